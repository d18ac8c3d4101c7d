#!/usr/bin/env bash
# --input SRC:DEST:cow and a manifest input's "cow": true: a writable overlay over a read-only
# input, on the run's size-capped scratch tmpfs, discarded at the run's end; the host's files
# never change. As root the input is idmapped to the sandbox's ids; where its owner has no id
# in the sandbox (rootless: host root's files), it is refused naming why, never read-only.
# modes: root user unshare subids
. "$(dirname "$0")/../lib.sh"
lib_init cowinput

SRC=$T/src
mkdir -p "$SRC/sub"
echo hi >"$SRC/sub/f"
printf 'test:\n\techo built > out.txt\n\tcat out.txt\nfail:\n\texit 3\n' >"$SRC/Makefile"
chmod -R a+rX "$SRC"
[ "$MODE" = root ] || chown -R $NOBODY:$NOBODY "$SRC"
tree_sum() { (cd "$SRC" && find . -printf '%p %m %U %s\n' | sort && find . -type f -exec sha256sum {} + | sort) | sha256sum; }
before=$(tree_sum)
POL=$T/pol.json
policy_variant default "$POL" cowtest "p.setdefault('limits', {})['rootfs_size'] = '48M'"

# The control for every mode: without :cow the same input is read-only (EROFS) and readable.
run_rbx run --policy "$POL" --input "$SRC:/workspace/in/src" -- /bin/sh -c 'cat /workspace/in/src/sub/f; echo x >/workspace/in/src/sub/f'
if [ "$RC" != 0 ] && [ "$OUT" = hi ] && grep -q "Read-only file system" <<<"$ERR"; then
	ok "control: the input without :cow is read-only (EROFS), its files readable"
else not_ok "control: the input without :cow is read-only" "exit $RC: $(first_line "$OUT") $(first_line "$ERR")"; fi

# Where the tree's owner has no id in the sandbox, a cow is refused naming why (125), never
# silently read-only: rootless (user, unshare, subids), host root's files. As root, runbox
# idmaps the cow input with the sandbox's ids, so host root's tree is the sandbox root's and
# the tests below run on it.
if [ "$MODE" != root ]; then
	mkdir -p "$T/rootown/d" && echo r >"$T/rootown/d/f" && chmod -R a+rX "$T/rootown"
	run_rbx run --policy "$POL" --input "$T/rootown:/workspace/src:cow" -- /bin/sh -c 'echo x >/workspace/src/d/f'
	if [ "$RC" = 125 ] && grep -q "(cow): its owner (uid 65534, gid 65534 as the sandbox sees them) has no id in the sandbox" <<<"$ERR" &&
		[ "$(cat "$T/rootown/d/f")" = r ]; then
		ok "cow over a tree whose owner the sandbox does not map is refused, naming why (125), nothing changed"
	else not_ok "cow refused where its owner is unmapped" "exit $RC: $(first_line "$ERR")"; fi
fi

# 1. The step writes into the cow input (a changed file, a new one, make's output) and reads back.
run_rbx run --policy "$POL" --input "$SRC:/workspace/src:cow" -w /workspace/src -- /bin/sh -c \
	'echo more >>sub/f && echo new >sub/new && make -s test && cat sub/f sub/new'
if [ "$RC" = 0 ] && [ "$OUT" = $'built\nhi\nmore\nnew' ]; then ok "cow: the step writes into the input and reads its writes back"
else not_ok "cow: write and read back" "exit $RC: $(tr '\n' '|' <<<"$OUT") $(first_line "$ERR")"; fi

# 2. The host's tree is unchanged (names, modes, owners, sizes, contents); the control: the
# checksum does see a change made on the host.
after=$(tree_sum)
touch "$SRC/probe" && changed=$(tree_sum) && rm -f "$SRC/probe"
if [ "$after" = "$before" ] && [ "$changed" != "$before" ]; then ok "cow: the host's tree is unchanged after the run"
else not_ok "cow: host tree unchanged" "$(cd "$SRC" && find . | sort | tr '\n' ' ')"; fi

# 3. A second run sees the original: nothing persisted.
run_rbx run --policy "$POL" --input "$SRC:/workspace/src:cow" -- /bin/sh -c 'cat /workspace/src/sub/f; ls /workspace/src'
if [ "$RC" = 0 ] && [ "$OUT" = $'hi\nMakefile\nsub' ]; then ok "cow: a second run sees the original (nothing persisted)"
else not_ok "cow: second run" "exit $RC: $(tr '\n' '|' <<<"$OUT")"; fi

