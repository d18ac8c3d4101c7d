#!/usr/bin/env bash
# Every file call of a runbox serve session is in its run's record, refused and failed ones too
# (docs/serve.md "The ledger"): a read of a missing file, a `..` escape (read, write, remove), a
# kernel file system's file, a stat of nothing, a PUT's bad mode and a declared length over the
# cap, a bad query of a read (max_bytes), a list (depth) or a hydrate (max_members), and a
# hydrate of no known snapshot are each an event of their call's type with the error, its errno
# name and the reply's status; controls: a successful write, read and list are recorded as
# before (no error), and each refused call was answered with that status.
# modes: root user unshare subids
. "$(dirname "$0")/../lib.sh"
lib_init serve_fsaudit

serve_client
serve_start serve.log || exit 0
MARK=$(new_marker)

api POST /v1/sessions '{"image": "minimal", "tenant": "ta"}'
S=$(jv 'r["id"]') RUN_ID=$(jv 'r["run_id"]')
api PUT "/v1/sessions/$S/files?path=/workspace/ok" "ok-$MARK"
put_ok=$ST
api GET "/v1/sessions/$S/files?path=/workspace/ok"
get_ok="$ST $R"
api GET "/v1/sessions/$S/files?path=/workspace/missing-$MARK"
st_missing=$ST
api GET "/v1/sessions/$S/files?path=/workspace/../etc/passwd"
st_escape=$ST
api PUT "/v1/sessions/$S/files?path=/workspace/../evil-$MARK" "x"
st_put_escape=$ST
api POST "/v1/sessions/$S/fs/remove" '{"path": "/workspace/../etc"}'
st_rm_escape=$ST
api GET "/v1/sessions/$S/files?path=/proc/1/environ"
st_kernel=$ST
api GET "/v1/sessions/$S/fs/stat?path=/nothing-$MARK"
st_stat=$ST
api PUT "/v1/sessions/$S/files?path=/workspace/m-$MARK&mode=999" "x"
st_mode=$ST
# A declared length over the 1 GiB cap: refused before a byte of the body is read.
st_big=$("${CLIENT[@]}" "$PY" - "$SOCK" "/v1/sessions/$S/files?path=/workspace/big-$MARK" <<'EOF'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(("PUT %s HTTP/1.1\r\nHost: runbox\r\nContent-Length: 2000000000\r\n\r\n" % sys.argv[2]).encode())
print(s.recv(4096).split(b" ")[1].decode())
EOF
)
answers="$put_ok|$get_ok|$st_missing|$st_escape|$st_put_escape|$st_rm_escape|$st_kernel|$st_stat|$st_mode|$st_big"
if [ "$answers" = "200|200 ok-$MARK|404|400|400|400|403|404|400|413" ]; then
	ok "control: the write and read succeed; the missing, escaping and kernel paths, a bad mode and a body over the cap are refused (404, 400, 403, 400, 413)"
else not_ok "the calls are answered as documented" "$answers"; fi

# Bad queries: each a 400 before the call begins; a hydrate of a ref no session took is a 404.
NOREF=sha256:$(printf 'none-%s' "$MARK" | sha256sum | cut -d' ' -f1)
api GET "/v1/sessions/$S/files?path=/workspace/ok&max_bytes=lots-$MARK"
q_read=$ST
api GET "/v1/sessions/$S/fs/list?path=/workspace/q-$MARK&depth=-1"
q_list=$ST
api POST "/v1/sessions/$S/hydrate?snapshot=$NOREF&max_members=x"
q_hyd=$ST
api POST "/v1/sessions/$S/hydrate?snapshot=$NOREF"
q_noref=$ST
api GET "/v1/sessions/$S/fs/list?path=/workspace&depth=2"
q_list_ok=$ST
if [ "$q_read|$q_list|$q_hyd|$q_noref|$q_list_ok" = "400|400|400|404|200" ]; then
	ok "bad queries (max_bytes, depth, max_members) are 400s, a hydrate of an unknown ref a 404; control: a list of depth 2 is a 200"
else not_ok "bad queries are answered 400" "$q_read|$q_list|$q_hyd|$q_noref|$q_list_ok"; fi

