#!/usr/bin/env bash
# `make bench`: times runbox against bubblewrap and runc (crun when installed) on the same
# rootfs, the minimal image's (busybox's `true`), root and rootless, in BENCH_ROUNDS interleaved hyperfine rounds per mode,
# then prints medians, p95s, peer/runbox ratios and peak memory (bench/report.py). Results
# land in build/bench/.
# Knobs: BENCH_RUNS (200 per command, in all), BENCH_ROUNDS (10), BENCH_WARMUP (10 per
# command, split over the rounds), BENCH_MODES ("root rootless").
set -euo pipefail

cd "$(dirname "$0")/.."
TOP=$(pwd)
OUT=$TOP/build/bench
R=$TOP/build/images/minimal/rootfs
B=$OUT/peers
RUNS=${BENCH_RUNS:-200}
WARMUP=${BENCH_WARMUP:-10}
ROUNDS=${BENCH_ROUNDS:-10}
MODES=${BENCH_MODES:-root rootless}
NOBODY=65534
NB="setpriv --reuid=$NOBODY --regid=$NOBODY --clear-groups"
CG=/sys/fs/cgroup/unified/cgroup.controllers

die() { echo "bench: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "run as root: it benchmarks root mode and drops to uid $NOBODY for rootless"
for t in hyperfine bwrap runc setpriv unshare python3 gcc nft; do
	command -v "$t" >/dev/null || die "missing $t (scripts/install-deps.sh build bench)"
done

# crun refuses a hybrid host while unified/cgroup.controllers is non-empty, even with
# --cgroup-manager=disabled (ANCHORS §3): rerun this script in a private mount namespace
# with /dev/null bound over that file. Every runner then sees the same host.
if [ -z "${RB_BENCH_PRIVATE:-}" ] && [ -s "$CG" ]; then
	export RB_BENCH_PRIVATE=1
	# shellcheck disable=SC2016 # $1 and $@ belong to the inner sh
	exec unshare -m --propagation private sh -c 'mount --bind /dev/null "$1" && shift && exec "$@"' \
		sh "$CG" "$0" "$@"
fi

# --- the peers' rootfs: the one `runbox run --image minimal` uses, read-only for all --------
[ -x "$R/bin/busybox" ] || die "no minimal image at $R (make runbox)"
mkdir -p "$B"
chmod -R a+rX "$OUT"

# --- runc bundles: root spec, and rootless spec mapping 0 -> 65534 -------------------------
# Each kind has a twin that sleeps 400 ms instead, so bench/rss.py can sample the runner.
bundle() { # bundle DIR ROOTLESS(0|1) ARGS...
	local dir=$1 rootless=$2
	shift 2
	rm -rf "$dir" && mkdir -p "$dir"
	if [ "$rootless" = 1 ]; then runc spec --rootless -b "$dir"; else runc spec -b "$dir"; fi
	python3 - "$dir/config.json" "$R" "$NOBODY" "$rootless" "$@" <<'EOF'
import json, sys
path, rootfs, nobody, rootless, args = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1", sys.argv[5:]
c = json.load(open(path))
c["root"] = {"path": rootfs, "readonly": True}
c["process"]["args"] = args
c["process"]["terminal"] = False
if rootless:
    for key in ("uidMappings", "gidMappings"):
        c["linux"][key] = [{"containerID": 0, "hostID": nobody, "size": 1}]
json.dump(c, open(path, "w"), indent=1)
EOF
	chmod -R a+rX "$dir"
}
bundle "$B/root" 0 /bin/true
bundle "$B/root-sleep" 0 /bin/sleep 0.4
bundle "$B/rl" 1 /bin/true
bundle "$B/rl-sleep" 1 /bin/sleep 0.4
rm -rf "$B/st" "$B/st-root" && mkdir -p "$B/st" "$B/st-root"
chown "$NOBODY:$NOBODY" "$B/st" && chmod 700 "$B/st" "$B/st-root"

# runbox's state and runtime dirs: fresh temp dirs, owned by 65534 for the rootless mode.
TMP=$(mktemp -d /tmp/runbox-bench.XXXXXX)
chmod 755 "$TMP"
mkdir -p "$TMP/root-state" "$TMP/rl-state" "$TMP/rl-xdg" "$TMP/rl-home"
chown "$NOBODY:$NOBODY" "$TMP/rl-state" "$TMP/rl-xdg" "$TMP/rl-home"
chmod 700 "$TMP"/rl-*
cleanup() {
	runc --root "$B/st-root" delete -f rb-probe >/dev/null 2>&1 || true
	rm -rf --one-file-system "$TMP"
}
trap cleanup EXIT

# --- one hyperfine run per mode -------------------------------------------------------------
# add NAME CMD: run CMD once; if it succeeds it joins the mode's hyperfine run, else it is
# listed as not run with its last line of stderr.
add() {
	local name=$1 cmd=$2 err rc
	if [ -n "${3:-}" ]; then
		printf '%s\t%s\t%s\n' "$name" "$cmd" "$3" >>"$OUT/$mode.skipped.tsv"
		return
	fi
	# shellcheck disable=SC2086 # split like hyperfine -N splits it
	if err=$(env "${ENVV[@]}" $cmd 2>&1 >/dev/null); then
		HF+=(-n "$name" "$cmd")
		printf '%s\t%s\n' "$name" "$cmd" >>"$OUT/$mode.commands.tsv"
		return
	else
		rc=$?
	fi
	err=$(printf '%s' "$err" | tr '\t' ' ' | tail -n 1 | cut -c1-200)
	printf '%s\t%s\t%s\n' "$name" "$cmd" "exit $rc on a trial run: ${err:-no message}" >>"$OUT/$mode.skipped.tsv"
}

RB="./runbox run --image minimal"
have_runbox=""
[ -x ./runbox ] || have_runbox="./runbox is not built (make runbox)"
have_crun=1
command -v crun >/dev/null || have_crun=""

for mode in $MODES; do
	rm -f "$OUT/$mode".*
	HF=()
	case $mode in
	root)
		P=""
		ENVV=(RUNBOX_STATE_DIR="$TMP/root-state")
		add "true" "$R/bin/busybox true"
		add "bwrap" "bwrap --unshare-all --die-with-parent --ro-bind $R / --proc /proc --dev /dev /bin/true"
		add "bwrap --share-net" "bwrap --unshare-all --share-net --die-with-parent --ro-bind $R / --proc /proc --dev /dev /bin/true"
		# Root runc makes a cgroup under every v1 hierarchy of a hybrid host (ANCHORS §2 (*)):
		# it joins only if a trial run succeeds and leaves nothing behind.
		add "runc" "runc --root $B/st-root run -b $B/root rb-probe"
		[ -n "$have_crun" ] && add "crun" "crun --cgroup-manager=disabled --root $B/st-root run -b $B/root cb1"
		;;
	rootless)
		P="$NB "
		ENVV=(RUNBOX_STATE_DIR="$TMP/rl-state" XDG_RUNTIME_DIR="$TMP/rl-xdg" HOME="$TMP/rl-home")
		add "true" "$NB $R/bin/busybox true"
		add "bwrap" "$NB bwrap --unshare-all --die-with-parent --ro-bind $R / --proc /proc --dev /dev /bin/true"
		add "bwrap --share-net" "$NB bwrap --unshare-all --share-net --die-with-parent --ro-bind $R / --proc /proc --dev /dev /bin/true"
		add "runc" "$NB runc --root $B/st run -b $B/rl rr1"
		[ -n "$have_crun" ] && add "crun" "$NB crun --root $B/st run -b $B/rl cr1"
		;;
	*) die "unknown mode $mode" ;;
	esac
	add "runbox" "$P$RB -- /bin/true" "$have_runbox"
	add "runbox --net none" "$P$RB --net none -- /bin/true" "$have_runbox"
	add "runbox --policy strict" "$P$RB --policy strict -- /bin/true" "$have_runbox"

	# The runs are split into rounds, each timing every command in turn: other work on the
	# host, and the drift of a shared VM's speed, then fall on every command alike instead
	# of on whichever one hyperfine was timing. Keep the load average beside the figures.
	per=$(((RUNS + ROUNDS - 1) / ROUNDS))
	warm=$(((WARMUP + ROUNDS - 1) / ROUNDS))
	echo "== $mode: $ROUNDS rounds of hyperfine -N --warmup $warm --runs $per" >&2
	if [ ${#HF[@]} -gt 0 ]; then
		cut -d' ' -f1 /proc/loadavg >"$OUT/$mode.load"
		parts=()
		for ((k = 1; k <= ROUNDS; k++)); do
			env "${ENVV[@]}" hyperfine -N --style none --warmup "$warm" --runs "$per" \
				--export-json "$OUT/$mode.round-$k.json" "${HF[@]}" >&2
			parts+=("$OUT/$mode.round-$k.json")
		done
		python3 bench/merge_rounds.py "$OUT/$mode.json" "${parts[@]}"
		rm -f "${parts[@]}"
		cut -d' ' -f1 /proc/loadavg >>"$OUT/$mode.load"
	fi

	# Peak memory of each runner's own process, sampled mid-step, plus its wait4 max RSS.
	RSS=()
	[ -n "$have_runbox" ] || RSS+=("runbox=$P$RB -- /bin/sleep 0.4")
	RSS+=("bwrap=${P}bwrap --unshare-all --die-with-parent --ro-bind $R / --proc /proc --dev /dev /bin/sleep 0.4")
	if [ "$mode" = root ]; then
		grep -q '^runc	' "$OUT/$mode.commands.tsv" && RSS+=("runc=runc --root $B/st-root run -b $B/root-sleep rb-probe")
	else
		RSS+=("runc=$NB runc --root $B/st run -b $B/rl-sleep rr1")
	fi
	env "${ENVV[@]}" python3 bench/rss.py "$OUT/$mode.rss.json" "${RSS[@]}" >&2 || true
done

# shellcheck disable=SC2086 # one argument per mode
python3 bench/report.py "$OUT" $MODES
bench/steps.sh   # per-step overhead of a multi-step run
RUNBOX_STATE_DIR="$TMP/root-state" python3 bench/filter_hooks.py "$OUT/filter_hooks.json" # on a host with a packet filter
bench/scrub.sh   # scrub MB/s, recall, ratio to grep -E -f (SCRUB_BENCH_MB, default 200)
echo "bench: done in ${SECONDS}s; figures in $OUT/results.json" >&2
