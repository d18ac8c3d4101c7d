#!/usr/bin/env bash
# runbox serve's exposed ports (docs/serve.md "Exposed ports"), each against a control: a server
# inside a session is reached through the host listener with the session's token (none, a wrong
# one or another session's is a 401; a port not exposed has no listener); the token is taken out
# of the request before it is forwarded; 3000-9999 only; another session's server is not reached
# through this session's port; a unix-socket port needs no token; DELETE and the session's close
# close the listener (connect refused after); the ledger has port_open, port_connection (bytes
# each way, refused ones too) and port_close, and never the token; the daemon's stop closes
# a live session's ports.
# modes: root user unshare subids
. "$(dirname "$0")/../lib.sh"
lib_init serve_ports

serve_client
# get URL [CURL-ARGS...]: a GET on a forwarded port; sets HST (000: no connection) and HB.
get() {
	local out
	out=$(curl -s -w '\n%{http_code}' --max-time 20 "${@:2}" "$1")
	HST=${out##*$'\n'}
	HB=${out%$'\n'*}
	HB=${HB%$'\n'}
}
# refused HOST_PORT: nothing accepts a TCP connection there.
refused() { ! "$PY" -c 'import socket,sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 3)' "$1" 2>/dev/null; }

stop() { kill -TERM "$DPID" 2>/dev/null; wait "$DPID" 2>/dev/null; }
serve_start serve.log || exit 0

MARK=$(new_marker)
# Session A: the host image, python's http.server on 3000 serving a file with A's marker.
api POST /v1/sessions '{"image": "host"}'
A=$(jv 'r["id"]')
RUN_A=$(jv 'r["run_id"]')
api POST /v1/sessions '{"image": "minimal"}'
B=$(jv 'r["id"]')
if [[ ! "$A" =~ ^[0-9a-f]{32}$ || ! "$B" =~ ^[0-9a-f]{32}$ ]]; then not_ok "two sessions are made" "$ST $R"; stop; exit 0; fi
api POST "/v1/sessions/$A/processes" "{\"argv\": [\"sh\", \"-c\", \"mkdir -p /tmp/www && echo A-$MARK >/tmp/www/hello.txt && cd /tmp/www && exec python3 -m http.server 3000 --bind 127.0.0.1\"]}"
PA=$(jv 'r["id"]')
# Session B: busybox httpd on 3001 serving B's marker.
api POST "/v1/sessions/$B/processes" "{\"argv\": [\"sh\", \"-c\", \"mkdir -p /tmp/www && echo B-$MARK >/tmp/www/hello.txt && exec httpd -f -p 127.0.0.1:3001 -h /tmp/www\"]}"

# --- not exposed: no listener --------------------------------------------------------------
api GET "/v1/sessions/$A/ports"
if [ "$ST" = 200 ] && [ "$(jv 'len(r["ports"])')" = 0 ]; then ok "a session exposes no port until asked"; else not_ok "a session exposes no port until asked" "$ST $R"; fi
get "http://127.0.0.1:3000/hello.txt"
if ! printf '%s' "$HB" | grep -qF "A-$MARK"; then ok "the server inside is not reachable on the host unexposed"; else not_ok "the server inside is not reachable on the host unexposed"; fi

# --- the range -----------------------------------------------------------------------------
bad=""
for p in 80 2999 10000 65535 '"3000"'; do
	api POST "/v1/sessions/$A/ports" "{\"port\": $p}"
	[ "$ST" = 400 ] || bad="$bad $p:$ST"
done
api DELETE "/v1/sessions/$A/ports/80"
[ "$ST" = 400 ] || bad="$bad DELETE80:$ST"
if [ -z "$bad" ]; then ok "a port outside 3000-9999 is a 400"; else not_ok "a port outside 3000-9999 is a 400" "$bad"; fi

# --- exposed: the token --------------------------------------------------------------------
api POST "/v1/sessions/$A/ports" '{"port": 3000}'
HPA=$(jv 'r["host_port"]')
TOKA=$(jv 'r["token"]')
URLA=$(jv 'r["url"]')
if [ "$ST" = 200 ] && [[ "$HPA" =~ ^[0-9]+$ ]] && [ ${#TOKA} -ge 32 ] && [ "$URLA" = "http://127.0.0.1:$HPA/" ] &&
	[ "$(jv 'r["host"]')" = 127.0.0.1 ]; then ok "POST ports (3000) gives host, host_port, url and a token"
else not_ok "POST ports (3000) gives host, host_port, url and a token" "$ST $R"; stop; exit 0; fi
api POST "/v1/sessions/$A/ports" '{"port": 3000}'
if [ "$ST" = 409 ]; then ok "a port exposed twice is a 409"; else not_ok "a port exposed twice is a 409" "$ST $R"; fi

# The server may still be starting: retry with the token until it answers.
try_a() { get "${URLA}hello.txt?runbox_token=$TOKA" && [ "$HST" = 200 ]; }
wait_for try_a
if [ "$HST" = 200 ] && [ "$HB" = "A-$MARK" ]; then ok "the server inside is reached with ?runbox_token="
else not_ok "the server inside is reached with ?runbox_token=" "$HST $(first_line "$HB")"; fi
get "${URLA}hello.txt" -H "Authorization: Bearer $TOKA"
if [ "$HST" = 200 ] && [ "$HB" = "A-$MARK" ]; then ok "the server inside is reached with Authorization: Bearer"
else not_ok "the server inside is reached with Authorization: Bearer" "$HST $(first_line "$HB")"; fi
get "${URLA}hello.txt"
h1=$HST b1=$HB
get "${URLA}hello.txt?runbox_token=${TOKA%?}x"
h2=$HST b2=$HB
get "${URLA}hello.txt" -H "Authorization: Bearer notthetoken$MARK"
h3=$HST b3=$HB
if [ "$h1$h2$h3" = 401401401 ] && ! printf '%s%s%s' "$b1" "$b2" "$b3" | grep -qF "A-$MARK"; then
	ok "without the token, or with a wrong one, the port answers 401 and forwards nothing"
else not_ok "without the token, or with a wrong one, the port answers 401 and forwards nothing" "$h1 $h2 $h3"; fi
# A raw connection that sends no HTTP head is closed unforwarded.
if "$PY" - "$HPA" <<'EOF'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), 5)
s.settimeout(15)
s.sendall(b"GET /hello.txt HTTP/1.0\n\n")  # no CRLF head: never complete
d = s.recv(100)
sys.exit(0 if not d.startswith(b"HTTP/1.0 200") else 1)
EOF
then ok "a connection without an HTTP head is not forwarded"; else not_ok "a connection without an HTTP head is not forwarded"; fi
# The token is taken out before the request goes in: the server's log (its stderr) has the
# path with the other parameters and without runbox_token.
get "${URLA}hello.txt?x=1&runbox_token=$TOKA&y=2"
api GET "/v1/sessions/$A/processes/$PA/output?wait_ms=2000"
if [ "$HST" = 200 ] && printf '%s' "$R" | grep -qF 'hello.txt?x=1&y=2' && ! printf '%s' "$R" | grep -qF "$TOKA"; then
	ok "the token is taken out of the forwarded request"
else not_ok "the token is taken out of the forwarded request" "$HST $(first_line "$R")"; fi

# --- another session's server --------------------------------------------------------------
api POST "/v1/sessions/$A/ports" '{"port": 3001}'
URLA1=$(jv 'r["url"]')
HPA1=$(jv 'r["host_port"]')
api POST "/v1/sessions/$B/ports" '{"port": 3001}'
URLB=$(jv 'r["url"]')
HPB=$(jv 'r["host_port"]')
TOKB=$(jv 'r["token"]')
try_b() { get "${URLB}hello.txt?runbox_token=$TOKB" && [ "$HST" = 200 ]; }
wait_for try_b
hb=$HST bb=$HB
get "${URLA1}hello.txt?runbox_token=$TOKA"
if [ "$hb" = 200 ] && [ "$bb" = "B-$MARK" ] && [ "$HST" != 200 ] && ! printf '%s' "$HB" | grep -qF "B-$MARK"; then
	ok "session B's server is reached through B's port 3001, never through A's (A's answers $HST)"
else not_ok "session B's server is reached through B's port 3001, never through A's" "B: $hb $(first_line "$bb"); A: $HST $(first_line "$HB")"; fi
get "${URLB}hello.txt?runbox_token=$TOKA"
if [ "$HST" = 401 ] && [ "$TOKA" != "$TOKB" ]; then ok "one session's token does not open another's port"; else not_ok "one session's token does not open another's port" "$HST"; fi
api GET "/v1/sessions/$A/ports"
if [ "$(jv 'sorted(p["port"] for p in r["ports"])')" = "[3000, 3001]" ] && ! printf '%s' "$R" | grep -qF "$TOKA"; then
	ok "GET ports lists the session's ports (without the token)"
else not_ok "GET ports lists the session's ports (without the token)" "$R"; fi

# The Authorization header that carried the token is taken out; other headers and the body
# go in as they came (a recorder inside: nc writes what it receives to a file).
api POST "/v1/sessions/$B/processes" '{"argv": ["sh", "-c", "exec nc -l -p 3002 >/tmp/req"]}'
api POST "/v1/sessions/$B/ports" '{"port": 3002}'
HPB2=$(jv 'r["host_port"]')
# send_rec: one request through B's port 3002; fails when nothing got it (502: nc not up yet).
send_rec() {
	"$PY" - "$HPB2" "$TOKB" "$MARK" <<'EOF2'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), 5)
