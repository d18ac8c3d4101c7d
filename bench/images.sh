#!/usr/bin/env bash
# `make bench-images`: the image store against its plain peers, measured in the same run with
# hyperfine (BENCH_ROUNDS runs each): `runbox image import` of a tarball against `tar -x` of
# the same tarball (MB/s of the tarball, and the ratio); a run's start on a store image
# against the same tree given as a plain directory; and the first run after an import against
# the runs after it. The tree: the minimal image with Python's standard library under
# /usr/lib (about 55 MB). As root, in a state directory of its own; not in make test.
set -euo pipefail
cd "$(dirname "$0")/.."
TOP=$PWD
ROUNDS=${BENCH_ROUNDS:-10}
die() {
	echo "bench-images: $*" >&2
	exit 1
}
[ "$(id -u)" = 0 ] || die "run as root (the store's idmapped mounts, and a state directory of its own)"
command -v hyperfine >/dev/null || die "hyperfine is missing (scripts/install-deps.sh bench)"
[ -x build/images/minimal/rootfs/bin/busybox ] || die "no minimal image (make all)"
PY=$(command -v python3)
PYLIB=/usr/lib/python3.11 # Debian 12's standard library: the same tree on every host
[ -d "$PYLIB" ] || die "no $PYLIB (Debian 12's python3.11)"

W=$(mktemp -d /tmp/rbx-bench-images.XXXXXX)
trap 'rm -rf "$W"' EXIT
chmod 0755 "$W"
cp -a build/images/minimal/rootfs "$W/tree"
mkdir -p "$W/tree/usr/lib"
cp -a "$PYLIB" "$W/tree/usr/lib/"
tar -cf "$W/img.tar" -C "$W/tree" .
bytes=$(stat -c %s "$W/img.tar")
files=$(find "$W/tree" | wc -l)
"$PY" - "$TOP/policy/profiles/default.json" "$W/policy.json" "$W" <<'EOF'
import json, sys
p = json.load(open(sys.argv[1]))
p["name"] = "bench-images"
p["images"] = {"allow": [sys.argv[3]]}
json.dump(p, open(sys.argv[2], "w"))
EOF
S=$W/state
RB=$TOP/runbox
echo "tree: $files entries, tarball $((bytes >> 20)) MiB; $ROUNDS rounds each"

# hyperfine's mean (s) of one command, its --prepare untimed.
mean() {
	local name=$1 prep=$2 cmd=$3
	hyperfine -N --style none --runs "$ROUNDS" --prepare "$prep" --export-json "$W/$name.json" "$cmd" >/dev/null 2>&1 ||
		die "$name failed: $cmd"
	"$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["results"][0]["mean"])' "$W/$name.json"
}

# 1. import against tar -x, each into an empty place (an import into a store already holding the
# digest would be a lookup).
t_import=$(mean import "rm -rf $S" "$RB image import $W/img.tar --name bench --state-dir $S --policy $W/policy.json")
t_tar=$(mean tar "sh -c 'rm -rf $W/x && mkdir $W/x'" "tar -xf $W/img.tar -C $W/x")

# 2. a run's start: the store image against the same tree as a plain directory (its digest cached
# after the first use, as a directory image's is).
"$RB" image import "$W/img.tar" --name bench --state-dir "$S" --policy "$W/policy.json" >/dev/null
"$RB" run --state-dir "$S" --policy "$W/policy.json" --image "$W/tree" -- true >/dev/null 2>&1
t_store=$(mean store true "$RB run --state-dir $S --policy $W/policy.json --image bench -- true")
t_dir=$(mean dir true "$RB run --state-dir $S --policy $W/policy.json --image $W/tree -- true")

# 3. the first run after an import (the import itself untimed) against the runs after it.
S2=$W/state2
t_first=$(mean first "sh -c 'rm -rf $S2 && $RB image import $W/img.tar --name bench --state-dir $S2 --policy $W/policy.json >/dev/null'" \
	"$RB run --state-dir $S2 --policy $W/policy.json --image bench -- true")

"$PY" - "$bytes" "$t_import" "$t_tar" "$t_store" "$t_dir" "$t_first" <<'EOF'
import sys
b, imp, tar, store, d, first = int(sys.argv[1]), *map(float, sys.argv[2:])
mb = b / 1e6
print(f"import: {mb / imp:8.1f} MB/s ({imp * 1e3:.1f} ms)   tar -x: {mb / tar:8.1f} MB/s ({tar * 1e3:.1f} ms)   "
      f"import/tar time {imp / tar:.2f}x")
print(f"run start, store image: {store * 1e3:.2f} ms   plain directory: {d * 1e3:.2f} ms   store/dir {store / d:.2f}x")
print(f"first run after import: {first * 1e3:.2f} ms   later runs: {store * 1e3:.2f} ms   first/later {first / store:.2f}x")
EOF
