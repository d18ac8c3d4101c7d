#!/usr/bin/env bash
# `runbox image build RECIPE`: mmdebstrap from a Debian repository the test makes on its own disk
# (one package, served by copy://; no network), the tree made neutral (no device nodes, no host
# resolv.conf or hostname, setuid bits dropped), the recipe's files written inside it,
# imported into the store, reproducible by digest; a failed or cancelled build leaves nothing;
# a recipe is validated strictly; its commands run inside a runbox sandbox on the tree. mmdebstrap's root mode needs root.
# modes: root
. "$(dirname "$0")/../lib.sh"
lib_init image_build

command -v mmdebstrap >/dev/null || { not_ok "mmdebstrap is installed (scripts/install-deps.sh test)"; exit 0; }
command -v dpkg-scanpackages >/dev/null || { not_ok "dpkg-scanpackages is installed (dpkg-dev)"; exit 0; }

# The repository: a package holding the probe, a file, a setuid copy of the probe, and a static
# busybox as /bin/sh (what a recipe's commands run with).
PKG=$T/pkg REPO=$T/repo
mkdir -p "$PKG/DEBIAN" "$PKG/usr/bin" "$PKG/etc" "$PKG/bin" "$REPO"
cp "$PROBE" "$PKG/usr/bin/probe" && cp "$PROBE" "$PKG/usr/bin/probe-suid" && chmod 4755 "$PKG/usr/bin/probe-suid"
cp "$(command -v busybox)" "$PKG/bin/busybox" && ln -s busybox "$PKG/bin/sh"
echo "hello from a package" >"$PKG/etc/hello"
cat >"$PKG/DEBIAN/control" <<EOF
Package: rbx-test
Version: 1.0
Architecture: $(dpkg --print-architecture)
Maintainer: runbox tests <tests@runbox.invalid>
Description: a tiny package for runbox's recipe build test
EOF
dpkg-deb --root-owner-group --build "$PKG" "$REPO/rbx-test_1.0.deb" >/dev/null
(cd "$REPO" && dpkg-scanpackages --multiversion . /dev/null >Packages 2>/dev/null)
MIRROR="deb [trusted=yes] copy://$REPO ./"

recipe() { # FILE EXTRA-JSON-MEMBERS: a recipe for rbx-test
	cat >"$1" <<EOF
{"description": "runbox test", "suite": "bookworm", "variant": "extract", "packages": ["rbx-test"],
 "mirrors": ["$MIRROR"], "source_date_epoch": 1700000000${2:+, $2}}
EOF
}
FILES='"files": [{"path": "/etc/runbox/recipe.txt", "content": "made by a recipe\n", "mode": "0640"}]'
recipe "$T/r1.json" "$FILES"
store_junk() { find "$STATE/images/store" -maxdepth 1 -name '.*' 2>/dev/null | wc -l; }

