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
# top directory is the sandbox's (docs/internals/design.md).
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

# Every directory of runbox's is never an input, not only this invocation's: with --state-dir
# elsewhere, the state directory RUNBOX_STATE_DIR names ($STATE, which holds this mode's token
# key), the default ones for this HOME and XDG_RUNTIME_DIR, and root's default state directory.
# Control: with the same --state-dir, an ordinary folder is an input.
mkdir -p "$T/other-state" "$T/home/.local/state/runbox" "$T/home/.config/runbox" "$T/xdg/runbox"
[ "$MODE" = root ] || chown -R $NOBODY:$NOBODY "$T/other-state" "$T/home" "$T/xdg"
own_dirs=("$STATE" "$T/home/.local/state/runbox" "$T/home/.config/runbox" "$T/xdg/runbox")
made_varlib=
if [ "$MODE" = root ]; then
	[ -e /var/lib/runbox ] || { mkdir -m 0700 /var/lib/runbox && made_varlib=1; }
	own_dirs+=(/var/lib/runbox)
fi
sb --state-dir "$T/other-state" --input "$data:/workspace/in/data" -- /bin/probe read /workspace/in/data/file
other_rc=$RC other_err=$ERR
for d in "${own_dirs[@]}"; do
	sb --state-dir "$T/other-state" --input "$d:/workspace/in/s" -- /bin/true
	if [ "$other_rc" != 0 ]; then not_ok "--input $d refused with --state-dir elsewhere" "control: an ordinary input fails, exit $other_rc: $(first_line "$other_err")"
	elif [ "$RC" = 125 ] && grep -q "never an input" <<<"$ERR"; then ok "--input $d refused with --state-dir elsewhere"
	else not_ok "--input $d refused with --state-dir elsewhere" "exit $RC: $(first_line "$ERR")"; fi
done

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

# A directory as the image. The operator's policy names where one may come from
# (images.allow); the default policy names none. Control for each refusal: a policy whose
# images.allow covers the directory runs it.
imgdir=$T/dirimage
mkdir -p "$imgdir/rootfs/bin" && chmod 755 "$T" "$imgdir" "$imgdir/rootfs" "$imgdir/rootfs/bin"
cp "$PROBE" "$imgdir/rootfs/bin/probe"
imgpol=$T/images-policy.json
policy_variant default "$imgpol" images "p['images'] = {'allow': ['$imgdir']}"
anypol=$T/images-any.json
policy_variant default "$anypol" images-any "p['images'] = {'allow': ['/']}"
# run_img ARGS...: run_rbx under a deadline, so a walk that blocks fails the check, not the file.
run_img() {
	rbx_cmd run "$@"
	timeout -k 5 120 "${RBX_CMD[@]}" </dev/null >"$T/out" 2>"$T/err"
	RC=$?
	OUT=$(cat "$T/out")
	ERR=$(cat "$T/err")
}

run_img --image "$imgdir/rootfs" -- /bin/probe exit 0
if [ "$RC" = 125 ] && grep -q "images.allow" <<<"$ERR" && grep -qF "$imgdir/rootfs" <<<"$ERR"; then
	ok "a directory image needs the policy's images.allow (the default allows none)"
else not_ok "a directory image needs the policy's images.allow (the default allows none)" "exit $RC: $(first_line "$ERR")"; fi
run_img --policy "$imgpol" --image "$imgdir/rootfs" --json -- /bin/probe stat /bin/probe
d1=$(json "$T/out" image.digest 2>/dev/null)
if [ "$RC" = 0 ] && [ "$(json "$T/out" image.name 2>/dev/null)" = dir ]; then ok "a directory images.allow covers runs as an image"
else not_ok "a directory images.allow covers runs as an image" "exit $RC: $(first_line "$ERR")"; fi
# Only runbox's own images are idmapped (as root; rootless none is). Control: minimal is.
if [ "$MODE" = root ]; then
	dir_idmapped=$(json "$T/out" sandbox.image_idmapped 2>/dev/null)
	sb --json -- /bin/true
	min_idmapped=$(json "$T/out" sandbox.image_idmapped 2>/dev/null)
	if [ "$min_idmapped" = true ] && [ "$dir_idmapped" = false ]; then ok "a directory image is not idmapped (minimal is)"
	else not_ok "a directory image is not idmapped (minimal is)" "directory: $dir_idmapped, minimal: $min_idmapped"; fi