body = ("body-" + sys.argv[3]).encode()
s.sendall(b"POST /rec HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + sys.argv[2].encode() +
          b"\r\nX-Keep: k-" + sys.argv[3].encode() + b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
s.shutdown(socket.SHUT_WR)
s.settimeout(10)
try:
    d = s.recv(100)
except Exception:
    d = b""
sys.exit(1 if b" 502 " in d else 0)
EOF2
}
wait_for send_rec
rec_has() { api GET "/v1/sessions/$B/files?path=/tmp/req" && printf '%s' "$R" | grep -qF "body-$MARK"; }
wait_for rec_has
api GET "/v1/sessions/$B/files?path=/tmp/req"
if [ "$ST" = 200 ] && printf '%s' "$R" | grep -qF "X-Keep: k-$MARK" && printf '%s' "$R" | grep -qF "body-$MARK" &&
	printf '%s' "$R" | grep -qF "POST /rec HTTP/1.1" && ! printf '%s' "$R" | grep -qiF authorization && ! printf '%s' "$R" | grep -qF "$TOKB"; then
	ok "the Authorization header with the token is taken out; the rest of the request goes in"
else not_ok "the Authorization header with the token is taken out; the rest of the request goes in" "$ST $(first_line "$R")"; fi

# --- DELETE closes the listener; a unix socket needs no token ------------------------------
api DELETE "/v1/sessions/$B/ports/3001"
d1=$ST
if [ "$d1" = 200 ] && refused "$HPB"; then ok "DELETE ports/N closes its listener (connect refused after)"; else not_ok "DELETE ports/N closes its listener" "$d1"; fi
api DELETE "/v1/sessions/$B/ports/3001"
if [ "$ST" = 404 ]; then ok "DELETE of a port not exposed is a 404"; else not_ok "DELETE of a port not exposed is a 404" "$ST"; fi
api POST "/v1/sessions/$B/ports" '{"port": 3001, "unix": true}'
UPATH=$(jv 'r["path"]')
if [ "$ST" = 200 ] && [ -S "$UPATH" ] && [ "$(stat -c %a "$UPATH")" = 600 ] && [ "$(jv 'r.get("token")')" = null ]; then
	ok "a unix-socket port is a 0600 socket under the state dir"
