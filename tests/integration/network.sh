#!/usr/bin/env bash
# Network: the sandbox's netns has only lo, the `inet runbox` table drops and counts every
# attempt to leave it (IPv4, IPv6, TCP, UDP, also over an interface added from outside),
# loopback works, raw and packet sockets fail, the gateway endpoint answers only its run's
# token, the host environment stays out, and root inside with CAP_NET_ADMIN cannot touch
# the table. Traffic goes only to loopback and to test hosts in network namespaces this file
# creates (rbxn-*, veth pairs), removed on exit.
# modes: root user subids
. "$(dirname "$0")/../lib.sh"
lib_init network

FIX=$ROOT/tests/integration/fixtures/network
GOLDEN=$ROOT/tests/unit/golden/nft_table.txt
S=$(($$ % 100000))
NH=rbxn-host-$S   # the test host: 10.211.0.1 (to NC), 10.212.0.1 (to NP or the sandbox)
NC=rbxn-cli-$S    # a plain client netns: 10.211.0.2
NP=rbxn-pl2-$S    # a plain netns on the second link: 10.212.0.2
NN=rbxn-nft-$S    # a plain netns where host root rules nftables (control)
VH1=rbxn-a$S VC1=rbxn-b$S VH2=rbxn-c$S VP2=rbxn-d$S VH3=rbxn-e$S VS3=rbxn-f$S
PORT=8080 UPORT=8081
HOST_PID="" RB_PID=""

net_cleanup() {
	[ -n "$RB_PID" ] && kill "$RB_PID" 2>/dev/null
	[ -n "$HOST_PID" ] && kill "$HOST_PID" 2>/dev/null
	[ -n "$HOST_PID" ] && wait "$HOST_PID" 2>/dev/null
	local ns
	for ns in "$NH" "$NC" "$NP" "$NN"; do ip netns del "$ns" 2>/dev/null; done
	lib_cleanup
}
trap net_cleanup EXIT
trap 'exit 130' INT TERM HUP

for tool in ip nft nsenter; do
	command -v $tool >/dev/null || { skip "network tests" "$tool missing"; exit 0; }
done

# jv PATH: a value of the last --json result ($T/out), empty when missing.
jv() { json "$T/out" "$1" 2>/dev/null; }
# ge NAME PATH N: the last result has PATH >= N.
ge() {
	local v
	v=$(jv "$2")
	if [ -z "$v" ]; then not_ok "$1" "no $2 in the result (exit $RC; $(first_line "$ERR"))"
	elif [ "$v" -ge "$3" ] 2>/dev/null; then ok "$1"
	else not_ok "$1" "$2 is $v, want >= $3"; fi
}
# in_ns NS CMD...: CMD in netns NS, as root; sets CTRL.
in_ns() {
	local ns=$1
	shift
	ip netns exec "$ns" "$@" >"$T/ctrl.out" 2>&1 </dev/null
	CTRL=$?
}
host_log_has() { grep -qx "$1" "$T/host.log" 2>/dev/null; }

# ---------------------------------------------------------------------------------------
# The test host: NH with a listener (TCP $PORT, UDP $UPORT, dual-stack), a veth to NC.
setup_host() {
	ip netns add "$NH" && ip netns add "$NC" || return 1
	ip -n "$NH" link set lo up && ip -n "$NC" link set lo up || return 1
	ip link add "$VH1" netns "$NH" type veth peer name "$VC1" netns "$NC" || return 1
	ip -n "$NH" addr add 10.211.0.1/24 dev "$VH1" &&
		ip -n "$NH" -6 addr add fd00:211::1/64 dev "$VH1" nodad &&
		ip -n "$NC" addr add 10.211.0.2/24 dev "$VC1" &&
		ip -n "$NC" -6 addr add fd00:211::2/64 dev "$VC1" nodad &&
		ip -n "$NH" link set "$VH1" up && ip -n "$NC" link set "$VC1" up || return 1
	: >"$T/host.log"
	ip netns exec "$NH" "$PY" "$FIX/testhost.py" $PORT "$T/host.log" "$T/host.ready" \
		</dev/null >"$T/host.out" 2>&1 &
	HOST_PID=$!
	wait_for test -e "$T/host.ready"
}
if ! setup_host; then
	not_ok "test host netns $NH" "setup failed: $(cat "$T/host.out" 2>/dev/null | head -n 3)"
	exit 0
