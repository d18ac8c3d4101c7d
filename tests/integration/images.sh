#!/usr/bin/env bash
# The image store: directory and tarball import by the canonical digest of the tree, names as
# references, ls/inspect/tag/rm (refused while a live run uses the image), hostile tarballs
# refused leaving nothing behind, and runs on a store image (idmapped as root).
# modes: root user
. "$(dirname "$0")/../lib.sh"
lib_init images

# What the store holds: its trees (and any temporary or half-removed one), one per line.
store_entries() { ls -A "$STATE/images/store" 2>/dev/null | sort; }
# Imports read host files as a directory image does: the policy's images.allow must cover
# the source. ALLOW covers the test's scratch directory.
ALLOW=$T/allow.json
policy_variant default "$ALLOW" images-test "p['images'] = {'allow': ['$T']}"
img() {
	if [ "$1" = import ]; then run_rbx image "$@" --policy "$ALLOW"
	else run_rbx image "$@"; fi
}

# Without a policy covering it (default allows no directory), an import is refused, naming
# the policy key; the control is the same import under ALLOW, which the tests below make.
mkdir -p "$T/plain" && echo x >"$T/plain/f"
run_rbx image import "$T/plain"
if [ "$RC" = 125 ] && grep -q "images.allow" <<<"$ERR" && [ -z "$(ls -A "$STATE/images/store" 2>/dev/null)" ]; then
	ok "import: refused where the policy's images.allow does not cover the source"
else not_ok "import: refused where the policy's images.allow does not cover the source" "exit $RC: $(first_line "$ERR")"; fi
img import "$T/plain"
if [ "$RC" = 0 ]; then ok "import: allowed where images.allow covers it (control)"
else not_ok "import: allowed where images.allow covers it (control)" "exit $RC: $(first_line "$ERR")"; fi
img rm "$OUT"

# ---- digest stability ---------------------------------------------------------------------
# The same tree made in two creation orders (so listed in two readdir orders) has one digest;
# one changed byte gives another. Control: the two copies really list in different orders.
mk_tree() { # DIR ORDER...: files f1..f3 and a dir, created in the given order
	local d=$1 n
	shift
	mkdir -p "$d"
	for n in "$@"; do
		case $n in
		dir) mkdir -p "$d/sub" && printf 'deep\n' >"$d/sub/inner" ;;
		*) printf 'content of %s\n' "$n" >"$d/$n" ;;
		esac
	done
	chmod 0755 "$d"
	ln -sf f1 "$d/link"
}
# The second copy is on a tmpfs of its own, which lists in creation order, not by name hash.
SHM=$T/shm
mkdir -p "$SHM" && mount -t tmpfs -o mode=0755 rbx-images "$SHM"
trap 'umount -l "$SHM" 2>/dev/null; lib_cleanup' EXIT
mk_tree "$T/a" f1 f2 f3 dir
mk_tree "$SHM/b" dir f3 f2 f1
cp -a "$T/a" "$T/c" && printf 'content of f2!\n' >"$T/c/f2"
img import "$T/a"; da=$OUT
img import "$SHM/b"; db=$OUT
img import "$T/c"; dc=$OUT
order_a=$(ls -f "$T/a" | grep -v '^\.' | tr '\n' ' ') order_b=$(ls -f "$SHM/b" | grep -v '^\.' | tr '\n' ' ')
if [ "$order_a" = "$order_b" ]; then
	skip "digest: the same tree in another creation/readdir order has the same digest" "control cannot tell: both copies list as $order_a"
elif [[ "$da" == sha256:* ]] && [ "$da" = "$db" ]; then ok "digest: the same tree in another creation/readdir order has the same digest"
else not_ok "digest: the same tree in another creation/readdir order has the same digest" "$da vs $db ($(first_line "$ERR"))"; fi
if [[ "$dc" == sha256:* ]] && [ "$dc" != "$da" ]; then ok "digest: one changed byte changes the digest"
else not_ok "digest: one changed byte changes the digest" "$da vs $dc"; fi
if [ "$(store_entries | wc -l)" = 2 ]; then ok "digest: the same tree is stored once"
else not_ok "digest: the same tree is stored once" "$(store_entries | tr '\n' ' ')"; fi
# A tarball of the tree imports to the same digest as the directory.
tar -C "$T/a" -czf "$T/a.tgz" .
img import "$T/a.tgz"
if [ "$OUT" = "$da" ]; then ok "digest: a tarball of the tree has the directory's digest"
else not_ok "digest: a tarball of the tree has the directory's digest" "$OUT vs $da ($(first_line "$ERR"))"; fi

