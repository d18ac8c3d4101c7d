#!/usr/bin/env bash
# A tenant's calls in flight on the TCP listener are bounded (--max-calls-per-tenant): with a
# bound of 2, tenant ta holding two NDJSON output streams open gets a 429 for a third call,
# while tenant tb is served meanwhile (control); once one of ta's streams ends, ta is served
# again. libmicrohttpd's connection limit is the daemon's: without this, one tenant's streams
# take every connection of every tenant. The same on the E2B listener (--e2b-listen), with
# calls whose bodies are still coming as the calls held open.
# modes: root user
. "$(dirname "$0")/../lib.sh"
lib_init serve_bounds

serve_client
PORT=$((20000 + RANDOM % 20000))
MARK=$(new_marker)
KA=ka-$MARK-key-of-tenant-a
KB=kb-$MARK-key-of-tenant-b
serve_keys "$(printf '{"%s": {"tenant": "ta"}, "%s": {"tenant": "tb"}}' "$KA" "$KB")"


STREAMS=() DPID=
cleanup_bounds() {
	for p in ${STREAMS[@]+"${STREAMS[@]}"}; do kill "$p" 2>/dev/null; done
	[ -z "$DPID" ] || { kill "$DPID" 2>/dev/null; wait "$DPID" 2>/dev/null; }
}
trap "cleanup_bounds; lib_cleanup" EXIT
serve_start serve.log --listen "127.0.0.1:$PORT" --keys "$T/keys.json" --max-calls-per-tenant 2 || exit 0

tcp "$KA" POST /v1/sessions '{"image": "minimal"}'
S=$(jv 'r["id"]')
tcp "$KA" POST "/v1/sessions/$S/processes" '{"argv": ["sleep", "60"]}'
P=$(jv 'r["id"]')
[ -n "$S" ] && [ -n "$P" ] || { not_ok "tenant ta starts a process" "$ST $R"; exit 0; }
# two streams of the sleeping process's output: each a call in flight until it ends. A stream
# refused (429) while an earlier call of ta's still counts is opened again; the test goes on
# only once both streams' status lines say 200.
status_of() { tr -d '\r' <"$1" 2>/dev/null | head -n 1 | cut -d' ' -f2; }
has_status() { [ -n "$(status_of "$1")" ]; }
open_stream() { # N: ta's output stream N, answered 200 (its curl's pid in STREAMS[N-1])
	local n=$1 _
	for _ in $(seq 20); do
		rm -f "$T/stream$n.h"
		curl -s -N --max-time 90 -D "$T/stream$n.h" -H "Authorization: Bearer $KA" \
			"http://127.0.0.1:$PORT/v1/sessions/$S/processes/$P/output?stream=1" >"$T/stream$n" 2>&1 &
		STREAMS[n - 1]=$!
		wait_for has_status "$T/stream$n.h"
		echo "stream $n: $(status_of "$T/stream$n.h")" >>"$T/streams.log"
		[ "$(status_of "$T/stream$n.h")" = 200 ] && return 0
		kill "${STREAMS[n - 1]}" 2>/dev/null
		wait "${STREAMS[n - 1]}" 2>/dev/null
		sleep 0.1
	done
	return 1
}
for i in 1 2; do
	open_stream $i || not_ok "ta's output stream $i is open (200)" "$(tr "\n" " " <"$T/streams.log") $(cat "$T/stream$i.h" "$T/stream$i" 2>/dev/null | head -c 300)"
done
# held3: ta's third call is refused while both streams are open
held3() { tcp "$KA" GET /v1/sessions; [ "$ST" = 429 ]; }
if wait_for held3; then
	case $R in *max-calls-per-tenant*) ok "a third call of tenant ta in flight is a 429 naming --max-calls-per-tenant" ;;
	*) not_ok "the 429 names its bound" "$R" ;; esac
