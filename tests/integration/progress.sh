#!/usr/bin/env bash
# Progress of long work on stderr: on a terminal one updating line (a bar, a percentage, \r and
# an erase-line, cleared at the end and followed by a one-line summary) for `runbox image
# import`, a run's harvest and `runbox image build`; never a control byte when stderr is a file;
# nothing at all with --json, whose stdout is the same object. runbox runs on a host pty that a
# python driver holds (pty.fork), as it would in a terminal emulator.
# modes: root user
. "$(dirname "$0")/../lib.sh"
lib_init progress

# drive.py OUT STDOUT -- CMD...: CMD on a new host pty of 30x160, every byte it writes there kept
# raw in OUT (\r and escapes included); its stdout to the file STDOUT instead when not `-`.
# Prints `exit N`.
cat >"$T/drive.py" <<'PYEOF'
import fcntl, os, pty, select, struct, sys, termios, time
out_path, stdout_path = sys.argv[1], sys.argv[2]
cmd = sys.argv[sys.argv.index('--') + 1:]
pid, fd = pty.fork()
if pid == 0:
    if stdout_path != '-':
        f = os.open(stdout_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(f, 1)
    os.execvp(cmd[0], cmd)
fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack('HHHH', 30, 160, 0, 0))
out = b''
end = time.time() + 300
while time.time() < end:
    r, _, _ = select.select([fd], [], [], 0.2)
    if r:
        try:
            d = os.read(fd, 65536)
        except OSError:
            d = b''
        if not d:
            break
        out += d
_, st = os.waitpid(pid, 0)
open(out_path, 'wb').write(out)
print('exit %d' % os.waitstatus_to_exitcode(st))
PYEOF

# on_pty NAME STDOUT -- RUNBOX-ARGS...: runbox in this mode on the pty; $T/NAME.pty holds its
# terminal's bytes, PRC its exit code.
on_pty() {
	local name=$1 so=$2
	shift 3
	rbx_cmd "$@"
	PRC=$("$PY" "$T/drive.py" "$T/$name.pty" "$so" -- "${RBX_CMD[@]}" | sed -n 's/^exit //p')
}
# has_bytes FILE PYTHON-BYTES-LITERAL: whether FILE holds those bytes.
has_bytes() { "$PY" -c 'import sys; sys.exit(0 if eval(sys.argv[2]) in open(sys.argv[1], "rb").read() else 1)' "$1" "$2"; }
# no_controls FILE: no \r and no ESC in it.
no_controls() { ! grep -q $'\r' "$1" && ! grep -q $'\033' "$1"; }

chmod 0755 "$T"
ALLOW=$T/allow.json
policy_variant default "$ALLOW" progress-test "p['images'] = {'allow': ['$T']}"

# A tarball of ~20 MB in 20040 members: long enough (seconds, not the 0.2 s a bar waits for).
"$PY" - "$T/many.tar" <<'EOF'
import io, sys, tarfile
with tarfile.open(sys.argv[1], 'w', format=tarfile.GNU_FORMAT) as t:
    for d in range(40):
        ti = tarfile.TarInfo('d%02d' % d); ti.type = tarfile.DIRTYPE; ti.mode = 0o755; t.addfile(ti)
        for i in range(500):
            ti = tarfile.TarInfo('d%02d/f%03d' % (d, i)); ti.size = 100; ti.mode = 0o644
            t.addfile(ti, io.BytesIO(b'x' * 100))
EOF
chmod a+r "$T/many.tar"

# ---- import ----------------------------------------------------------------------------------
on_pty import - -- image import "$T/many.tar" --policy "$ALLOW"
digest_pty=$(grep -ao 'sha256:[0-9a-f]\{64\}' "$T/import.pty" | tail -n 1)
if [ "$PRC" = 0 ] && has_bytes "$T/import.pty" "b'\r\x1b[Kimport ['" &&
	grep -aqE 'import \[[#-]+\] +[0-9]+%  [0-9.]+ (B|KiB|MiB) / 19\.[0-9] MiB' "$T/import.pty" &&
	has_bytes "$T/import.pty" "b'\r\x1b[Krunbox: import: done, read 19.'" &&
	grep -aq 'runbox: import: done, read 19\.[0-9] MiB, 20040 members' "$T/import.pty"; then
	ok "import on a terminal: an updating bar with a percentage (\\r, erase-line), cleared, then a summary"