fi

# --- 1. the test host answers a plain netns, not the sandbox; each attempt is counted ---
in_ns "$NC" "$PROBE" connect 10.211.0.1 $PORT
c_tcp4=$CTRL
in_ns "$NC" "$PROBE" connect fd00:211::1 $PORT
c_tcp6=$CTRL
in_ns "$NC" "$PROBE" connect 10.211.0.1 $UPORT udp
c_udp4=$CTRL
in_ns "$NC" "$PROBE" connect fd00:211::1 $UPORT udp
c_udp6=$CTRL
wait_for host_log_has "udp fd00:211::2"
if [ "$c_tcp4$c_tcp6$c_udp4$c_udp6" = 0000 ] && host_log_has "tcp 10.211.0.2" &&
	host_log_has "tcp fd00:211::2" && host_log_has "udp 10.211.0.2" && host_log_has "udp fd00:211::2"; then
	ok "control: test host answers TCP/UDP, IPv4/IPv6 from a plain netns"
	host_ok=1
else
	not_ok "control: test host answers TCP/UDP, IPv4/IPv6 from a plain netns" \
		"tcp4 $c_tcp4 tcp6 $c_tcp6 udp4 $c_udp4 udp6 $c_udp6; host saw: $(tr '\n' ',' <"$T/host.log")"
	host_ok=""
fi

# blocked NAME ADDR PORT PROTO KEY WANT: the probe in the sandbox fails with WANT, the host
# logs nothing from the attempt, and egress.by_protocol.KEY >= 1.
blocked() {
	local name=$1 addr=$2 port=$3 proto=$4 key=$5 want=$6 before
	before=$(wc -l <"$T/host.log")
	sb --json -- /bin/probe connect "$addr" "$port" "$proto"
	local after
	after=$(wc -l <"$T/host.log")
	if [ -z "$host_ok" ]; then skip "$name" "the control failed: the test host cannot tell"; return; fi
	if ! matches "$RC" "$want"; then not_ok "$name" "probe exit $RC, want $want ($(first_line "$ERR"))"
	elif [ "$after" != "$before" ]; then not_ok "$name" "the test host saw: $(tail -n 1 "$T/host.log")"
	else ok "$name"; fi
	ge "$name: egress.by_protocol.$key counted" "egress.by_protocol.$key" 1
	ge "$name: egress.blocked_packets > 0" egress.blocked_packets 1
}
blocked "sandbox cannot reach the test host (IPv4 TCP)" 10.211.0.1 $PORT tcp ipv4_tcp "110"
blocked "sandbox cannot reach the test host (IPv6 TCP)" fd00:211::1 $PORT tcp ipv6_tcp "110"
blocked "sandbox cannot reach the test host (IPv4 UDP)" 10.211.0.1 $UPORT udp ipv4_udp "$EPERM"
blocked "sandbox cannot reach the test host (IPv6 UDP)" fd00:211::1 $UPORT udp ipv6_udp "$EPERM"
# 8. rootless runs get the same table: the counts above came from it.
if [ "$MODE" = user ] || [ "$MODE" = subids ]; then
	expect_json "rootless run is rootless (egress counted above)" sandbox.rootless true
fi

# --- 2. a route into the sandbox netns, added from outside: still dropped and counted ---
# Control: the same veth into a plain netns NP reaches the host, and the host reaches NP
# (no listener there: ECONNREFUSED, so packets come back).
ctrl2=""
if ip netns add "$NP" && ip -n "$NP" link set lo up &&
	ip link add "$VH2" netns "$NH" type veth peer name "$VP2" netns "$NP" &&
	ip -n "$NH" addr add 10.212.0.1/24 dev "$VH2" && ip -n "$NP" addr add 10.212.0.2/24 dev "$VP2" &&
	ip -n "$NH" link set "$VH2" up && ip -n "$NP" link set "$VP2" up; then
	in_ns "$NP" "$PROBE" connect 10.212.0.1 $PORT
	c_out=$CTRL
	in_ns "$NH" "$PROBE" connect 10.212.0.2 $PORT
	c_in=$CTRL
	if [ "$c_out" = 0 ] && [ "$c_in" = 111 ] && host_log_has "tcp 10.212.0.2"; then
		ok "control: a veth into a plain netns reaches the test host (and back)"
		ctrl2=1
	else
		not_ok "control: a veth into a plain netns reaches the test host (and back)" \
			"out: exit $c_out, in: exit $c_in (want 0, 111)"
	fi
