#!/usr/bin/env bash
# The gateway's DNS stub: in gateway mode a lookup inside the sandbox is answered REFUSED at
# once by the stub on 127.0.0.1:53 (never a timeout), each distinct name is recorded (ledger,
# result.gateway.dns_refused, the text-mode hint); control: without gateway mode nothing
# answers there (the query is refused by the kernel, as before) and no result names it.
# /etc/resolv.conf inside names the stub, over an image's own (control: mode none keeps it).
# modes: root user
. "$(dirname "$0")/../lib.sh"
lib_init gwdns

policy_variant default "$T/gw.json" gwdns "p['network'] = {'mode': 'gateway'}"
policy_variant default "$T/none.json" gwdnsnone "p['network'] = {'mode': 'none'}"
printf '{}' >"$T/gwconf.json" && chmod a+r "$T/gwconf.json"

# A raw query from inside: prints the answer's id, flags, rcode and question, or the error.
cat >"$T/q.py" <<'EOF'
import socket, struct, sys
q = struct.pack(">HHHHHH", 0x4242, 0x0100, 1, 0, 0, 0) + b"\x07example\x07invalid\x00" + struct.pack(">HH", 1, 1)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(3)
try:
    s.connect(("127.0.0.1", 53))  # connected, as resolvers do: an ICMP refusal is reported
    s.send(q)
    a = s.recv(512)
    idn, flags, qd, an = struct.unpack(">HHHH", a[:8])
    print("id=%x qr=%d rcode=%d qd=%d an=%d question=%s" % (idn, flags >> 15, flags & 15, qd, an, a[12:] == q[12:]))
except Exception as e:
    print("error=%s" % type(e).__name__)
EOF
chmod a+r "$T/q.py"
STEP='t0=$(date +%s%N); getent hosts example.invalid; echo "getent=$?"; t1=$(date +%s%N)
python3 -c "import socket; socket.getaddrinfo(\"rbx-second.example\", 443)" 2>&1 | tail -n 1
for i in 1 2 3 4 5 6 7 8; do getent hosts example.invalid >/dev/null; done
echo "ms=$(( (t1 - t0) / 1000000 ))"; python3 /workspace/in/q.py'

run_rbx run --image host --policy "$T/gw.json" --gateway-config "$T/gwconf.json" --input "$T/q.py:/workspace/in/q.py" -- /bin/sh -c "$STEP"
ms=$(printf '%s\n' "$OUT" | sed -n 's/^ms=//p')
case $OUT in *"getent=2"*) ;; *) not_ok "getent fails in gateway mode" "$OUT" ;; esac
if [ -n "$ms" ] && [ "$ms" -lt 1500 ]; then ok "a lookup in gateway mode fails within a second or so (${ms} ms), not at the resolver's timeout"
else not_ok "a lookup in gateway mode fails fast" "ms=$ms; $OUT"; fi
case $OUT in *"id=4242 qr=1 rcode=5 qd=1 an=0 question=True"*) ok "the stub answers REFUSED with the query's id and question, no answer records" ;;
*) not_ok "the stub answers REFUSED" "$OUT" ;; esac
case $OUT in *"name resolution"*|*"Name or service"*|*gaierror*) ok "python's getaddrinfo fails with a resolver error" ;;
*) not_ok "python's getaddrinfo fails with a resolver error" "$OUT" ;; esac
grep -q "DNS refused: .*example.invalid" "$T/err" && grep -q "rbx-second.example" "$T/err" &&
	ok "the step's one-line hint on stderr names the refused lookups" || not_ok "the hint names the refused lookups" "$(cat "$T/err")"

run_rbx run --image host --json --policy "$T/gw.json" --gateway-config "$T/gwconf.json" --input "$T/q.py:/workspace/in/q.py" -- /bin/sh -c "$STEP"
check "result.gateway.dns_refused lists each name asked once" \
	'sorted(r["gateway"]["dns_refused"]) == ["example.invalid", "rbx-second.example"]' 'r.get("gateway")'
n=$("$PY" - "$STATE/ledger.db" <<'PYEOF'
import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
ev = [json.loads(d) for (d,) in db.execute("SELECT data FROM events WHERE type='gateway_call'")]
print(sum(1 for e in ev if e.get("door") == "dns" and e.get("connector") == "example.invalid" and e.get("refused") and e.get("rule") == "dns"))
PYEOF
)
# Two runs, A and AAAA each: at most 2 per run although the name was asked 10 times in each.
[ "${n:-0}" -ge 2 ] && [ "${n:-0}" -le 4 ] && ok "each refused name is a gateway_call ledger event (door dns), once per type per run" ||
	not_ok "refused names are in the ledger once each" "$n events"

# Control: mode none has no stub; the same query is refused by the kernel, the result says nothing.
run_rbx run --image host --json --policy "$T/none.json" --input "$T/q.py:/workspace/in/q.py" -- /bin/sh -c "$STEP"
check "control: without gateway mode nothing answers on 127.0.0.1:53 (ConnectionRefusedError) and no result names a lookup" \
	'"error=ConnectionRefusedError" in r["stdout"] and "gateway" not in r' 'r["stdout"]'
# Control: a gateway-mode step that looks nothing up has no dns_refused.
run_rbx run --image host --json --policy "$T/gw.json" --gateway-config "$T/gwconf.json" -- /bin/true
check "control: a gateway-mode step with no lookups lists none" '"dns_refused" not in r.get("gateway", {})' 'r.get("gateway")'

# /etc/resolv.conf inside names the stub in gateway mode, even when the image ships its own
# naming another server (a copy of the minimal image with one); busybox's nslookup, which asks
# the server resolv.conf names, then fails fast and the stub records the name. Control: the
# same image in mode none keeps its own file (nothing is looked up there).
IMG=$T/img
cp -a "$MINIMAL" "$IMG"
rm -f "$IMG/etc/resolv.conf"
printf 'nameserver 192.0.2.53\n' >"$IMG/etc/resolv.conf"
chmod -R a+rX "$IMG"
policy_variant default "$T/gwimg.json" gwdnsimg "p['network'] = {'mode': 'gateway'}; p['images'] = {'allow': ['$T']}"
policy_variant default "$T/noneimg.json" gwdnsnoneimg "p['network'] = {'mode': 'none'}; p['images'] = {'allow': ['$T']}"
run_rbx run --image "$IMG" --json --policy "$T/gwimg.json" --gateway-config "$T/gwconf.json" --timeout 30s -- /bin/sh -c \
	'cat /etc/resolv.conf; t0=$(date +%s); nslookup blocked.example >/dev/null 2>&1; echo "nslookup=$? s=$(( $(date +%s) - t0 ))"'
check "gateway mode: /etc/resolv.conf names the stub over the image's own (nameserver 127.0.0.1 only)" \
	'"nameserver 127.0.0.1" in r["stdout"] and "192.0.2.53" not in r["stdout"]' 'r["stdout"]'
check "gateway mode: a lookup through the image's resolver config fails fast and the stub records it" \
	'"nslookup=0" not in r["stdout"] and int(r["stdout"].split("s=")[-1].split()[0]) <= 3 and "blocked.example" in r.get("gateway", {}).get("dns_refused", [])' \
	'(r["stdout"], r.get("gateway"))'
run_rbx run --image "$IMG" --json --policy "$T/noneimg.json" -- cat /etc/resolv.conf
check "control: mode none keeps the image's resolv.conf" '"nameserver 192.0.2.53" in r["stdout"]' 'r["stdout"]'
