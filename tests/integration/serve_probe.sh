#!/usr/bin/env bash
# A probe of made-up session ids costs runbox serve a table lookup (serve/known.h), never the
# ledger: while ids that never were are asked for on every kind of route (the session, a
# process, a file, a resume), the daemon opens no ledger file (strace) and the ledger gains no
# event. So does a probe of snapshot refs (GET /v1/snapshots/REF): malformed, made up, or
# another tenant's (over TCP) are 404s (400 malformed) that open neither the ledger nor the
# store. Controls: a closed session's id, which the daemon knew, is looked up in the ledger (the
# same trace sees it open), a live session's file call adds its event, and the snapshot's own
# tenant and the operator read it; the chain verifies after those lookups.
# modes: root user unshare subids
. "$(dirname "$0")/../lib.sh"
lib_init serve_probe

serve_client
PORT=$((20000 + RANDOM % 20000))
MARK=$(new_marker)
KA=ka-$MARK-key-of-tenant-ta KB=kb-$MARK-key-of-tenant-tb
serve_keys "$(printf '{"%s": {"tenant": "ta"}, "%s": {"tenant": "tb"}}' "$KA" "$KB")"
if ! command -v strace >/dev/null; then
	not_ok "the ledger is not opened for unknown ids" "strace missing (scripts/install-deps.sh test)"
	exit 0
fi
serve_start serve.log --listen "127.0.0.1:$PORT" --keys "$T/keys.json" || exit 0
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
api POST "/v1/sessions/$L/snapshots" '{}'
SREF=$(jv 'r["ref"]') SSIZE=$(jv 'r["size"]')
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
snap_probes() {
	local i ref sts=""
	for i in $(seq 1 12); do
		ref=sha256:$("$PY" -c 'import secrets; print(secrets.token_hex(32))')
		api GET "/v1/snapshots/$ref"
		sts+=" $ST"
		tcp "$KA" GET "/v1/snapshots/$ref"
		sts+=" $ST"
		tcp "$KB" GET "/v1/snapshots/$SREF"
		sts+=" $ST"
	done
	SNAP_ST=$(tr ' ' '\n' <<<"$sts" | sort -u | tr '\n' ' ')
	sts=""
	for ref in x sha256:abc "sha256:${SREF#sha256:}0" "SHA256:${SREF#sha256:}"; do
		api GET "/v1/snapshots/$ref"
		sts+=" $ST"
	done
	MALFORMED_ST=$(tr ' ' '\n' <<<"$sts" | sort -u | tr '\n' ' ')
}
before=$(events)
traced "$T/probes.trace" probes
after=$(events)
probe_opens=$(grep -c 'ledger' "$T/probes.trace")
if [ "$PROBE_ST" = " 404 " ] && [ "$probe_opens" = 0 ] && [ -n "$before" ] && [ "$before" = "$after" ]; then
	ok "48 calls naming made-up ids are 404s that open no ledger file and add no event"
else not_ok "probes of made-up ids cost nothing" "statuses '$PROBE_ST', ledger opens $probe_opens, events $before -> $after"; fi

before=$(events)
traced "$T/snaps.trace" snap_probes
after=$(events)
snap_opens=$(grep -c 'ledger\|artifacts' "$T/snaps.trace")
if [ -n "$SREF" ] && [ "$SNAP_ST" = " 404 " ] && [ "$MALFORMED_ST" = " 400 " ] && [ "$snap_opens" = 0 ] &&
	[ "$before" = "$after" ]; then
	ok "40 GET /v1/snapshots/REF of made-up refs, another tenant's ref and malformed ones are 404s (400 malformed) that open neither the ledger nor the store"
else not_ok "probes of snapshot refs cost nothing" "ref '$SREF', statuses '$SNAP_ST' malformed '$MALFORMED_ST', ledger or store opens $snap_opens, events $before -> $after"; fi
snap_controls() {
	OWN=$(curl -s -o "$T/snap.tar.zst" -w '%{http_code}' --max-time 60 -H "Authorization: Bearer $KA" \
		"http://127.0.0.1:$PORT/v1/snapshots/$SREF")
	OWN+=" $(stat -c %s "$T/snap.tar.zst") sha256:$(sha256sum <"$T/snap.tar.zst" | cut -d' ' -f1)"
	OPER=$("${CLIENT[@]}" curl -s -o /dev/null -w '%{http_code}' --max-time 60 --unix-socket "$SOCK" \
		"http://runbox/v1/snapshots/$SREF")
}
traced "$T/snapctl.trace" snap_controls
if [ "$OWN" = "200 $SSIZE $SREF" ] && [ "$OPER" = 200 ] && grep -q artifacts "$T/snapctl.trace"; then
	ok "control: the snapshot's own tenant reads it ($SSIZE bytes), so does the operator"
else not_ok "control: a real snapshot ref is answered" "own '$OWN' (size $SSIZE), operator '$OPER'"; fi

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
