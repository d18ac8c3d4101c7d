#!/bin/sh
# The VM test: boots Debian's kernel under qemu (software emulation, cgroup v2 only) with an
# initramfs holding busybox, runbox and its libraries, the probe, the minimal image and the
# policies; the guest runs tests/vm/guest-tests.sh and reports "VMTEST: N passed, M failed".
# Usage: tests/vm/run.sh   (from anywhere; as root, it installs what it needs with apt-get)
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
VM=build/vm
TIMEOUT=${VM_TIMEOUT:-300}
say() { echo "vm: $*" >&2; }
die() {
	say "$*"
	echo "vm: 0 passed, 1 failed"
	exit 1
}

scripts/install-deps.sh build vm || die "cannot install the VM's packages"
command -v qemu-system-x86_64 >/dev/null || die "qemu-system-x86_64 is missing"
BUSYBOX=$(command -v busybox || true)
[ -n "$BUSYBOX" ] && file_static=$(ldd "$BUSYBOX" 2>&1 || true)
case "${file_static:-}" in *"not a dynamic"*) ;; *) die "busybox is not static (install busybox-static)" ;; esac

# --- the kernel: Debian's, unpacked into build/vm/kernel, never installed on the host ---
mkdir -p "$VM"
if ! ls "$VM"/kernel/boot/vmlinuz-* >/dev/null 2>&1; then
	say "fetching Debian's kernel"
	rm -rf "$VM/dl" "$VM/kernel.tmp"
	mkdir -p "$VM/dl" "$VM/kernel.tmp"
	(cd "$VM/dl" && apt-get download -q linux-image-amd64 >/dev/null 2>&1) ||
		{ apt-get update -q >/dev/null && (cd "$VM/dl" && apt-get download -q linux-image-amd64 >/dev/null 2>&1); } ||
		die "apt-get download linux-image-amd64 failed"
	# The metapackage only depends on the real image package, e.g. linux-image-6.1.0-56-amd64.
	real=$(dpkg-deb -f "$VM"/dl/linux-image-amd64_*.deb Depends | tr ',' '\n' |
		sed -n 's/^ *\(linux-image-[0-9][^ ]*-amd64\).*/\1/p' | head -n1)
	[ -n "$real" ] || die "cannot resolve the kernel package behind linux-image-amd64"
	say "kernel package: $real"
	(cd "$VM/dl" && apt-get download -q "$real" >/dev/null 2>&1) || die "apt-get download $real failed"
	dpkg-deb -x "$VM"/dl/"$real"_*.deb "$VM/kernel.tmp" || die "dpkg-deb -x $real failed"
	rm -rf "$VM/kernel"
	mv "$VM/kernel.tmp" "$VM/kernel"
	rm -rf "$VM/dl"