else not_ok "a unix-socket port is a 0600 socket under the state dir" "$ST $R"; fi
out=$("${CLIENT[@]}" curl -s --max-time 20 --unix-socket "$UPATH" "http://x/hello.txt")
if [ "$out" = "B-$MARK" ]; then ok "the server inside is reached through the unix socket"; else not_ok "the server inside is reached through the unix socket" "$(first_line "$out")"; fi

# --- the session's close closes its listeners ----------------------------------------------
get "${URLA}hello.txt?runbox_token=$TOKA"
before=$HST
api DELETE "/v1/sessions/$A"
if [ "$before" = 200 ] && refused "$HPA" && refused "$HPA1"; then ok "closing the session closes its listeners (connect refused after)"
else not_ok "closing the session closes its listeners" "before $before"; fi
api DELETE "/v1/sessions/$B"
if [ ! -e "$UPATH" ]; then ok "closing the session removes its unix socket"; else not_ok "closing the session removes its unix socket"; fi

# --- the ledger ----------------------------------------------------------------------------
run_rbx ledger show "$RUN_A" --json
if printf '%s' "$OUT" | "$PY" -c '
import json, sys
ev = json.load(sys.stdin)
ev = ev.get("events", ev) if isinstance(ev, dict) else ev
t = {}
for e in ev:
    t.setdefault(e["type"], []).append(e["data"])