# ---- a benign tarball imports and runs ----------------------------------------------------
tar -C "$MINIMAL" -cf - . | zstd -q -o "$T/mini.tar.zst"
img import "$T/mini.tar.zst" --name mini
dm=$OUT
if [ "$RC" = 0 ] && [[ "$dm" == sha256:* ]]; then ok "import: a .tar.zst of the minimal image"
else not_ok "import: a .tar.zst of the minimal image" "exit $RC: $(first_line "$ERR")"; fi
run_rbx run --image mini --json -- /bin/sh -c 'cat /etc/hostname; stat -c %u:%g /bin/busybox'
if [ "$RC" = 0 ] && [ "$(rj 'r["stdout"].split()[0]')" = "$(cat "$MINIMAL/etc/hostname")" ]; then
	ok "run: --image NAME runs on the store image"
else not_ok "run: --image NAME runs on the store image" "exit $RC: $(first_line "$ERR")"; fi
check "run: the result records the store image's digest" "r['image']['digest'] == '$dm'" "r['image']"
if [ "$MODE" = root ]; then
	check "run: a store image is idmapped as root" "r['sandbox']['image_idmapped'] is True" "r['sandbox']"
	check "run: a file owned by 0 in the archive is root's inside" "r['stdout'].split()[1] == '0:0'" "r['stdout']"
else
	# Rootless there is no idmapped mount: the files are the caller's, root inside.
	check "run: rootless, the store image is not idmapped (the caller's files are root's inside)" \
		"r['sandbox']['image_idmapped'] is False and r['stdout'].split()[1] == '0:0'" "[r['sandbox'], r['stdout']]"
fi
run_rbx run --image "$dm" --json -- /bin/cat /etc/hostname
check "run: --image sha256:DIGEST runs on the store image" "r['exit_code'] == 0 and r['image']['digest'] == '$dm'" "[r.get('exit_code'), r.get('image'), '$(first_line "$ERR")']"
run_rbx run --image sha256:0000000000000000000000000000000000000000000000000000000000000000 -- /bin/true
if [ "$RC" = 125 ] && grep -q "not in the store" <<<"$ERR"; then ok "run: an unknown digest is refused, naming it"
else not_ok "run: an unknown digest is refused, naming it" "exit $RC: $(first_line "$ERR")"; fi

# Ownership from the archive (as root): uid 1000 there is uid 1000 inside, through the idmap.
"$PY" - "$T/own.tar" <<'PYEOF'
import io, sys, tarfile
t = tarfile.open(sys.argv[1], "w")
def add(name, data=b"", uid=0, mode=0o644, kind=tarfile.REGTYPE, link=""):
    i = tarfile.TarInfo(name); i.uid = i.gid = uid; i.mode = mode; i.type = kind; i.linkname = link
    i.size = len(data) if kind == tarfile.REGTYPE else 0
    t.addfile(i, io.BytesIO(data) if kind == tarfile.REGTYPE else None)
add("owned", b"x", uid=1000)
add("suid", b"#!/bin/sh\n", mode=0o4755)
PYEOF
tar -C "$MINIMAL" -cf "$T/own-base.tar" .
cp "$T/own-base.tar" "$T/own-full.tar" && tar -Af "$T/own-full.tar" "$T/own.tar"
img import "$T/own-full.tar" --name own
do=$OUT
if [ "$MODE" = root ]; then
	run_rbx run --image own --json -- /bin/stat -c %u /owned
	check "run: a file owned by 1000 in the archive is uid 1000 inside" "r['stdout'].strip() == '1000'" "[r.get('stdout'), '$(first_line "$ERR")']"
fi
sm=$(stat -c %a "$STATE/images/store/${do#sha256:}/rootfs/suid" 2>/dev/null)
if [ "$sm" = 755 ]; then ok "import: setuid bits are dropped by default"
else not_ok "import: setuid bits are dropped by default" "mode $sm ($(first_line "$ERR"))"; fi
# Keeping them is the operator's to allow (policy images.keep_setuid): asked for under a policy
# that does not allow it, the import is refused naming the key, and nothing is stored.
before=$(store_entries)
img import "$T/own-full.tar" --name own-suid --keep-setuid
if [ "$RC" = 125 ] && grep -q "images.keep_setuid" <<<"$ERR" && [ "$(store_entries)" = "$before" ]; then
	ok "import: --keep-setuid is refused where the policy does not allow it (images.keep_setuid)"
else not_ok "import: --keep-setuid is refused where the policy does not allow it (images.keep_setuid)" "exit $RC: $(first_line "$ERR")"; fi
PRIV=$T/priv.json
policy_variant default "$PRIV" images-priv "p['images'] = {'allow': ['$T'], 'keep_setuid': True, 'keep_file_caps': True}"
run_rbx image import "$T/own-full.tar" --name own-suid --keep-setuid --policy "$PRIV"
sm=$(stat -c %a "$STATE/images/store/${OUT#sha256:}/rootfs/suid" 2>/dev/null)
if [ "$sm" = 4755 ]; then ok "import: --keep-setuid keeps them where the policy allows (control)"
else not_ok "import: --keep-setuid keeps them where the policy allows (control)" "mode $sm ($(first_line "$ERR"))"; fi
run_rbx image import "$T/own-full.tar" --policy "$PRIV"
if [ "$OUT" = "$do" ]; then ok "import: a policy that allows keeping keeps nothing unasked (the same digest as stripped)"
else not_ok "import: a policy that allows keeping keeps nothing unasked (the same digest as stripped)" "$OUT vs $do"; fi

