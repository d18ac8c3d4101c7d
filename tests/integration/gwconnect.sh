#!/usr/bin/env bash
# The installing proxy's CONNECT door: a step reaches an HTTPS upstream on host 127.0.0.1 (by
# the name localhost) through HTTPS_PROXY with the upstream's own certificate (nothing is
# intercepted, no CA inside), and a plain TCP echo through a raw CONNECT; host:port pairs off
# the policy's allowlist, IP literals, other ports, loopback addresses the gateway config does
# not name and calls without the run token are refused with the uniform JSON and recorded;
# every tunnel is a gateway_call ledger event with its bytes and how it ended (and a sent
# record before it relays, one id); the idle bound
# ends a silent tunnel; tunnels take from the run's rate; a connection stalled on a prefix of
# "CONNECT " costs no CPU. Traffic goes only to 127.0.0.1.
# modes: root user
. "$(dirname "$0")/../lib.sh"
lib_init gwconnect

FIX=$ROOT/tests/integration/fixtures/gateway
PIDS=""
cn_cleanup() {
	[ -n "$PIDS" ] && kill $PIDS 2>/dev/null
	lib_cleanup
}
trap cn_cleanup EXIT
command -v curl >/dev/null || { skip "CONNECT tests" "curl missing"; exit 0; }
command -v openssl >/dev/null || { skip "CONNECT tests" "openssl missing"; exit 0; }

openssl req -x509 -newkey rsa:2048 -nodes -keyout "$T/key.pem" -out "$T/cert.pem" -days 1 \
	-subj "/CN=localhost" -addext "subjectAltName=DNS:localhost" 2>/dev/null
chmod a+r "$T/cert.pem"
up() { # up MODE NAME: starts an upstream, its port in $T/NAME.port
	"$PY" "$FIX/tunnelup.py" "$1" "$T/$2.port" "$T/$2.log" "$T/cert.pem" "$T/key.pem" 2>"$T/$2.err" &
	PIDS="$PIDS $!"
}
up tls tls
up echo echo
up hold hold
for _ in $(seq 50); do [ -s "$T/tls.port" ] && [ -s "$T/echo.port" ] && [ -s "$T/hold.port" ] && break; sleep 0.1; done
TLS=$(cat "$T/tls.port") ECHO=$(cat "$T/echo.port") HOLD=$(cat "$T/hold.port")
[ -n "$TLS" ] && [ -n "$ECHO" ] && [ -n "$HOLD" ] || { not_ok "upstreams start" "$(cat "$T"/*.err)"; exit 0; }
touch "$T/tls.log" "$T/echo.log" "$T/hold.log"
OFF=$((TLS == 65535 ? 1 : TLS + 1)) # a port no entry names

printf '{"private_upstreams": ["127.0.0.1"], "tunnel": {"idle_s": 1}}' >"$T/gw.json"
printf '{"tunnel": {"idle_s": 1}}' >"$T/gw-nopriv.json"
chmod a+r "$T/gw.json" "$T/gw-nopriv.json"
policy_variant default "$T/pol.json" gwconnect \
	"p['network'] = {'mode': 'gateway', 'proxy': ['localhost:$TLS', 'localhost:$ECHO', 'localhost:$HOLD', '127.0.0.2:$ECHO']}"

# ledger_calls PYEXPR: how many gateway_call events of door connect satisfy PYEXPR (on e).
ledger_calls() {
	"$PY" - "$STATE/ledger.db" "$1" <<'PYEOF'
import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
n = 0
for (d,) in db.execute("SELECT data FROM events WHERE type='gateway_call'"):
    e = json.loads(d)
    n += e.get("door") == "connect" and bool(eval(sys.argv[2]))
print(n)
PYEOF
}

# ---------------------------------------------------------------------------------------
# 1. HTTPS through the proxy variables, verified against the upstream's own certificate.
run_rbx run --image host --policy "$T/pol.json" --gateway-config "$T/gw.json" \
	--input "$T/cert.pem:/workspace/in/cert.pem" -- /bin/sh -c \
	"curl -sS --cacert /workspace/in/cert.pem https://localhost:$TLS/hello; echo \"rc=\$?\"