op = t.get("port_open", []); cn = t.get("port_connection", []); cl = t.get("port_close", [])
ok = sorted(o["port"] for o in op) == [3000, 3001] \
    and any(c["port"] == 3000 and c["authorized"] and c["bytes_in"] > 0 and c["bytes_out"] > 0 for c in cn) \
    and any(c["port"] == 3000 and not c["authorized"] for c in cn) \
    and any(c["port"] == 3001 and c["authorized"] and c.get("error") for c in cn) \
    and sorted(c["port"] for c in cl) == [3000, 3001] and all(c["reason"] == "session closed" for c in cl)
print(sorted(t))
sys.exit(0 if ok else 1)' >"$T/scratch-ledger" 2>&1; then ok "the ledger has port_open, port_connection (refused ones too) and port_close"
else not_ok "the ledger has port_open, port_connection and port_close" "$(cat "$T/scratch-ledger")"; fi
if [ -n "$OUT" ] && ! printf '%s' "$OUT" | grep -qF "$TOKA"; then ok "the token is in no ledger event"; else not_ok "the token is in no ledger event"; fi

# --- a tenant's bound over its sessions ----------------------------------------------------
# Tenant tp's four sessions expose 16 ports each, 64 in all: its fifth session's first port is a
# 409 naming the tenant's bound; another tenant's is served (control), and once tp closes one,
# its fifth session's is too.
TPS=()
for i in 1 2 3 4 5; do
	api POST /v1/sessions '{"image": "minimal", "tenant": "tp"}'
	TPS+=("$(jv 'r["id"]')")
done
opened=0
for i in 0 1 2 3; do
	for p in $(seq 5000 5015); do
		api POST "/v1/sessions/${TPS[$i]}/ports" "{\"port\": $p}"
		[ "$ST" = 200 ] && opened=$((opened + 1))
	done
done
api POST "/v1/sessions/${TPS[4]}/ports" '{"port": 5000}'
over="$ST $R"
api POST /v1/sessions '{"image": "minimal", "tenant": "tz"}'
TZ=$(jv 'r["id"]')
api POST "/v1/sessions/$TZ/ports" '{"port": 5000}'
other=$ST
api DELETE "/v1/sessions/${TPS[0]}/ports/5000"
api POST "/v1/sessions/${TPS[4]}/ports" '{"port": 5000}'
after=$ST
if [ "$opened" = 64 ] && [[ "$over" == 409*"at most 64 ports"* ]] && [ "$other" = 200 ] && [ "$after" = 200 ]; then
	ok "a tenant's sessions expose at most 64 ports in all (the 65th a 409); another tenant's is served, and tp's once it closed one (controls)"
else not_ok "a tenant's bound of ports" "opened $opened; 65th: $over; other tenant $other; after a close $after"; fi
for s in "${TPS[@]}" "$TZ"; do api DELETE "/v1/sessions/$s"; done

# --- the daemon's stop (SIGTERM) closes a live session's listeners ---------------------------
api POST /v1/sessions '{"image": "minimal"}'
C=$(jv 'r["id"]')
RUN_C=$(jv 'r["run_id"]')
api POST "/v1/sessions/$C/ports" '{"port": 4000}'
HPC=$(jv 'r["host_port"]')
open_before=1
refused "$HPC" && open_before=0
stop
if [ "$open_before" = 1 ] && refused "$HPC"; then ok "the daemon's stop closes a live session's port (connect refused after)"
else not_ok "the daemon's stop closes a live session's port" "open before: $open_before"; fi
run_rbx ledger show "$RUN_C" --json
if printf '%s' "$OUT" | "$PY" -c '
import json, sys
ev = json.load(sys.stdin)
ev = ev.get("events", ev) if isinstance(ev, dict) else ev
sys.exit(0 if any(e["type"] == "port_close" and e["data"]["port"] == 4000 for e in ev) else 1)'; then
	ok "the port'"'"'s close at the daemon'"'"'s stop is in the ledger"
else not_ok "the port'"'"'s close at the daemon'"'"'s stop is in the ledger" "$(first_line "$OUT")"; fi