# File capabilities (the security.capability xattr, in a tar's SCHILY.xattr header): dropped by
# default, refused when asked for beyond the policy, kept where it allows; and inside a sandbox a
# kept setuid-root file or file capability gives nothing (no_new_privs), while on the host the
# same files do (the control). Setting an xattr in the security namespace needs root.
if [ "$MODE" = root ] && command -v setcap >/dev/null; then
	pub=$T/privfiles
	mkdir -p "$pub" && chmod 0755 "$pub"
	cp "$PROBE" "$pub/suid-probe" && chmod 4755 "$pub/suid-probe"
	cp "$PROBE" "$pub/cap-probe" && chmod 0755 "$pub/cap-probe" && setcap cap_net_raw+ep "$pub/cap-probe"
	tar --format=posix -C "$MINIMAL" -cf "$T/priv.tar" . &&
		tar --format=posix --xattrs --xattrs-include='security.capability' -C "$pub" -rf "$T/priv.tar" suid-probe cap-probe
	img import "$T/priv.tar" --name priv-stripped
	ps=$OUT
	pst=$STATE/images/store/${ps#sha256:}/rootfs
	if [ "$RC" = 0 ] && [ -x "$pst/cap-probe" ] && [ -z "$(getcap "$pst/cap-probe")" ] && [ ! -u "$pst/suid-probe" ] &&
		[ -n "$(getcap "$pub/cap-probe")" ]; then
		ok "import: file capabilities are dropped by default (the source has $(getcap "$pub/cap-probe" | cut -d' ' -f2))"
	else not_ok "import: file capabilities are dropped by default" "exit $RC: $(first_line "$ERR"); $(getcap "$pst/cap-probe")"; fi
	before=$(store_entries)
	img import "$T/priv.tar" --keep-file-caps
	if [ "$RC" = 125 ] && grep -q "images.keep_file_caps" <<<"$ERR" && [ "$(store_entries)" = "$before" ]; then
		ok "import: --keep-file-caps is refused where the policy does not allow it (images.keep_file_caps)"
	else not_ok "import: --keep-file-caps is refused where the policy does not allow it (images.keep_file_caps)" "exit $RC: $(first_line "$ERR")"; fi
	run_rbx image import "$T/priv.tar" --name priv --keep-file-caps --keep-setuid --policy "$PRIV"
	pk=$OUT
	pkt=$STATE/images/store/${pk#sha256:}/rootfs
	if [ "$RC" = 0 ] && getcap "$pkt/cap-probe" | grep -q "cap_net_raw=ep" && [ -u "$pkt/suid-probe" ] && [ "$pk" != "$ps" ]; then
		ok "import: --keep-file-caps keeps them where the policy allows, and they are in the digest"
	else not_ok "import: --keep-file-caps keeps them where the policy allows, and they are in the digest" "exit $RC: $(first_line "$ERR"); $(getcap "$pkt/cap-probe"); $pk vs $ps"; fi
	# The control: on the host, as nobody, the setuid-root file runs as euid 0, and the file
	# capability is effective.
	host_suid=$(setpriv --reuid=65534 --regid=65534 --clear-groups "$pub/suid-probe" uid 65534 2>&1)
	setpriv --reuid=65534 --regid=65534 --clear-groups "$pub/cap-probe" caps-has net_raw >/dev/null 2>&1
	host_cap=$?
	UIDPOL=$T/uid1000.json
	policy_variant default "$UIDPOL" uid1000 "p['identity'] = {'uid': 1000, 'gid': 1000, 'id_range': 'auto', 'capabilities': []}"
	run_rbx run --image priv --policy "$UIDPOL" -- /suid-probe uid 1000
	sb_suid=$OUT sb_suid_rc=$RC
	run_rbx run --image priv --policy "$UIDPOL" -- /cap-probe caps-has net_raw
	sb_cap=$RC
	run_rbx run --image priv --policy "$UIDPOL" -- /suid-probe nnp
	sb_nnp=$RC
	if [ -u "$pkt/suid-probe" ] && getcap "$pkt/cap-probe" | grep -q cap_net_raw &&
		[ "$host_suid" = "uid=65534 euid=0" ] && [ "$host_cap" = 0 ] && [ "$sb_suid_rc" = 0 ] &&
		[ "$sb_suid" = "uid=1000 euid=1000" ] && [ "$sb_cap" != 0 ] && [ "$sb_nnp" = 0 ]; then
		ok "run: a kept setuid-root file and file capability give nothing inside (no_new_privs); on the host they do"
	else not_ok "run: a kept setuid-root file and file capability give nothing inside (no_new_privs); on the host they do" \
		"host: '$host_suid' cap $host_cap; sandbox: '$sb_suid' ($sb_suid_rc) cap $sb_cap nnp $sb_nnp; $(first_line "$ERR")"; fi
fi

# ---- ls, inspect, tag ---------------------------------------------------------------------
img tag mini mini2
img inspect mini2
if [ "$RC" = 0 ] && [ "$(json "$T/out" digest)" = "$dm" ] && [ "$(json "$T/out" size)" -gt 0 ]; then
	ok "tag: the new name refers to the same digest (inspect shows it in full)"
else not_ok "tag: the new name refers to the same digest (inspect shows it in full)" "exit $RC: $(first_line "$OUT$ERR")"; fi
img ls
if grep -q "^mini2 .*${dm:0:19} " <<<"$OUT" && ! grep -q "$dm" <<<"$OUT"; then ok "ls: names with short digests"
else not_ok "ls: names with short digests" "$(first_line "$OUT")"; fi
img ls --digests
if grep -q "^mini2 .*$dm " <<<"$OUT"; then ok "ls --digests: full digests"
else not_ok "ls --digests: full digests" "$(first_line "$OUT")"; fi
img rm mini2
if [ "$RC" = 0 ] && [ -d "$STATE/images/store/${dm#sha256:}/rootfs" ]; then
	ok "rm NAME: another name keeps the tree"
else not_ok "rm NAME: another name keeps the tree" "exit $RC: $(first_line "$ERR")"; fi

# ---- rm refused while a live run uses the image -------------------------------------------
rbx_cmd run --image mini -- /bin/sleep 4
"${RBX_CMD[@]}" >/dev/null 2>"$T/bg.err" </dev/null &
bg=$!
live() { rbx ps --json 2>/dev/null | grep -q "$dm"; }
if ! wait_for live; then
	not_ok "rm: refused while a live run uses the image" "the run never showed in ps: $(first_line "$(cat "$T/bg.err")")"
else
	img rm mini
	if [ "$RC" != 0 ] && grep -q "live run" <<<"$ERR" && [ -d "$STATE/images/store/${dm#sha256:}/rootfs" ]; then
		ok "rm: refused while a live run uses the image"
	else not_ok "rm: refused while a live run uses the image" "exit $RC: $(first_line "$ERR")"; fi
	img rm "$dm"
	if [ "$RC" != 0 ] && grep -q "live run" <<<"$ERR"; then ok "rm DIGEST: refused while in use too"
	else not_ok "rm DIGEST: refused while in use too" "exit $RC: $(first_line "$ERR")"; fi
fi
wait "$bg"
img rm mini
if [ "$RC" = 0 ] && [ ! -e "$STATE/images/store/${dm#sha256:}" ]; then ok "rm: once the run has ended the image goes (control)"
else not_ok "rm: once the run has ended the image goes (control)" "exit $RC: $(first_line "$ERR")"; fi
run_rbx run --image mini -- /bin/true
if [ "$RC" = 125 ]; then ok "rm: the removed name no longer resolves"
else not_ok "rm: the removed name no longer resolves" "exit $RC"; fi

# ---- hostile tarballs ---------------------------------------------------------------------
mkdir -p "$T/outside"
chmod 0777 "$T/outside"
"$PY" - "$T" <<'PYEOF'
import io, os, sys, tarfile
T = sys.argv[1]
def tarball(name, members, mode="w"):
    t = tarfile.open(os.path.join(T, name), mode)
    for m in members:
        i = tarfile.TarInfo(m[0]); kind = m[1]
        i.type = {"f": tarfile.REGTYPE, "l": tarfile.SYMTYPE, "h": tarfile.LNKTYPE, "d": tarfile.DIRTYPE,
                  "c": tarfile.CHRTYPE}[kind]
        data = b""
        if kind == "f": data = m[2] if len(m) > 2 else b"pwned\n"
        else: i.linkname = m[2] if len(m) > 2 else ""
        if kind == "c": i.devmajor, i.devminor = 1, 3
        i.size = len(data); i.mode = 0o755 if kind == "d" else 0o644
        t.addfile(i, io.BytesIO(data) if kind == "f" else None)
    t.close()
out = T + "/outside"
tarball("h-dotdot.tar", [("ok", "f"), ("../pwned", "f")])
tarball("h-dotdot-deep.tar", [("a/b", "f"), ("a/../../pwned", "f")])
tarball("h-symlink-abs.tar", [("esc", "l", out), ("esc/pwned", "f")])
tarball("h-symlink-rel.tar", [("d", "d"), ("d/esc", "l", "../../../../../../../../.." + out), ("d/esc/pwned", "f")])
tarball("h-hardlink-dotdot.tar", [("hl", "h", "../../../../etc/passwd")])
tarball("h-hardlink-abs.tar", [("hl", "h", "/etc/passwd")])
tarball("h-hardlink-via-symlink.tar", [("s", "l", "/etc"), ("hl", "h", "s/passwd")])
tarball("h-device.tar", [("dev", "d"), ("dev/null", "c")])
tarball("many.tar", [("f%d" % i, "f", b"") for i in range(300)])
tarball("abs.tar", [("/etc/rbx-abs-member", "f")])
PYEOF
# A decompression bomb: 64 MiB of zeros, about 64 KiB compressed.
mkdir -p "$T/bomb" && head -c 64M /dev/zero >"$T/bomb/zeros" && tar -C "$T/bomb" -czf "$T/bomb.tar.gz" . && rm -rf "$T/bomb"
chmod a+r "$T"/*.tar "$T"/*.tar.gz
before=$(store_entries)
hostile() { # NAME FILE EXPECT-TEXT [IMPORT-OPTIONS]
	local name=$1 file=$2 want=$3
	shift 3
	img import "$T/$file" --name hostile "$@"
	local left
	left=$(diff <(echo "$before") <(store_entries) | grep '^>' | tr '\n' ' ')
	if [ "$RC" = 0 ]; then not_ok "hostile: $name is refused" "imported: $OUT"
	elif ! grep -q -- "$want" <<<"$ERR"; then not_ok "hostile: $name is refused" "exit $RC, error not naming it: $(first_line "$ERR")"
	elif [ -n "$left" ] || [ -e "$STATE/images/refs/hostile" ]; then not_ok "hostile: $name is refused" "left behind: $left"
	elif [ -e "$T/outside/pwned" ] || [ -e "$T/pwned" ]; then not_ok "hostile: $name is refused" "wrote outside the tree"
	else ok "hostile: $name is refused, naming it, leaving nothing"; fi
}
hostile "a \`..\` member" h-dotdot.tar '`..` component'
hostile "a deep \`..\` member" h-dotdot-deep.tar '`..` component'
hostile "a member below an absolute symlink" h-symlink-abs.tar 'leaves the tree through a link'
hostile "a member below a relative symlink out of the tree" h-symlink-rel.tar 'leaves the tree through a link'
hostile "a hard link with \`..\`" h-hardlink-dotdot.tar '`..` component'
hostile "a hard link to an absolute host file" h-hardlink-abs.tar 'no earlier file of the tree'
hostile "a hard link through a symlink out of the tree" h-hardlink-via-symlink.tar 'leaves the tree through a link'
hostile "a device node" h-device.tar 'device node'
hostile "more members than --max-members" many.tar 'more than 100 members' --max-members 100
hostile "a decompression bomb over --max-bytes" bomb.tar.gz 'more than 16777216 bytes unpacked' --max-bytes 16M
# Controls: the same archives under caps that fit import.
img import "$T/many.tar" --max-members 1000
if [ "$RC" = 0 ]; then ok "hostile: the member cap's control (--max-members 1000) imports"
else not_ok "hostile: the member cap's control (--max-members 1000) imports" "$(first_line "$ERR")"; fi
img import "$T/bomb.tar.gz" --max-bytes 128M
if [ "$RC" = 0 ]; then ok "hostile: the byte cap's control (--max-bytes 128M) imports"
else not_ok "hostile: the byte cap's control (--max-bytes 128M) imports" "$(first_line "$ERR")"; fi
# An absolute member name is made relative, as tar does: into the tree, never the host's /etc.
img import "$T/abs.tar"
if [ "$RC" = 0 ] && [ -f "$STATE/images/store/${OUT#sha256:}/rootfs/etc/rbx-abs-member" ] && [ ! -e /etc/rbx-abs-member ]; then
	ok "hostile: an absolute member name lands inside the tree"
else not_ok "hostile: an absolute member name lands inside the tree" "exit $RC: $(first_line "$ERR")"; fi
if [ -z "$(store_entries | grep '^\.')" ]; then ok "import: no temporary tree is left in the store"
else not_ok "import: no temporary tree is left in the store" "$(store_entries | tr '\n' ' ')"; fi

# ---- OCI image layouts --------------------------------------------------------------------
# A layout made here with tar and sha256sum: layer 1 the minimal image plus files, layer 2
# (gzip) with a whiteout, an opaque directory and an added file. Control: the layout of layer
# 1 alone has what layer 2 takes away.
oci_blob() { # FILE: copies it into the layout's blobs, prints "sha256:<hex> <size>"
	local h
	h=$(sha256sum "$1" | cut -d' ' -f1)
	cp "$1" "$L/blobs/sha256/$h"
	echo "sha256:$h $(stat -c %s "$1")"
}
oci_layout() { # DIR LAYER...: an OCI layout in DIR of the layer tarballs, in order
	L=$1
	shift
	mkdir -p "$L/blobs/sha256"
	printf '{"imageLayoutVersion":"1.0.0"}' >"$L/oci-layout"
	printf '{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]}}' >"$T/config.json"
	local cfg layers="" f b mt
	read -r cfg cs < <(oci_blob "$T/config.json")
	for f in "$@"; do
		read -r b bs < <(oci_blob "$f")
		case $f in *.gz) mt=tar+gzip ;; *) mt=tar ;; esac
		layers+="${layers:+,}{\"mediaType\":\"application/vnd.oci.image.layer.v1.$mt\",\"digest\":\"$b\",\"size\":$bs}"
	done
	printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"%s","size":%s},"layers":[%s]}' \
		"$cfg" "$cs" "$layers" >"$T/manifest.json"
	read -r b bs < <(oci_blob "$T/manifest.json")
	printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"%s","size":%s}]}' \
		"$b" "$bs" >"$L/index.json"
	chmod -R a+rX "$L"
}
mkdir -p "$T/l1" "$T/l2/etc" "$T/l2/opq"
cp -a "$MINIMAL/." "$T/l1/"
mkdir -p "$T/l1/opq/sub" && echo old >"$T/l1/opq/old1" && echo old >"$T/l1/opq/sub/old2" && echo gone >"$T/l1/etc/gone"
: >"$T/l2/etc/.wh.gone" && : >"$T/l2/opq/.wh..wh..opq" && echo new >"$T/l2/opq/new" && echo added >"$T/l2/etc/added"
tar -C "$T/l1" -cf "$T/layer1.tar" .
tar -C "$T/l2" -czf "$T/layer2.tar.gz" .
oci_layout "$T/oci" "$T/layer1.tar" "$T/layer2.tar.gz"
oci_layout "$T/oci1" "$T/layer1.tar"
probe_oci='for p in /etc/gone /etc/added /opq/old1 /opq/sub /opq/new /etc/.wh.gone /opq/.wh..wh..opq; do [ -e $p ] && echo $p; done; true'
img import "$T/oci1" --name oci1
run_rbx run --image oci1 -- /bin/sh -c "$probe_oci"
if [ "$RC" = 0 ] && [ "$(echo $OUT)" = "/etc/gone /opq/old1 /opq/sub" ]; then ok "oci: a one-layer layout imports and runs (control)"
else not_ok "oci: a one-layer layout imports and runs (control)" "exit $RC: $(echo $OUT) $(first_line "$ERR")"; fi
img import "$T/oci" --name oci
run_rbx run --image oci -- /bin/sh -c "$probe_oci"
if [ "$RC" = 0 ] && [ "$(echo $OUT)" = "/etc/added /opq/new" ]; then
	ok "oci: layers applied in order, with a whiteout and an opaque directory"
else not_ok "oci: layers applied in order, with a whiteout and an opaque directory" "exit $RC: $(echo $OUT) $(first_line "$ERR")"; fi
# A layout made by a real tool, Debian's umoci: two layers, the second deleting a file and
# replacing a directory (umoci writes the whiteouts itself); control: the first layer's files.
if ! command -v umoci >/dev/null; then
	not_ok "oci: umoci is installed (scripts/install-deps.sh test)"
else
	U=$T/umoci UB=$T/umoci-bundle
	if umoci init --layout "$U" && umoci new --image "$U:base" && umoci unpack --image "$U:base" "$UB" >/dev/null &&
		cp -a "$MINIMAL/." "$UB/rootfs/" && echo one >"$UB/rootfs/keep" && echo gone >"$UB/rootfs/gone" &&
		mkdir -p "$UB/rootfs/dir/sub" && echo x >"$UB/rootfs/dir/sub/x" && umoci repack --image "$U:base" "$UB" &&
		rm "$UB/rootfs/gone" && rm -r "$UB/rootfs/dir/sub" && echo new >"$UB/rootfs/dir/new" && echo two >"$UB/rootfs/keep" &&
		umoci repack --image "$U:base" "$UB"; then
		chmod -R a+rX "$U"
		img import "$U" --name umoci
		run_rbx run --image umoci -- /bin/sh -c 'cat /keep; for p in /gone /dir/sub /dir/new; do [ -e $p ] && echo $p; done; true'
		if [ "$RC" = 0 ] && [ "$(echo $OUT)" = "two /dir/new" ]; then
			ok "oci: a layout umoci made (two layers, its whiteouts) imports and runs: the deleted file and directory are gone"
		else not_ok "oci: a layout umoci made imports with its whiteouts" "exit $RC: $(echo $OUT) $(first_line "$ERR")"; fi
	else not_ok "oci: umoci makes the test's layout" "umoci failed"; fi
fi
# A layer whose bytes do not hash to its name is refused, leaving nothing.
before=$(store_entries)
h=$(sha256sum "$T/layer1.tar" | cut -d' ' -f1)
printf 'x' >>"$T/oci1/blobs/sha256/$h"
img import "$T/oci1" --name hostile
if [ "$RC" != 0 ] && grep -q "does not hash to its name" <<<"$ERR" && [ "$before" = "$(store_entries)" ]; then
	ok "oci: a blob that does not match its digest is refused, leaving nothing"
else not_ok "oci: a blob that does not match its digest is refused, leaving nothing" "exit $RC: $(first_line "$ERR")"; fi
# A whiteout below a link out of the tree is refused: the host file it names stays.
echo keep >"$T/outside/victim"
mkdir -p "$T/w1" "$T/w2/esc" && ln -s "$T/outside" "$T/w1/esc" && : >"$T/w2/esc/.wh.victim"
tar -C "$T/w1" -cf "$T/wlayer1.tar" . && tar -C "$T/w2" -cf "$T/wlayer2.tar" .
oci_layout "$T/ociw" "$T/wlayer1.tar" "$T/wlayer2.tar"
before=$(store_entries)
img import "$T/ociw" --name hostile
if [ "$RC" != 0 ] && grep -q "leaves the tree through a link" <<<"$ERR" && [ -f "$T/outside/victim" ] &&
	[ "$before" = "$(store_entries)" ]; then ok "oci: a whiteout through a link out of the tree is refused"
else not_ok "oci: a whiteout through a link out of the tree is refused" "exit $RC: $(first_line "$ERR")"; fi

# ---- a manifest's "image", and the ledger ---------------------------------------------------
# A manifest's "image" takes a store name; the result and the ledger's run_start record the
# digest import computed. Control: the same manifest with a name the store lacks fails.
img inspect oci
doci=$(json "$T/out" digest)
printf '{"tenant": "t", "agent": "a", "image": "oci", "steps": [{"script": "cat /opq/new"}]}\n' >"$T/img.json"
run_manifest "$T/img.json"
check "manifest: \"image\": a store name runs on it, recording its digest" \
	"r['result'] == 'success' and r['image']['digest'] == '$doci' and r['steps'][0]['stdout'] == 'new\n'" \
	"[r.get('result'), r.get('image'), '$(first_line "$ERR")']"
rid=$(rj 'r["run_id"]')
rbx ledger export --jsonl >"$T/ledger.jsonl" 2>/dev/null
if grep '"run_start"' "$T/ledger.jsonl" | grep -F "$rid" | grep -qF "\"image_digest\": \"$doci\"" ||
	grep '"run_start"' "$T/ledger.jsonl" | grep -F "$rid" | grep -qF "\"image_digest\":\"$doci\""; then
	ok "ledger: run_start records the store image's digest"
else not_ok "ledger: run_start records the store image's digest" "$(grep -F "$rid" "$T/ledger.jsonl" | grep run_start | cut -c 1-300)"; fi
printf '{"tenant": "t", "agent": "a", "image": "no-such-image", "steps": [{"script": "true"}]}\n' >"$T/img2.json"
run_manifest "$T/img2.json"
if [ "$RC" = 125 ] && grep -q "no-such-image" <<<"$ERR"; then ok "manifest: a name the store lacks is refused (control)"
else not_ok "manifest: a name the store lacks is refused (control)" "exit $RC: $(first_line "$ERR")"; fi

# ---- what a directory import keeps and refuses ----------------------------------------------
# Symlinks stay links (never followed); a read-only directory still takes its members and
# goes with rm (rootless too); a device node in a source directory is refused (as root, who
# can make one here).
mkdir -p "$T/ro/sub" && echo x >"$T/ro/sub/f" && ln -s /etc/passwd "$T/ro/hostlink" && chmod 0555 "$T/ro/sub"
img import "$T/ro" --name ro
dro=$OUT
t=$(readlink "$STATE/images/store/${dro#sha256:}/rootfs/hostlink" 2>/dev/null)
m=$(stat -c %a "$STATE/images/store/${dro#sha256:}/rootfs/sub" 2>/dev/null)
if [ "$t" = /etc/passwd ] && [ "$m" = 555 ] && [ -f "$STATE/images/store/${dro#sha256:}/rootfs/sub/f" ]; then
	ok "import: a symlink stays a link, a 0555 directory keeps its mode and its members"
else not_ok "import: a symlink stays a link, a 0555 directory keeps its mode and its members" "link '$t', mode $m ($(first_line "$ERR"))"; fi
img rm ro
if [ "$RC" = 0 ] && [ ! -e "$STATE/images/store/${dro#sha256:}" ]; then ok "rm: a tree with a read-only directory is removed"
else not_ok "rm: a tree with a read-only directory is removed" "exit $RC: $(first_line "$ERR")"; fi
if [ "$MODE" = root ]; then
	mkdir -p "$T/devsrc" && echo x >"$T/devsrc/f" && mknod "$T/devsrc/null" c 1 3
	before=$(store_entries)
	img import "$T/devsrc" --name hostile
	if [ "$RC" != 0 ] && grep -q "device node" <<<"$ERR" && [ "$before" = "$(store_entries)" ]; then
		ok "import: a device node in a source directory is refused, leaving nothing"
	else not_ok "import: a device node in a source directory is refused, leaving nothing" "exit $RC: $(first_line "$ERR")"; fi
	rm -f "$T/devsrc/null"
	img import "$T/devsrc"
	if [ "$RC" = 0 ]; then ok "import: the same directory without it imports (control)"
	else not_ok "import: the same directory without it imports (control)" "exit $RC: $(first_line "$ERR")"; fi
fi

# The command refuses an option it does not know, naming it. Control: without it, it works.
img ls
ctl=$RC
img --no-such-option ls
if [ "$RC" = 125 ] && grep -q -- "--no-such-option" <<<"$ERR" && [ "$ctl" = 0 ]; then ok "\`runbox image\` refuses an unknown option, naming it"
else not_ok "\`runbox image\` refuses an unknown option, naming it" "exit $RC (control $ctl): $(first_line "$ERR")"; fi

# ---- gc -----------------------------------------------------------------------------------
# gc removes unnamed trees no live run uses and temporary trees whose maker is gone (older than
# a minute, lock free); it keeps named trees, an unnamed one a live run uses, and a temporary
# tree whose maker still holds its lock. --dry-run lists the same and removes nothing.
mkdir -p "$T/gc-named" "$T/gc-loose" "$T/gc-used"
echo named >"$T/gc-named/f" && echo loose >"$T/gc-loose/f"
cp -a "$MINIMAL/." "$T/gc-used/" && echo used >"$T/gc-used/marker"
[ "$MODE" = root ] || chown -R $NOBODY:$NOBODY "$T/gc-used"
img import "$T/gc-named" --name gc-named; dn=$OUT
img import "$T/gc-loose"; dl=$OUT
img import "$T/gc-used"; du=$OUT
if [[ $dn == sha256:* && $dl == sha256:* && $du == sha256:* ]]; then ok "gc: three images to collect from are imported"
else not_ok "gc: three images to collect from are imported" "'$dn' '$dl' '$du': $(first_line "$ERR")"; fi
stale=$STATE/images/store/.tmp-gcstale held=$STATE/images/store/.build-gcheld
mkdir -p "$stale/rootfs" "$held/tree"
[ "$MODE" = root ] || chown -R $NOBODY:$NOBODY "$stale" "$held"
touch -d '-5 min' "$stale" "$held"
"$PY" -c 'import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY); fcntl.flock(fd, fcntl.LOCK_EX); time.sleep(60)' "$held" &
holder=$!
rbx_cmd run --image "$du" -- /bin/sleep 6
"${RBX_CMD[@]}" >/dev/null 2>"$T/gc-bg.err" </dev/null &
gcbg=$!
live_du() { [ -n "$du" ] && rbx ps --json 2>/dev/null | grep -q "$du"; }
if ! wait_for live_du; then
	not_ok "gc: keeps an unnamed image a live run uses" "the run never showed in ps: $(first_line "$(cat "$T/gc-bg.err")")"
else
	img gc --dry-run --json
	dry=$OUT
	present=$(for d in "$dn" "$dl" "$du"; do [ -d "$STATE/images/store/${d#sha256:}" ] && echo y; done | wc -l)
	if grep -q "$dl" <<<"$dry" && grep -q gcstale <<<"$dry" && [ "$present" = 3 ] && [ -d "$stale" ]; then
		ok "gc --dry-run: names what would go, removes nothing"
	else not_ok "gc --dry-run: names what would go, removes nothing" "exit $RC, $present of 3 trees: $(first_line "$dry")"; fi
	img gc
	if [ "$RC" = 0 ] && [ ! -e "$STATE/images/store/${dl#sha256:}" ] && [ ! -e "$stale" ]; then
		ok "gc: removes an unnamed image and a dead maker's temporary tree"
	else not_ok "gc: removes an unnamed image and a dead maker's temporary tree" "exit $RC: $(first_line "$OUT$ERR")"; fi
	if [ -d "$STATE/images/store/${dn#sha256:}" ] && [ -d "$STATE/images/store/${du#sha256:}" ] && [ -d "$held" ]; then
		ok "gc: keeps a named image, one a live run uses, and a temporary tree whose maker holds it"
	else not_ok "gc: keeps a named image, one a live run uses, and a temporary tree whose maker holds it" "$(store_entries | tr '\n' ' ')"; fi
fi
wait "$gcbg"
kill "$holder" 2>/dev/null; wait "$holder" 2>/dev/null
img gc
if [ "$RC" = 0 ] && [ ! -e "$STATE/images/store/${du#sha256:}" ] && [ ! -e "$held" ] && [ -d "$STATE/images/store/${dn#sha256:}" ]; then
	ok "gc: once the run has ended and the maker let go, those go too (control)"
else not_ok "gc: once the run has ended and the maker let go, those go too (control)" "exit $RC, used $du: $(store_entries | tr '\n' ' '); $OUT; ps: $(rbx ps 2>&1 | tail -n +2)"; fi
