#!/usr/bin/env bash
# A probe of made-up session ids costs runbox serve a table lookup (serve/known.h), never the
# ledger: while ids that never were are asked for on every kind of route (the session, a
# process, a file, a resume), the daemon opens no ledger file (strace) and the ledger gains no
# event. Controls: a closed session's id, which the daemon knew, is looked up in the ledger (the
# same trace sees it open), and a live session's file call adds its event; the chain verifies
# after those lookups.
# modes: root user unshare subids
. "$(dirname "$0")/../lib.sh"
lib_init serve_probe

serve_client
if ! command -v strace >/dev/null; then
	not_ok "the ledger is not opened for unknown ids" "strace missing (scripts/install-deps.sh test)"
	exit 0
fi
serve_start serve.log || exit 0
gone() { api GET "/v1/sessions/$1"; [ "$ST" = 404 ]; }
events() { "$PY" -c 'import sqlite3,sys; print(sqlite3.connect("file:%s?mode=ro" % sys.argv[1], uri=True).execute("select count(*) from events").fetchone()[0])' "$STATE/ledger.db"; }
# traced FILE CMD...: CMD while strace records the daemon's (every thread's) opens into FILE.
traced() {
	local f=$1 spid
	shift
	strace -f -p "$DPID" -e trace=open,openat,openat2 -o "$f" 2>"$f.err" &
	spid=$!
	wait_for grep -q attached "$f.err"
	"$@"
	kill "$spid" 2>/dev/null
	wait "$spid" 2>/dev/null
}

api POST /v1/sessions '{"image": "minimal", "tenant": "ta", "idle_timeout": 2}'
C=$(jv 'r["id"]')
api POST /v1/sessions '{"image": "minimal", "tenant": "ta"}'
L=$(jv 'r["id"]')
api PUT "/v1/sessions/$L/files?path=/workspace/f" "probe"
wait_for gone "$C" || not_ok "the idle session closes" "$ST $R"

probes() {
	local i id sts=""
	for i in $(seq 1 12); do
		id=$("$PY" -c 'import secrets; print(secrets.token_hex(16))')
		api GET "/v1/sessions/$id"
		sts+=" $ST"
		api POST "/v1/sessions/$id/processes" '{"argv": ["true"]}'
		sts+=" $ST"
		api GET "/v1/sessions/$id/files?path=/etc/passwd"
		sts+=" $ST"
		api POST "/v1/sessions/$id/resume" '{}'
		sts+=" $ST"
	done
	PROBE_ST=$(tr ' ' '\n' <<<"$sts" | sort -u | tr '\n' ' ')
}
before=$(events)
traced "$T/probes.trace" probes
after=$(events)
probe_opens=$(grep -c 'ledger' "$T/probes.trace")
if [ "$PROBE_ST" = " 404 " ] && [ "$probe_opens" = 0 ] && [ -n "$before" ] && [ "$before" = "$after" ]; then
	ok "48 calls naming made-up ids are 404s that open no ledger file and add no event"
else not_ok "probes of made-up ids cost nothing" "statuses '$PROBE_ST', ledger opens $probe_opens, events $before -> $after"; fi

controls() {
	api GET "/v1/sessions/$C"
	CLOSED_ST=$ST
	api POST "/v1/sessions/$C/resume" '{}'
	RESUME="$ST $R"
	api GET "/v1/sessions/$L/files?path=/workspace/f"
	READ="$ST $R"
}
traced "$T/controls.trace" controls
control_opens=$(grep -c 'ledger' "$T/controls.trace")
later=$(events)
if [ "$CLOSED_ST" = 404 ] && [[ "$RESUME" == 409*"without a snapshot"* ]] && [ "$control_opens" -gt 0 ] &&
	[ "$READ" = "200 probe" ] && [ "$later" -gt "$after" ]; then
	ok "control: a closed session's id is looked up in the ledger (seen opened), a live session's read adds its event"
else not_ok "control: known ids reach the ledger" "closed $CLOSED_ST, resume '$RESUME', ledger opens $control_opens, read '$READ', events $after -> $later"; fi

# The daemon's ledger connection keeps its commits through those lookups (each opens and closes
# a connection of its own in the daemon): more calls recorded, then the chain verifies.
for i in 1 2 3 4 5; do api GET "/v1/sessions/$L/files?path=/workspace/f"; done
api POST "/v1/sessions/$C/resume" '{}'
for i in 1 2 3 4 5; do
	api PUT "/v1/sessions/$L/files?path=/workspace/g$i" "g"
	api GET "/v1/sessions/$C"
done
kill -TERM "$DPID" 2>/dev/null
wait "$DPID" 2>/dev/null
run_rbx ledger verify
if [ "$RC" = 0 ]; then ok "the ledger's chain verifies after the daemon's lookups of known ids"
else not_ok "the ledger's chain verifies after the daemon's lookups of known ids" "$(first_line "$OUT$ERR")"; fi
