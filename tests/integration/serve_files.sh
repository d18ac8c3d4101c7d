#!/usr/bin/env bash
# runbox serve's files and snapshots (docs/serve.md), each property against a control: links
# planted inside the sandbox to host paths are never followed by read, write, stat, list,
# remove or rename (a regular file works for each); mounts are never removed; a hydrate archive
# with `..`, absolute or escaping-link members is refused whole and writes nothing; its bounds
# refuse an oversize archive; a snapshot restores files into a new session but not its
# environment; a 64 MiB file round-trips with the daemon's peak memory far below its size;
# every call is a ledger event; `runbox cp` both ways; a snapshot restores after a restart.
# modes: root user unshare subids
. "$(dirname "$0")/../lib.sh"
lib_init serve_files

serve_client
# ex CMD...: a command in session $S; sets RC, OUT.
ex() { run_rbx exec --socket "$SOCK" "$S" -- "$@"; }

serve_start serve.log || exit 0
# The daemon itself (runbox serve execs runbox-serve; unshare -r forks it as a child).
SPID=$(pgrep -f "runbox-serve --socket $SOCK" | head -n 1)

MARK=$(new_marker)
api POST /v1/sessions "{\"image\": \"minimal\", \"env\": {\"EPH_SECRET\": \"eph-$MARK\"}}"
S=$(jv 'r["id"]')
RUN_ID=$(jv 'r["run_id"]')
if [[ ! "$S" =~ ^[0-9a-f]{32}$ ]]; then not_ok "a session is made" "$ST $R"; kill "$DPID"; exit 0; fi

# --- links planted inside the sandbox to host paths -------------------------------------
echo "host-$MARK" >"$T/hostsecret"
chmod 0666 "$T/hostsecret"
mkdir -p "$T/hostdir"
echo keep >"$T/hostdir/keep-$MARK"
chmod -R a+rwX "$T/hostdir"
HOSTSUM=$(sha256sum "$T/hostsecret" | cut -d' ' -f1)
ex sh -c "ln -s $T/hostsecret /workspace/lf; ln -s $T/hostdir /workspace/ld; ln -s $T/hostdir /workspace/ld2;
	ln -s $T/hostsecret /workspace/lf2; printf reg > /workspace/reg; mkdir /workspace/rd; echo in > /workspace/rd/inner"
host_intact() { [ "$(sha256sum "$T/hostsecret" | cut -d' ' -f1)" = "$HOSTSUM" ] && [ -e "$T/hostdir/keep-$MARK" ] &&
	[ "$(ls "$T/hostdir" | wc -l)" = 1 ]; }

# read
api GET "/v1/sessions/$S/files?path=/workspace/lf"; a="$ST"; ar=$R
api GET "/v1/sessions/$S/files?path=/workspace/ld/keep-$MARK"; b="$ST"; br=$R
api GET "/v1/sessions/$S/files?path=/workspace/reg"
if [[ "$ar$br" != *"host-$MARK"* ]] && [[ "$br" != keep ]] && [ "$a" = 409 ] && [ "$b" = 404 ] && [ "$ST" = 200 ] && [ "$R" = reg ]; then
	ok "read: a link to a host file is not followed (409), nor one to a host dir (404); control: a file reads"
else not_ok "read: links to host paths are not followed" "link $a '$ar', via dir $b '$br', file $ST '$R'"; fi
# write
api PUT "/v1/sessions/$S/files?path=/workspace/lf" "evil"; a=$ST
api PUT "/v1/sessions/$S/files?path=/workspace/ld/planted-$MARK" "evil"; b=$ST
api PUT "/v1/sessions/$S/files?path=/workspace/reg&mode=0640" "new-$MARK"; c=$ST
ex cat /workspace/reg
regout=$OUT
ex stat -c %a /workspace/reg
if [ "$a" = 409 ] && [ "$b" = 404 ] && host_intact && [ "$c" = 200 ] && [ "$regout" = "new-$MARK" ] && [ "$OUT" = 640 ]; then
	ok "write: through a link nothing of the host changes (409, 404); control: a file is replaced, mode 0640"
