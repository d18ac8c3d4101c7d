#!/usr/bin/env bash
# Root filesystem: overlay over a read-only image, /workspace and its read-only inputs,
# /dev, /tmp, the old root gone, and the `host` image without host secrets.
# modes: root user subids
. "$(dirname "$0")/../lib.sh"
lib_init rootfs

# The root is writable (overlay upper) but the image never changes, and the next run starts
# clean. Control: inside the same run the file is there, so the later check can see it.
# As root the image is idmapped to the sandbox's ids, so even its /etc is root's inside;
# rootless, an image that host root built keeps its owner unmapped: only the overlay's own
# top directory is the sandbox's (docs/design.md).
if [ "$MODE" = root ]; then img_marker=etc/rbx-overlay-test; else img_marker=rbx-overlay-test; fi
if [ "$MODE" != root ]; then
	sb -- /bin/probe write /etc/rbx-overlay-test x
	if [ "$RC" = 13 ]; then ok "rootless: the root-owned image's /etc stays read-only (EACCES)"
	else not_ok "rootless: the root-owned image's /etc stays read-only (EACCES)" "exit $RC"; fi
fi
sb -- /bin/sh -c "/bin/probe write /$img_marker x && /bin/probe stat /$img_marker"
if [ "$RC" != 0 ]; then not_ok "root is writable (overlay upper)" "exit $RC: $(first_line "$ERR")"
else
	ok "root is writable (overlay upper)"
	if [ -e "$MINIMAL/$img_marker" ]; then not_ok "the image is unchanged by a run" "$MINIMAL/$img_marker exists"
	else ok "the image is unchanged by a run"; fi
	sb -- /bin/probe stat "/$img_marker"
	if [ "$RC" = "$ENOENT" ]; then ok "the next run starts from a clean root"
	else not_ok "the next run starts from a clean root" "stat exit $RC"; fi
fi
# Under strict (uid 1000) the image's own files stay read-only to the step.
CTRL_CMD="$PROBE write $T/scratch/f x" pair "strict: /etc not writable" "$EACCES|$EROFS" --policy strict -- write /etc/passwd x

# /workspace is writable for both identities; /workspace/out exists.
allowed "/workspace writable (default)" -- write /workspace/f x
allowed "/workspace writable (strict)" --policy strict -- write /workspace/f x
allowed "/workspace/out writable (strict)" --policy strict -- write /workspace/out/f x
allowed "/tmp writable (strict)" --policy strict -- write /tmp/f x
sb -- /bin/sh -c 'grep -E " /tmp " /proc/self/mountinfo'
if grep -q ' - tmpfs ' <<<"$OUT"; then ok "/tmp is a tmpfs"; else not_ok "/tmp is a tmpfs" "$(first_line "$OUT")"; fi

# --input SRC:DEST binds read-only under /workspace/in; reads work, writes give EROFS.
data=$T/data
mkdir -p "$data"
echo "input-content" >"$data/file"
chmod -R a+rX "$data"
sb --input "$data:/workspace/in/data" -- /bin/probe read /workspace/in/data/file
if [ "$RC" = 0 ] && [ "$OUT" = input-content ]; then ok "--input is readable inside"
else not_ok "--input is readable inside" "exit $RC, '$(first_line "$OUT")' $(first_line "$ERR")"; fi
CTRL_CMD="$PROBE write $data/new x" pair "--input is read-only (EROFS)" "$EROFS" \
	--input "$data:/workspace/in/data" -- write /workspace/in/data/new x
rm -f "$data/new"
CTRL_CMD="$PROBE write $data/new x" pair "--input is read-only under strict" "$EROFS|$EACCES" \
	--policy strict --input "$data:/workspace/in/data" -- write /workspace/in/data/new x
rm -f "$data/new"
sb --input "$data:/workspace/in/data" -- /bin/sh -c 'grep " /workspace/in/data " /proc/self/mountinfo'
if grep -q 'ro,' <<<"$OUT" && grep -q nosuid <<<"$OUT" && grep -q nodev <<<"$OUT"; then
	ok "--input mount is ro,nosuid,nodev"
