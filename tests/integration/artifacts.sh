#!/usr/bin/env bash
# Artifacts a user gets back: `runbox run -- CMD` harvests /workspace/out as manifest steps do
# (scrubbed, recorded), --output copies them out (no link followed, no overwrite without
# --force), and `runbox artifact ls|get|inspect` reach them only from the tenant that stored them.
# modes: root user subids
. "$(dirname "$0")/../lib.sh"
lib_init artifacts

AWS=AKIAIOSFODNN7EXAMPLQ
runid() { sed -n 's/^runbox: run \([0-9a-f]*\)$/\1/p' <<<"$ERR" | head -n 1; }
events() { # events RUN TYPE: the run's events of TYPE, as a JSON array in $T/ev
	rbx ledger query --run "$1" --type "$2" --json >"$T/ev" 2>/dev/null
}
count_ev() { events "$1" "$2"; "$PY" -c 'import json,sys; print(len(json.load(open(sys.argv[1]))))' "$T/ev" 2>/dev/null; }

# 1. An ad-hoc run's /workspace/out is harvested and recorded; a run that writes nothing there
# has no artifact (the control: the events come from the harvest, not from the run).
sb -- sh -c "mkdir -p /workspace/out/sub; echo 'a,b' > /workspace/out/data.csv; echo hi > /workspace/out/sub/x.txt; echo 'key=$AWS' > /workspace/out/creds.txt"
ID=$(runid)
sb -- sh -c 'echo nothing here'
ID0=$(runid)
n=$(count_ev "$ID" artifact)
n0=$(count_ev "$ID0" artifact)
if [ -n "$ID" ] && [ "$n" = 3 ] && [ "$n0" = 0 ]; then
	ok "run -- CMD: /workspace/out harvested, 3 artifact events (control: a run that wrote nothing has 0)"
else not_ok "run -- CMD: /workspace/out harvested" "id '$ID' events $n, control '$ID0' $n0; $(first_line "$ERR")"; fi

# 2. The same scrub as a manifest step's: the key is redacted in the stored bytes; the control
# file is stored byte for byte.
run_rbx artifact get "$ID:creds.txt"
creds=$OUT
run_rbx artifact get "$ID:data.csv"
if [ "$creds" != "" ] && ! grep -q "$AWS" <<<"$creds" && grep -q REDACTED <<<"$creds" && [ "$OUT" = "a,b" ]; then
	ok "run -- CMD: artifacts scrubbed (control: a file without a secret comes back as written)"
else not_ok "run -- CMD: artifacts scrubbed" "creds '$(first_line "$creds")' data '$OUT'"; fi

# 3. artifact ls: one line per artifact, the full digest, the size and the redactions.
run_rbx artifact ls "$ID"
line=$(grep ' creds.txt$' <<<"$OUT")
dline=$(grep ' data.csv$' <<<"$OUT")
if [ "$RC" = 0 ] && [ "$(grep -c 'sha256:[0-9a-f]\{64\} ' <<<"$OUT")" = 3 ] &&
	[[ $line =~ ^\ +[0-9]+\ +1\ +sha256: ]] && [[ $dline =~ ^\ +4\ +0\ +sha256: ]]; then
	ok "artifact ls: 3 lines with full digests; the scrubbed file shows 1 redaction, the other 0"
else not_ok "artifact ls: 3 lines with full digests" "exit $RC: $(printf '%s' "$OUT$ERR" | tr '\n' '|')"; fi

# 4. De-duplicated across steps: a manifest whose two steps both see out/a.txt lists it once,
# though the ledger recorded it after each step (the control).
"$PY" - "$T/m.json" <<'EOF'
import json, sys
json.dump({"tenant": "acme", "agent": "art", "image": "minimal", "policy": "strict",
           "steps": [{"name": "one", "script": "echo 1 > /workspace/out/a.txt"},
                     {"name": "two", "script": "echo 2 > /workspace/out/b.txt"}]}, open(sys.argv[1], "w"))
EOF
chmod a+r "$T/m.json"
run_rbx run "$T/m.json"
MID=$(runid)
events "$MID" artifact
recorded=$("$PY" -c 'import json,sys; print(sum(1 for e in json.load(open(sys.argv[1])) if e["data"]["path"] == "a.txt"))' "$T/ev" 2>/dev/null)
run_rbx artifact ls "$MID" --tenant acme
if [ "$RC" = 0 ] && [ "$(grep -c ' a.txt$' <<<"$OUT")" = 1 ] && [ "$(grep -c ' b.txt$' <<<"$OUT")" = 1 ] && [ "$recorded" = 2 ]; then
	ok "artifact ls: a file every step saw is listed once (control: the ledger has it twice)"
else not_ok "artifact ls: de-duplicated across steps" "recorded $recorded; exit $RC: $(printf '%s' "$OUT$ERR" | tr '\n' '|')"; fi

# 5. get by digest, to stdout and to a file; -o never overwrites without --force.
D=$(awk '$NF == "data.csv" {print $3}' <<<"$(rbx artifact ls "$ID")")
run_rbx artifact get "$D"
got=$OUT
rm -f "$T/scratch/g.csv"
[ "$MODE" = root ] || chown $NOBODY:$NOBODY "$T/scratch"
run_rbx artifact get "$D" -o "$T/scratch/g.csv"
r1=$RC
echo keep >"$T/scratch/keep"
[ "$MODE" = root ] || chown $NOBODY:$NOBODY "$T/scratch/keep"
run_rbx artifact get "$D" -o "$T/scratch/keep"
r2=$RC
k2=$(cat "$T/scratch/keep")
run_rbx artifact get "$D" -o "$T/scratch/keep" --force
r3=$RC
if [ "$got" = "a,b" ] && [ "$r1" = 0 ] && [ "$(cat "$T/scratch/g.csv")" = "a,b" ] && [ "$r2" = 125 ] && [ "$k2" = keep ] &&
	[ "$r3" = 0 ] && [ "$(cat "$T/scratch/keep")" = "a,b" ]; then
	ok "artifact get DIGEST: stdout and -o FILE; an existing FILE kept (125) unless --force"
