#!/bin/sh
# The SDK part of `make bench-serve`: runs dist/bench/sdk-run.js (built by `make bench-serve-sdk`)
# against RUNBOX_SOCKET when set, else against a `runbox serve` it starts on a temp socket.
set -eu
cd "$(dirname "$0")/.."
exec node dist/bench/sdk-run.js "$@"