# 4. The cap: writing more than the run's scratch tmpfs (limits.rootfs_size 48M) fails with
# ENOSPC inside; the control: 1 MiB in the same run is written.
run_rbx run --policy "$POL" --input "$SRC:/workspace/in/src:cow" -- /bin/sh -c \
	'head -c 1048576 /dev/zero >/workspace/in/src/small && echo small ok; head -c 100000000 /dev/zero >/workspace/in/src/big; echo big $?'
if grep -q '^small ok$' <<<"$OUT" && grep -q '^big [1-9]' <<<"$OUT" && grep -q "No space left on device" <<<"$ERR" &&
	[ ! -e "$SRC/big" ] && [ "$(tree_sum)" = "$before" ]; then
	ok "cow: writing beyond the run's tmpfs cap fails with ENOSPC inside, the host untouched (control: 1 MiB fits)"
else not_ok "cow: ENOSPC at the cap" "exit $RC: $(tr '\n' '|' <<<"$OUT") $(first_line "$ERR")"; fi

# 5. The README's CI use: the source tree as a cow input, make's exit code passed through.
rbx_cmd run --image host --policy "$POL" --input .:/workspace/src:cow -w /workspace/src -- make test
(cd "$SRC" && "${RBX_CMD[@]}" </dev/null >"$T/out" 2>"$T/err")
t_rc=$? t_out=$(cat "$T/out")
rbx_cmd run --image host --policy "$POL" --input .:/workspace/src:cow -w /workspace/src -- make fail
(cd "$SRC" && "${RBX_CMD[@]}" </dev/null >"$T/out" 2>"$T/err")
f_rc=$?
if [ "$t_rc" = 0 ] && grep -q '^built$' <<<"$t_out" && [ "$f_rc" = 2 ] && [ "$(tree_sum)" = "$before" ]; then
	ok "cow: runbox run --input .:/workspace/src:cow -w /workspace/src -- make test (exit passed through: 0, and 2 for a failing target)"
else not_ok "cow: the CI use" "make test: $t_rc '$(tr '\n' '|' <<<"$t_out")'; make fail: $f_rc (want 2); $(first_line "$(cat "$T/err")")"; fi

# 6. A manifest's input with "cow": true is writable, its host folder unchanged; the control:
# "cow" not a boolean is refused by the manifest's check.
"$PY" - "$T/m.json" "$SRC" <<'PYEOF'
import json, sys
step = {"name": "build", "script": "cd /workspace/src && echo w >sub/f && make -s test && cat sub/f"}
json.dump({"tenant": "acme", "agent": "cow", "image": "host",
           "inputs": [{"from": sys.argv[2], "to": "/workspace/src", "cow": True}], "steps": [step]},
          open(sys.argv[1], "w"))
json.dump({"tenant": "acme", "agent": "cow", "image": "host",
           "inputs": [{"from": sys.argv[2], "to": "/workspace/src", "cow": "yes"}], "steps": [step]},
          open(sys.argv[1].replace("m.json", "bad.json"), "w"))
PYEOF
chmod a+r "$T/m.json" "$T/bad.json"
run_rbx run "$T/m.json"
m_rc=$RC m_log=$OUT
run_rbx run "$T/bad.json"
if [ "$m_rc" = 0 ] && [ "$(tree_sum)" = "$before" ] && [ "$RC" = 125 ] && grep -q 'inputs\[0\].cow' <<<"$ERR"; then
	ok "manifest input \"cow\": true: writable, the host folder unchanged (control: a non-boolean cow is refused)"
else not_ok "manifest cow" "cow run: exit $m_rc $(first_line "$m_log"); bad: exit $RC $(first_line "$ERR")"; fi

# 7. Where a cow input may not go: on /workspace/out (harvest would take it) or /workspace/in
# itself; and a file cannot be one. The control: /workspace/in/NAME (the default place) works.
run_rbx run --input "$SRC:/workspace/out/src:cow" -- /bin/true
o_rc=$RC o_err=$ERR
run_rbx run --input "$SRC/Makefile:/workspace/in/mk:cow" -- /bin/true
f_rc=$RC f_err=$ERR
run_rbx run --input "$SRC:cow" -- /bin/sh -c 'echo z >/workspace/in/src/sub/f && cat /workspace/in/src/sub/f'
if [ "$o_rc" = 125 ] && grep -q "never on /workspace/in itself, /workspace/out" <<<"$o_err" &&
	[ "$f_rc" = 125 ] && grep -q "cow needs a folder" <<<"$f_err" && [ "$RC" = 0 ] && [ "$OUT" = z ]; then
	ok "cow: refused on /workspace/out and for a file (control: SRC:cow goes to /workspace/in/NAME, writable)"
else not_ok "cow: places" "out: $o_rc $(first_line "$o_err"); file: $f_rc $(first_line "$f_err"); default: $RC '$OUT' $(first_line "$ERR")"; fi