else not_ok "import on a terminal: progress bar" "exit $PRC: $(head -c 300 "$T/import.pty" | od -c | head -5 | tr '\n' ' ')"; fi
# The bar redraws (more than one \r), but at most 10 times a second.
redraws=$(grep -ao $'\r\033\\[Kimport \\[' "$T/import.pty" | wc -l)
secs=$(grep -ao 'members, [0-9.]* s' "$T/import.pty" | tail -n 1 | sed 's/.*, \([0-9.]*\) s/\1/')
if [ "$redraws" -ge 2 ] && "$PY" -c "import sys; sys.exit(0 if $redraws <= 10 * $secs + 3 else 1)"; then
	ok "import on a terminal: the bar redraws ($redraws times in $secs s), at most ~10 times a second"
else not_ok "import on a terminal: redraw rate" "$redraws redraws in $secs s"; fi
# Control: the same import with stderr a file says nothing of progress, not a control byte.
run_rbx image import "$T/many.tar" --policy "$ALLOW"
if [ "$RC" = 0 ] && [ "$OUT" = "$digest_pty" ] && no_controls "$T/err" && ! grep -q 'import \[' "$T/err"; then
	ok "import with stderr a file: no \\r, no escape, no bar (control), the same digest"
else not_ok "import with stderr a file: no control bytes" "exit $RC, $OUT vs $digest_pty: $(od -c "$T/err" | head -3 | tr '\n' ' ')"; fi

# ---- a run's harvest -------------------------------------------------------------------------
# 200 MiB in four files: a harvest well past the bar's first 200 ms however fast it gets.
big='for i in 1 2 3 4; do dd if=/dev/urandom of=/workspace/out/big$i bs=1M count=50 2>/dev/null; done; echo made'
on_pty harvest - -- run --image minimal -- sh -c "$big"
if [ "$PRC" = 0 ] && has_bytes "$T/harvest.pty" "b'\r\x1b[Kharvest '" &&
	grep -aqE 'harvested [0-9.]+ (B|KiB|MiB)' "$T/harvest.pty" &&
	has_bytes "$T/harvest.pty" "b'\r\x1b[Krunbox: harvest: done, harvested 200.0 MiB, 4 files'"; then
	ok "run on a terminal: the harvest of 200 MiB shows an updating line, cleared, then a summary"
else not_ok "run on a terminal: harvest progress" "exit $PRC: $(tr -d '\033' <"$T/harvest.pty" | tr '\r' '|' | head -c 400)"; fi
run_rbx run --image minimal -- sh -c "$big"
if [ "$RC" = 0 ] && [ "$OUT" = made ] && no_controls "$T/err" && ! grep -q 'harvest' <<<"$(grep -v 'stored 4 artifacts' "$T/err")"; then
	ok "run with stderr a file: the same harvest says no progress, no control byte (control)"
else not_ok "run with stderr a file: no progress" "exit $RC: $(od -c "$T/err" | head -4 | tr '\n' ' ')"; fi

# A manifest's steps: each step's harvest (a walk of all /workspace/out) has its line, cleared
# and summed up before the step's own line is said.
"$PY" - "$T/m.json" "$big" <<'EOF'
import json, sys
json.dump({"tenant": "acme", "agent": "progress", "image": "minimal", "policy": "default",
           "steps": [{"name": "big", "script": sys.argv[2]},
                     {"name": "small", "script": "echo small > /workspace/out/small"}]}, open(sys.argv[1], "w"))
EOF
chmod a+r "$T/m.json"
on_pty manifest - -- run "$T/m.json"
if [ "$PRC" = 0 ] && "$PY" - "$T/manifest.pty" <<'EOF'; then
import sys
b = open(sys.argv[1], "rb").read()
bar = b.find(b"\r\x1b[Kharvest ")
d1 = b.find(b"\r\x1b[Krunbox: harvest: done, harvested 200.0 MiB, 4 files")
s1 = b.find(b"step 1 big: success")
d2 = b.find(b"\r\x1b[Krunbox: harvest: done, harvested 200.0 MiB, 5 files")
s2 = b.find(b"step 2 small: success")
sys.exit(0 if 0 <= bar < d1 < s1 < d2 < s2 else 1)
EOF
	ok "manifest on a terminal: each step's harvest shows its line, cleared and summed up before that step's line"
else not_ok "manifest on a terminal: harvest progress per step" "exit $PRC: $(tr -d '\033' <"$T/manifest.pty" | tr '\r' '|' | head -c 600)"; fi
run_rbx run "$T/m.json"
if [ "$RC" = 0 ] && no_controls "$T/err" && ! grep -q 'runbox: harvest' "$T/err"; then
	ok "manifest with stderr a file: no progress, no control byte (control)"