fi

# Never an input is never an image, whatever images.allow says: the host's /etc (it holds
# /etc/shadow), `/` (it holds /proc), and every directory of runbox's (the token key and the
# ledger). Control: the policy allowing `/` runs the test's directory.
run_img --policy "$anypol" --image "$imgdir/rootfs" -- /bin/probe exit 0
any_rc=$RC any_err=$ERR
for d in /etc / "${own_dirs[@]}"; do
	for pol in default "$anypol"; do
		run_img --policy "$pol" --state-dir "$T/other-state" --image "$d" -- /bin/probe exit 0
		name="--image $d refused (policy ${pol##*/})"
		if [ "$any_rc" != 0 ]; then not_ok "$name" "control: the policy allowing / fails, exit $any_rc: $(first_line "$any_err")"
		elif [ "$RC" = 125 ] && grep -q "never an input" <<<"$ERR" && grep -qF "image \`$d\`" <<<"$ERR"; then ok "$name"
		else not_ok "$name" "exit $RC: $(first_line "$ERR")"; fi
	done
done
# A manifest's "image" goes through the same checks: what is never an input, and the policy's
# images.allow (the manifest's policy is default). Control: the same manifest with "minimal".
manifest_img() {
	printf '{"tenant": "t", "agent": "a", "image": "%s", "steps": [{"script": "true"}]}\n' "$1" >"$T/img-$$.json"
	run_manifest "$T/img-$$.json"
}
manifest_img minimal
m_rc=$RC m_err=$ERR
for want in "/etc:it holds /etc/shadow" "$imgdir/rootfs:images.allow"; do
	img=${want%%:*}
	manifest_img "$img"
	name="a manifest's \"image\": \"$img\" refused (${want#*:})"
	if [ "$m_rc" != 0 ]; then not_ok "$name" "control: minimal fails, exit $m_rc: $(first_line "$m_err")"
	elif [ "$RC" = 125 ] && grep -qF "image \`$img\`" <<<"$ERR" && grep -qF "${want#*:}" <<<"$ERR"; then ok "$name"
	else not_ok "$name" "exit $RC: $(first_line "$ERR")"; fi
done

# A directory image keeps its host owners: host root's 0600 file is unreadable inside, in
# every mode. Controls: root reads it on the host; a world-readable file beside it reads.
echo secret-$$ >"$imgdir/rootfs/secret" && chmod 0600 "$imgdir/rootfs/secret"
echo public-$$ >"$imgdir/rootfs/public" && chmod 0644 "$imgdir/rootfs/public"
run_img --policy "$imgpol" --image "$imgdir/rootfs" -- /bin/probe read /public
pub_rc=$RC pub_out=$OUT
run_img --policy "$imgpol" --image "$imgdir/rootfs" -- /bin/probe read /secret
if [ "$(cat "$imgdir/rootfs/secret")" != "secret-$$" ]; then not_ok "host root's 0600 file in a directory image is unreadable inside" "control: root cannot read it on the host"
elif [ "$pub_rc" != 0 ] || [ "$pub_out" != "public-$$" ]; then not_ok "host root's 0600 file in a directory image is unreadable inside" "control: the 0644 file: exit $pub_rc '$pub_out'"
elif [ "$RC" = "$EACCES" ] && ! grep -q "secret-$$" <<<"$OUT"; then ok "host root's 0600 file in a directory image is unreadable inside"
else not_ok "host root's 0600 file in a directory image is unreadable inside" "exit $RC: $(first_line "$OUT")"; fi
rm -f "$imgdir/rootfs/secret" "$imgdir/rootfs/public"