fi
VMLINUZ=$(ls "$VM"/kernel/boot/vmlinuz-* | head -n1)
KVER=${VMLINUZ##*/vmlinuz-}
KCONFIG="$VM/kernel/boot/config-$KVER"
MODDIR="$VM/kernel/lib/modules/$KVER"
say "kernel $KVER"

# --- the initramfs ---
STAGE="$VM/initramfs"
rm -rf "$STAGE"
mkdir -p "$STAGE"/bin "$STAGE"/sbin "$STAGE"/etc "$STAGE"/proc "$STAGE"/sys "$STAGE"/dev "$STAGE"/tmp \
	"$STAGE"/run "$STAGE"/root "$STAGE"/var/lib "$STAGE"/lib/modules "$STAGE"/opt/runbox "$STAGE"/newroot
cp "$BUSYBOX" "$STAGE/bin/busybox"
for applet in $("$BUSYBOX" --list); do
	[ -e "$STAGE/bin/$applet" ] || ln -s busybox "$STAGE/bin/$applet"
done
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' >"$STAGE/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$STAGE/etc/group"

# runbox, its data beside it (policy/, build/images/), every library it loads and the loader.
# VM_RUNBOX: another build of runbox to try in the guest (default ./runbox).
RUNBOX_BIN=${VM_RUNBOX:-./runbox}
have_runbox=0
if [ -x "$RUNBOX_BIN" ]; then
	have_runbox=1
	cp "$RUNBOX_BIN" "$STAGE/opt/runbox/runbox"
	cp -a policy "$STAGE/opt/runbox/policy"
	if [ -d build/images/minimal/rootfs ]; then
		mkdir -p "$STAGE/opt/runbox/build/images/minimal"
		cp -a build/images/minimal/rootfs "$STAGE/opt/runbox/build/images/minimal/rootfs"
		[ -e build/images/minimal/.built ] && cp build/images/minimal/.built "$STAGE/opt/runbox/build/images/minimal/"
	fi
	# runbox-gateway beside it: a run's first gateway call starts it (in the run's cgroup).
	GW_BIN=$(dirname "$RUNBOX_BIN")/runbox-gateway
	bins=$RUNBOX_BIN
	[ -x "$GW_BIN" ] && cp "$GW_BIN" "$STAGE/opt/runbox/runbox-gateway" && bins="$bins $GW_BIN"
	for lib in $(for b in $bins; do ldd "$b"; done | sed -n 's/.*=> \(\/[^ ]*\).*/\1/p; s/^[[:space:]]*\(\/[^ ]*\) (.*/\1/p' | sort -u); do
		mkdir -p "$STAGE$(dirname "$lib")"
		cp -L "$lib" "$STAGE$lib"
	done
	# Debian's /lib and /lib64 are links into /usr; keep the paths the binary was linked with.
	[ -d "$STAGE/lib64" ] || { [ -d "$STAGE/usr/lib64" ] && ln -s usr/lib64 "$STAGE/lib64"; } || true
else
	say "no $RUNBOX_BIN yet: the guest will report it"
fi
[ -x build/probe ] && cp build/probe "$STAGE/bin/probe"
cp "${VM_GUEST:-tests/vm/guest-tests.sh}" "$STAGE/guest-tests.sh"

# Kernel modules: the features runbox needs that Debian builds as modules, with their
# dependencies (read from each module's .modinfo, since the package ships no modules.dep),
# loaded in dependency order.
want="overlay nf_tables nft_objref nft_reject_inet nft_ct nft_log nft_limit nft_quota nft_fib_inet veth"
: >"$STAGE/etc/modules.load"
modpath() { find "$MODDIR/kernel" -name "$1.ko" -o -name "$1.ko.xz" -o -name "$1.ko.zst" | head -n1; }
added=" "
# Recursive: dash and busybox sh both have `local`.
add_mod() {
	local m f dep
	m=$(echo "$1" | tr '-' '_')
	case "$added" in *" $m "*) return 0 ;; esac
	added="$added$m "
	f=$(modpath "$m")
	[ -n "$f" ] || f=$(modpath "$(echo "$m" | tr '_' '-')")
	if [ -z "$f" ]; then
		grep -q "/$m.ko" "$MODDIR/modules.builtin" 2>/dev/null || say "module $m: not found"
		return 0
	fi
	case "$f" in
	*.xz) xz -dc "$f" >"$STAGE/lib/modules/$m.ko" ;;
	*.zst) zstd -qdc "$f" >"$STAGE/lib/modules/$m.ko" ;;
	*) cp "$f" "$STAGE/lib/modules/$m.ko" ;;
	esac
	for dep in $(tr '\0' '\n' <"$STAGE/lib/modules/$m.ko" | sed -n 's/^depends=//p' | tr ',' ' '); do
		add_mod "$dep"
	done
	# "softdep=pre: crc32c" (libcrc32c) names an alias; the generic driver provides it.
	for dep in $(tr '\0' '\n' <"$STAGE/lib/modules/$m.ko" | sed -n 's/^softdep=pre: *//p'); do
		if [ -n "$(modpath "$dep")" ]; then add_mod "$dep"; else add_mod "${dep}_generic"; fi
	done
	echo "$m" >>"$STAGE/etc/modules.load" # after its dependencies
}
for m in $want; do
	key=$(echo "$m" | tr 'a-z' 'A-Z')
	case "$m" in overlay) key=OVERLAY_FS ;; esac
	if grep -q "^CONFIG_$key=y" "$KCONFIG"; then continue; fi
	add_mod "$m"
done
say "modules: $(tr '\n' ' ' <"$STAGE/etc/modules.load")"

