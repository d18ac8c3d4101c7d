#!/usr/bin/env bash
# Everything runbox prints or records is scrubbed, each check against a control: passthrough
# output (the run token echoed, live); terminal control sequences shown, not obeyed, on a
# terminal and byte exact through a pipe; a secret straddling the max_stdout cap gone, even in
# part; a skill's parsed result; artifact and skipped paths in the result and the ledger.
# The sandbox prints the token's rot13 as well, so the test knows what must not appear.
# modes: root user subids
. "$(dirname "$0")/../lib.sh"
lib_init scrub

FIX=$ROOT/tests/integration/fixtures/scrub
AWS=AKIAIOSFODNN7EXAMPLQ

# token_from FILE: the token whose rot13 the sandbox printed as a line rot=... in FILE.
token_from() {
	sed -n 's/^rot=//p' "$1" | head -n 1 | tr 'A-Za-z' 'N-ZA-Mn-za-m'
}

# absent NAME FILE TOKEN [MIN]: ok when no MIN-byte (default 20) piece of TOKEN is in FILE.
absent() {
	local name=$1 file=$2 tok=$3 min=${4:-20} i
	if [ ${#tok} -lt "$min" ]; then
		not_ok "$name" "the sandbox printed no token (${#tok} bytes)"
		return
	fi
	for ((i = 0; i + min <= ${#tok}; i++)); do
		if grep -qF -- "${tok:i:min}" "$file"; then
			not_ok "$name" "bytes $i..$((i + min)) of it are in the output"
			return
		fi
	done
	ok "$name"
}

# ---------------------------------------------------------------------------------------
# 1. Passthrough: the run token echoed to stdout and stderr is redacted as it is printed.
sb -- sh -c 'echo "tok=$RUNBOX_TOKEN"; echo "err=$RUNBOX_TOKEN" >&2; echo "aws=AKIAIOSFODNN7EXAMPLQ"
	printf "rot=%s\n" "$(printf %s "$RUNBOX_TOKEN" | tr A-Za-z N-ZA-Mn-za-m)"'
TOKEN=$(token_from "$T/out")
if [ "$RC" = 0 ] && [ ${#TOKEN} -ge 20 ]; then ok "passthrough control: the step ran and printed the token's rot13 (${#TOKEN} bytes)"
else not_ok "passthrough control: the step printed the token's rot13" "exit $RC, token ${#TOKEN} bytes: $(first_line "$ERR")"; fi
cat "$T/out" "$T/err" >"$T/both"
absent "passthrough: the run token is in neither stdout nor stderr" "$T/both" "$TOKEN"
if grep -qx 'tok=\[REDACTED:exact:run-token:raw\]' "$T/out" && grep -qx 'err=\[REDACTED:exact:run-token:raw\]' "$T/err" &&
	grep -qx 'aws=\[REDACTED:aws-access-key-id\]' "$T/out" && ! grep -qF "$AWS" "$T/both"; then
	ok "passthrough: stdout and stderr show [REDACTED:...] in place of the token and the AWS key"
else not_ok "passthrough: the secrets show redacted" "stdout $(head -c 200 "$T/out" | tr '\n' '|')"; fi

# ---------------------------------------------------------------------------------------
# 2. Terminal control sequences: shown on a terminal, byte exact through a pipe.
ESCS='printf "a\033]0;pwned\007b\033[2Jc\tz\r\n"'
sb -- sh -c "$ESCS"
if [ "$RC" = 0 ] && [ "$(od -An -c "$T/out" | tr -s ' ')" = "$(printf 'a\033]0;pwned\007b\033[2Jc\tz\r\n' | od -An -c | tr -s ' ')" ]; then
	ok "terminal control: through a pipe the output is byte for byte what the step wrote"
else not_ok "terminal control: through a pipe the output is byte exact" "exit $RC: $(od -An -c "$T/out" | head -n 2 | tr '\n' ' ')"; fi
if ! command -v script >/dev/null; then
	skip "terminal: control bytes are shown, not obeyed" "script (util-linux) is missing"
else
	rbx_cmd run --image minimal -- sh -c "$ESCS"
	script -qec "$(printf '%q ' "${RBX_CMD[@]}") </dev/null" /dev/null >"$T/tty" 2>&1
	RC=$?
	if [ "$RC" = 0 ] && grep -qF 'a\x1b]0;pwned\x07b\x1b[2Jc' "$T/tty" && ! grep -q $'\033' "$T/tty" && ! grep -q $'\007' "$T/tty" &&
		grep -q $'c\tz' "$T/tty"; then
		ok "terminal: ESC and BEL reach the terminal as the text \\x1b and \\x07, tabs as they are"
	else not_ok "terminal: control bytes are shown, not obeyed" "exit $RC: $(od -An -c "$T/tty" | head -n 3 | tr '\n' ' ')"; fi
fi

# ---------------------------------------------------------------------------------------
# 3. A secret across the max_stdout cap: never cut before it is scrubbed.
policy_variant default "$T/cap.json" scrub-cap 'p.setdefault("output", {})["max_stdout"] = "1000"'
for case in token:900 token:979 aws:990; do
	what=${case%:*} at=${case#*:}
	# The secret starts $((1000 - at)) bytes before the cap; the other one follows it.
	if [ "$what" = token ]; then pair="\"\$RUNBOX_TOKEN\" $AWS"; else pair="$AWS \"\$RUNBOX_TOKEN\""; fi
	sb --policy "$T/cap.json" --json -- sh -c "head -c $((at - 1)) /dev/zero | tr '\\0' x; printf ' %s %s\\n' $pair; head -c 300 /dev/zero | tr '\\0' y
		printf 'rot=%s\\n' \"\$(printf %s \"\$RUNBOX_TOKEN\" | tr A-Za-z N-ZA-Mn-za-m)\" >&2"
	TOKEN=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1])).get("stderr",""))' "$T/out" 2>/dev/null | sed -n 's/^rot=//p' | tr 'A-Za-z' 'N-ZA-Mn-za-m')
	"$PY" -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r.get("stdout","")); print("TRUNC" if r.get("stdout_truncated") else "WHOLE")' "$T/out" >"$T/stdout" 2>/dev/null
	if grep -qx TRUNC "$T/stdout" && [ "$(head -n 1 "$T/stdout" | wc -c)" -le 1001 ] && grep -q "^x\{$((at - 1))\} " "$T/stdout"; then
		ok "cap, $what at $at: control: stdout is cut at max_stdout (1000) and flagged truncated"
	else not_ok "cap, $what at $at: stdout is cut at max_stdout and flagged" "exit $RC: $(head -c 120 "$T/out")"; fi
	if [ "$what" = aws ]; then
		absent "cap, $what at $at: no 8-byte piece of the AWS key straddling the cap shows" "$T/stdout" "$AWS" 8
	else
		absent "cap, $what at $at: no 20-byte piece of the token straddling the cap shows" "$T/stdout" "$TOKEN"
	fi
done

# ---------------------------------------------------------------------------------------
# 4. A skill's result: parsed from the scrubbed text, its decoded strings scrubbed again.
run_manifest "$FIX/skill.json"
r=$("$PY" - "$T/out" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
s = r["steps"][0]
res = s.get("result")
tok = "".join(chr((ord(c) - (65 if c < "a" else 97) + 13) % 26 + (65 if c < "a" else 97)) if c.isalpha() else c
              for c in s["stderr"].split("rot=", 1)[1].strip()) if "rot=" in s["stderr"] else ""
print("TOKEN\t%s" % tok)
if not isinstance(res, dict):
    print("not_ok\tskill result: present\tstatus %s, error %r" % (s["status"], s.get("error")))
    sys.exit(0)
print("%s\tskill result control: the plain value is there as it was\t%r" % ("ok" if res.get("plain") == "apples" else "not_ok", res))
good = (res.get("token") == "[REDACTED:exact:run-token:raw]" and res.get("aws") == "[REDACTED:aws-access-key-id]"
        and res.get("hidden") == "[REDACTED:aws-access-key-id]" and "[REDACTED:aws-access-key-id]" in res)
print("%s\tskill result: token, key, escaped key and a key named after a secret are redacted\t%r" % ("ok" if good else "not_ok", res))
EOF
)
report "$r"
[ -n "$r" ] || not_ok "skill result" "no result (exit $RC; $(first_line "$(cat "$T/err")"))"
absent "skill result: the run token is nowhere in the printed result" "$T/out" "${TOKEN:-}"
if grep -qF "AKIAIOSFODNN7EXAMPL" "$T/out"; then not_ok "skill result: no AWS key in the printed result" "$(grep -o 'AKIAIOSFODNN7EXAMPL.' "$T/out" | head -n 3 | tr '\n' ' ')"
else ok "skill result: no AWS key in the printed result"; fi

# ---------------------------------------------------------------------------------------
# 5. Paths: files named after secrets are recorded under scrubbed names, flagged. A state of
# its own: the commands above hold the key, and the ledger records commands as they are.
STATE=$T/state-names
mkdir -p "$STATE"
[ "$MODE" = root ] || chown $NOBODY:$NOBODY "$STATE"
run_manifest "$FIX/names.json"
TOKEN=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["steps"][0]["stderr"])' "$T/out" 2>/dev/null | sed -n 's/^rot=//p' | tr 'A-Za-z' 'N-ZA-Mn-za-m')
cp "$T/out" "$T/names.out"
r=$("$PY" - "$T/out" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
h = r["steps"][0].get("harvest", {})
arts = {a["path"]: a for a in h.get("artifacts", [])}
skips = {s["path"]: s for s in h.get("skipped", [])}
names = sorted(arts) + sorted(skips)
print("%s\tnames control: plain.txt is recorded as it is, unflagged\t%s" % (
    "ok" if "plain.txt" in arts and not arts["plain.txt"].get("path_redacted") else "not_ok", names))
want = {"[REDACTED:aws-access-key-id]", "d/tok-[REDACTED:exact:run-token:raw]"}
got = {p for p, a in list(arts.items()) + list(skips.items()) if a.get("path_redacted")}
print("%s\tnames: the files named after the key and the token are recorded scrubbed and flagged path_redacted\t%s" % (
    "ok" if want <= got else "not_ok", names))
link = [s for s in skips.values() if s["reason"].startswith("hardlink_of")]
ok = link and ("AKIA" not in json.dumps(link)) and (link[0].get("hardlink_of_redacted") or link[0].get("path_redacted"))
print("%s\tnames: the hardlink's record names the first path scrubbed\t%s" % ("ok" if ok else "not_ok", link))
EOF
)
report "$r" "(exit $RC; $(first_line "$(cat "$T/err")"))"
run_rbx ledger export --jsonl
if [ "$RC" = 0 ] && grep -q 'path_redacted' "$T/out" && grep -q '"plain.txt"' "$T/out"; then
	ok "names: ledger export has the artifacts (plain.txt as it is, the others flagged path_redacted)"
else not_ok "names: ledger export records the artifacts" "exit $RC: $(first_line "$ERR")"; fi
if grep -qF "$AWS" "$T/out"; then not_ok "names: the AWS key is not in ledger export" "$(grep -oF "$AWS" "$T/out" | head -n 1)"
else ok "names: the AWS key is not in ledger export"; fi
absent "names: the run token is not in ledger export" "$T/out" "$TOKEN"
absent "names: the run token is not in the printed result" "$T/names.out" "$TOKEN"
