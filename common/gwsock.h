/* Where the gateway daemon (`runbox gateway serve`) listens, shared by the daemon and the
 * runner that registers its runs there, and the registration's wire shape (docs/gateway.md). */
#ifndef RB_GWSOCK_H
#define RB_GWSOCK_H

#include <stddef.h>

#include "common/host.h"

/* The registration, on a SOCK_STREAM unix connection: the runner sends one line, the run's
 * grant as the per-run gateway's fd-3 config JSON (gateway/serve_main.c), whose "listen_fds"
 * and "dns_fd" are indexes into the descriptors passed with the line's first byte
 * (SCM_RIGHTS, at most RB_GWSOCK_MAX_FDS). The daemon answers {"ready": {"run_id": ...}} or
 * {"error": why}, one line each; then each call's {"call": {...}} line as it happens; the
 * run is served while the connection is open. The runner's shutdown(SHUT_WR) ends it: the
 * daemon answers {"stats": {...}} and closes. */
#define RB_GWSOCK_MAX_FDS  8
#define RB_GWSOCK_LINE_MAX ((size_t)256 * 1024)

/* The daemon's socket into buf: RUNBOX_GATEWAY_SOCKET of host when set (empty: none), else
 * /run/runbox/gateway.sock for root and $XDG_RUNTIME_DIR/runbox/gateway.sock for others.
 * NULL when there is none (no XDG_RUNTIME_DIR, an empty variable, a path too long). */
const char *rb_gwsock_path(const struct rb_host *host, char *buf, size_t len);

#endif
