#!/usr/bin/env bash
# docs/openapi.json against runbox serve (tests/integration/serve_openapi.py): the routes of
# serve/http.c, every documented operation on a live daemon (and the control: undocumented paths
# and methods refused), and every documented body as strict as the daemon.
# modes: root
. "$(dirname "$0")/../lib.sh"
lib_init serve_openapi

SOCK=$T/xdg/runbox/serve.sock
serve_start serve.log || exit 0
HERE=$(cd "$(dirname "$0")" && pwd)
if "$PY" "$HERE/serve_openapi.py" "${RBX_OPENAPI_DOC:-$HERE/../../docs/openapi.json}" "$HERE/../../serve/http.c" "$SOCK" >"$T/check" 2>&1; then
	ok "docs/openapi.json and the daemon agree ($(tail -n 1 "$T/check" | tr -d '#'))"
	grep '^# pending' "$T/check"
else not_ok "docs/openapi.json and the daemon agree" "$(grep -m 3 'not ok\|Error' "$T/check" | tr '\n' ';')"; sed 's/^/# /' "$T/check" >&2; fi
kill -TERM "$DPID" 2>/dev/null
wait "$DPID" 2>/dev/null
