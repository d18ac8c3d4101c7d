#!/usr/bin/env bash
# What a run costs the host: the runner stops reading a stream once it is past its caps (the
# rest is drained unread), reports its own CPU, and the gateway answers a flood with 429.
# modes: root user subids
. "$(dirname "$0")/../lib.sh"
lib_init hostcost

# --- output past its caps is not read (RB_STEP_LOG_CAP: the run's logs keep 64 MiB) ---
LOG_CAP=$((64 << 20))
# Control: 2 MiB of stdout (past the result's 1 MiB cap, under the logs' cap) is all read and
# scrubbed; none of it dropped.
sb --json --cpus 0.2 -- /bin/sh -c 'head -c 2097152 /dev/zero'
check "under the caps every byte is read" \
	"r['host_cost']['stdout_read_bytes'] == 2097152 and r['host_cost']['stdout_dropped_bytes'] == 0" "r['host_cost']"
check "the result's copy is capped" "r['stdout_truncated'] is True"
# The flood: 160 MiB. The runner reads up to the caps and drains the rest without reading it.
sb --json --cpus 0.2 -- /bin/sh -c 'head -c 167772160 /dev/zero; echo after >&2'
check "a flood step still ends and exits 0" "r['status'] == 'exited' and r['exit_code'] == 0" "[r['status'], r.get('error')]"
# At most one read's worth (16 KiB) past the cap: the read that filled it.
check "bytes the runner read stop at the caps" "r['host_cost']['stdout_read_bytes'] <= $LOG_CAP + 16384" "r['host_cost']"
check "the rest is counted as dropped" \
	"r['host_cost']['stdout_read_bytes'] + r['host_cost']['stdout_dropped_bytes'] == 167772160" "r['host_cost']"
check "the other stream is still read" "r['stderr'] == 'after\n'" "r['stderr']"
check "the runner's CPU is reported" \
	"r['host_cost']['cpu_user_ms'] >= 0 and r['host_cost']['cpu_system_ms'] > 0" "r['host_cost']"

# The ledger's step_end and run_end carry the host's side.
dropped=$(rj "r['host_cost']['stdout_dropped_bytes'] + r['host_cost']['stderr_dropped_bytes']")
rbx ledger query --run "$(rj "r['run_id']")" --json >"$T/ledger" 2>"$T/err"
if "$PY" - "$T/ledger" "$dropped" <<'PYEOF'; then ok "the ledger records the runner's CPU and the dropped bytes"; else not_ok "the ledger records the runner's CPU and the dropped bytes" "$(head -c 300 "$T/ledger")"; fi
import json, sys
text = open(sys.argv[1]).read()
try:
    rows = json.loads(text)
except ValueError:
    rows = [json.loads(l) for l in text.splitlines() if l.strip()]
if isinstance(rows, dict):
    rows = rows.get("events", [])
def data(t):
    return [r.get("data", r) for r in rows if r.get("type", r.get("event")) == t]
end, run_end = data("step_end"), data("run_end")
ok = end and run_end and end[0]["output_dropped_bytes"] == int(sys.argv[2]) > 0 \
    and end[0]["host_cpu_ms"] > 0 and run_end[0]["host_cpu_seconds"] > 0
sys.exit(0 if ok else 1)
PYEOF

# --- the gateway's per-run rate (50/s, a burst of 100): a flood gets 429, counted ---
flood() { # flood N: N requests on one keep-alive connection; prints "<n 200> <n 429> <a 429 body>"
	sb --json --net gateway --image host -- python3 -c '
import http.client, os, sys, urllib.parse
u = urllib.parse.urlparse(os.environ["RUNBOX_API_URL"])
c = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
n = {200: 0, 429: 0}; body = ""
for i in range(int(sys.argv[1])):
    c.request("GET", "/v1/health")
    r = c.getresponse(); b = r.read().decode()
    n[r.status] = n.get(r.status, 0) + 1
    if r.status == 429: body = b
print(n[200], n[429], body)' "$1"
}
flood 20
check "control: 20 requests are all answered" \
	"r['stdout'].split()[:2] == ['20', '0'] and r['gateway']['rate_limited'] == 0" "[r['stdout'], r.get('gateway'), r.get('stderr')]"
flood 600
check "a flood of 600 requests meets 429" "int(r['stdout'].split()[1]) > 0" "[r['stdout'], r.get('stderr')[:300]]"
check "the 429 answer is JSON naming the limit" \
	"json.loads(r['stdout'].split(' ', 2)[2])['error'] == 'rate limited'" "r['stdout']"
check "the result counts the refused requests" \
	"r['gateway']['rate_limited'] == int(r['stdout'].split()[1]) and r['gateway']['requests'] == 600" "[r['stdout'], r['gateway']]"
check "the gateway's CPU is in the result" "r['gateway']['cpu_ms'] > 0" "r['gateway']"