else not_ok "manifest with stderr a file: no progress" "exit $RC: $(od -c "$T/err" | head -4 | tr '\n' ' ')"; fi

# ---- --json ------------------------------------------------------------------------------------
# On a terminal (stdout to a file, stderr the pty) --json draws nothing and its object is the
# same, key for key, as with stderr a file; the control: the harvest really read the 60 MiB.
keys='import json, sys
def walk(v, p=""):
    if isinstance(v, dict):
        for k in sorted(v): yield p + "/" + k; yield from walk(v[k], p + "/" + k)
    elif isinstance(v, list):
        for x in v[:1]: yield from walk(x, p + "[]")
d = json.load(open(sys.argv[1]))
print(d["harvest"]["bytes_read"]); print("\n".join(walk(d)))'
one='dd if=/dev/urandom of=/workspace/out/big bs=1M count=60 2>/dev/null'
on_pty json "$T/json_pty.out" -- run --json --image minimal -- sh -c "$one"
run_rbx run --json --image minimal -- sh -c "$one"
k_pty=$("$PY" -c "$keys" "$T/json_pty.out" 2>&1) k_file=$("$PY" -c "$keys" "$T/out" 2>&1)
if [ "$PRC" = 0 ] && [ "$RC" = 0 ] && [ "$(head -n 1 <<<"$k_pty")" = $((60 << 20)) ] && [ "$k_pty" = "$k_file" ] &&
	no_controls "$T/json.pty" && ! grep -aq 'harvest' "$T/json.pty"; then
	ok "run --json on a terminal: no progress drawn, the object's keys identical to stderr-a-file's"
else not_ok "run --json on a terminal" "exit $PRC/$RC: $(diff <(echo "$k_pty") <(echo "$k_file") | head -5 | tr '\n' ' '); pty: $(head -c 200 "$T/json.pty" | od -c | head -2 | tr '\n' ' ')"; fi

# ---- image build (mmdebstrap's root mode) ------------------------------------------------------
if [ "$MODE" = root ]; then
	if ! command -v mmdebstrap >/dev/null || ! command -v dpkg-scanpackages >/dev/null; then
		not_ok "build progress: mmdebstrap and dpkg-scanpackages are installed (scripts/install-deps.sh test)"
	else
		PKG=$T/pkg REPO=$T/repo
		mkdir -p "$PKG/DEBIAN" "$PKG/etc" "$REPO"
		echo hello >"$PKG/etc/hello"
		printf 'Package: rbx-progress\nVersion: 1.0\nArchitecture: %s\nMaintainer: t <t@runbox.invalid>\nDescription: t\n' \
			"$(dpkg --print-architecture)" >"$PKG/DEBIAN/control"
		dpkg-deb --root-owner-group --build "$PKG" "$REPO/rbx-progress_1.0.deb" >/dev/null
		(cd "$REPO" && dpkg-scanpackages --multiversion . /dev/null >Packages 2>/dev/null)
		cat >"$T/r.json" <<EOF
{"description": "t", "suite": "bookworm", "variant": "extract", "packages": ["rbx-progress"],
 "mirrors": ["deb [trusted=yes] copy://$REPO ./"], "source_date_epoch": 1700000000}
EOF
		on_pty build - -- image build "$T/r.json"
		if [ "$PRC" = 0 ] && has_bytes "$T/build.pty" "b'\r\x1b[Kbuild ['" &&
			grep -aqE 'build \[[#-]+\] +[0-9]+%  fetched [0-9]+ / 1' "$T/build.pty" &&
			grep -aq '^I: downloading packages' "$T/build.pty" && grep -aq 'runbox: build: done, fetched 1' "$T/build.pty" &&
			! grep -aq '^Get:' "$T/build.pty"; then
			ok "build on a terminal: a bar of packages fetched of the count apt said, mmdebstrap's I: lines above it"
		else not_ok "build on a terminal: progress" "exit $PRC: $(tr -d '\033' <"$T/build.pty" | tr '\r' '|' | head -c 500)"; fi
		run_rbx image build "$T/r.json"
		if [ "$RC" = 0 ] && grep -q '^I: downloading packages' "$T/err" && no_controls "$T/err" &&
			! grep -q 'build \[' "$T/err"; then
			ok "build with stderr a file: mmdebstrap's own lines as before, no bar, no control byte (control)"
		else not_ok "build with stderr a file" "exit $RC: $(od -c "$T/err" | head -3 | tr '\n' ' ')"; fi
	fi
fi