else
	not_ok "control: a veth into a plain netns reaches the test host (and back)" "veth setup failed"
fi
ip netns del "$NP" 2>/dev/null # its veth, and 10.212.0.1 on the host side, go with it
: >"$T/host.log"

MARK=$(new_marker)
# The step waits (bounded) for the route the test adds, tries TCP and UDP over it, says so
# in /tmp/attempted, then waits until the test removes the link.
STEP2=": $MARK
i=0; while ! grep -q 0000D40A /proc/net/route; do i=\$((i+1)); [ \$i -gt 300 ] && { echo noroute; exit 3; }; sleep 0.1; done
probe connect 10.212.0.1 $PORT; t=\$?
probe connect 10.212.0.1 $UPORT udp; u=\$?
echo tcp=\$t udp=\$u >/tmp/attempted
i=0; while grep -q 0000D40A /proc/net/route; do i=\$((i+1)); [ \$i -gt 300 ] && break; sleep 0.1; done
echo tcp=\$t udp=\$u"
rbx run --image minimal --json --timeout 90s -- /bin/sh -c "$STEP2" </dev/null >"$T/out" 2>"$T/err" &
RB_PID=$!
hostnet=$(readlink /proc/self/ns/net)
find_sandbox_pid() {
	local p
	SPID=""
	for p in $(pids_with "$MARK"); do
		if [ "$(readlink "/proc/$p/ns/net" 2>/dev/null)" != "$hostnet" ] &&
			[ -e "/proc/$p/root/bin/probe" ]; then
			SPID=$p
			return 0
		fi
	done
	return 1
}
why2=""
if ! wait_for find_sandbox_pid; then
	why2="no sandbox process with marker $MARK found"
else
	# 8. the table is there (rootless too), as the golden listing says; control: a plain
	# netns has no such table.
	nsenter -t "$SPID" -n nft list table inet runbox >"$T/table.txt" 2>&1
	trc=$?
	ip netns add "$NN" 2>/dev/null
	ip netns exec "$NN" nft list table inet runbox >/dev/null 2>&1
	nrc=$?
	sed -E 's/packets [0-9]+ bytes [0-9]+/packets 0 bytes 0/' "$T/table.txt" >"$T/table.norm"
	if [ $trc != 0 ]; then not_ok "table inet runbox is in the sandbox netns" "nft list: $(head -n 1 "$T/table.txt")"
	elif [ $nrc = 0 ]; then skip "table inet runbox is in the sandbox netns" "control: a plain netns lists it too"
	elif ! diff -u "$GOLDEN" "$T/table.norm" >"$T/table.diff"; then
		not_ok "table inet runbox is in the sandbox netns" "differs from the golden: $(sed -n '3,12p' "$T/table.diff" | tr '\n\t' '  ')"
	else ok "table inet runbox is in the sandbox netns (as the golden listing, counters aside)"; fi

	if ip link add "$VH3" netns "$NH" type veth peer name "$VS3" netns "$SPID" &&
		ip -n "$NH" addr add 10.212.0.1/24 dev "$VH3" && ip -n "$NH" link set "$VH3" up &&
		nsenter -t "$SPID" -n ip addr add 10.212.0.2/24 dev "$VS3" &&
		nsenter -t "$SPID" -n ip link set "$VS3" up; then
		if wait_for test -e "/proc/$SPID/root/tmp/attempted"; then
			# Inbound: the host tries the sandbox. A plain netns refuses (111); the
			# sandbox's refusal (a RST) is itself traffic that would leave: dropped.
			in_ns "$NH" "$PROBE" connect 10.212.0.2 $PORT
			c_in=$CTRL
		else
			why2="the step never reported its attempts"
		fi
	else
		why2="could not add a veth into the sandbox netns"
	fi
	ip -n "$NH" link del "$VH3" 2>/dev/null # the step sees its route go and ends