else not_ok "write: links to host paths are not followed" "link $a, via dir $b, file $c '$regout' mode $OUT, host $(ls "$T/hostdir" | tr '\n' ' ')"; fi
# stat
api GET "/v1/sessions/$S/fs/stat?path=/workspace/lf"
sa=$(jv '[r["type"], r["target"], r["size"]]')
api GET "/v1/sessions/$S/fs/stat?path=/workspace/reg"
if [ "$sa" = "[\"symlink\", \"$T/hostsecret\", $((${#T} + 11))]" ] && [ "$(jv 'r["type"]')" = file ] && [ "$(jv 'r["size"]')" = $((${#MARK} + 4)) ]; then
	ok "stat: a link is described as itself (symlink, its target), never its host target; control: a file"
else not_ok "stat: a link is described as itself" "link $sa, file $R"; fi
# list
api GET "/v1/sessions/$S/fs/list?path=/workspace/ld"; a=$ST; ar=$R
api GET "/v1/sessions/$S/fs/list?path=/workspace&depth=3"
names=$(jv '" ".join(e["path"] for e in r["entries"])')
if [ "$a" = 409 ] && [[ "$ar" != *"keep-$MARK"* ]] && [[ "$names" != *"keep-$MARK"* ]] && [[ " $names " == *" /workspace/rd/inner "* ]] &&
	[[ " $names " == *" /workspace/ld "* ]]; then
	ok "list: a link to a host dir is not listed into (409, nor at depth 3); control: a dir's entries are"
else not_ok "list: links to host dirs are not followed" "link $a '$(first_line "$ar")', depth 3: $names"; fi
# remove
api POST "/v1/sessions/$S/fs/remove" '{"path": "/workspace/lf"}'; a=$ST
api POST "/v1/sessions/$S/fs/remove" '{"path": "/workspace/ld", "recursive": true}'; b=$ST
api POST "/v1/sessions/$S/fs/remove" "{\"path\": \"/workspace/ld2/keep-$MARK\"}"; c=$ST
ex sh -c 'ls /workspace'
after=$OUT
api POST "/v1/sessions/$S/fs/remove" '{"path": "/workspace/rd", "recursive": true}'; d=$ST
ex test -e /workspace/rd
if [ "$a" = 200 ] && [ "$b" = 200 ] && [ "$c" = 404 ] && host_intact && [[ $'\n'"$after"$'\n' != *$'\n'lf$'\n'* ]] &&
	[[ $'\n'"$after"$'\n' != *$'\n'ld$'\n'* ]] && [ "$d" = 200 ] && [ "$RC" = 1 ]; then
	ok "remove: a link goes itself, its host target stays (also recursive, and through one: 404); control: a tree goes"
else not_ok "remove: links to host paths are not followed" "link $a, recursive $b, through $c, tree $d ($RC), host $(ls "$T/hostdir" | tr '\n' ' '), left $(echo $after)"; fi
# rename
api POST "/v1/sessions/$S/fs/rename" "{\"from\": \"/workspace/ld2/keep-$MARK\", \"to\": \"/workspace/stolen\"}"; a=$ST
api POST "/v1/sessions/$S/fs/rename" "{\"from\": \"/workspace/reg\", \"to\": \"/workspace/ld2/planted-$MARK\"}"; b=$ST
api POST "/v1/sessions/$S/fs/rename" '{"from": "/workspace/lf2", "to": "/workspace/lf3"}'; c=$ST; ct=$(jv 'r["type"]')
api POST "/v1/sessions/$S/fs/rename" '{"from": "/workspace/reg", "to": "/workspace/reg2"}'; d=$ST
ex cat /workspace/reg2
if [ "$a" = 404 ] && [ "$b" = 404 ] && [ "$c" = 200 ] && [ "$ct" = symlink ] && host_intact && [ "$d" = 200 ] && [ "$OUT" = "new-$MARK" ]; then
	ok "rename: nothing moves through a link (404 both ways), a link moves as itself; control: a file moves"
else not_ok "rename: links to host paths are not followed" "from-through $a, to-through $b, link $c $ct, file $d '$OUT'"; fi
api POST "/v1/sessions/$S/fs/rename" '{"from": "/workspace/reg2", "to": "/workspace/lf3"}'; a=$ST
api POST "/v1/sessions/$S/fs/rename" '{"from": "/workspace/reg2", "to": "/workspace/lf3", "overwrite": true}'; b=$ST
if [ "$a" = 409 ] && [ "$b" = 200 ] && host_intact; then ok "rename: an existing target is kept (409) unless overwrite (200), the link replaced, never followed"
else not_ok "rename: overwrite" "without $a, with $b"; fi

# --- mkdir, mounts, kernel files, read-only ----------------------------------------------
api POST "/v1/sessions/$S/fs/mkdir" '{"path": "/workspace/m/n/o", "mode": "0700"}'; a=$ST
api POST "/v1/sessions/$S/fs/mkdir" '{"path": "/workspace/m/n/o", "parents": true, "mode": "0700"}'; b=$ST; bm=$(jv 'r["mode"]')
api POST "/v1/sessions/$S/fs/mkdir" '{"path": "/workspace/m/n/o", "parents": false}'; c=$ST
if [ "$a" = 404 ] && [ "$b" = 200 ] && [ "$bm" = 0700 ] && [ "$c" = 409 ]; then ok "mkdir: parents only when asked (404, then 200 mode 0700), an existing one 409"
else not_ok "mkdir" "no parents $a, parents $b $bm, again $c"; fi
api POST "/v1/sessions/$S/fs/remove" '{"path": "/workspace", "recursive": true}'; a=$ST
api POST "/v1/sessions/$S/fs/rename" '{"from": "/workspace", "to": "/w2"}'; b=$ST
ex test -d /workspace/m/n/o
if [ "$a" = 403 ] && [ "$b" = 403 ] && [ "$RC" = 0 ]; then ok "a mount (/workspace) is neither removed nor renamed (403), nothing in it removed; control above: a tree in it is"
else not_ok "a mount is neither removed nor renamed" "remove $a, rename $b, still there $RC"; fi
api GET "/v1/sessions/$S/files?path=/proc/1/environ"; a=$ST; ar=$R
api GET "/v1/sessions/$S/files?path=/etc/passwd"; b=$ST
if [ "$a" = 403 ] && [[ "$ar" != *"eph-$MARK"* ]] && [ "$b" = 200 ]; then ok "a kernel file (/proc/1/environ) is refused (403); control: /etc/passwd of the sandbox reads"
else not_ok "kernel files are refused" "proc $a, passwd $b"; fi
# stat and list of a kernel filesystem: refused, never the daemon's view of /proc's links (their
# targets as the host's root names them); a listing from / shows /proc, not what is below it
api GET "/v1/sessions/$S/fs/stat?path=/proc/1/cwd"; a=$ST; ar=$R
api GET "/v1/sessions/$S/fs/list?path=/proc/1&depth=2"; b=$ST; br=$R
api GET "/v1/sessions/$S/fs/list?path=/&depth=2"; c=$ST; cr=$R
below=$(jv 'sum(1 for e in r["entries"] if e["path"].startswith("/proc/") or e["path"].startswith("/sys/"))')
top=$(jv 'sum(1 for e in r["entries"] if e["path"] in ("/proc", "/workspace"))')
api GET "/v1/sessions/$S/fs/stat?path=/workspace"; d=$ST
if [ "$a" = 403 ] && [ "$b" = 403 ] && [[ "$ar$br" != *'"target"'* ]] && [ "$c" = 200 ] && [ "$below" = 0 ] &&
	[ "$top" = 2 ] && [ "$d" = 200 ]; then
	ok "stat and list below a kernel filesystem are refused (403); a listing of / shows /proc but nothing below it; control: /workspace stats"
else not_ok "stat and list of kernel filesystems" "stat $a, list $b, / $c ${cr:0:300} ($below below /proc and /sys, $top of /proc and /workspace), workspace $d"; fi
ex sh -c 'touch /usr/rbx-probe 2>/dev/null'
probe=$RC
api PUT "/v1/sessions/$S/files?path=/usr/rbx-$MARK" "x"; a=$ST
api PUT "/v1/sessions/$S/files?path=/workspace/w-$MARK" "x"; b=$ST
if [ "$probe" != 0 ]; then
	if [ "$a" = 403 ] && [ "$b" = 200 ]; then ok "a read-only image path is a 403 (as it is read-only inside); control: /workspace takes it"
	else not_ok "a read-only image path is a 403" "usr $a, workspace $b"; fi
else note "the image's /usr is writable here: no read-only path to probe"; fi

# --- streaming: 64 MiB round trip, the daemon's peak memory far below it ------------------
hwm() { awk '/^VmHWM/ {print $2}' "/proc/$SPID/status"; }
head -c $((64 << 20)) /dev/urandom >"$T/big"
chmod 0644 "$T/big"
BIGSUM=$(sha256sum "$T/big" | cut -d' ' -f1)
h0=$(hwm)
upload PUT "/v1/sessions/$S/files?path=/workspace/big" "$T/big"; pst=$ST; psum=$(jv 'r["sha256"]')
"${CLIENT[@]}" curl -s --max-time 120 --unix-socket "$SOCK" -o "$T/home/big.back" "http://runbox/v1/sessions/$S/files?path=/workspace/big"
h1=$(hwm)
gotsum=$(sha256sum "$T/home/big.back" | cut -d' ' -f1)
# The control: a reader that holds the file whole peaks above its size, so the measure sees it.
ctl=$("$PY" -c 'import sys; d = open(sys.argv[1], "rb").read(); print([l.split()[1] for l in open("/proc/self/status") if l.startswith("VmHWM")][0])' "$T/big")
if [ "$pst" = 200 ] && [ "$psum" = "sha256:$BIGSUM" ] && [ "$gotsum" = "$BIGSUM" ] && [ -n "$h0" ] &&
	[ $((h1 - h0)) -lt 16384 ] && [ "$ctl" -gt 65536 ]; then
	ok "a 64 MiB file round-trips by PUT and GET, the daemon's peak grew $(((h1 - h0) / 1024)) MiB (control: a whole read peaks $((ctl / 1024)) MiB)"
else not_ok "a 64 MiB file streams both ways" "put $pst $psum, back $gotsum, hwm $h0 -> $h1 KiB, control $ctl KiB"; fi
api GET "/v1/sessions/$S/files?path=/workspace/big&max_bytes=1000"
if [ "$ST" = 409 ]; then ok "GET over max_bytes is a 409"; else not_ok "GET over max_bytes is a 409" "$ST"; fi
ex rm -f /workspace/big

# --- hydrate: members leaving /workspace, bounds --------------------------------------------
"$PY" - "$T" "$MARK" <<'EOF'
import io, sys, tarfile
t, mark = sys.argv[1], sys.argv[2]
def mk(name, members):
    with tarfile.open(f"{t}/{name}", "w") as tf:
        for n, kind, arg in members:
            ti = tarfile.TarInfo(n)
            data = b""
            if kind == "f":
                data = arg.encode()
            elif kind == "l":
                ti.type, ti.linkname = tarfile.SYMTYPE, arg
            elif kind == "d":
                ti.type = tarfile.DIRTYPE
            ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data))
good = [("h/", "d", None), ("h/a.txt", "f", "a-" + mark), ("h/rel", "l", "a.txt")]
mk("good.tar", good)
mk("dotdot.tar", good + [("h/../../dd-" + mark, "f", "x")])
mk("abs.tar", good + [(f"{t}/abs-{mark}", "f", "x")])
mk("linkabs.tar", good + [("h/esc", "l", t)])
mk("linkup.tar", good + [("h/esc", "l", "../../..")])
# h/p -> .. is /workspace itself: through it, three `..` leave (a later member's check needs the
# earlier link, and the order may be either); control: through it to a file inside
mk("linkchain.tar", good + [("q", "l", "h/p/h/p/h/p/../../../etc"), ("h/p", "l", "..")])
mk("linkchain-ok.tar", good + [("h/p", "l", ".."), ("q", "l", "h/p/h/a.txt")])
mk("under.tar", good + [("h/esc", "l", "a.txt"), ("h/esc/x", "f", "x")])
mk("many.tar", good + [(f"h/m{i}", "f", "") for i in range(20)])
mk("bytes.tar", good + [("h/big", "f", "y" * 5000)])
EOF
chmod 0644 "$T"/*.tar
refused=""
for f in dotdot abs linkabs linkup under linkchain; do
	upload POST "/v1/sessions/$S/hydrate" "$T/$f.tar"
	refused="$refused $f:$ST"
done
ex sh -c "ls /workspace/h 2>&1; ls / | grep -c dd-$MARK; find / -xdev -name 'abs-$MARK' 2>/dev/null | wc -l"
inside=$OUT
if [ "$refused" = " dotdot:400 abs:400 linkabs:400 linkup:400 under:400 linkchain:400" ] && [[ "$inside" == *"No such file"* ]] &&
	[ ! -e "$T/dd-$MARK" ] && [ ! -e "$T/abs-$MARK" ] && [ ! -e "$(dirname "$T")/dd-$MARK" ]; then
	ok "hydrate refuses whole an archive with a ../, absolute, or escaping-link member (nothing written, its good members neither)"
else not_ok "hydrate refuses members leaving /workspace" "$refused; inside: $(echo $inside)"; fi
upload POST "/v1/sessions/$S/hydrate" "$T/good.tar"; a=$ST; am=$(jv 'r["members"]')
ex cat /workspace/h/rel
if [ "$a" = 200 ] && [ "$am" = 3 ] && [ "$OUT" = "a-$MARK" ]; then ok "control: the same archive without them hydrates (3 members, a link inside works)"
else not_ok "control: the good archive hydrates" "$a $R, '$OUT'"; fi
upload POST "/v1/sessions/$S/hydrate" "$T/linkchain-ok.tar"; a=$ST
ex cat /workspace/q
if [ "$a" = 200 ] && [ "$OUT" = "a-$MARK" ]; then ok "control: links through the archive's own links that stay inside hydrate (q -> h/p/h/a.txt, h/p -> ..)"
else not_ok "control: a chain of links inside hydrates" "$a $R, '$OUT'"; fi
ex sh -c 'rm -f /workspace/q /workspace/h/p'
# the same chain planted in the tree: the snapshot (below) leaves out the one that leaves
ex sh -c 'mkdir -p /workspace/cx && ln -s .. /workspace/cx/p && ln -s cx/p/cx/p/cx/p/../../../etc /workspace/lchain && ln -s cx/p/k /workspace/lgood' 
upload POST "/v1/sessions/$S/hydrate?max_members=10" "$T/many.tar"; a=$ST
upload POST "/v1/sessions/$S/hydrate?max_bytes=4096" "$T/bytes.tar"; b=$ST
upload POST "/v1/sessions/$S/hydrate?max_in_bytes=4096" "$T/bytes.tar"; c=$ST
ex test -e /workspace/h/big
big_absent=$RC
upload POST "/v1/sessions/$S/hydrate?max_members=30" "$T/many.tar"; d=$ST
upload POST "/v1/sessions/$S/hydrate?max_bytes=8192" "$T/bytes.tar"; e=$ST
# The same bound on bytes in while the body streams (chunked: no length to refuse it by first).
chunked() {
	local out
	out=$("${CLIENT[@]}" curl -s -w '\n%{http_code}' --max-time 120 --unix-socket "$SOCK" -X POST \
		-H 'Transfer-Encoding: chunked' -T "$2" "http://runbox$1")
	ST=${out##*$'\n'}
}
chunked "/v1/sessions/$S/hydrate?max_in_bytes=4096" "$T/bytes.tar"; f=$ST
chunked "/v1/sessions/$S/hydrate?max_in_bytes=20000" "$T/bytes.tar"; g=$ST
if [ "$a" = 409 ] && [ "$b" = 409 ] && [ "$c" = 413 ] && [ "$big_absent" = 1 ] && [ "$d" = 200 ] && [ "$e" = 200 ] &&
	[ "$f" = 413 ] && [ "$g" = 200 ]; then
	ok "hydrate bounds refuse an oversize archive (members 409, bytes out 409, bytes in 413, also chunked), writing nothing; control: within them 200"
else not_ok "hydrate bounds" "members $a, bytes $b, in $c, chunked $f, written $big_absent; within: $d $e $g"; fi

# A FIFO the sandbox planted at a member's name is refused at once (409), never opened to block
# a daemon thread; control: with a file there again, the same archive hydrates.
ex sh -c 'rm -f /workspace/h/a.txt && mkfifo /workspace/h/a.txt'
t0=$(date +%s)
upload POST "/v1/sessions/$S/hydrate" "$T/good.tar"; a=$ST; secs=$(($(date +%s) - t0))
ex sh -c 'rm -f /workspace/h/a.txt'
upload POST "/v1/sessions/$S/hydrate" "$T/good.tar"; b=$ST
if [ "$a" = 409 ] && [ "$secs" -lt 30 ] && [ "$b" = 200 ]; then ok "hydrate over a FIFO the sandbox planted is 409 at once (${secs}s), not a blocked thread; control: over a file, 200"
else not_ok "hydrate over a planted FIFO is refused at once" "fifo: $a after ${secs}s ($R); file: $b"; fi

# Member names are bounded in bytes too: 5000 members of 3.8 KB names (19 MB of names, within
# the member count) are a 409 naming it, nothing written; control: 200 of the same shape hydrate.
"$PY" - "$T" <<'EOF'
import io, sys, tarfile
t = sys.argv[1]
deep = "/".join(["n" * 250] * 15)
for name, count in (("longnames", 5000), ("longnames-ok", 200)):
    with tarfile.open(f"{t}/{name}.tar", "w", format=tarfile.PAX_FORMAT) as tf:
        for i in range(count):
            ti = tarfile.TarInfo(f"ln/{deep}/{i}")
            tf.addfile(ti, io.BytesIO(b""))
EOF
chmod 0644 "$T"/longnames*.tar
upload POST "/v1/sessions/$S/hydrate" "$T/longnames.tar"; a=$ST ar=$R
ex sh -c 'ls /workspace/ln 2>&1 | head -n 1'; gone=$OUT
upload POST "/v1/sessions/$S/hydrate" "$T/longnames-ok.tar"; b=$ST
if [ "$a" = 409 ] && [[ "$ar" == *"member names"* ]] && [[ "$gone" == *"No such file"* ]] && [ "$b" = 200 ]; then
	ok "hydrate bounds the bytes of member names (19 MB of names: 409, nothing written); control: 200 such members hydrate"
else not_ok "hydrate bounds the bytes of member names" "$a ($ar), inside '$gone', control $b"; fi
ex sh -c 'rm -rf /workspace/ln'

# --- snapshot -> a new session: files restored, the environment not ------------------------
ex sh -c "mkdir -p /workspace/out/deep && echo snap-\$EPH_SECRET-x > /workspace/out/deep/f && echo kept-$MARK > /workspace/k"
ex sh -c 'echo "$EPH_SECRET"'
envhere=$OUT
api POST "/v1/sessions/$S/snapshots" '{}'
REF=$(jv 'r["ref"]')
skipped=$(jv '" ".join(sorted(r["skipped_links"]))')
run_rbx session snapshot --socket "$SOCK" "$S"
cliref=$OUT
"${CLIENT[@]}" curl -s --unix-socket "$SOCK" -o "$T/home/snap.tzst" "http://runbox/v1/snapshots/$REF"
members=$(zstd -dc <"$T/home/snap.tzst" 2>/dev/null | tar -t 2>/dev/null | tr '\n' ' ')
run_rbx session create --socket "$SOCK" --image minimal --from-snapshot "$REF"
S2=$OUT
S_ORIG=$S
S=$S2
ex cat /workspace/k
k=$OUT
ex sh -c 'echo "[$EPH_SECRET]"'
env2=$OUT
ex cat /workspace/out/deep/f
f2=$OUT
S=$S_ORIG
if [[ "$REF" =~ ^sha256:[0-9a-f]{64}$ ]] && [ "$k" = "kept-$MARK" ] && [ "$f2" = "snap-eph-$MARK-x" ] && [ "$env2" = "[]" ] &&
	[ "$envhere" = "eph-$MARK" ] && [[ " $members " == *" k "* ]]; then
	ok "a snapshot restores /workspace into a new session (--from-snapshot), without the session's env (control: set in the first)"
else not_ok "snapshot -> new session" "ref '$REF', k '$k', f '$f2', env '$env2' (first '$envhere'), members $members ($(first_line "$ERR"))"; fi
if [ "$cliref" = "$REF" ]; then ok "runbox session snapshot prints the ref; the same tree gives the same ref"
else not_ok "runbox session snapshot prints the ref" "cli '$cliref', api '$REF'"; fi
if [ "$skipped" = "/workspace/lchain /workspace/ld2" ] && [[ " $members " != *" ld2 "* ]] && [[ " $members " != *" lchain "* ]] &&
	[[ " $members " == *" h/rel "* ]] && [[ " $members " == *" lgood "* ]] && [[ " $members " == *" cx/p "* ]]; then
	ok "a snapshot leaves out a link to a host path and one leaving through a link (named in skipped_links); control: links inside, through the same link, are kept"
else not_ok "a snapshot leaves out links leaving /workspace" "skipped '$skipped', members $members"; fi
# /workspace/in is a mount of its own (where inputs go): left out; control: out/, a plain dir, is in.
ex sh -c 'test -d /workspace/in && awk "\$5 == \"/workspace/in\"" /proc/self/mountinfo | wc -l'
if [ "$OUT" -ge 1 ] && [[ " $members " != *" in/ "* ]] && [[ " $members " == *" out/ "* ]]; then
	ok "a snapshot leaves out the mount at /workspace/in; control: out/ is kept"
else not_ok "a snapshot leaves out mounts" "mounts at /workspace/in: '$OUT', members $members"; fi
api POST /v1/sessions '{"image": "minimal", "snapshot": "sha256:0000000000000000000000000000000000000000000000000000000000000000"}'
a=$ST
api GET "/v1/snapshots/sha256:0000000000000000000000000000000000000000000000000000000000000000"
if [ "$a" = 404 ] && [ "$ST" = 404 ]; then ok "an unknown snapshot is a 404 (create and GET)"; else not_ok "an unknown snapshot is a 404" "create $a, get $ST"; fi
# A reference is no capability: another tenant's session cannot restore it (404, as for none);
# control: a session of the snapshot's own tenant can.
api GET "/v1/sessions/$S"
own=$(jv 'r["tenant"]')
api POST /v1/sessions "{\"image\": \"minimal\", \"tenant\": \"other-$MARK\", \"snapshot\": \"$REF\"}"
a=$ST
ar=$R
api POST /v1/sessions "{\"image\": \"minimal\", \"tenant\": \"$own\", \"snapshot\": \"$REF\"}"
b=$ST
S3=$(jv 'r["id"]')
[ -n "$S3" ] && api DELETE "/v1/sessions/$S3"
run_rbx session ls --socket "$SOCK"
if [ -n "$own" ] && [ "$a" = 404 ] && [ "$b" = 201 ] && [[ "$OUT" != *"other-$MARK"* ]]; then
	ok "another tenant's session cannot restore a snapshot by its ref (404, no session left); control: its own tenant's can"
else not_ok "a snapshot is its tenant's" "other tenant $a ($ar), own tenant '$own' $b, sessions: $OUT"; fi

# --- runbox cp -------------------------------------------------------------------------------
printf 'cp-%s\n' "$MARK" >"$T/scratch/cpin"
chmod 0644 "$T/scratch/cpin"
run_rbx cp --socket "$SOCK" --parents "$T/scratch/cpin" "$S:/workspace/cpdir/"
a=$RC
run_rbx cp --socket "$SOCK" "$S:/workspace/cpdir/cpin" -
b="$RC:$OUT"
RBX_STDIN=$T/scratch/cpin run_rbx cp --socket "$SOCK" - "$S:/workspace/fromstdin"
c=$RC
run_rbx cp --socket "$SOCK" "$S:/workspace/fromstdin" "$T/home/back"
d="$RC:$(cat "$T/home/back" 2>/dev/null)"
run_rbx cp --socket "$SOCK" "$S:/workspace/nope" -
if [ "$a" = 0 ] && [ "$b" = "0:cp-$MARK" ] && [ "$c" = 0 ] && [ "$d" = "0:cp-$MARK" ] && [ "$RC" = 125 ] && [[ "$ERR" == *404* ]]; then
	ok "runbox cp: a file in and out, stdin and stdout; control: a missing one is exit 125 (404)"
else not_ok "runbox cp" "in $a, out $b, stdin $c, back $d, missing $RC '$(first_line "$ERR")'"; fi

# --- the ledger: every call an event ----------------------------------------------------------
run_rbx ledger show "$RUN_ID" --json
if printf '%s' "$OUT" | "$PY" -c '
import json, sys
ev = json.load(sys.stdin)
ev = ev.get("events", ev) if isinstance(ev, dict) else ev
t = {}
for e in ev:
    t.setdefault(e["type"], []).append(e["data"])
need = ["file_write", "file_read", "fs_stat", "fs_list", "fs_mkdir", "fs_remove", "fs_rename", "snapshot", "hydrate"]
miss = [n for n in need if n not in t]
snap = t.get("snapshot", [{}])[0]
hyd = [h for h in t.get("hydrate", []) if h.get("source") == "upload"]
ok = not miss and snap.get("ref") == sys.argv[1] and snap.get("members", 0) > 0 and any("error" in h for h in hyd) \
    and any(h.get("members") == 3 and "error" not in h for h in hyd) \
    and any(w["path"] == "/workspace/big" and w["size"] == 64 << 20 for w in t["file_write"]) \
    and any(r["path"] == "/workspace/lf3" or r.get("type") == "symlink" for r in t["fs_stat"]) \
    and any(r["from"] == "/workspace/lf2" for r in t["fs_rename"])
print(miss)
sys.exit(0 if ok else 1)' "$REF" >"$T/scratch/ledger-check"; then
	ok "the ledger has an event for every kind of call (file_write, file_read, fs_*, snapshot, hydrate; refused hydrates too)"
else not_ok "the ledger has an event for every kind of call" "missing $(cat "$T/scratch/ledger-check")"; fi
run_rbx ledger show "$RUN_ID" --json
if ! printf '%s' "$OUT" | grep -qF "eph-$MARK"; then ok "the session's env value is in no ledger event"; else not_ok "the session's env value is in no ledger event"; fi

# --- a snapshot outlives the daemon -------------------------------------------------------------
kill -TERM "$DPID" 2>/dev/null
wait "$DPID" 2>/dev/null
rbx_cmd serve --socket "$SOCK"
"${RBX_CMD[@]}" </dev/null >"$T/serve2.log" 2>&1 &
DPID=$!
if wait_for test -S "$SOCK"; then
	run_rbx session create --socket "$SOCK" --image minimal --from-snapshot "$REF"
	S=$OUT
	ex cat /workspace/k
	if [ "$RC" = 0 ] && [ "$OUT" = "kept-$MARK" ]; then ok "after a daemon restart, the snapshot restores into a new session"
	else not_ok "after a daemon restart, the snapshot restores" "exit $RC '$OUT' ($(first_line "$ERR"))"; fi
else not_ok "after a daemon restart, the snapshot restores" "the daemon did not come back: $(first_line "$(cat "$T/serve2.log")")"; fi
kill -TERM "$DPID" 2>/dev/null
wait "$DPID" 2>/dev/null
