#!/usr/bin/env bash
# The architecture as `make lint` holds it (SPEC "Layout"):
#  1. Includes point one way. A component includes only itself and what its line below names:
#     common <- policy <- images; common <- ledger; common <- scrub; those <- runtime/sandbox
#     <- runtime/run <- {runtime/check, cli}; gateway <- common, policy, ledger, scrub (never
#     the sandbox nor runs). The sandbox knows nothing of runs.
#  2. No writable global in the library: an object in .data or .bss (or their thread-local
#     .tdata/.tbss) of a library object (what
#     `objdump -t` lists there) is shared by every run a process holds. The few that are
#     process-wide by nature are named in scripts/writable-globals.allow, each with its reason.
#  3. The library reads no environment: no getenv, secure_getenv or environ outside cli/ and the
#     mains (*_main.c). What a call may know of the host comes in its rb_host (common/host.h).
#     The few exceptions are named in scripts/environ.allow, each with its reason.
# Usage: scripts/check-layout.sh OBJ_DIR (the build's object tree, for check 2). Exit 1 on a
# violation, each printed as FILE: what.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
objdir=${1:-build/obj}
status=0

base="common policy images ledger scrub"
declare -A may=(
	[common]="common"
	[policy]="common policy"
	[images]="common policy images"
	[ledger]="common ledger"
	[scrub]="common scrub"
	[runtime/sandbox]="$base runtime/sandbox"
	[runtime/run]="$base runtime/sandbox runtime/run"
	[runtime/check]="$base runtime/sandbox runtime/run runtime/check"
	[gateway]="common policy ledger scrub gateway"
	[serve]="$base runtime/sandbox runtime/run serve"
	[cli]="$base runtime/sandbox runtime/run runtime/check cli"
)
for comp in "${!may[@]}"; do
	[ -d "$comp" ] || continue
	while IFS=: read -r file _ inc; do
		dep=${inc#*\"}
		dep=${dep%/*} # the component: the include's directory
		case " ${may[$comp]} " in
		*" $dep "*) ;;
		*)
			echo "$file: includes \"${inc#*\"} ($comp may include only: ${may[$comp]})"
			status=1
			;;
		esac
	done < <(grep -Hn '^#include "[a-z_]*/' "$comp"/*.[ch] 2>/dev/null)
done
# Every directory holding library sources has its line.
while read -r d; do
	if [ -z "${may[$d]+x}" ]; then
		echo "$d/: a component with no line in scripts/check-layout.sh"
		status=1
	fi
done < <(find . -name '*.c' -not -path './build/*' -not -path './tests/*' -not -path './bench/*' \
	-not -path './sdk/*' -not -path '*/node_modules/*' -printf '%h\n' | sed 's#^\./##' | sort -u)

env_allow=scripts/environ.allow
while IFS=: read -r file line text; do
	if ! grep -qE "^$file " "$env_allow"; then
		echo "$file:$line: reads the process's environment (take it from an rb_host): ${text#"${text%%[![:space:]]*}"}"
		status=1
	fi
done < <(find common policy images ledger scrub runtime gateway serve -name '*.c' ! -name '*_main.c' -print0 |
	xargs -0 grep -HnE '\b(getenv|secure_getenv)[[:space:]]*\(|\benviron\b' | grep -vE ':[[:space:]]*(/?\*|//)')

if [ -d "$objdir" ]; then
	allow=scripts/writable-globals.allow
	while read -r obj sym; do
		if ! grep -qE "^$obj $sym( |$)" "$allow"; then
			echo "$obj: writable global \`$sym\` (per-run state goes in a struct the caller owns)"
			status=1
		fi
	# cli/ and the mains are not the library: signals and the terminal are theirs.
	done < <(find "$objdir" -name '*.o' ! -path "$objdir/cli/*" ! -path '*/gateway/serve_main.o' ! -path '*/serve/serve_main.o' | sort |
		while read -r o; do
			objdump -t "$o" | awk -v o="${o#"$objdir"/}" \
				'($3 == "O" && ($4 ~ /^\.(data|bss)(\.|$)/) && $4 !~ /^\.data\.rel\.ro/) ||
				 $3 ~ /^\.t(data|bss)(\.|$)/ { print o, $NF }'
		done)
else
	echo "check-layout: no object tree at $objdir (build first)"
	status=1
fi
exit $status