run_rbx image build "$T/r1.json" --name built
d1=$OUT
tree=$STATE/images/store/${d1#sha256:}/rootfs
if [ "$RC" = 0 ] && [[ $d1 == sha256:* ]] && [ -f "$tree/usr/bin/probe" ]; then ok "build: the recipe's package is in the stored tree"
else not_ok "build: the recipe's package is in the stored tree" "exit $RC: $(first_line "$ERR")"; fi
if grep -q "^I: " <<<"$ERR"; then ok "build: mmdebstrap's progress is shown on stderr"
else not_ok "build: mmdebstrap's progress is shown on stderr" "$(first_line "$ERR")"; fi

# A run on it by name sees the package's file and the recipe's file with its mode.
sb_img() { run_rbx run --image built -- "$@"; }
sb_img /usr/bin/probe read /etc/hello
if [ "$RC" = 0 ] && [ "$OUT" = "hello from a package" ]; then ok "build: a run on the built image reads the package's file"
else not_ok "build: a run on the built image reads the package's file" "exit $RC: $OUT $(first_line "$ERR")"; fi
sb_img /usr/bin/probe read /etc/runbox/recipe.txt
if [ "$RC" = 0 ] && [ "$OUT" = "made by a recipe" ] && [ "$(stat -c %a "$tree/etc/runbox/recipe.txt")" = 640 ]; then
	ok "build: the recipe's file is written inside the tree, with its mode"
else not_ok "build: the recipe's file is written inside the tree, with its mode" "exit $RC: $OUT, mode $(stat -c %a "$tree/etc/runbox/recipe.txt" 2>&1)"; fi

# Neutral: mmdebstrap makes device nodes and copies the host's resolv.conf and hostname into
# its tree (the control: a plain mmdebstrap of the same recipe does); the stored tree has none.
raw=$T/raw
SOURCE_DATE_EPOCH=1700000000 mmdebstrap --variant=extract --include=rbx-test bookworm "$raw" "$MIRROR" >/dev/null 2>&1
raw_dev=$(find "$raw/dev" -type c 2>/dev/null | wc -l)
img_dev=$(find "$tree" -type c -o -type b 2>/dev/null | wc -l)
if [ "$raw_dev" -gt 0 ] && [ "$img_dev" = 0 ]; then ok "build: no device node in the image ($raw_dev in mmdebstrap's own tree)"
else not_ok "build: no device node in the image ($raw_dev in mmdebstrap's own tree)" "$img_dev in the image"; fi
if [ -e "$raw/etc/hostname" ] && [ ! -e "$tree/etc/hostname" ] && [ ! -e "$tree/etc/resolv.conf" ]; then
	ok "build: the host's hostname and resolv.conf are not in the image"
else not_ok "build: the host's hostname and resolv.conf are not in the image" "raw: $(ls "$raw/etc" | tr '\n' ' ')"; fi
if [ -u "$raw/usr/bin/probe-suid" ] && [ -f "$tree/usr/bin/probe-suid" ] && [ ! -u "$tree/usr/bin/probe-suid" ]; then
	ok "build: setuid bits are dropped as on import"
else not_ok "build: setuid bits are dropped as on import" "$(stat -c %A "$tree/usr/bin/probe-suid" 2>&1)"; fi
rm -rf "$raw"
# Keeping them is the operator's policy's to allow (images.keep_setuid): asked for beyond it the
# build is refused before mmdebstrap runs; where it allows, the bit is kept (control).
run_rbx image build "$T/r1.json" --keep-setuid
if [ "$RC" = 125 ] && grep -q "images.keep_setuid" <<<"$ERR" && ! grep -q "^I: " <<<"$ERR"; then
	ok "build: --keep-setuid is refused where the policy does not allow it"
else not_ok "build: --keep-setuid is refused where the policy does not allow it" "exit $RC: $(first_line "$ERR")"; fi
policy_variant default "$T/priv.json" build-priv "p['images'] = {'keep_setuid': True}"
run_rbx image build "$T/r1.json" --keep-setuid --policy "$T/priv.json"
if [ "$RC" = 0 ] && [ -u "$STATE/images/store/${OUT#sha256:}/rootfs/usr/bin/probe-suid" ]; then
	ok "build: --keep-setuid keeps them where the policy allows (control)"
else not_ok "build: --keep-setuid keeps them where the policy allows (control)" "exit $RC: $(first_line "$ERR")"; fi

# Reproducible: the same recipe again gives the same digest; a changed file another (control).
run_rbx image build "$T/r1.json" --name built-again
d2=$OUT
recipe "$T/r2.json" "${FILES/made by a recipe/made by another recipe}"
run_rbx image build "$T/r2.json"
d3=$OUT
if [ -n "$d1" ] && [ "$d1" = "$d2" ] && [ -n "$d3" ] && [ "$d3" != "$d1" ]; then ok "build: the same recipe gives the same digest; a changed file another"
else not_ok "build: the same recipe gives the same digest; a changed file another" "$d1 / $d2 / $d3"; fi
run_rbx image inspect built
if grep -q "recipe $T/r1.json sha256:" <<<"$OUT"; then ok "build: inspect names the recipe and its hash as the source"
else not_ok "build: inspect names the recipe and its hash as the source" "$(first_line "$OUT")"; fi

# A failing build (a package the repository lacks) fails with mmdebstrap's exit and leaves
# neither a name nor a temporary tree.
recipe "$T/bad.json" '"files": []'
sed -i 's/"rbx-test"/"rbx-missing"/' "$T/bad.json"
run_rbx image build "$T/bad.json" --name never
run_rbx image inspect never
miss=$RC
if [ "$miss" = 125 ] && [ "$(store_junk)" = 0 ]; then ok "build: a failed build leaves no name and no temporary tree"
else not_ok "build: a failed build leaves no name and no temporary tree" "inspect exit $miss, $(store_junk) temporary entries"; fi

# Cancelled: a mirror on loopback that accepts and never answers holds apt; SIGINT to runbox
# stops mmdebstrap and its children and removes the tree (exit 130).
port_file=$T/port
"$PY" - "$port_file" <<'EOF' &
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(16)
open(sys.argv[1], "w").write(str(s.getsockname()[1]))
held = []
while True:
    c, _ = s.accept(); held.append(c)
EOF
srv=$!
wait_for test -s "$port_file"
recipe "$T/slow.json" '"files": []'
sed -i "s#copy://$REPO ./#http://127.0.0.1:$(cat "$port_file")/ ./#" "$T/slow.json"
rbx_cmd image build "$T/slow.json" --name slow
"${RBX_CMD[@]}" >/dev/null 2>"$T/slow.err" & # runbox itself (env execs it), not a subshell
bpid=$!
sleep 3
started=$(store_junk)
kill -INT $bpid
wait_for eval '! kill -0 $bpid 2>/dev/null' || kill -KILL $bpid # a runbox deaf to SIGINT fails below
wait $bpid
brc=$?
sleep 0.5
kill $srv 2>/dev/null
left_procs=$(pgrep -f "mmdebstrap.*$T/" | wc -l)
if [ "$started" -ge 1 ] && [ "$brc" = 130 ] && [ "$(store_junk)" = 0 ] && [ "$left_procs" = 0 ]; then
	ok "build: SIGINT stops mmdebstrap and leaves nothing (exit 130)"
else not_ok "build: SIGINT stops mmdebstrap and leaves nothing (exit 130)" "exit $brc, $started temporary while running, $(store_junk) after, $left_procs mmdebstrap left; $(head -c 200 "$T/slow.err")"; fi

# A recipe's commands run inside a runbox sandbox whose root is the new tree, writable: what
# they write is in the image; they see the sandbox, not the host (pid 1 is runbox's init, the
# network namespace has only lo, the ids are a user namespace's, a host file outside the tree
# is not there). The host's view of the same things is the control.
echo "host secret" >"$T/host-secret"
CMDS='"commands": ["echo made inside >/etc/from-command",
 "/bin/busybox tr \\000 \\n </proc/1/cmdline | /bin/busybox head -n 1 >/etc/pid1",
 "/bin/busybox cut -d: -f1 /proc/net/dev | /bin/busybox tail -n +3 | /bin/busybox tr -d \" \" >/etc/netdevs",
 "/bin/busybox cat /proc/self/uid_map | /bin/busybox tr -s \" \" >/etc/uidmap",
 "if /bin/busybox cat '"$T"'/host-secret >/dev/null 2>&1; then echo visible; else echo hidden; fi >/etc/hostfile"]'
