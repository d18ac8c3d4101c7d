#!/bin/sh
# Installs the Debian packages runbox needs to build, test, lint and benchmark, but only
# those that are missing, so a second run costs one dpkg query. Usage: install-deps.sh [GROUP...]
# Groups: build (default), test, vm, bench, lint, fuzz, sdk.
set -eu
build="gcc make pkg-config libseccomp-dev libcap-dev libmnl-dev libnftnl-dev libjansson-dev
  libcmocka-dev libmicrohttpd-dev libssl-dev libsqlite3-dev libarchive-dev libcurl4-openssl-dev
  busybox-static"
test="uidmap iproute2 nftables util-linux procps python3 sqlite3 psmisc strace mmdebstrap dpkg-dev nodejs npm umoci"
vm="qemu-system-x86 cpio xz-utils zstd"
bench="bubblewrap runc hyperfine time nftables npm bc"
lint="clang-format clang-tidy cppcheck"
# The SDK client (sdk/js): Debian's node and npm, unless a node is already installed.
sdk="nodejs npm"
# libFuzzer and the sanitizer runtimes that clang links with -fsanitize=fuzzer.
fuzz="clang libclang-rt-dev"
groups="${*:-build}"
want=""
for g in $groups; do
  eval "want=\"\$want \$$g\""
done
missing=""
for p in $want; do
  # nodesource's nodejs ships npm and conflicts with Debian's npm package: a working npm counts.
  if [ "$p" = npm ] && command -v npm >/dev/null 2>&1; then continue; fi
  if [ "$p" = nodejs ] && command -v node >/dev/null 2>&1; then continue; fi
  if ! dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed'; then
    missing="$missing $p"
  fi
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "install-deps: missing packages:$missing (run as root, or install them)" >&2
  exit 1
fi
echo "install-deps: installing:$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null
apt-get install -y -q --no-install-recommends $missing >/dev/null