curl -sS --cacert /workspace/in/cert.pem -o /dev/null -w '%{http_connect}' https://localhost:$OFF/ 2>/dev/null; echo \" rc=\$?\""
case $OUT in "hello-tls"*"rc=0"*"403 rc="*) ok "curl reaches an allowed HTTPS upstream through HTTPS_PROXY, its certificate verified end to end" ;;
*) not_ok "curl reaches an allowed HTTPS upstream through HTTPS_PROXY" "exit $RC: $OUT $(first_line "$ERR")" ;; esac
grep -q '^tls GET /hello$' "$T/tls.log" && ok "the upstream got the request through the tunnel" ||
	not_ok "the upstream got the request through the tunnel" "$(cat "$T/tls.log")"
case $OUT in *"403 rc=56"*) ok "https to a port off the allowlist fails at the CONNECT (403)" ;;
*) not_ok "https to a port off the allowlist fails at the CONNECT" "$OUT" ;; esac
grep -q "gateway refused CONNECT localhost:$OFF (rule network.proxy)" "$T/err" && ok "the step ends with the one-line hint naming the refused CONNECT" ||
	not_ok "the one-line hint names the refused CONNECT" "$(first_line "$ERR")"
[ "$(ledger_calls "e['connector'] == 'localhost:$TLS' and e['status'] == 200 and e['bytes_up'] > 100 and e['bytes_down'] > 100 and e['address'] == '127.0.0.1' and 'duration_ms' in e and e['ended'] in ('upstream closed', 'client closed')")" -ge 1 ] &&
	ok "the tunnel is a gateway_call event with host:port, address, bytes each way, duration and its end" ||
	not_ok "the tunnel is a gateway_call event" "$(ledger_calls "e['connector'] == 'localhost:$TLS'") connect events"
# Its sent record (made once connected, before a byte was relayed) has the tunnel's id; control:
# the refused CONNECT, which never left, has none.
sent=$("$PY" - "$STATE/ledger.db" "localhost:$TLS" "localhost:$OFF" <<'PYEOF'
import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
ev = lambda t: [json.loads(d) for (d,) in db.execute("SELECT data FROM events WHERE type=?", (t,))]
done = {e.get("id") for e in ev("gateway_call") if e.get("door") == "connect" and e.get("status") == 200}
sent = [s for s in ev("gateway_sent") if s.get("door") == "connect" and s.get("method") == "CONNECT"]
print(sum(1 for s in sent if s.get("connector") == sys.argv[2] and s.get("id") in done), sum(1 for s in sent if s.get("connector") == sys.argv[3]))
PYEOF
)
case $sent in [1-9]*" 0") ok "the tunnel's sent record (gateway_sent) shares its id with its gateway_call; the refused CONNECT has none (control)" ;;
*) not_ok "the tunnel's sent record is linked to its gateway_call" "'$sent'" ;; esac

