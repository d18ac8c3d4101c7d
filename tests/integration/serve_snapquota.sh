#!/usr/bin/env bash
# A tenant's snapshots count against --max-snapshot-bytes-per-tenant (docs/serve.md "Quotas"):
# with a bound of 8000 bytes, tenant ta's first snapshot (~3 KB of random bytes) is taken, its
# second (~6 KB) is a 507 naming the bound, recorded as a `snapshot` event with the error; the
# same tree again (a ref ta holds) and a small one are taken (controls), and so is tb's ~6 KB
# one (another tenant's bytes are its own). After a restart the next daemon counts ta's bytes
# from the ledger (the ~6 KB one is still a 507); once the first's object is gone from the
# store (what `runbox gc` removes), its bytes are back and the ~6 KB one is taken.
# modes: root user unshare subids
. "$(dirname "$0")/../lib.sh"
lib_init serve_snapquota

serve_client
ex() { run_rbx exec --socket "$SOCK" "$1" -- sh -c "$2"; }
snap() { api POST "/v1/sessions/$1/snapshots" '{}'; }
stop_daemon() {
	kill -TERM "$DPID" 2>/dev/null
	wait "$DPID" 2>/dev/null
}
serve_start serve.log --max-snapshot-bytes-per-tenant 8000 || exit 0

api POST /v1/sessions '{"image": "minimal", "tenant": "ta"}'
A=$(jv 'r["id"]') A_RUN=$(jv 'r["run_id"]')
api POST /v1/sessions '{"image": "minimal", "tenant": "tb"}'
B=$(jv 'r["id"]')
ex "$A" 'head -c 3000 /dev/urandom > /workspace/a'
snap "$A"
first="$ST" REF1=$(jv 'r["ref"]') SIZE1=$(jv 'r["size"]')
ex "$A" 'head -c 3000 /dev/urandom > /workspace/b'
snap "$A"
second="$ST $R"
ex "$B" 'head -c 6000 /dev/urandom > /workspace/b'
snap "$B"
other="$ST" SIZEB=$(jv 'r["size"]')
if [ "$first" = 200 ] && [[ "$second" == 507*"over 8000 (--max-snapshot-bytes-per-tenant)"* ]] && [ "$other" = 200 ] &&
	[ "$SIZEB" -gt $((8000 - SIZE1)) ]; then
	ok "ta's snapshot that would put its bytes over the bound (8000) is a 507 naming it; control: its first ($SIZE1 bytes) and tb's ($SIZEB bytes) are taken"
else not_ok "a tenant's snapshot bytes are bounded" "first $first ($SIZE1), second '$second', other $other ($SIZEB)"; fi

ex "$A" 'rm /workspace/b'
snap "$A"
again="$ST $(jv 'r["ref"]')"
ex "$A" 'rm /workspace/a; echo small > /workspace/s'
snap "$A"
small=$ST SMALL=$(jv 'r["size"]')
if [ "$again" = "200 $REF1" ] && [ "$small" = 200 ]; then
	ok "control: the same tree again (the ref ta holds takes nothing more) and a small snapshot ($SMALL bytes) are taken"
else not_ok "control: snapshots within the bound are taken" "again '$again' (ref $REF1), small $small"; fi

# /v1/stats shows each tenant's snapshots as counted against the bound, and the bound.
stats() {
	api GET /v1/stats
	jv '" ".join(str(x) for x in [r["snapshots"].get(t, {}).get(k) for t in ("ta", "tb") for k in ("snapshots", "bytes")] + [r["limits"]["max_snapshot_bytes_per_tenant"]])'
}
want_stats="2 $((SIZE1 + SMALL)) 1 $SIZEB 8000"
got_stats=$(stats)
if [ "$got_stats" = "$want_stats" ]; then
	ok "/v1/stats: ta holds 2 snapshots of $((SIZE1 + SMALL)) bytes, tb 1 of $SIZEB, against 8000 (the refused one counts nothing)"
else not_ok "/v1/stats shows the tenants' snapshot usage" "got $got_stats, want $want_stats"; fi

run_rbx ledger show "$A_RUN" --json
if "$PY" - "$OUT" <<'EOF'; then
import json, sys
ev = json.loads(sys.argv[1])
ev = ev.get("events", ev) if isinstance(ev, dict) else ev
bad = [e["data"] for e in ev if e.get("type") == "snapshot" and "error" in (e.get("data") or {})]
sys.exit(0 if len(bad) == 1 and bad[0].get("status") == 507 and bad[0].get("errno") == "EDQUOT" and
         "--max-snapshot-bytes-per-tenant" in bad[0]["error"] and "ref" not in bad[0] and "digest" not in bad[0]
         else 1)
EOF
	ok "the refused snapshot is recorded (a snapshot event: error, EDQUOT, 507, no ref)"
else not_ok "the refused snapshot is recorded" "$(first_line "$OUT") $(first_line "$ERR")"; fi

# A restart: the next daemon counts ta's snapshots from the ledger.
stop_daemon
rm -f "$SOCK"
serve_start serve2.log --max-snapshot-bytes-per-tenant 8000 || exit 0
api POST /v1/sessions '{"image": "minimal", "tenant": "ta"}'
A2=$(jv 'r["id"]')
ex "$A2" 'head -c 6000 /dev/urandom > /workspace/b'
snap "$A2"
restarted="$ST $R"
api POST /v1/sessions '{"image": "minimal", "tenant": "tb"}'
B2=$(jv 'r["id"]')
ex "$B2" 'echo small > /workspace/s'
snap "$B2"
other2=$ST
restarted_stats=$(stats)
if [[ "$restarted" == 507*"--max-snapshot-bytes-per-tenant"* ]] && [ "$other2" = 200 ]; then
	ok "after a restart ta's snapshot bytes still count (its ~6 KB snapshot is a 507); control: tb's is taken"
else not_ok "the accounting survives a restart" "ta '$restarted', tb $other2"; fi

# The first snapshot's object gone from the store, as `runbox gc` removes it: its bytes are back.
hex=${REF1#sha256:}
rm -f "$STATE/artifacts/sha256/${hex:0:2}/$hex"
snap "$A2"
freed="$ST"
if [[ "$restarted_stats" == "2 $((SIZE1 + SMALL)) "* ]]; then
	ok "/v1/stats after a restart: ta's usage read from the ledger ($((SIZE1 + SMALL)) bytes in 2)"
else not_ok "/v1/stats after a restart shows ta's usage from the ledger" "$restarted_stats"; fi
if [ "$freed" = 200 ]; then
	ok "once a snapshot's object is gone from the store its bytes are ta's again (the ~6 KB snapshot is taken)"
else not_ok "a snapshot gone from the store gives its bytes back" "$freed $R"; fi

stop_daemon