recipe "$T/cmd.json" "$CMDS"
run_rbx image build "$T/cmd.json" --name with-commands
dc=$OUT
ctree=$STATE/images/store/${dc#sha256:}/rootfs
if [ "$RC" = 0 ] && [ "$(cat "$ctree/etc/from-command" 2>/dev/null)" = "made inside" ]; then
	ok "build commands: a file a command writes is in the image"
else not_ok "build commands: a file a command writes is in the image" "exit $RC: $(first_line "$ERR")"; fi
host_pid1=$(tr '\0' '\n' </proc/1/cmdline | head -n 1)
if [ "$(tr -d '\0' <"$ctree/etc/pid1" 2>/dev/null)" = runbox-init ] && [ "$host_pid1" != runbox-init ]; then
	ok "build commands: pid 1 is runbox's init (the host's is $host_pid1)"
else not_ok "build commands: pid 1 is runbox's init (the host's is $host_pid1)" "$(cat "$ctree/etc/pid1" 2>&1)"; fi
host_devs=$(cut -d: -f1 /proc/net/dev | tail -n +3 | tr -d ' ' | sort | tr '\n' ' ')
if [ "$(cat "$ctree/etc/netdevs" 2>/dev/null)" = lo ] && [ "$host_devs" != "lo " ]; then
	ok "build commands: their network namespace has only lo (the host's: $host_devs)"
else not_ok "build commands: their network namespace has only lo (the host's: $host_devs)" "$(tr '\n' ' ' <"$ctree/etc/netdevs" 2>&1)"; fi
host_map=$(tr -s ' ' </proc/self/uid_map)
if [ -s "$ctree/etc/uidmap" ] && [ "$(cat "$ctree/etc/uidmap")" != "$host_map" ]; then
	ok "build commands: they run in a user namespace of their own ($(cat "$ctree/etc/uidmap"))"
else not_ok "build commands: they run in a user namespace of their own" "$(cat "$ctree/etc/uidmap" 2>&1) vs host $host_map"; fi
if [ "$(cat "$ctree/etc/hostfile" 2>/dev/null)" = hidden ] && [ "$(cat "$T/host-secret")" = "host secret" ]; then
	ok "build commands: a host file outside the tree is not reachable (the host reads it)"
else not_ok "build commands: a host file outside the tree is not reachable (the host reads it)" "$(cat "$ctree/etc/hostfile" 2>&1)"; fi
if [ ! -e "$ctree/workspace" ] && [ "$(find "$ctree/dev" -mindepth 1 ! -type d | wc -l)" = 0 ]; then
	ok "build commands: the sandbox's mount points (/workspace, /dev entries) are not left in the image"
else not_ok "build commands: the sandbox's mount points (/workspace, /dev entries) are not left in the image" "$(ls -a "$ctree" "$ctree/dev" | tr '\n' ' ')"; fi
# Each command is a run of its own in the ledger, as every run is.
run_rbx ledger query --agent image-build --type run_start --json
if [ "$RC" = 0 ] && [ "$(grep -c '"run_start"' <<<"$OUT")" -ge 5 ]; then ok "build commands: each is a recorded run (agent image-build)"
else not_ok "build commands: each is a recorded run (agent image-build)" "exit $RC: $(first_line "$OUT$ERR")"; fi
# Reproducible with commands too (ones whose output is the same each time: the uid map above
# is not, a run's subordinate slice is its own); a changed command gives another digest (control).
REPRO='"commands": ["echo made inside >/etc/from-command", "mkdir -p /opt/made && echo $SOURCE_DATE_EPOCH >/opt/made/epoch"]'
recipe "$T/rep.json" "$REPRO"
run_rbx image build "$T/rep.json"
dc=$OUT
rtree=$STATE/images/store/${dc#sha256:}/rootfs
run_rbx image build "$T/rep.json"
dc2=$OUT
recipe "$T/rep2.json" "${REPRO/made inside/made elsewhere}"
run_rbx image build "$T/rep2.json"
dc3=$OUT
if [ "$(cat "$rtree/opt/made/epoch" 2>/dev/null)" = 1700000000 ]; then ok "build commands: they get the recipe's SOURCE_DATE_EPOCH"
else not_ok "build commands: they get the recipe's SOURCE_DATE_EPOCH" "$(cat "$rtree/opt/made/epoch" 2>&1)"; fi
if [[ $dc == sha256:* ]] && [ "$dc" = "$dc2" ] && [[ $dc3 == sha256:* ]] && [ "$dc3" != "$dc" ]; then
	ok "build commands: the same recipe gives the same digest; a changed command another"
else not_ok "build commands: the same recipe gives the same digest; a changed command another" "$dc / $dc2 / $dc3"; fi
# A failing command fails the build naming it, and leaves no name and no temporary tree; the
# command before it ran (its file was written) but nothing of it is stored.
recipe "$T/cmdfail.json" '"commands": ["echo first >/etc/first", "exit 3", "echo never >/etc/never"]'
before=$(ls "$STATE/images/store" | wc -l)
run_rbx image build "$T/cmdfail.json" --name never-cmd
fail_rc=$RC fail_err=$ERR
run_rbx image inspect never-cmd
if [ "$fail_rc" = 125 ] && grep -q 'commands\[1\] `exit 3` exited 3' <<<"$fail_err" && [ "$RC" = 125 ] &&
	[ "$(store_junk)" = 0 ] && [ "$(ls "$STATE/images/store" | wc -l)" = "$before" ]; then
	ok "build commands: a failing command fails the build, named, and leaves nothing"
else not_ok "build commands: a failing command fails the build, named, and leaves nothing" "exit $fail_rc: $(first_line "$fail_err"); inspect $RC; $(store_junk) temporary"; fi

# The commands' network: none by default (no gateway in their environment); "network":
# "gateway" gives them the gateway (its install proxy too where the policy's network.proxy names
# hosts) where the policy allows the gateway, and is refused, naming the policy, where not.
recipe "$T/gw.json" '"commands": ["echo \"$RUNBOX_API_URL\" >/etc/proxy"], "network": "gateway"'
run_rbx image build "$T/gw.json"
gtree=$STATE/images/store/${OUT#sha256:}/rootfs
recipe "$T/nogw.json" '"commands": ["echo \"$RUNBOX_API_URL\" >/etc/proxy"]'
run_rbx image build "$T/nogw.json"
ntree=$STATE/images/store/${OUT#sha256:}/rootfs
if grep -q '^http://127\.0\.0\.1:[0-9]*' "$gtree/etc/proxy" 2>/dev/null && [ -f "$ntree/etc/proxy" ] && [ -z "$(tr -d '\n' <"$ntree/etc/proxy")" ]; then
	ok "build commands: network gateway gives them the gateway (RUNBOX_API_URL); none (the default) gives none"
else not_ok "build commands: network gateway gives them the gateway (RUNBOX_API_URL); none (the default) gives none" "gateway: $(cat "$gtree/etc/proxy" 2>&1); none: $(cat "$ntree/etc/proxy" 2>&1)"; fi
policy_variant default "$T/nonet.json" nonet "p['network'] = {'mode': 'none'}"
run_rbx image build "$T/gw.json" --policy "$T/nonet.json"
if [ "$RC" = 125 ] && grep -q "policy \`nonet\` has network mode none" <<<"$ERR" && [ "$(store_junk)" = 0 ]; then
	ok "build commands: network gateway is refused where the policy's network is none"
else not_ok "build commands: network gateway is refused where the policy's network is none" "exit $RC: $(first_line "$ERR")"; fi

# Strict recipes: each bad shape is refused before mmdebstrap runs, naming the key; the control
# is r1.json above, which built.
bad_recipe() { # NAME JSON EXPECT
	printf '%s\n' "$2" >"$T/b.json"
	run_rbx image build "$T/b.json"
	if [ "$RC" = 125 ] && grep -q -- "$3" <<<"$ERR" && ! grep -q "^I: " <<<"$ERR"; then ok "recipe: $1 refused"
	else not_ok "recipe: $1 refused" "exit $RC: $(first_line "$ERR")"; fi
}
bad_recipe "an unknown key" '{"suite": "bookworm", "packges": ["x"]}' "packges"
bad_recipe "a package that is an option" '{"suite": "bookworm", "packages": ["--root=/"]}' "packages\[0\]"
bad_recipe "a mirror that is an option" '{"suite": "bookworm", "mirrors": ["--setup-hook=sh"]}' "mirrors\[0\]"
bad_recipe "a file path with .." '{"suite": "bookworm", "files": [{"path": "/etc/../../x", "content": ""}]}' "files\[0\].path"
bad_recipe "a setuid file mode" '{"suite": "bookworm", "files": [{"path": "/x", "content": "", "mode": "4755"}]}' "files\[0\].mode"
bad_recipe "an unknown variant" '{"suite": "bookworm", "variant": "huge"}' "variant"
bad_recipe "a missing suite" '{"packages": ["a1"]}' "suite"
bad_recipe "a command that is no string" '{"suite": "bookworm", "commands": [["sh"]]}' "commands\[0\]"
bad_recipe "an unknown network" '{"suite": "bookworm", "network": "host"}' "network"
