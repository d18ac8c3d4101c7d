#!/usr/bin/env bash
# What runbox serve writes into a session's /workspace (a tmpfs) is the session's memory: a
# PUT's and a hydrate's bytes are written by the sandbox's writer (runtime/sandbox/writer.h),
# so the kernel charges them to the session's memory cgroup, not the daemon's. A 40 MB PUT
# grows the session's usage by about as much; a 100 MB PUT or hydrate into a session limited
# to 64M is a 409 naming the memory limit, leaves no partial file, and the session lives on
# (its init is not the OOM killer's choice); controls: the same 100 MB PUT and hydrate into a
# session with the default limit are taken. Before the writer, the 100 MB went in (charged to
# the daemon) and the session's usage did not move. The session keeps one idle writer between
# calls, and one killed from inside the sandbox is replaced, not handed the next call.
# modes: root user
. "$(dirname "$0")/../lib.sh"
lib_init serve_memory

serve_client
ex() { run_rbx exec --socket "$SOCK" "$1" -- sh -c "$2"; }
# usage DIR: the cgroup's memory in use, in bytes (v1 or v2).
usage() { cat "$1/memory.usage_in_bytes" 2>/dev/null || cat "$1/memory.current"; }

serve_start serve.log || exit 0
api POST /v1/sessions '{"image": "minimal", "limits": {"memory": "64M"}}'
S=$(jv 'r["id"]') RUN=$(jv 'r["run_id"]')
api POST /v1/sessions '{"image": "minimal"}'
B=$(jv 'r["id"]')
if [[ ! "$S" =~ ^[0-9a-f]{32}$ ]] || [[ ! "$B" =~ ^[0-9a-f]{32}$ ]]; then
	not_ok "two sessions are made" "$ST $R"
	kill "$DPID"
	exit 0
fi
# The session keeps one idle writer between calls; one killed from inside the sandbox is
# replaced, not handed a call.
# shellcheck disable=SC2016 # expanded by the sandbox's sh
writers='n=0; for c in /proc/[0-9]*/comm; do [ "$(cat $c 2>/dev/null)" = runbox-writer ] && n=$((n+1)); done; echo $n'
api PUT "/v1/sessions/$B/files?path=/workspace/s1" "one"
a=$ST
api PUT "/v1/sessions/$B/files?path=/workspace/s2" "two"
b=$ST
ex "$B" "$writers"
idle=$OUT
# shellcheck disable=SC2016 # expanded by the sandbox's sh
ex "$B" 'for c in /proc/[0-9]*/comm; do [ "$(cat $c)" = runbox-writer ] && kill -9 "$(basename "$(dirname $c)")"; done; sleep 0.2'
api PUT "/v1/sessions/$B/files?path=/workspace/s3" "three"
c="$ST $R"
ex "$B" 'cat /workspace/s3'
if [ "$a$b" = 200200 ] && [ "$idle" = 1 ] && [[ "$c" == 200* ]] && [ "$OUT" = three ]; then
	ok "the session keeps one idle writer between PUTs; one killed from inside is replaced (the next PUT 200)"
else not_ok "an idle writer is kept and replaced when killed" "PUTs $a $b, idle writers '$idle', after the kill '$c', read '$OUT'"; fi


CG=""
while read -r d; do
	if [ -r "$d/memory.usage_in_bytes" ] || [ -r "$d/memory.current" ]; then CG=$d; fi
done < <(find /sys/fs/cgroup -maxdepth 8 -type d -name "$RUN" 2>/dev/null)
if [ -z "$CG" ]; then
	for t in "a PUT is charged to the session's memory" "a PUT or a hydrate past the session's memory limit is refused"; do
		host_limit "$t" "the session has no memory cgroup here (no delegated hierarchy for the mode's user)"
	done
	kill "$DPID"
	wait "$DPID" 2>/dev/null
	exit 0
fi

head -c 40000000 /dev/urandom >"$T/f40"
head -c 100000000 /dev/zero >"$T/f100"
mkdir -p "$T/arc" && cp "$T/f100" "$T/arc/big" && tar -C "$T/arc" -cf "$T/big.tar" big

u0=$(usage "$CG")
upload PUT "/v1/sessions/$S/files?path=/workspace/f40" "$T/f40"
put40="$ST"
u1=$(usage "$CG")
grew=$(((u1 - u0) / 1000000))
if [ "$put40" = 200 ] && [ "$grew" -ge 38 ]; then
	ok "a 40 MB PUT is charged to the session's memory cgroup (+$grew MB)"
else not_ok "a PUT is charged to the session's memory" "PUT $put40, the session's usage grew $grew MB"; fi

upload PUT "/v1/sessions/$S/files?path=/workspace/f100" "$T/f100"
put100="$ST $R"
upload POST "/v1/sessions/$S/hydrate" "$T/big.tar"
hyd="$ST $R"
ex "$S" 'ls -a /workspace | tr "\n" " "'
left="$RC $OUT"
upload PUT "/v1/sessions/$B/files?path=/workspace/f100" "$T/f100"
ctl_put="$ST"
upload POST "/v1/sessions/$B/hydrate" "$T/big.tar"
ctl_hyd="$ST"
ex "$B" 'stat -c %s /workspace/f100 /workspace/big | tr "\n" " "'
ctl_sizes="$OUT"
if [[ "$put100" == 409*"out of memory (its memory limit)"* ]] && [[ "$hyd" == 409*"out of memory"* ]] &&
	[[ "$left" == "0 . .. f40 in out "* ]] && [[ "$left" != *runbox-put* ]] &&
	[ "$ctl_put" = 200 ] && [ "$ctl_hyd" = 200 ] && [ "$ctl_sizes" = "100000000 100000000 " ]; then
	ok "a 100 MB PUT and hydrate past the session's 64M are 409s naming its memory limit; it lives on, no partial file left; control: a session at the default limit takes both"
else
	not_ok "a PUT or a hydrate past the session's memory limit is refused" \
		"PUT '$(first_line "$put100")', hydrate '$(first_line "$hyd")', left '$left'; control PUT $ctl_put, hydrate $ctl_hyd, sizes '$ctl_sizes'"
fi

kill "$DPID"
wait "$DPID" 2>/dev/null
exit 0