# ---------------------------------------------------------------------------------------
# 2. Raw CONNECTs: an echo through the tunnel; refusals beside it, nothing reaching upstreams.
spec() { printf '%s' "$2" >"$1" && chmod a+r "$1"; }
spec "$T/s1.json" "[
 {\"name\": \"nul\", \"raw\": \"CONNECT \\u0000\\r\\n\\r\\n\"},
 {\"name\": \"echo\", \"target\": \"localhost:$ECHO\", \"send\": \"ping-through\\n\"},
 {\"name\": \"offlist\", \"target\": \"localhost:$((ECHO == 65535 ? 1 : ECHO + 1))\"},
 {\"name\": \"literal\", \"target\": \"127.0.0.1:$ECHO\"},
 {\"name\": \"literal-named\", \"target\": \"127.0.0.2:$ECHO\", \"send\": \"never\\n\"},
 {\"name\": \"notoken\", \"target\": \"localhost:$ECHO\", \"token\": false},
 {\"name\": \"garbage\", \"target\": \"localhost:$ECHO/x\"},
 {\"name\": \"idle\", \"target\": \"localhost:$HOLD\"}]"
# ct_run CONFIG SPEC [POLICY]: the raw client in a step; its output in $T/client.json.
ct_run() {
	run_rbx run --image host --json --policy "${3:-$T/pol.json}" --gateway-config "$1" --timeout 60s \
		--input "$FIX/tunnel_client.py:/workspace/in/c.py" --input "$2:/workspace/in/spec.json" -- \
		/usr/bin/python3 /workspace/in/c.py /workspace/in/spec.json
	json "$T/out" stdout >"$T/client.json" 2>/dev/null
}
# field NAME KEY: the client's KEY for its call NAME (the first, when it ran several).
field() {
	"$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print([c for c in d["calls"] if c["name"]==sys.argv[2]][0].get(sys.argv[3], ""))' \
		"$T/client.json" "$1" "$2" 2>/dev/null
}
: >"$T/echo.log"
ct_run "$T/gw.json" "$T/s1.json"
[ "$(field echo status) $(field echo got)" = "200 echo:ping-through" ] &&
	ok "a plain TCP echo answers through an allowed CONNECT, bytes untouched" ||
	not_ok "a plain TCP echo answers through CONNECT" "$(field echo status) $(field echo got); exit $RC $(first_line "$ERR")"
b=$(field offlist body)
case "$(field offlist status) $b" in "403 "*'"rule":"network.proxy"'*'"hint":'*"network.proxy"*) ok "another port of an allowed name is refused: 403 with rule and hint" ;;
*) not_ok "another port of an allowed name is refused with the uniform JSON" "$(field offlist status) $b" ;; esac
case "$(field literal status) $(field literal body)" in "403 "*'"rule":"network.proxy"'*) ok "an IP literal no entry names is refused (403)" ;;
*) not_ok "an IP literal no entry names is refused" "$(field literal status) $(field literal body)" ;; esac
# 127.0.0.2 is named by an entry, so the allowlist passes it; the address rule still holds
# (private_upstreams names 127.0.0.1 only): refused for its address, not its name.
case "$(field literal-named status) $(field literal-named body)" in "403 "*loopback*'"rule":"address"'*) ok "an IP literal an entry names passes the allowlist and meets the address rule" ;;
*) not_ok "an IP literal an entry names meets the address rule" "$(field literal-named status) $(field literal-named body)" ;; esac
[ "$(field notoken status)" = 407 ] && ok "CONNECT without the run token is 407" || not_ok "CONNECT without the run token is 407" "$(field notoken status)"
# A NUL in the head (which memmem sees past, a C string parser would not) is a 400, and the
# gateway goes on: the echo after it in the same run went through (above).
[ "$(field nul status)" = 400 ] && [ "$(field echo status)" = 200 ] && ok "a CONNECT head holding a NUL is 400; the gateway serves the next tunnel" ||
	not_ok "a CONNECT head holding a NUL is 400 and the gateway goes on" "nul $(field nul status), echo after it $(field echo status)"
[ "$(field garbage status)" = 400 ] && ok "a CONNECT target that is not host:port is 400" || not_ok "a malformed CONNECT target is 400" "$(field garbage status)"
n=$(grep -c '^echo' "$T/echo.log")
[ "$n" = 1 ] && ok "only the allowed tunnel reached the echo upstream" || not_ok "only the allowed tunnel reached the echo upstream" "$n: $(cat "$T/echo.log")"
s=$(field idle seconds)
if [ "$(field idle status)" = 200 ] && "$PY" -c "import sys; sys.exit(not 0.9 <= float('$s') < 10)"; then
	ok "a silent tunnel ends at the config's idle bound (1 s)"
else not_ok "a silent tunnel ends at the idle bound" "status $(field idle status) after ${s}s"; fi
[ "$(ledger_calls "e['connector'] == 'localhost:$HOLD' and e.get('ended') == 'idle_s'")" = 1 ] &&
	[ "$(ledger_calls "e['connector'] == 'localhost:$ECHO' and e.get('ended') == 'upstream closed' and e['bytes_up'] == 13 and e['bytes_down'] == 18")" = 1 ] &&
	ok "the records say the idle tunnel ended at idle_s, the echo's when the upstream closed, with its exact bytes" ||
	not_ok "the records say how each tunnel ended" "$(ledger_calls "e['connector'] in ('localhost:$HOLD', 'localhost:$ECHO')") events"
[ "$(ledger_calls "e['status'] == 403 and e['rule'] == 'network.proxy' and e.get('refused') and e.get('hint')")" -ge 2 ] &&
	ok "each refused CONNECT is a gateway_call event with rule and hint" || not_ok "refused CONNECTs are recorded" "$(ledger_calls "e['status'] == 403")"

# ---------------------------------------------------------------------------------------
# 3. The address rule: a name resolving to loopback, without private_upstreams naming it.
spec "$T/s2.json" "[{\"name\": \"echo\", \"target\": \"localhost:$ECHO\", \"send\": \"x\\n\"}]"
: >"$T/echo.log"
ct_run "$T/gw-nopriv.json" "$T/s2.json"
case "$(field echo status) $(field echo body)" in "403 "*'"rule":"address"'*) ok "CONNECT to a name resolving to loopback is refused without private_upstreams (control: named, above, it tunnels)" ;;
*) not_ok "CONNECT to a loopback address without private_upstreams is refused" "$(field echo status) $(field echo body)" ;; esac
[ ! -s "$T/echo.log" ] && ok "the refused upstream got nothing" || not_ok "the refused upstream got nothing" "$(cat "$T/echo.log")"