cat >"$STAGE/init" <<'EOF'
#!/bin/busybox sh
# Stage 1: the initramfs root (rootfs) cannot be pivot_root'ed, and runbox pivots; copy
# everything into a tmpfs and switch_root into it.
export PATH=/bin:/sbin
mount -t proc proc /proc
mount -t tmpfs -o mode=755 root /newroot
cp -a /bin /etc /lib /opt /root /sbin /tmp /run /var /guest-tests.sh /newroot/ 2>/dev/null
for d in usr lib64; do [ -e /$d ] && cp -a /$d /newroot/; done
mkdir -p /newroot/proc /newroot/sys /newroot/dev /newroot/tmp /newroot/run
cp /init2 /newroot/init2
umount /proc
exec switch_root /newroot /init2
EOF
cat >"$STAGE/init2" <<'EOF'
#!/bin/sh
export PATH=/bin:/sbin:/usr/bin:/usr/sbin HOME=/root RUNBOX_DATA_DIR=/opt/runbox
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t cgroup2 cgroup2 /sys/fs/cgroup
mount -t tmpfs -o mode=1777 tmpfs /tmp
mount -t tmpfs -o mode=755 tmpfs /run
ln -sf /opt/runbox/runbox /bin/runbox
hostname vmtest
# A 1 GiB guest computes a hard RLIMIT_NPROC (~3.8k) below the default policy's 4096, which a
# sandbox cannot raise; hosts have far more. Raise it here, as the host's would be.
ulimit -H -u 65536 2>/dev/null; ulimit -S -u 65536 2>/dev/null
while read -r m; do
	insmod "/lib/modules/$m.ko" || echo "VMINFO: insmod $m failed"
done </etc/modules.load
echo "VMINFO: kernel $(uname -r)"
echo "VMINFO: controllers: $(cat /sys/fs/cgroup/cgroup.controllers)"
echo "+cpu +memory +pids" >/sys/fs/cgroup/cgroup.subtree_control || echo "VMINFO: subtree_control failed"
echo "VMINFO: subtree_control: $(cat /sys/fs/cgroup/cgroup.subtree_control)"
sh /guest-tests.sh
echo "VMDONE"
sync
poweroff -f
EOF
chmod 755 "$STAGE/init" "$STAGE/init2"
[ -e "$STAGE/sbin/switch_root" ] || ln -s ../bin/busybox "$STAGE/sbin/switch_root"

(cd "$STAGE" && find . | cpio -o -H newc --quiet | gzip -1) >"$VM/initrd"
say "initramfs: $(du -h "$VM/initrd" | cut -f1)"

# --- boot ---
LOG="$VM/serial.log"
rm -f "$LOG"
say "booting (timeout ${TIMEOUT}s)"
set +e
timeout --foreground -k 5 "$TIMEOUT" qemu-system-x86_64 -accel tcg -m 1024 -smp 2 -nographic -no-reboot \
	-kernel "$VMLINUZ" -initrd "$VM/initrd" \
	-append "console=ttyS0 quiet panic=-1 rdinit=/init" </dev/null >"$LOG" 2>&1
qrc=$?
set -e
tr -d '\r' <"$LOG" >"$LOG.txt"
# The guest's own lines (kernel messages start with "[").
awk '/VMINFO: kernel/ { on = 1; sub(/.*VMINFO/, "VMINFO") } on && !/^\[/ { print } /^VMTEST/ { on = 0 }' "$LOG.txt" >&2
[ "$qrc" = 124 ] && say "qemu timed out after ${TIMEOUT}s"
line=$(grep -E '^VMTEST: [0-9]+ passed, [0-9]+ failed' "$LOG.txt" | tail -n1 || true)
if [ -z "$line" ]; then
	say "the guest did not report (serial log: $LOG)"
	tail -n 30 "$LOG.txt" >&2
	echo "vm: 0 passed, 1 failed"
	exit 1
fi
passed=$(echo "$line" | sed 's/VMTEST: \([0-9]*\) passed.*/\1/')
failed=$(echo "$line" | sed 's/.* passed, \([0-9]*\) failed.*/\1/')
[ "$have_runbox" = 1 ] || failed=$((failed + 1))
echo "vm: $passed passed, $failed failed"
[ "$failed" = 0 ]
