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

# --- cgroup v1: socket buffers count against the memory limit (memory.kmem.tcp) ---
# The step queues loopback TCP data it never reads: 96 connections, up to 400 MiB in all, then
# prints how many MiB it queued and sleeps, so the test can read its cgroup's TCP usage.
TCPFILL='
import socket, sys, time
limit = int(sys.argv[1]) << 20
ls = socket.socket(); ls.bind(("127.0.0.1", 0)); ls.listen(128)
pairs, total, buf = [], 0, b"x" * 65536
for i in range(96):
    c = socket.socket()
    c.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8 << 20)
    c.connect(ls.getsockname()); s, _ = ls.accept()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    c.setblocking(False); pairs.append((c, s))
    while total < limit:
        try:
            total += c.send(buf)
        except BlockingIOError:
            break
    if total >= limit:
        break
print("queued", total >> 20, flush=True)
time.sleep(float(sys.argv[2]))'
# tcp_step MEM: the step under --memory MEM (root: its cgroup under a parent of this test's),
# sets QUEUED (MiB) and TCP_MAX (the cgroup's memory.kmem.tcp.max_usage_in_bytes, or "").
tcp_step() {
	QUEUED="" TCP_MAX=""
	local parent=rbx-hostcost-$$ line d
	rbx_cmd run --image host --memory "$1" -- python3 -c "$TCPFILL" 400 5
	[ "$MODE" = root ] && RBX_CMD=("${RBX_CMD[@]:0:2}" "RUNBOX_CGROUP_PARENT=/$parent" "${RBX_CMD[@]:2}")
	coproc TCP { "${RBX_CMD[@]}" 2>&1 </dev/null; }
	local pid=$TCP_PID
	# past the run id runbox prints first in text mode
	while read -r -t 60 line <&"${TCP[0]}" && [[ $line == "runbox: run "* ]]; do :; done
	QUEUED=${line#queued }
	for d in /sys/fs/cgroup/memory/$parent/*/; do
		[ -r "$d/memory.kmem.tcp.max_usage_in_bytes" ] && TCP_MAX=$(cat "$d/memory.kmem.tcp.max_usage_in_bytes")
	done
	cat <&"${TCP[0]}" >/dev/null
	wait "$pid"
	rmdir /sys/fs/cgroup/*/$parent 2>/dev/null
	return 0
}
# Only runbox as root makes v1 cgroups (rootless modes have none: their result says memory is
# not enforced, which result.sh holds).
v1=false
if [ "$MODE" = root ]; then
	sb --json --memory 64M -- /bin/true
	v1=$(rj "r['sandbox']['cgroup'] == 'v1' and 'memory' in r['limits'] and r['limits']['memory']['enforced']")
fi
if [ "$MODE" != root ]; then
	:
elif [ "$v1" != true ]; then
	skip "v1: socket buffers count against the memory limit" "not a cgroup v1 memory limit here (sandbox: $(rj "r['sandbox']['cgroup']"); v2 charges socket buffers always)"
else
	check "v1: the memory limit names kmem.tcp, not partly enforced" \
		"'kmem.tcp' in r['limits']['memory']['mechanism'] and 'partly' not in r['limits']['memory']" "r['limits']['memory']"
	run_rbx check
	if grep -q "socket buffers count against the memory limit" <<<"$OUT"; then ok "v1: runbox check says socket buffers count against the memory limit"
	else not_ok "v1: runbox check says socket buffers count against the memory limit" "$(grep -i 'cgroup v1' <<<"$OUT" | cut -c 1-300)"; fi
	tcp_step 1G # control: above 64 MiB of socket buffers fit under a 1G limit
	if [ "${QUEUED:-0}" -gt 64 ] 2>/dev/null; then ok "control: under --memory 1G the step queues ${QUEUED} MiB of TCP"
	else not_ok "control: under --memory 1G the step queues more than 64 MiB of TCP" "queued '${QUEUED}'"; fi
	if [ "$MODE" = root ]; then
		if [ "${TCP_MAX:-0}" -gt $((64 << 20)) ]; then ok "control: under --memory 1G the cgroup's TCP usage passes 64 MiB ($TCP_MAX)"
		else not_ok "control: under --memory 1G the cgroup's TCP usage passes 64 MiB" "memory.kmem.tcp.max_usage_in_bytes '$TCP_MAX'"; fi
	fi
	tcp_step 64M
	if [ -n "$QUEUED" ] && [ "$QUEUED" -le 64 ] 2>/dev/null; then ok "v1: under --memory 64M the step queues at most 64 MiB of TCP ($QUEUED)"
	else not_ok "v1: under --memory 64M the step queues at most 64 MiB of TCP" "queued '${QUEUED}'"; fi
	if [ "$MODE" = root ]; then
		# The kernel forces a few charges past the limit (an skb already received): 1 MiB slack
		# on 64, against the 400 MiB the control queues.
		if [ -n "$TCP_MAX" ] && [ "$TCP_MAX" -le $((65 << 20)) ]; then ok "v1: the cgroup's TCP usage stays under the limit ($TCP_MAX)"
		else not_ok "v1: the cgroup's TCP usage stays under the limit" "memory.kmem.tcp.max_usage_in_bytes '$TCP_MAX'"; fi
	fi
fi

# --- a run's storage budget (policy output.run_bytes, run_files, run_events, tenant_bytes,
# min_free): harvests stop storing at the limit, and the run says so ---
# manifest FILE TENANT POLICY STEP...: a manifest of script steps (each a line of sh).
manifest() {
	local file=$1 tenant=$2 pol=$3
	shift 3
	"$PY" - "$file" "$tenant" "$pol" "$@" <<'PYEOF'
import json, sys
f, tenant, pol, steps = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
m = {"tenant": tenant, "agent": "budget", "image": "minimal",
     "steps": [{"name": "s%d" % i, "script": "mkdir -p /workspace/out; cd /workspace/out; " + s}
               for i, s in enumerate(steps, 1)]}
if pol:
    m["policy"] = pol
json.dump(m, open(f, "w"))
PYEOF
	chmod a+r "$file"
}
mkdir -p "$T/scratch/b" "$T/cfg/policies"
# A manifest names its policy by name: the budgets' policies are in a config dir of the test's own.
chmod a+rx "$T/cfg" "$T/cfg/policies"
RBX_ENV=("RUNBOX_CONFIG_DIR=$T/cfg")
chmod 0755 "$T/scratch/b"
# fill NAME CHAR N: a file of N bytes of CHAR (distinct contents, distinct objects).
FILL='fill() { head -c "$3" /dev/zero | tr "\0" "$2" > "$1"; }; '
two_steps=("${FILL}fill a a 600; fill b b 600" "${FILL}fill c c 600")
manifest "$T/scratch/b/default.json" acme "" "${two_steps[@]}"
run_manifest "$T/scratch/b/default.json"
check "control: under the default budget every harvested file is stored" \
	"r['storage']['stopped'] is None and r['storage']['stored_files'] == 5 and r['result'] == 'success'" "r.get('storage')"

policy_variant default "$T/cfg/policies/budget-files.json" budget-files 'p["output"]["run_files"] = 3'
manifest "$T/scratch/b/m-files.json" acme budget-files "${two_steps[@]}"
run_manifest "$T/scratch/b/m-files.json"
check "run_files: storing stops at the run's third object" \
	"r['storage']['stored_files'] == 3 and r['storage']['stopped'] == 'run_files' and r['storage']['stopped_step'] == 2" "r.get('storage')"
check "run_files: the cut harvest names the budget" \
	"r['steps'][1]['harvest']['budget'] == 'run_files' and 'budget' not in r['steps'][0]['harvest']" "[s.get('harvest', {}).get('budget') for s in r['steps']]"
check "run_files: the steps still ran" "r['result'] == 'success' and len(r['steps']) == 2" "r['result']"
run_id=$(rj "r['run_id']")
run_rbx ledger query --run "$run_id" --type storage_stopped --json
if grep -q '"limit": *"run_files"' <<<"$OUT"; then ok "run_files: the ledger records where storing stopped"
else not_ok "run_files: the ledger records where storing stopped" "$(first_line "$OUT$ERR")"; fi

policy_variant default "$T/cfg/policies/budget-bytes.json" budget-bytes 'p["output"]["run_bytes"] = 1000'
manifest "$T/scratch/b/m-bytes.json" acme budget-bytes "${FILL}fill a a 600" "${FILL}fill d d 600"
run_manifest "$T/scratch/b/m-bytes.json"
check "run_bytes: the second step's files do not fit in what is left" \
	"r['storage']['stored_bytes'] <= 1000 and r['storage']['stopped'] == 'run_bytes' and r['steps'][0]['harvest']['objects_new'] + len(r['steps'][0]['harvest']['artifacts']) >= 1" "r.get('storage')"

policy_variant default "$T/cfg/policies/budget-events.json" budget-events 'p["output"]["run_events"] = 4'
manifest "$T/scratch/b/m-events.json" acme budget-events "${FILL}fill a a 10; fill e e 10"
run_manifest "$T/scratch/b/m-events.json"
check "run_events: no artifact event beyond the run's event budget" \
	"r['storage']['stopped'] == 'run_events' and r['storage']['stored_files'] == 0" "r.get('storage')"

policy_variant default "$T/cfg/policies/budget-floor.json" budget-floor 'p["output"]["min_free"] = 9000000000000000000'
manifest "$T/scratch/b/m-floor.json" acme budget-floor "${FILL}fill a a 10"
run_manifest "$T/scratch/b/m-floor.json"
check "min_free: below the free-space floor nothing is stored, and the run says so" \
	"r['storage']['stopped'] == 'min_free' and r['storage']['stored_files'] == 0 and r['steps'][0]['harvest']['budget'] == 'min_free'" "r.get('storage')"

# The tenant's quota counts what its earlier runs stored; another tenant (control) is not held.
policy_variant default "$T/cfg/policies/budget-tenant.json" budget-tenant 'p["output"]["tenant_bytes"] = 1000'
manifest "$T/scratch/b/m-t1.json" quota-t budget-tenant "${FILL}fill f f 800"
run_manifest "$T/scratch/b/m-t1.json"
check "tenant_bytes: a first run within the quota stores" "r['storage']['stored_files'] == 1 and r['storage']['stopped'] is None" "r.get('storage')"
manifest "$T/scratch/b/m-t2.json" quota-t budget-tenant "${FILL}fill g g 800"
run_manifest "$T/scratch/b/m-t2.json"
check "tenant_bytes: the tenant's next run is held at its quota" \
	"r['storage']['tenant_bytes_used'] == 800 and r['storage']['stored_files'] == 0 and r['storage']['stopped'] == 'tenant_bytes'" "r.get('storage')"
manifest "$T/scratch/b/m-t3.json" other-t budget-tenant "${FILL}fill g g 800"
run_manifest "$T/scratch/b/m-t3.json"
check "control: another tenant's run stores" "r['storage']['stored_files'] == 1 and r['storage']['tenant_bytes_used'] == 0" "r.get('storage')"
kept_digest=$(rj "r['steps'][0]['harvest']['artifacts'][0]['digest']")

# --- retention: runbox gc collects objects no ledger row within the retention needs ---
obj() { local h=${1#sha256:}; echo "$STATE/artifacts/sha256/${h:0:2}/$h"; }
orphan=sha256:$(printf 'no run stored this' | sha256sum | cut -c 1-64)
as_mode() { if [ "$MODE" = root ]; then "$@"; else as_nobody "$@"; fi; }
as_mode mkdir -p "$(dirname "$(obj "$orphan")")"
printf 'no run stored this' | as_mode tee "$(obj "$orphan")" >/dev/null
touch -h -d '2 hours ago' "$(obj "$orphan")" "$(obj "$kept_digest")"
run_rbx gc --retention 1h --dry-run
if grep -q "would remove artifact $orphan" <<<"$OUT" && [ -e "$(obj "$orphan")" ] && ! grep -q "$kept_digest" <<<"$OUT"; then
	ok "gc --dry-run lists an old unreferenced object and removes nothing"
else not_ok "gc --dry-run lists an old unreferenced object and removes nothing" "exit $RC: $(first_line "$OUT$ERR")"; fi
run_rbx gc --retention 1h
if [ ! -e "$(obj "$orphan")" ] && grep -q "removed artifact $orphan" <<<"$OUT"; then ok "gc removes an old object no ledger row names"
else not_ok "gc removes an old object no ledger row names" "exit $RC: $(first_line "$OUT$ERR")"; fi
if [ -e "$(obj "$kept_digest")" ]; then ok "control: gc keeps an old object a ledger row within the retention names"
else not_ok "control: gc keeps an old object a ledger row within the retention names" "$kept_digest is gone"; fi
run_rbx gc --retention 0s
if [ ! -e "$(obj "$kept_digest")" ]; then ok "gc --retention 0s collects it once no row within the retention needs it"
else not_ok "gc --retention 0s collects it once no row within the retention needs it" "exit $RC: $(first_line "$OUT$ERR")"; fi

# --- the runner's memory does not grow with the steps: the result is streamed, and holds at
# most 8 MiB of the steps' output and 100 artifacts per step; the rest is spilled to files in
# the run's result directory, which the result names ---
policy_variant default "$T/cfg/policies/big-out.json" big-out 'p["output"]["max_stdout"] = "3M"'
big_out='head -c 3145728 /dev/zero | tr "\0" x'
manifest "$T/scratch/b/m-spill.json" acme big-out \
	"$big_out; i=0; while [ \$i -lt 150 ]; do echo \$i > f\$i; i=\$((i+1)); done" "$big_out" "$big_out"
run_manifest "$T/scratch/b/m-spill.json"
check "spill: the first steps' output is in the result" \
	"[len(s['stdout']) for s in r['steps'][:2]] == [3145728, 3145728] and 'stdout_file' not in r['steps'][1]" "[len(s['stdout']) for s in r['steps']]"
check "spill: past the run's 8 MiB the step's output is in a file the result names" \
	"r['steps'][2]['stdout'] == '' and open(r['steps'][2]['stdout_file']).read() == 'x' * 3145728 and r['steps'][2]['stdout_file'].startswith(r['results_dir'])" \
	"[r['steps'][2].get('stdout_file'), r.get('results_dir')]"
check "spill: a step's artifact list is cut at 100, with the count" \
	"len(r['steps'][0]['harvest']['artifacts']) == 100 and r['steps'][0]['harvest']['artifacts_total'] == 150" \
	"[len(r['steps'][0]['harvest']['artifacts']), r['steps'][0]['harvest'].get('artifacts_total')]"
check "spill: every artifact is in the step's artifacts file" \
	"sorted(json.loads(l)['path'] for l in open(r['steps'][0]['harvest']['artifacts_file'])) == sorted('f%d' % i for i in range(150))" \
	"r['steps'][0]['harvest'].get('artifacts_file')"
# The result directory goes with the retention: kept while recent (control), removed once old.
rdir=$(rj "r['results_dir']")
run_rbx gc --retention 1h
if [ -d "$rdir" ]; then ok "control: gc keeps a recent run's result directory"
else not_ok "control: gc keeps a recent run's result directory" "$rdir is gone"; fi
touch -h -d '2 hours ago' "$rdir"
run_rbx gc --retention 1h
if [ ! -e "$rdir" ] && grep -q "removed run results $rdir" <<<"$OUT"; then ok "gc removes a run's result directory older than the retention"
else not_ok "gc removes a run's result directory older than the retention" "exit $RC: $(first_line "$OUT$ERR")"; fi
# Control: a small run holds everything itself and spills nothing.
manifest "$T/scratch/b/m-small.json" acme "" "echo hi; touch a b c"
run_manifest "$T/scratch/b/m-small.json"
check "control: a small run spills nothing" \
	"r['steps'][0]['stdout'] == 'hi\n' and 'artifacts_total' not in r['steps'][0]['harvest'] and len(r['steps'][0]['harvest']['artifacts']) == 3 and 'results_dir' not in r" "r['steps'][0]"

# Streamed: the first step's object is out while the second step still runs.
manifest "$T/scratch/b/m-stream.json" acme "" "echo first" "sleep 10"
rbx_cmd run "$T/scratch/b/m-stream.json" --json
coproc STREAM { "${RBX_CMD[@]}" 2>/dev/null </dev/null; }
spid=$STREAM_PID
seen="" running=""
while IFS= read -r -t 60 line <&"${STREAM[0]}"; do
	case $line in *'"stdout": "first\n"'*) seen=1; kill -0 "$spid" 2>/dev/null && running=1; break ;; esac
done
cat <&"${STREAM[0]}" >"$T/stream.json"
wait "$spid"
if [ -n "$seen" ] && [ -n "$running" ]; then ok "the result is written step by step: step 1 is out while step 2 runs"
else not_ok "the result is written step by step: step 1 is out while step 2 runs" "seen=$seen running=$running"; fi
# A reader that goes away does not stop the run: it ends and is recorded.
rbx_cmd run "$T/scratch/b/m-stream.json" --json
"${RBX_CMD[@]}" 2>"$T/err" </dev/null | head -c 1 >/dev/null
rc=${PIPESTATUS[0]}
last=$(rbx ledger query --type run_end --json --limit 1000 2>/dev/null | "$PY" -c 'import json, sys; e = json.load(sys.stdin); print(e[-1]["data"]["result"], e[-1]["data"]["steps"])')
if [ "$rc" = 0 ] && [ "$last" = "success 2" ]; then ok "a closed stdout does not abandon the run (exit 0, run_end recorded)"
else not_ok "a closed stdout does not abandon the run" "exit $rc, last run_end: $last; $(first_line "$(cat "$T/err")")"; fi