run_rbx ledger show "$RUN_ID" --json
printf '%s' "$OUT" >"$T/events.json"
# has TYPE PATH ERRNO STATUS ERROR_PART: an event of TYPE naming PATH with that outcome (ERRNO
# "-": any; STATUS "-": a success, no error recorded).
has() {
	"$PY" - "$T/events.json" "$@" <<'EOF'
import json, sys
f, typ, path, errno, status, part = sys.argv[1:7]
ev = json.load(open(f))
ev = ev.get("events", ev) if isinstance(ev, dict) else ev
for e in ev:
    d = e.get("data") or {}
    if e.get("type") != typ or d.get("path") != path:
        continue
    if status == "-":
        if "error" not in d and "status" not in d:
            sys.exit(0)
        continue
    if d.get("status") == int(status) and part in (d.get("error") or "") and \
            (errno == "-" or d.get("errno") == errno):
        sys.exit(0)
sys.exit(1)
EOF
}
if has file_write /workspace/ok - - "" && has file_read /workspace/ok - - ""; then
	ok "control: the successful write and read are recorded without an error"
else not_ok "control: the successful write and read are recorded" "$(first_line "$OUT") $(first_line "$ERR")"; fi
if has file_read "/workspace/missing-$MARK" ENOENT 404 "missing-$MARK"; then
	ok "a read of a missing file is recorded (file_read, ENOENT, 404)"
else not_ok "a failed read is recorded" "$(grep -o '"file_read"' "$T/events.json" | wc -l) file_read events"; fi
if has file_read /workspace/../etc/passwd - 400 '`..`' && has file_write "/workspace/../evil-$MARK" - 400 '`..`' &&
	has fs_remove /workspace/../etc - 400 '`..`'; then
	ok "a refused \`..\` escape is recorded for a read, a write and a remove (the path as asked, 400, the error)"
else not_ok "a refused escape is recorded" "$(grep -c '\.\./' "$T/events.json") events naming it"; fi
if has file_read /proc/1/environ - 403 "kernel" && has fs_stat "/nothing-$MARK" ENOENT 404 "nothing-$MARK"; then
	ok "a refused kernel file and a stat of nothing are recorded (403; fs_stat ENOENT 404)"
else not_ok "a refused kernel file and a failed stat are recorded" "$(first_line "$OUT")"; fi

if has file_write "/workspace/m-$MARK" - 400 'query `mode`' && has file_write "/workspace/big-$MARK" EFBIG 413 "cap"; then
	ok "a PUT refused before its file opens (a bad mode 400, a declared length over the cap 413, EFBIG) is recorded"
else not_ok "a PUT refused before its file opens is recorded" "$(grep -c "m-$MARK\|big-$MARK" "$T/events.json") events naming them"; fi

if has file_read /workspace/ok - 400 'query `max_bytes`' && has fs_list "/workspace/q-$MARK" - 400 'query `depth`' &&
	has fs_list /workspace - - ""; then
	ok "a read's bad max_bytes and a list's bad depth are recorded (file_read, fs_list: the path as asked, 400, the error); control: the good list is recorded without one"
else not_ok "bad queries of a read and a list are recorded" "$(grep -c "q-$MARK\|max_bytes" "$T/events.json") events naming them"; fi
# hydrated ERROR_PART STATUS: a hydrate event of the unknown ref with that error and status.
hydrated() {
	"$PY" - "$T/events.json" "$NOREF" "$@" <<'EOF'
import json, sys
f, ref, part, status = sys.argv[1:5]
ev = json.load(open(f))
ev = ev.get("events", ev) if isinstance(ev, dict) else ev
sys.exit(0 if any(e.get("type") == "hydrate" and (e.get("data") or {}).get("ref") == ref and
                  e["data"].get("source") == "snapshot" and e["data"].get("status") == int(status) and
                  part in (e["data"].get("error") or "") for e in ev) else 1)
EOF
}
if hydrated 'query `max_members`' 400 && hydrated "no snapshot" 404; then
	ok "a hydrate's bad max_members (400) and a hydrate of an unknown ref (404) are recorded as hydrate events naming the source"
else not_ok "refused hydrates are recorded" "$(grep -c '"hydrate"' "$T/events.json") hydrate events"; fi

kill -TERM "$DPID" 2>/dev/null
wait "$DPID" 2>/dev/null