# The digest names the content: the same digest twice, another after a change.
run_img --policy "$imgpol" --image "$imgdir/rootfs" --json -- /bin/probe write /workspace/x y
d2=$(json "$T/out" image.digest 2>/dev/null)
echo changed >"$imgdir/rootfs/bin/other"
chmod 644 "$imgdir/rootfs/bin/other"
run_img --policy "$imgpol" --image "$imgdir/rootfs" --json -- /bin/probe stat /bin/other
d3=$(json "$T/out" image.digest 2>/dev/null)
if [ -n "$d1" ] && [ "$d1" = "$d2" ] && [ "$d3" != "$d1" ]; then ok "a directory image's digest follows its content"
else not_ok "a directory image's digest follows its content" "$d1 / $d2 / $d3"; fi
if [ "$(ls -A "$imgdir")" = rootfs ] && [ ! -e "$imgdir/rootfs/workspace" ]; then ok "nothing is written in or beside a directory image"
else not_ok "nothing is written in or beside a directory image" "$(ls -A "$imgdir" "$imgdir/rootfs" | tr '\n' ' ')"; fi

# The digest walk opens nothing it could block on and follows no link: a FIFO and a symlink
# loop are listed, not opened (control: opening the FIFO blocks). As root, a procfs mounted
# below the image is another filesystem: the walk does not enter it, nor does the sandbox see
# it (control: it is mounted on the host).
mkfifo "$imgdir/rootfs/fifo"
ln -s loop2 "$imgdir/rootfs/loop1" && ln -s loop1 "$imgdir/rootfs/loop2"
timeout 2 cat "$imgdir/rootfs/fifo" >/dev/null 2>&1
fifo_rc=$?
run_img --policy "$imgpol" --image "$imgdir/rootfs" -- /bin/probe stat /fifo
if [ "$fifo_rc" != 124 ]; then not_ok "a FIFO and a symlink loop in a directory image are walked past" "control: reading the FIFO did not block (exit $fifo_rc)"
elif [ "$RC" = 0 ]; then ok "a FIFO and a symlink loop in a directory image are walked past"
else not_ok "a FIFO and a symlink loop in a directory image are walked past" "exit $RC: $(first_line "$ERR")"; fi
if [ "$MODE" = root ]; then
	mkdir -p "$imgdir/rootfs/proc"
	if mount -t proc proc "$imgdir/rootfs/proc"; then
		mountpoint -q "$imgdir/rootfs/proc" && [ -e "$imgdir/rootfs/proc/kmsg" ]
		ctl_rc=$?
		run_img -v --policy "$imgpol" --image "$imgdir/rootfs" -- /bin/probe stat /proc/1/status
		umount "$imgdir/rootfs/proc"
		if [ "$ctl_rc" != 0 ]; then not_ok "a procfs below a directory image is not walked" "control: no procfs with kmsg mounted there"
		elif [ "$RC" = 0 ] && grep -q "image digest of" <<<"$ERR"; then ok "a procfs below a directory image is not walked"
		else not_ok "a procfs below a directory image is not walked" "exit $RC: $(grep -v '^runbox\[' <<<"$ERR" | head -n 1)"; fi
	else not_ok "a procfs below a directory image is not walked" "could not mount a procfs for the test"; fi
	rmdir "$imgdir/rootfs/proc"
fi

# The walk is bounded: over the policy's images.max_entries or images.max_bytes it fails with
# an error naming the key. Control: the same tree under the default bounds runs (above).
policy_variant default "$T/images-small.json" images-small "p['images'] = {'allow': ['$imgdir'], 'max_entries': 5}"
policy_variant default "$T/images-tiny.json" images-tiny "p['images'] = {'allow': ['$imgdir'], 'max_bytes': 1000}"
for i in 1 2 3 4 5 6 7 8; do : >"$imgdir/rootfs/f$i"; done
run_img --policy "$imgpol" --image "$imgdir/rootfs" -- /bin/probe exit 0
ctl_rc=$RC
for k in max_entries:small max_bytes:tiny; do
	run_img --policy "$T/images-${k#*:}.json" --image "$imgdir/rootfs" -- /bin/probe exit 0
	if [ "$ctl_rc" != 0 ]; then not_ok "a directory image over images.${k%:*} is refused" "control: exit $ctl_rc"
	elif [ "$RC" = 125 ] && grep -q "images.${k%:*}" <<<"$ERR"; then ok "a directory image over images.${k%:*} is refused"
	else not_ok "a directory image over images.${k%:*} is refused" "exit $RC: $(first_line "$ERR")"; fi
