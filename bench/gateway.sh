#!/usr/bin/env bash
# `make bench-gateway`: the gateway's connector and CONNECT paths against direct calls and
# Debian's tinyproxy, measured in the same run (bench/gateway_bench.py); installs tinyproxy
# and wrk (and only them) when missing. Traffic stays on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v tinyproxy >/dev/null && [ ! -x /usr/bin/tinyproxy ]; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends tinyproxy >/dev/null ||
			echo "bench-gateway: tinyproxy could not be installed; the CONNECT comparison is skipped" >&2
		# the package starts its own daemon; the bench runs its own instance
		systemctl stop tinyproxy 2>/dev/null || true
	fi
fi
if ! command -v wrk >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends wrk >/dev/null ||
		echo "bench-gateway: wrk could not be installed; calls/s is Python's" >&2
fi
mkdir -p build/bench
# shellcheck disable=SC2046 # pkg-config prints several words on purpose
gcc -std=gnu17 -O2 -Wall -Wextra -Werror -o build/bench/gateway_upstream bench/gateway_upstream.c \
	$(pkg-config --cflags --libs libmicrohttpd) -lpthread
exec python3 bench/gateway_bench.py ./runbox-gateway build/bench/gateway_upstream "${GW_BENCH_N:-2000}"