else not_ok "--input mount is ro,nosuid,nodev" "mountinfo: $(first_line "$OUT")"; fi
sb --policy strict --input "$data:/workspace/in/data" -- ls -l /workspace/in
if [ "$RC" = 0 ] && grep -q data <<<"$OUT"; then ok "ls -l /workspace/in under strict"
else not_ok "ls -l /workspace/in under strict" "exit $RC: $(first_line "$ERR")"; fi
# DEST outside /workspace/in and a missing SRC are refused (125).
sb --input "$data:/etc/x" -- /bin/true
if [ "$RC" = 125 ]; then ok "--input DEST outside /workspace/in refused"
else not_ok "--input DEST outside /workspace/in refused" "exit $RC"; fi
sb --input "$data:/workspace/in/../../etc" -- /bin/true
if [ "$RC" = 125 ]; then ok "--input DEST with .. refused"
else not_ok "--input DEST with .. refused" "exit $RC"; fi
sb --input "$T/nonexistent:/workspace/in/x" -- /bin/true
if [ "$RC" = 125 ]; then ok "--input with a missing SRC refused"
else not_ok "--input with a missing SRC refused" "exit $RC"; fi

# What realpath makes `/` (or any path holding /proc, /run or runbox's own state) is never an
# input: it would bring the host's /proc, /run and, rootless, the token key in the state
# directory. Control: the same --input form with an ordinary folder works (above).
sb --input "/proc/self/root:/workspace/in/h" -- /bin/probe stat /workspace/in/h/proc/1
if [ "$RC" = 125 ] && grep -q "never an input" <<<"$ERR"; then ok "--input /proc/self/root (the host's /) refused"
else not_ok "--input /proc/self/root (the host's /) refused" "exit $RC: $(first_line "$ERR")"; fi
sb --input "$T:/workspace/in/t" -- /bin/true
if [ "$RC" = 125 ] && grep -q "holds $STATE" <<<"$ERR"; then ok "--input holding runbox's state directory refused"
else not_ok "--input holding runbox's state directory refused" "exit $RC: $(first_line "$ERR")"; fi

# An input is one mount: a filesystem mounted below it on the host (here a tmpfs holding a
# marker) does not come in with it. Root only: the test mounts on the host. Control: with the
# mount gone, the same input binds.
if [ "$MODE" = root ]; then
	mkdir -p "$T/hasmnt/sub"
	chmod -R a+rX "$T/hasmnt"
	if mount -t tmpfs -o mode=0755 tmpfs "$T/hasmnt/sub" && echo marker >"$T/hasmnt/sub/m"; then
		sb --input "$T/hasmnt:/workspace/in/m" -- /bin/probe read /workspace/in/m/sub/m
		rc_in=$RC err_in=$ERR
		umount "$T/hasmnt/sub"
		sb --input "$T/hasmnt:/workspace/in/m" -- /bin/probe stat /workspace/in/m/sub
		if [ "$RC" != 0 ]; then skip "--input with a mount below it refused" "control: the input alone fails, exit $RC"
		elif [ "$rc_in" = 125 ] && grep -q "an input is one mount" <<<"$err_in"; then
			ok "--input with a mount below it refused (the mount's files never come in)"
		else not_ok "--input with a mount below it refused" "exit $rc_in: $(first_line "$err_in")"; fi
	else
		umount "$T/hasmnt/sub" 2>/dev/null
		skip "--input with a mount below it refused" "could not mount a tmpfs for the test"
	fi
fi

# pivot_root: no host path is reachable. Control: the path exists on the host.
CTRL_CMD="$PROBE stat $ROOT/Makefile" pair "host tree not visible (pivot_root)" "$ENOENT" -- stat "$ROOT/Makefile"
CTRL_CMD="$PROBE stat $data/file" pair "host tmp not visible" "$ENOENT" -- stat "$data/file"

# /dev: the minimal set, nothing from the host's /dev.
for d in null zero full random urandom tty ptmx pts shm fd stdin stdout stderr; do
	sb -- /bin/probe stat "/dev/$d"
	if [ "$RC" = 0 ]; then ok "/dev/$d present"; else not_ok "/dev/$d present" "stat exit $RC"; fi
done
for d in kmsg mem port sda vda console; do
	if [ -e "/dev/$d" ]; then
		pair "host /dev/$d absent" "$ENOENT" -- stat "/dev/$d"
	fi
