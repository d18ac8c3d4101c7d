#!/usr/bin/env bash
# `make install DESTDIR=$T/root PREFIX=/usr`, then the README's commands with the installed
# runbox, from / and with an environment that names nothing of the checkout: it must find its
# gateway, profiles and minimal image under its own prefix (common/paths.c, rb_parts_find).
# Controls: each part removed from the installed tree makes the command that needs it fail
# fast, naming the installed path, so the passing runs cannot have used the checkout.
# modes: root user
. "$(dirname "$0")/../lib.sh"
lib_init install
jv() { json "$T/out" "$1" 2>/dev/null; }

DEST=$T/root
if ! make -C "$ROOT" --no-print-directory install DESTDIR="$DEST" PREFIX=/usr >"$T/make.out" 2>&1; then
	not_ok "make install DESTDIR PREFIX=/usr" "$(tail -n 3 "$T/make.out" | tr '\n' ' ')"
	exit 0
fi
chmod -R a+rX "$DEST/usr/bin" "$DEST/usr/libexec" "$DEST/usr/share/runbox/policy" "$DEST/usr/share/man"
chmod a+rx "$DEST" "$DEST/usr" "$DEST/usr/share" "$DEST/usr/share/runbox" "$DEST/usr/share/runbox/images" \
	"$DEST/usr/share/runbox/images/minimal"
P=$DEST/usr
missing=""
for f in bin/runbox libexec/runbox/runbox-gateway share/runbox/policy/profiles/default.json \
	share/runbox/policy/profiles/strict.json share/runbox/policy/seccomp/default.json \
	share/runbox/images/minimal/.built share/runbox/images/minimal/rootfs/bin/busybox share/man/man1/runbox.1; do
	[ -e "$P/$f" ] || missing="$missing $f"
done
if [ -z "$missing" ]; then ok "make install puts runbox, its gateway, profiles, image and man page under DESTDIR/PREFIX"
else not_ok "make install puts every part under DESTDIR/PREFIX" "missing:$missing"; fi
if find "$DEST" -mindepth 1 -maxdepth 1 ! -name usr | grep -q .; then
	not_ok "make install writes only below PREFIX" "$(find "$DEST" -mindepth 1 -maxdepth 1 ! -name usr | tr '\n' ' ')"
else ok "make install writes only below PREFIX"; fi
if command -v man >/dev/null; then
	if w=$(MANWIDTH=80 man --warnings -l "$P/share/man/man1/runbox.1" 2>&1 >/dev/null) && [ -z "$w" ]; then
		ok "runbox(1) renders without warnings"
	else not_ok "runbox(1) renders without warnings" "$(first_line "$w")"; fi
fi

# From /, with the installed binary; rbx_cmd's environment is PATH, HOME and the state dirs.
cd / || exit 1
# shellcheck disable=SC2034 # read by rbx_cmd (tests/lib.sh)
RUNBOX=$P/bin/runbox

run_rbx check
if [ "$RC" = 0 ]; then ok "installed: runbox check"; else not_ok "installed: runbox check" "exit $RC: $(first_line "$ERR")"; fi

run_rbx policy show strict
if [ "$RC" = 0 ] && grep -q strict <<<"$OUT"; then ok "installed: runbox policy show strict (a shipped profile)"
else not_ok "installed: runbox policy show strict" "exit $RC: $(first_line "$ERR")"; fi

sb -- /bin/sh -c 'echo hi; id -u'
if [ "$RC" = 0 ] && [ "$(head -n 1 <<<"$OUT")" = hi ]; then ok "installed: runbox run --image minimal"
else not_ok "installed: runbox run --image minimal" "exit $RC: $(first_line "$OUT $ERR")"; fi

# shellcheck disable=SC2016 # expanded by the sandbox's sh
WHO='wget -qO- "$RUNBOX_API_URL/v1/whoami" --header "Authorization: Bearer $RUNBOX_TOKEN"'
sb --json --timeout 20s -- /bin/sh -c "$WHO"
run_id=$(jv run_id)
jv stdout >"$T/who.json"
if [ "$RC" = 0 ] && [ -n "$run_id" ] && [ "$(json "$T/who.json" run)" = "$run_id" ]; then
	ok "installed: a gateway call (whoami) answers with the run's id"
else not_ok "installed: a gateway call (whoami) answers" "exit $RC: $(jv stdout | head -c 200) $(first_line "$ERR")"; fi

run_rbx ledger verify
if [ "$RC" = 0 ]; then ok "installed: runbox ledger verify"; else not_ok "installed: runbox ledger verify" "exit $RC: $(first_line "$OUT $ERR")"; fi

# --- controls: a part taken away from the installed tree ---
# The gateway: its call is refused at once, and the result names the installed binary.
mv "$P/libexec/runbox/runbox-gateway" "$T/gw.away"
start=$(date +%s)
sb --json --timeout 20s -- /bin/sh -c "$WHO; echo \" rc=\$?\""
took=$(($(date +%s) - start))
mv "$T/gw.away" "$P/libexec/runbox/runbox-gateway"
gerr=$(jv gateway.error)
name="control: without the installed gateway the call fails fast, naming it"
if [ "$(jv status)" = timeout ] || [ "$RC" = 124 ]; then not_ok "$name" "the step hung until its deadline"
elif grep -q ' rc=0' <<<"$(jv stdout)"; then not_ok "$name" "the call succeeded: another gateway served it"
elif ! grep -qF "$P/libexec/runbox/runbox-gateway" <<<"$gerr"; then not_ok "$name" "gateway.error is '$gerr'"
elif [ "$took" -ge 15 ]; then not_ok "$name" "took ${took}s"
else ok "$name ($gerr)"; fi

# The minimal image: the run fails, naming the installed stamp, not the checkout's.
mv "$P/share/runbox/images/minimal/.built" "$T/built.away"
sb -- /bin/true
mv "$T/built.away" "$P/share/runbox/images/minimal/.built"
name="control: without the installed minimal image the run fails, naming it"
if [ "$RC" = 125 ] && grep -qF "$P/share/runbox/images/minimal/.built" <<<"$ERR"; then ok "$name"
else not_ok "$name" "exit $RC: $(first_line "$ERR")"; fi

# The profiles: nothing is found, and the error names the installed directory.
mv "$P/share/runbox/policy" "$T/policy.away"
run_rbx policy show strict
mv "$T/policy.away" "$P/share/runbox/policy"
name="control: without the installed profiles runbox fails, naming where it looked"
if [ "$RC" = 125 ] && grep -qF "$P/share/runbox/policy/profiles" <<<"$ERR"; then ok "$name"
else not_ok "$name" "exit $RC: $(first_line "$ERR")"; fi

# And the checkout's copy still runs from the build tree (the fallback layout).
RUNBOX=$ROOT/runbox sb -- /bin/true
if [ "$RC" = 0 ]; then ok "the checkout's runbox still finds its parts in the build tree"
else not_ok "the checkout's runbox still finds its parts in the build tree" "exit $RC: $(first_line "$ERR")"; fi
