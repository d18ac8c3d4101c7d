#!/bin/sh
# Builds the `minimal` image's root filesystem: static busybox with its applet links, the
# project's probe at /bin/probe, a small /etc and the mount points runbox needs.
# Usage: build.sh OUT PROBE. Builds beside OUT and renames, so OUT is never half-built.
set -eu

[ $# -eq 2 ] || { echo "usage: $0 OUT PROBE" >&2; exit 2; }
out=$1
probe=$2

busybox=""
for b in /bin/busybox /usr/bin/busybox; do
	if [ -x "$b" ] && file -L "$b" 2>/dev/null | grep -q 'statically linked'; then
		busybox=$b
		break
	fi
done
if [ -z "$busybox" ]; then
	# `file` may be missing: fall back to asking the binary whether it has an interpreter.
	for b in /bin/busybox /usr/bin/busybox; do
		if [ -x "$b" ] && ! readelf -l "$b" 2>/dev/null | grep -q 'program interpreter'; then
			busybox=$b
			break
		fi
	done
fi
[ -n "$busybox" ] || { echo "build.sh: no static busybox (install busybox-static)" >&2; exit 1; }
[ -x "$probe" ] || { echo "build.sh: probe \`$probe' is not an executable" >&2; exit 1; }
probe=$(realpath "$probe")

parent=$(dirname "$out")
mkdir -p "$parent"
parent=$(realpath "$parent")
out=$parent/$(basename "$out")
tmp=$(mktemp -d "$parent/.minimal.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
chmod 0755 "$tmp" # mktemp makes it 0700; rootless runs must read the image

cd "$tmp"
mkdir -p bin sbin usr/bin usr/sbin etc proc dev sys tmp root run var/tmp \
	workspace/in workspace/out
chmod 1777 tmp var/tmp
chmod 0700 root
cp "$busybox" bin/busybox
cp "$probe" bin/probe
chmod 0755 bin/busybox bin/probe

# `busybox --list-full` names each applet with its usual directory (bin/ls, usr/bin/env).
"$busybox" --list-full | while read -r applet; do
	[ "$applet" = bin/busybox ] && continue
	case $applet in
	bin/* | sbin/* | usr/bin/* | usr/sbin/*) ;;
	*) applet=bin/$(basename "$applet") ;;
	esac
	[ -e "$applet" ] || [ -L "$applet" ] || ln -s /bin/busybox "$applet"
done
[ -L bin/sh ] || ln -sf /bin/busybox bin/sh

cat >etc/passwd <<'EOF'
root:x:0:0:root:/root:/bin/sh
sandbox:x:1000:1000:sandbox:/workspace:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
EOF
cat >etc/group <<'EOF'
root:x:0:
sandbox:x:1000:
nogroup:x:65534:
EOF
echo runbox >etc/hostname
cat >etc/hosts <<'EOF'
127.0.0.1	localhost
::1	localhost
EOF
: >etc/resolv.conf
chmod 0644 etc/passwd etc/group etc/hostname etc/hosts etc/resolv.conf

cd - >/dev/null
# Swap in the new tree; the old one, if any, is removed only after the rename.
if [ -e "$out" ]; then
	old=$(mktemp -d "$parent/.minimal-old.XXXXXX")
	mv "$out" "$old/rootfs"
	mv "$tmp" "$out"
	rm -rf "$old"
else
	mv "$tmp" "$out"
fi
trap - EXIT