done
allowed "/dev/null writable" --policy strict -- write /dev/null x
sb -- /bin/probe write /dev/full x
if [ "$RC" = 28 ]; then ok "/dev/full gives ENOSPC"; else not_ok "/dev/full gives ENOSPC" "exit $RC"; fi
sb -- /bin/sh -c 'grep -E " /dev/pts " /proc/self/mountinfo'
if grep -q 'newinstance\|ptmxmode' <<<"$OUT" || grep -q ' - devpts ' <<<"$OUT"; then ok "/dev/pts is a devpts"
else not_ok "/dev/pts is a devpts" "$(first_line "$OUT")"; fi

# The host image: the host's /usr read-only, no host secrets.
run_rbx run --image host --timeout 10s -- python3 -c 'print(1)'
if [ "$RC" = 0 ] && [ "$OUT" = 1 ]; then ok "host image runs python3"
else not_ok "host image runs python3" "exit $RC, '$(first_line "$OUT")' $(first_line "$ERR")"; fi
# Absent, or an empty directory of the sandbox's own: nothing of the host's shows through.
for p in /root /home /etc/shadow /etc/gshadow /etc/ssh /etc/sudoers /var/lib/runbox /run/user; do
	[ -e "$p" ] || continue # control: only paths the host really has
	run_rbx run --image host -- /bin/sh -c "if [ -d $p ]; then ls -A $p; elif [ -e $p ]; then echo present $p; fi; true"
	if [ "$RC" != 0 ]; then not_ok "host image hides $p" "exit $RC: $(first_line "$ERR")"
	elif [ -n "$OUT" ]; then not_ok "host image hides $p" "$(head -n 3 <<<"$OUT" | tr '\n' ' ')"
	else ok "host image hides $p"; fi
done
run_rbx run --image host -- /bin/sh -c 'touch /usr/rbx-test 2>/dev/null && echo writable; true'
if [ "$RC" = 0 ] && [ -z "$OUT" ] && [ ! -e /usr/rbx-test ]; then ok "host image /usr is read-only"
else
	not_ok "host image /usr is read-only" "exit $RC '$OUT'"
fi

# A directory as the image: its files are the root; it is not changed and nothing is written
# beside it; the digest names its content. Control: the same digest twice, another after a change.
imgdir=$T/dirimage
mkdir -p "$imgdir/rootfs/bin" && chmod 755 "$T" "$imgdir" "$imgdir/rootfs" "$imgdir/rootfs/bin"
cp "$PROBE" "$imgdir/rootfs/bin/probe"
run_rbx run --image "$imgdir/rootfs" --json -- /bin/probe stat /bin/probe
d1=$(json "$T/out" image.digest 2>/dev/null)
if [ "$RC" = 0 ] && [ "$(json "$T/out" image.name 2>/dev/null)" = dir ]; then ok "a directory runs as an image"
else not_ok "a directory runs as an image" "exit $RC: $(first_line "$ERR")"; fi
run_rbx run --image "$imgdir/rootfs" --json -- /bin/probe write /workspace/x y
d2=$(json "$T/out" image.digest 2>/dev/null)
echo changed >"$imgdir/rootfs/bin/other"
chmod 644 "$imgdir/rootfs/bin/other"
run_rbx run --image "$imgdir/rootfs" --json -- /bin/probe stat /bin/other
d3=$(json "$T/out" image.digest 2>/dev/null)
if [ -n "$d1" ] && [ "$d1" = "$d2" ] && [ "$d3" != "$d1" ]; then ok "a directory image's digest follows its content"
else not_ok "a directory image's digest follows its content" "$d1 / $d2 / $d3"; fi
if [ "$(ls -A "$imgdir")" = rootfs ] && [ ! -e "$imgdir/rootfs/workspace" ]; then ok "nothing is written in or beside a directory image"
else not_ok "nothing is written in or beside a directory image" "$(ls -A "$imgdir" "$imgdir/rootfs" | tr '\n' ' ')"; fi

# An image whose /dev is a symlink to / fails closed (ANCHORS §6.7): setup fails with 125
# naming /dev, and the failed start leaves no run directory behind. Control: the directory
# image above, without the link, runs.
ln -s / "$imgdir/rootfs/dev"
run_rbx run --image "$imgdir/rootfs" -- /bin/probe exit 0
left=$(find "$STATE/run" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
if [ "$RC" = 125 ] && grep -q '/dev' <<<"$ERR" && [ "$left" = 0 ]; then ok "a symlinked /dev in an image fails closed"
else not_ok "a symlinked /dev in an image fails closed" "exit $RC, $left left: $(first_line "$ERR")"; fi