else
	not_ok "a third call of tenant ta in flight is refused" "$ST $R | streams: $(for i in 1 2; do printf '[%s: %s] ' "$(status_of "$T/stream$i.h")" "$(head -c 200 "$T/stream$i")"; done) | alive: $(for p in "${STREAMS[@]}"; do kill -0 "$p" 2>/dev/null && printf '%s ' "$p"; done)"
fi
tcp "$KB" GET /v1/sessions
[ "$ST" = 200 ] && ok "control: tenant tb is served meanwhile" || not_ok "tenant tb is served while ta is at its bound" "$ST $R"
kill "${STREAMS[0]}" 2>/dev/null
wait "${STREAMS[0]}" 2>/dev/null
served() { tcp "$KA" GET /v1/sessions; [ "$ST" = 200 ]; }
wait_for served && ok "once one of ta's streams ends, ta is served again" ||
	not_ok "ta is served again after a stream ends" "$ST $R"
tcp "$KA" DELETE "/v1/sessions/$S"
for p in "${STREAMS[@]}"; do kill "$p" 2>/dev/null; done
STREAMS=()
kill "$DPID" 2>/dev/null
wait "$DPID" 2>/dev/null

# The E2B listener: tenant ta's two POST /sandboxes with a body that never ends (chunked, from
# a pipe held open) are two calls in flight; ta's third call is a 429, tb's is served
# (control); ta again once one of the two is gone.
# (the keys made by root, then the mode's user's, as --keys above)
EA=$("$RUNBOX" serve --e2b-keys "$T/e2b-keys.json" --e2b-new-key ta 2>"$T/e2bkey.err")
EB=$("$RUNBOX" serve --e2b-keys "$T/e2b-keys.json" --e2b-new-key tb 2>>"$T/e2bkey.err")
[ "$MODE" = root ] || chown $NOBODY:$NOBODY "$T/e2b-keys.json"
EPORT=$((20000 + RANDOM % 20000))
if [ -z "$EA" ] || [ -z "$EB" ]; then
	not_ok "runbox e2b keys are made" "$(first_line "$(cat "$T/e2bkey.err")")"
	exit 0
fi
serve_start serve-e2b.log --e2b-listen "127.0.0.1:$EPORT" --e2b-keys "$T/e2b-keys.json" --max-calls-per-tenant 2 || exit 0
e2b() { # KEY METHOD PATH
	local out
	out=$(curl -s -w '\n%{http_code}' --max-time 60 -H "X-API-Key: $1" -X "$2" "http://127.0.0.1:$EPORT$3")
	ST=${out##*$'\n'}
	R=${out%$'\n'*}
}
for i in 1 2; do
	mkfifo "$T/body$i"
	curl -s --max-time 90 -H "X-API-Key: $EA" -H "Content-Type: application/json" -T "$T/body$i" \
		-X POST "http://127.0.0.1:$EPORT/sandboxes" >"$T/held$i" 2>&1 &
	STREAMS+=($!)
done
exec 7>"$T/body1" 8>"$T/body2" # the bodies' writers, held open: the calls stay in flight
e2b_held() { e2b "$EA" GET /sandboxes; [ "$ST" = 429 ]; }
if wait_for e2b_held; then
	case $R in *max-calls-per-tenant*) ok "e2b: a third call of tenant ta in flight is a 429 naming --max-calls-per-tenant" ;;
	*) not_ok "e2b: the 429 names its bound" "$R" ;; esac
else
	not_ok "e2b: a third call of tenant ta in flight is refused" "$ST $R"
fi
e2b "$EB" GET /sandboxes
[ "$ST" = 200 ] && ok "e2b control: tenant tb is served meanwhile" || not_ok "e2b: tenant tb is served while ta is at its bound" "$ST $R"
exec 7>&- 8>&- # the bodies end: both calls are answered and leave
e2b_served() { e2b "$EA" GET /sandboxes; [ "$ST" = 200 ]; }
wait_for e2b_served && ok "e2b: once ta's held calls end, ta is served again" ||
	not_ok "e2b: ta is served again after its held calls end" "$ST $R"
