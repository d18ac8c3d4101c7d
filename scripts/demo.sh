#!/bin/sh
# `make demo`: one sample run in a fresh sandbox, shown as a person would see it, then the
# same run's JSON result.
set -eu
cd "$(dirname "$0")/.."
say() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }

say ./runbox run --image minimal -- /bin/sh -c 'echo hi; id; grep -E "Cap|NoNew|Seccomp" /proc/self/status'
./runbox run --image minimal -- /bin/sh -c 'echo hi; id; grep -E "Cap|NoNew|Seccomp" /proc/self/status'

say ./runbox run --image minimal --policy strict -- /bin/sh -c 'id; unshare -r true || echo "unshare refused"'
./runbox run --image minimal --policy strict -- /bin/sh -c 'id; unshare -r true 2>/dev/null || echo "unshare refused"'

say ./runbox run --image minimal --timeout 300ms -- sleep 10
./runbox run --image minimal --timeout 300ms -- sleep 10 || echo "(exit $?: timed out, the sandbox was killed)"

say ./runbox run --image host --json -- sh -c 'echo from the host image: $(uname -s)'
./runbox run --image host --json -- sh -c 'echo from the host image: $(uname -s)'

say '(cd docs/examples && ../../runbox run manifest.json)   # three steps: two scripts and a skill'
(cd docs/examples && ../../runbox run manifest.json) || true

say ./runbox ledger runs --tenant acme --agent weekly-report --last 1 --detail
./runbox ledger runs --tenant acme --agent weekly-report --last 1 --detail

say ./runbox ledger query --tenant acme --agent weekly-report --last 8
./runbox ledger query --tenant acme --agent weekly-report --last 8
say ./runbox ledger verify
./runbox ledger verify

# The seed's three jobs on the agent image (docs/examples/skills): a markdown report to PDF, a
# .docx template filled from JSON values, a Python repository linted. The image is built once,
# from Debian's packages (5 minutes on 2 idle cores, 20 loaded; it needs root for its idmapped store).
if ! ./runbox image inspect agent >/dev/null 2>&1; then
	if [ "$(id -u)" != 0 ]; then
		printf '\n(the agent image is built as root: run `make demo` as root for the seed'"'"'s jobs)\n'
		exit 0
	fi
	say ./runbox image build images/recipes/agent.json --name agent '  # once, 5 to 20 minutes'
	./runbox image build images/recipes/agent.json --name agent
fi
out=$(mktemp -d /tmp/runbox-demo.XXXXXX)
say "(cd docs/examples && ../../runbox run seed.json --output $out)   # report.pdf, letter.docx, findings.json"
(cd docs/examples && ../../runbox run seed.json --output "$out")
say ls -l "$out"
ls -l "$out"