else not_ok "artifact get DIGEST" "stdout '$got', -o $r1, existing $r2 ('$k2'), --force $r3"; fi

# 6. The tenant rule: another tenant's caller reaches nothing of it, and hears what a digest
# nobody stored gets; the run's own tenant (the control) reaches it.
run_rbx artifact get "$D" --tenant other
e_other=$ERR r_other=$RC
run_rbx artifact get "sha256:$(printf '%064d' 0)" --tenant other
e_none=$ERR
run_rbx artifact ls "$ID" --tenant other
r_ls=$RC
run_rbx artifact get "$ID:data.csv" --tenant other
r_rp=$RC
run_rbx artifact inspect "$D" --tenant other
r_in=$RC
run_rbx artifact get "$D" --tenant local
if [ "$r_other" = 125 ] && [ "$r_ls" = 125 ] && [ "$r_rp" = 125 ] && [ "$r_in" = 125 ] && [ "$RC" = 0 ] && [ "$OUT" = "a,b" ] &&
	[ "${e_other/$D/X}" = "${e_none/sha256:$(printf '%064d' 0)/X}" ]; then
	ok "artifact ls|get|inspect: another tenant is refused, with the message of a digest nobody stored (control: its own tenant gets it)"
else not_ok "artifact: the tenant rule" "get $r_other ls $r_ls run:path $r_rp inspect $r_in own $RC; '$(first_line "$e_other")' vs '$(first_line "$e_none")'"; fi

# 7. inspect: which runs stored it (two runs writing the same bytes), with tenant and agent.
sb --agent second -- sh -c "echo 'a,b' > /workspace/out/again.csv"
ID2=$(runid)
run_rbx artifact inspect "$D"
if [ "$RC" = 0 ] && grep -q "$ID .* data.csv$" <<<"$OUT" && grep -q "local  *second  *$ID2 .* again.csv$" <<<"$OUT" &&
	! grep -q "$ID0" <<<"$OUT"; then
	ok "artifact inspect: both runs that stored the digest, with tenant and agent (control: a run that did not is absent)"
else not_ok "artifact inspect" "exit $RC: $(printf '%s' "$OUT$ERR" | tr '\n' '|')"; fi

# 8. --output DIR: the run's artifacts under their stored names.
O=$T/scratch/out
sb --output "$O" -- sh -c 'mkdir -p /workspace/out/d; echo x > /workspace/out/d/f.txt; echo y > /workspace/out/top.txt'
if [ "$RC" = 0 ] && [ "$(cat "$O/d/f.txt" 2>/dev/null)" = x ] && [ "$(cat "$O/top.txt" 2>/dev/null)" = y ]; then
	ok "run --output DIR: the artifacts copied out under their names"
else not_ok "run --output DIR" "exit $RC: $(first_line "$ERR"); $(find "$O" 2>&1 | tr '\n' ' ')"; fi

# 9. ... refusing to overwrite without --force (exit 125, the file as it was); with --force
# replaced.
sb --output "$O" -- sh -c 'echo z > /workspace/out/top.txt'
r1=$RC c1=$(cat "$O/top.txt")
sb --output "$O" --force -- sh -c 'echo z > /workspace/out/top.txt'
if [ "$r1" = 125 ] && [ "$c1" = y ] && grep -q "exists" <<<"$(rbx run --image minimal --output "$O" -- sh -c 'echo w > /workspace/out/top.txt' 2>&1)" &&
	[ "$RC" = 0 ] && [ "$(cat "$O/top.txt")" = z ]; then
	ok "run --output: an existing file is kept (125) unless --force, which replaces it"
else not_ok "run --output: overwrite" "without --force $r1 ('$c1'), with $RC ('$(cat "$O/top.txt")')"; fi

# 10. ... never following a link in DIR: a link at a file's name is replaced (with --force), its
# target untouched; a link where a folder goes is refused, nothing written through it.
O2=$T/scratch/out2
mkdir -p "$O2" "$T/scratch/elsewhere"
echo target >"$T/scratch/victim"
ln -s "$T/scratch/victim" "$O2/top.txt"
ln -s "$T/scratch/elsewhere" "$O2/d"
[ "$MODE" = root ] || chown -R -h $NOBODY:$NOBODY "$T/scratch"
sb --output "$O2" --force -- sh -c 'mkdir -p /workspace/out/d; echo x > /workspace/out/d/f.txt; echo y > /workspace/out/top.txt'
if [ "$RC" = 125 ] && [ "$(cat "$T/scratch/victim")" = target ] && [ ! -L "$O2/top.txt" ] && [ "$(cat "$O2/top.txt")" = y ] &&
	[ -z "$(ls -A "$T/scratch/elsewhere")" ] && grep -q "d/f.txt" <<<"$ERR"; then
	ok "run --output: links in DIR are never followed (a file's link replaced, a folder's refused; the control file written)"
else not_ok "run --output: links" "exit $RC; victim '$(cat "$T/scratch/victim")'; elsewhere '$(ls -A "$T/scratch/elsewhere")'; $(first_line "$ERR")"; fi