done

# The digest is cached in the state directory: a second run reads no file again. A file whose
# bytes change (its size and mtime put back) gets a new digest: the cache is keyed by ctime
# too, which no call can put back. (Files younger than a second are never cached.)
cimg=$T/cacheimage
mkdir -p "$cimg/rootfs/bin" && chmod -R 755 "$cimg"
cp "$PROBE" "$cimg/rootfs/bin/probe"
echo AAAA >"$cimg/rootfs/data" && chmod 644 "$cimg/rootfs/data"
touch -d '2020-01-01 00:00:00' "$cimg/rootfs/data"
policy_variant default "$T/images-cache.json" images-cache "p['images'] = {'allow': ['$cimg']}"
sleep 1.2
reads() { sed -n 's/.*image digest of .*, \([0-9]*\) files read, \([0-9]*\) from the cache.*/\1 \2/p' <<<"$ERR" | head -n 1; }
run_img -v --json --policy "$T/images-cache.json" --image "$cimg/rootfs" -- /bin/probe read /data
r1=$(reads) c1=$(json "$T/out" image.digest 2>/dev/null)
run_img -v --json --policy "$T/images-cache.json" --image "$cimg/rootfs" -- /bin/probe read /data
r2=$(reads) c2=$(json "$T/out" image.digest 2>/dev/null)
cache_file=$(find "$STATE/cache/images" -type f -newer "$cimg/rootfs/bin/probe" 2>/dev/null | head -n 1)
if [ "$r1" = "2 0" ] && [ "$r2" = "0 2" ] && [ -n "$c1" ] && [ "$c1" = "$c2" ]; then ok "a directory image's second digest reads no file (cached)"
else not_ok "a directory image's second digest reads no file (cached)" "first: '$r1' $c1, second: '$r2' $c2"; fi
if [ -n "$cache_file" ] && [ "$(stat -c %a "$cache_file")" = 600 ]; then ok "the digest cache is a 0600 file in the state directory"
else not_ok "the digest cache is a 0600 file in the state directory" "'$cache_file' $(stat -c %a "$cache_file" 2>/dev/null)"; fi
echo BBBB >"$cimg/rootfs/data"
touch -d '2020-01-01 00:00:00' "$cimg/rootfs/data"
run_img -v --json --policy "$T/images-cache.json" --image "$cimg/rootfs" -- /bin/probe read /data
r3=$(reads) c3=$(json "$T/out" image.digest 2>/dev/null)
if [ "$RC" = 0 ] && [ "$OUT" != "" ] && [ "$r3" = "1 1" ] && [ -n "$c3" ] && [ "$c3" != "$c1" ]; then
	ok "a changed byte changes the digest, though size and mtime are as before"
else not_ok "a changed byte changes the digest, though size and mtime are as before" "exit $RC, reads '$r3', $c1 -> $c3"; fi

# An image whose /dev is a symlink to / fails closed (ANCHORS §6.7): setup fails with 125
# naming /dev, and the failed start leaves no run directory behind. Control: the directory
# image above, without the link, runs.
rm -f "$imgdir/rootfs/fifo" "$imgdir/rootfs/loop1" "$imgdir/rootfs/loop2"
ln -s / "$imgdir/rootfs/dev"
run_img --policy "$imgpol" --image "$imgdir/rootfs" -- /bin/probe exit 0
left=$(find "$STATE/run" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
if [ "$RC" = 125 ] && grep -q '/dev' <<<"$ERR" && [ "$left" = 0 ]; then ok "a symlinked /dev in an image fails closed"
else not_ok "a symlinked /dev in an image fails closed" "exit $RC, $left left: $(first_line "$ERR")"; fi

[ -n "$made_varlib" ] && rmdir /var/lib/runbox 2>/dev/null
true