# ---------------------------------------------------------------------------------------
# 4. Tunnels count against the run's rate (50/s, a burst of 100): 130 CONNECTs at once meet
# 429s; the first ones are judged (403) as before.
spec "$T/s3.json" "[{\"name\": \"flood\", \"target\": \"localhost:1\", \"count\": 130}]"
ct_run "$T/gw.json" "$T/s3.json"
counts=$("$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); s=[c["status"] for c in d["calls"]]; print(s[0], s.count(403), s.count(429))' "$T/client.json" 2>/dev/null)
set -- $counts
if [ "${1:-}" = 403 ] && [ "${3:-0}" -ge 1 ] && [ "${2:-0}" -ge 90 ]; then ok "CONNECTs take from the run's rate: $2 judged, $3 answered 429"
else not_ok "CONNECTs take from the run's rate" "first, 403s, 429s: $counts"; fi

# ---------------------------------------------------------------------------------------
# 5. What a step's environment holds in gateway mode with network.proxy, and without it.
run_rbx run --image host --policy "$T/pol.json" --gateway-config "$T/gw.json" -- /bin/sh -c \
	'for v in HTTPS_PROXY https_proxy HTTP_PROXY http_proxy NO_PROXY no_proxy NODE_USE_ENV_PROXY; do printenv $v >/dev/null && echo $v; done | tr "\n" " "; echo "$NODE_USE_ENV_PROXY"'
[ "$OUT" = "HTTPS_PROXY https_proxy HTTP_PROXY http_proxy NO_PROXY no_proxy NODE_USE_ENV_PROXY 1" ] &&
	ok "the step gets HTTPS_PROXY, https_proxy, HTTP_PROXY, http_proxy, NO_PROXY, no_proxy and NODE_USE_ENV_PROXY=1" ||
	not_ok "the step gets the proxy variables" "$OUT"
policy_variant default "$T/pol0.json" gwnoproxy "p['network'] = {'mode': 'gateway'}"
run_rbx run --image host --policy "$T/pol0.json" --gateway-config "$T/gw.json" -- /bin/sh -c 'env | grep -ci proxy'
[ "$OUT" = 0 ] && ok "control: without network.proxy, no proxy variable" || not_ok "control: no proxy variables without network.proxy" "$OUT"

# ---------------------------------------------------------------------------------------
# 6. A connection whose first bytes are a prefix of "CONNECT " and then nothing (8 of them, held
# 3 s, then closed) costs the gateway next to no CPU: it waits for the rest, it does not spin on
# the unread bytes. Control: 8 whole requests on the same door are answered.
HOLDC='
import os, socket, time, urllib.parse
u = urllib.parse.urlparse(os.environ["RUNBOX_API_URL"])
ss = [socket.create_connection((u.hostname, u.port)) for _ in range(8)]
for s in ss:
    s.sendall(b"C")
time.sleep(3)
for s in ss:
    s.close()
n = 0
for _ in range(8):
    s = socket.create_connection((u.hostname, u.port), timeout=10)
    s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    n += s.recv(4096).startswith(b"HTTP/1.1 ")
    s.close()
print(n)'
run_rbx run --image host --json --policy "$T/pol.json" --gateway-config "$T/gw.json" --timeout 60s -- python3 -c "$HOLDC"
cpu=$(printf '%s' "$OUT" | "$PY" -c 'import json,sys; r=json.load(sys.stdin); print(r["gateway"]["cpu_ms"])' 2>/dev/null)
answered=$(printf '%s' "$OUT" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["stdout"].strip())' 2>/dev/null)
if [ -n "$cpu" ] && "$PY" -c 'import sys; sys.exit(float(sys.argv[1]) >= 1000)' "$cpu" && [ "$answered" = 8 ]; then
	ok "8 connections held 3 s on a prefix of CONNECT cost the gateway $cpu ms of CPU (no spin); control: 8 whole requests answered"
else not_ok "a connection's partial first bytes do not spin the gateway" "gateway cpu_ms '$cpu', answered '$answered' ($(first_line "$ERR"))"; fi