fi
wait "$RB_PID"
RC=$?
RB_PID=""
ERR=$(cat "$T/err")
name2="route into the sandbox netns from outside: still dropped"
if [ -n "$why2" ]; then not_ok "$name2" "$why2 (runbox exit $RC; $(first_line "$ERR"))"
elif [ -z "$ctrl2" ]; then skip "$name2" "the control failed"
else
	got=$(jv stdout)
	if [ "$got" != "tcp=110 udp=$EPERM" ]; then not_ok "$name2" "step printed '$(first_line "$got")', want tcp=110 udp=$EPERM (exit $RC)"
	elif grep -q 10.212.0.2 "$T/host.log"; then not_ok "$name2" "the test host saw: $(tr '\n' ',' <"$T/host.log")"
	else ok "$name2"; fi
	ge "$name2: ipv4_tcp counted" egress.by_protocol.ipv4_tcp 1
	ge "$name2: ipv4_udp counted" egress.by_protocol.ipv4_udp 1
	if [ "$c_in" = 110 ]; then ok "route into the sandbox netns: the host cannot get in"
	else not_ok "route into the sandbox netns: the host cannot get in" "host connect exit $c_in, want 110 (timeout)"; fi
fi

# --- 3. a server and a client inside one sandbox talk over loopback; nothing is counted ---
sb --json -- /bin/sh -c 'probe listen-connect || exit 10
mkdir -p /tmp/www && echo hello-lo >/tmp/www/index.html || exit 11
busybox httpd -p 127.0.0.1:8000 -h /tmp/www || exit 12
busybox httpd -p "[::1]:8001" -h /tmp/www || exit 13
i=0; until wget -qO- http://127.0.0.1:8000/index.html; do i=$((i+1)); [ $i -gt 50 ] && exit 14; sleep 0.1; done
i=0; until wget -qO- "http://[::1]:8001/index.html"; do i=$((i+1)); [ $i -gt 50 ] && exit 15; sleep 0.1; done'
if [ "$RC" = 0 ] && [ "$(jv stdout)" = "hello-lo
hello-lo" ]; then ok "loopback server and client in one sandbox (probe, httpd+wget, IPv4 and IPv6)"
else not_ok "loopback server and client in one sandbox (probe, httpd+wget, IPv4 and IPv6)" "exit $RC: $(first_line "$(jv stderr)")"; fi
expect_json "loopback traffic is not counted (blocked_packets 0)" egress.blocked_packets 0

# --- 4. raw and packet sockets fail inside; outside as root they work ---
# The default policy keeps CAP_NET_RAW; the netns's owner is not the sandbox's user
# namespace, so raw sockets are still refused (packet sockets also by seccomp).
sb -- /bin/sh -c 'grep ^CapEff /proc/self/status'
eff=$(awk '{print $2}' <<<"$OUT")
if [ -n "$eff" ] && (((0x$eff >> 13) & 1)); then note "the step holds CAP_NET_RAW ($eff); raw sockets must still fail"; fi
pair "raw socket (AF_INET, ICMP) fails" "$EPERM" -- socket raw
pair "raw socket (AF_INET6, ICMPv6) fails" "$EPERM" -- socket 10 3 58
pair "packet socket fails" "$EPERM" -- socket packet

# --- 5. the endpoint ---
sb --json -- /bin/sh -c 'wget -qO- "$RUNBOX_API_URL/v1/whoami" --header "Authorization: Bearer $RUNBOX_TOKEN" || exit 20
echo; echo "$RUNBOX_TOKEN"; wget -qO- "$RUNBOX_API_URL/v1/health"'
cp "$T/out" "$T/whoami.json"
run_id=$(jv run_id)
who=$(jv stdout | head -n 1)
tok1=$(jv stdout | sed -n 2p)
health=$(jv stdout | sed -n 3p)
printf '%s' "$who" >"$T/who.json"
if [ "$RC" != 0 ]; then not_ok "whoami answers with the run's scope" "exit $RC: $(first_line "$(jv stderr)")"
elif [ -z "$run_id" ]; then not_ok "whoami answers with the run's scope" "no run_id in the result"
elif [ "$(json "$T/who.json" run)" != "$run_id" ]; then not_ok "whoami answers with the run's scope" "whoami says '$who', run_id $run_id"
elif ! json "$T/who.json" tenant >/dev/null || ! json "$T/who.json" agent >/dev/null ||
	! [ "$(json "$T/who.json" expires)" -gt "$(date +%s)" ] 2>/dev/null; then
	not_ok "whoami answers with the run's scope" "tenant/agent/expires missing or expired: $who"
else ok "whoami answers with the run's scope (run $run_id)"; fi
if [ "$(tr -d ' ' <<<"$health")" = '{"ok":true}' ]; then ok "health answers"; else not_ok "health answers" "got '$health'"; fi
expect_json "gateway started in gateway mode" gateway.started true
expect_json "good requests are not unauthorized" gateway.unauthorized 0
ge "gateway counts requests" gateway.requests 2

# Wrong, missing and another run's token: 401 each, counted. Control: the right token in the
# same step works.
sb --json -- /bin/sh -c 'u=$RUNBOX_API_URL/v1/whoami
wget -qO- "$u" --header "Authorization: Bearer ${RUNBOX_TOKEN}x" 2>&1; echo "wrong=$?"
wget -qO- "$u" 2>&1; echo "missing=$?"
wget -qO- "$u" --header "Authorization: Bearer '"$tok1"'" 2>&1; echo "other=$?"
wget -qO /dev/null "$u" --header "Authorization: Bearer $RUNBOX_TOKEN"; echo "right=$?"'
o=$(jv stdout)
for k in wrong missing other; do
	n="$k token gets 401"
	[ "$k" = other ] && n="another run's token gets 401"
	line=$(grep -B1 "^$k=" <<<"$o" | head -n 1)
	if ! grep -q '^right=0$' <<<"$o"; then not_ok "$n" "control: the right token fails too: $(tr '\n' ' ' <<<"$o")"
	elif [ -z "$tok1" ] && [ "$k" = other ]; then skip "$n" "no token from the first run"
	elif grep -q "^$k=0$" <<<"$o"; then not_ok "$n" "accepted"
	elif ! grep -q 401 <<<"$line"; then not_ok "$n" "no 401: $line"
	else ok "$n"; fi
done
expect_json "gateway.unauthorized counts the 3 refusals" gateway.unauthorized 3

# --- 5b. a gateway that cannot serve is noticed ---
# runbox starts the runbox-gateway beside its own binary, so a copy of runbox in a directory of
# the test's (shipped data linked beside it) runs with whatever gateway the test puts there:
# none, one that exits at once, one that never says it is ready, or (the control) the real one.
# Every gateway call of the step must then be refused (ECONNREFUSED, not a hang until the
# step's deadline), and runbox must say so once on stderr and in the result.
gw_dir() { # NAME [SCRIPT]: $T/gw-NAME with runbox and its data; SCRIPT as its runbox-gateway
	local d=$T/gw-$1
	mkdir -p "$d"
	cp "$RUNBOX" "$d/runbox"
	ln -s "$ROOT/policy" "$d/policy"
	ln -s "$ROOT/build" "$d/build"
	if [ "${2:-}" = real ]; then ln -s "$ROOT/runbox-gateway" "$d/runbox-gateway"
	elif [ -n "${2:-}" ]; then printf '#!/bin/sh\n%s\n' "$2" >"$d/runbox-gateway" && chmod 0755 "$d/runbox-gateway"; fi
	chmod -R a+rX "$d"
	echo "$d"
}
GW_STEP='u=$RUNBOX_API_URL/v1/health
wget -qO- "$u" 2>&1; echo " first=$?"
wget -qO- "$u" 2>&1; echo " second=$?"
/bin/probe connect 127.0.0.1 "${RUNBOX_API_URL##*:}" 2>&1; echo " probe=$?"'
d=$(gw_dir real real)
RUNBOX=$d/runbox sb --json --timeout 20s -- /bin/sh -c "$GW_STEP"
ctl=$(jv stdout | tr '\n' ' ')
if ! grep -q '{"ok":true} first=0' <<<"$ctl" || ! grep -q 'probe=0' <<<"$ctl"; then
	not_ok "control: a copied runbox with the real gateway serves" "exit $RC: $ctl $(first_line "$ERR")"
else ok "control: a copied runbox with the real gateway serves ($(jv gateway))"; fi
gw_refused() { # NAME SCRIPT WHY: the gateway SCRIPT fails; the step's calls are refused
	local name="gateway $1: calls refused, warned once" d o n
	d=$(gw_dir "$1" "$2")
	RUNBOX=$d/runbox sb --json --timeout 20s -- /bin/sh -c "$GW_STEP"
	o=$(jv stdout | tr '\n' ' ')
	n=$(grep -c "gateway calls are refused" <<<"$ERR")
	if [ "$(jv status)" = timeout ] || [ "$RC" = 124 ]; then not_ok "$name" "the step hung until its deadline: $o"
	elif ! grep -q 'probe=111' <<<"$o"; then not_ok "$name" "connect after the failure: $o (exit $RC; $(first_line "$ERR"))"
	elif ! grep -q 'Connection refused *second=1' <<<"$o"; then not_ok "$name" "the second call was not refused: $o"
	elif grep -q 'first=0' <<<"$o"; then not_ok "$name" "the first call succeeded: $o"
	elif [ "$n" != 1 ]; then not_ok "$name" "$n warnings on stderr: $(first_line "$ERR")"
	elif ! jv gateway.error | grep -q "$3"; then not_ok "$name" "gateway.error is '$(jv gateway.error)', want /$3/"
	elif [ "$(jv gateway.started)" != false ]; then not_ok "$name" "gateway.started is $(jv gateway.started)"
	else ok "$name ($(jv gateway.error))"; fi
}
gw_refused missing "" "exec .*No such file"
gw_refused exits "exit 3" "exited with status 3 before it was ready"
gw_refused silent "exec sleep 60" "did not say it was ready"

# The real gateway killed during the step: the listeners close once runbox sees it die, so
# the step's next call is refused. Control: its first call, before the kill, succeeds. The
# step's output streams (no --json), so the kill waits for that first answer.
d=$(gw_dir dies real)
RUNBOX=$d/runbox rbx_cmd run --image minimal --timeout 30s -- /bin/sh -c 'u=$RUNBOX_API_URL/v1/health
wget -qO- "$u" 2>&1; echo " first=$?"; i=0
while [ $i -lt 100 ] && wget -qO /dev/null "$u" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
# The call the kill cut short fails before runbox has seen the death: connects may still
# queue for a moment, never for good.
j=0; while [ $j -lt 50 ]; do /bin/probe connect 127.0.0.1 "${RUNBOX_API_URL##*:}" 2>/dev/null; r=$?
[ $r = 111 ] && break; sleep 0.1; j=$((j + 1)); done; echo " probe=$r"'
"${RBX_CMD[@]}" </dev/null >"$T/out" 2>"$T/err" &
gw_runner=$!
gwp=""
gw_pid() { grep -q 'first=' "$T/out" && gwp=$(pgrep -P "$gw_runner" -x runbox-gateway | head -n 1) && [ -n "$gwp" ]; }
wait_for gw_pid && kill -KILL "$gwp"
wait "$gw_runner"
RC=$? ERR=$(cat "$T/err")
o=$(tr '\n' ' ' <"$T/out")
name="gateway killed during the step: later calls refused, warned"
if ! grep -q '{"ok":true} first=0' <<<"$o"; then not_ok "$name" "control: the first call failed: $o (exit $RC; $(first_line "$ERR"))"
elif [ -z "$gwp" ]; then not_ok "$name" "no runbox-gateway process seen (exit $RC; $(first_line "$ERR"))"
elif ! grep -q 'probe=111' <<<"$o"; then not_ok "$name" "connect after the kill: $o"
elif ! grep -q "gateway was killed by signal 9 during the run; the run's gateway calls are refused" <<<"$ERR"; then
	not_ok "$name" "no warning on stderr: $(first_line "$ERR")"
else ok "$name"; fi

# --net none: no variables, nothing listens. Control: gateway mode has both.
STEP5='env | grep ^RUNBOX_ | sort; echo listen:; awk '\''$4 == "0A" { print $2 }'\'' /proc/net/tcp /proc/net/tcp6'
sb --json --net gateway -- /bin/sh -c "$STEP5"
g_out=$(jv stdout)
sb --json --net none -- /bin/sh -c "$STEP5"
n_out=$(jv stdout)
g_port=$(sed -n 's|^RUNBOX_API_URL=http://127.0.0.1:||p' <<<"$g_out")
g_hex=$(printf '%04X' "${g_port:-0}" 2>/dev/null)
if [ -z "$g_port" ] || ! grep -q "^0100007F:$g_hex$" <<<"$g_out"; then
	skip "--net none: no RUNBOX_ variables and no listener" "control: gateway mode shows no URL or listener: $(tr '\n' ' ' <<<"$g_out")"
elif [ "$RC" != 0 ]; then not_ok "--net none: no RUNBOX_ variables and no listener" "exit $RC: $(first_line "$(jv stderr)")"
elif [ "$n_out" != "listen:" ]; then not_ok "--net none: no RUNBOX_ variables and no listener" "got: $(tr '\n' ' ' <<<"$n_out")"
else ok "--net none: no RUNBOX_ variables and no listener (gateway mode: port $g_port)"; fi
# The result may leave `gateway` out in mode none, or say it did not start.
if [ "$(jv gateway.started)" = true ]; then not_ok "--net none: the gateway is not started" "gateway.started is true"
else ok "--net none: the gateway is not started (gateway: $(jv gateway))"; fi
expect_json "--net none: the result says network none" sandbox.network none

# --- 6. the host environment stays out ---
CANARY=RBX_CANARY_$RANDOM$RANDOM
CVAL=secret-value-$RANDOM$RANDOM
STEP6='env; echo ---; for f in /proc/[0-9]*/environ; do cat "$f" 2>/dev/null | tr "\0" "\n"; done; echo ---; cat /proc/$$/environ >/dev/null 2>&1; echo "self_environ=$?"; cat /proc/1/environ >/dev/null 2>&1; echo "init_environ=$?"; cat /proc/1/mem >/dev/null 2>&1; echo "init_mem=$?"
env | grep ^RUNBOX_ | cut -d= -f1 | sort | tr "\n" " "'
rbx_cmd run --image minimal --json -- /bin/sh -c "$STEP6"
# The same command line with the canaries after `env -i` (and, for the control, a shell
# printing its environment in runbox's place).
cmd=() ctrl_cmd=() seen="" at_runbox=""
for a in "${RBX_CMD[@]}"; do
	if [ -z "$seen" ] && [ "$a" = -i ]; then
		seen=1
		cmd+=(-i "$CANARY=$CVAL" "RUNBOX_CANARY=$CVAL" "RUNBOX_TOKEN=host-$CVAL")
		ctrl_cmd+=(-i "$CANARY=$CVAL" "RUNBOX_CANARY=$CVAL" "RUNBOX_TOKEN=host-$CVAL")
		continue
	fi
	cmd+=("$a")
	[ "$a" = "$RUNBOX" ] && at_runbox=1 && ctrl_cmd+=(/bin/sh -c 'cat /proc/self/environ | tr "\0" "\n"')
	[ -n "$at_runbox" ] || ctrl_cmd+=("$a")
done
# Control: the process that becomes runbox has the canary (and RUNBOX_STATE_DIR).
ctrl_env=$("${ctrl_cmd[@]}" 2>&1)
"${cmd[@]}" </dev/null >"$T/out" 2>"$T/err"
RC=$?
ERR=$(cat "$T/err")
inside=$(jv stdout)
vars=$(tail -n 1 <<<"$inside")
if ! grep -q "^$CANARY=$CVAL$" <<<"$ctrl_env" || ! grep -q '^RUNBOX_STATE_DIR=' <<<"$ctrl_env"; then
	skip "host canary not in env or /proc/*/environ" "control: the host env lacks it: $(first_line "$ctrl_env")"
elif [ "$RC" != 0 ]; then not_ok "host canary not in env or /proc/*/environ" "exit $RC: $(first_line "$ERR")"
elif ! grep -q '^PATH=' <<<"$inside"; then not_ok "host canary not in env or /proc/*/environ" "the step printed no environment"
elif grep -q -e "$CVAL" -e "$CANARY" -e RUNBOX_STATE_DIR -e RUNBOX_CANARY <<<"$inside"; then
	not_ok "host canary not in env or /proc/*/environ" "found: $(grep -e "$CVAL" -e "$CANARY" -e RUNBOX_STATE_DIR -e RUNBOX_CANARY <<<"$inside" | head -n 2 | tr '\n' ' ')"
else ok "host canary not in env or /proc/*/environ"; fi
# The sandbox's init is a copy of the runner, so its memory holds the host environment:
# the step must not be able to read it.
if grep -q '^init_environ=0$' <<<"$inside" || grep -q '^init_mem=0$' <<<"$inside"; then
	not_ok "the step cannot read init's environ or memory" "$(grep '^init_' <<<"$inside" | tr '\n' ' ')"
elif ! grep -q '^init_environ=' <<<"$inside"; then not_ok "the step cannot read init's environ or memory" "no output (exit $RC)"
elif ! grep -q '^self_environ=0$' <<<"$inside"; then skip "the step cannot read init's environ or memory" "control: the step cannot read its own environ either"
else ok "the step cannot read init's environ or memory"; fi
if [ "$vars" = "RUNBOX_API_URL RUNBOX_TOKEN " ]; then ok "RUNBOX_API_URL and RUNBOX_TOKEN are the only RUNBOX_ variables"
else not_ok "RUNBOX_API_URL and RUNBOX_TOKEN are the only RUNBOX_ variables" "got: $vars"; fi

# --- 7. root inside, with CAP_NET_ADMIN from the policy, cannot touch the table ---
policy_variant default "$T/netadmin.json" netadmin 'p["identity"]["capabilities"].append("CAP_NET_ADMIN")'
# Control: host root rules nftables and links in a netns of its own.
ip netns add "$NN" 2>/dev/null
in_ns "$NN" sh -c 'ip link set lo up && nft add table inet rbxn && nft list ruleset | grep -q "table inet rbxn" &&
	nft flush ruleset && ip link add rbxn-v0 type veth peer name rbxn-v1 && ip route add 10.213.0.0/24 dev lo'
c7=$CTRL
c7_out=$(cat "$T/ctrl.out")
# Each line: NAME=EXIT OUTPUT (newlines folded).
run_rbx run --image host --policy "$T/netadmin.json" --json -- /bin/sh -c '
t() { k=$1; shift; o=$("$@" 2>&1); echo "$k=$? $(echo $o | tr "\n" " ")"; }
grep ^CapEff /proc/self/status
t list nft list ruleset
t flush nft flush ruleset
t delete nft delete table inet runbox
t link ip link add rbxn-v0 type veth peer name rbxn-v1
t route ip route del default
t udp bash -c "echo x >/dev/udp/10.211.0.1/'"$UPORT"'"'
o=$(jv stdout)
eff=$(sed -n 's/^CapEff:[[:space:]]*//p' <<<"$o")
n7="CAP_NET_ADMIN inside cannot touch the table"
if [ "$c7" != 0 ]; then skip "$n7" "control: host root in $NN fails: $(first_line "$c7_out")"
elif [ "$RC" = 125 ] || [ -z "$o" ]; then not_ok "$n7" "runbox exit $RC: $(first_line "$ERR")"
elif [ -z "$eff" ] || ! (((0x$eff >> 12) & 1)); then not_ok "$n7" "the step lacks CAP_NET_ADMIN (CapEff $eff): the test cannot tell"
else
	for k in list flush delete link route; do
		line=$(grep "^$k=" <<<"$o")
		if [ -z "$line" ]; then not_ok "$n7: $k" "no output: $(tr '\n' ' ' <<<"$o" | cut -c 1-300)"
		elif [[ $line == "$k=0 "* ]]; then not_ok "$n7: $k" "succeeded: $line"
		elif ! grep -qi 'operation not permitted' <<<"$line"; then not_ok "$n7: $k" "refused, but not with EPERM: $line"
		else ok "$n7: $k refused (EPERM)"; fi
	done
	if grep -q 'table inet runbox' <<<"$o"; then not_ok "$n7: list shows nothing" "the table was listed inside"
	else ok "$n7: list shows nothing"; fi
	# Which layer refused: nft cannot even open its netlink socket (seccomp allows only
	# NETLINK_ROUTE); ip reaches the kernel, which refuses (the netns is owned outside).
	note "inside: $(grep -e '^list=' -e '^link=' <<<"$o" | tr '\n' '|')"
	if grep -q "^udp=0 " <<<"$o" || ! grep -q "^udp=" <<<"$o"; then not_ok "$n7: the table still drops afterwards" "the UDP send succeeded or did not run: $(grep "^udp" <<<"$o")"
	else ge "$n7: the table still drops and counts afterwards" egress.by_protocol.ipv4_udp 1; fi
fi
