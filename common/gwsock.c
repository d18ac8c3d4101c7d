/* The gateway daemon's socket path (see gwsock.h). */
#include "common/gwsock.h"

#include <stdio.h>
#include <unistd.h>

const char *rb_gwsock_path(const struct rb_host *host, char *buf, size_t len)
{
	const char *env = rb_host_getenv(host, "RUNBOX_GATEWAY_SOCKET");
	int n;
	if (env)
		n = *env ? snprintf(buf, len, "%s", env) : -1;
	else if (geteuid() == 0)
		n = snprintf(buf, len, "/run/runbox/gateway.sock");
	else {
		const char *x = rb_host_getenv(host, "XDG_RUNTIME_DIR");
		n = x && *x ? snprintf(buf, len, "%s/runbox/gateway.sock", x) : -1;
	}
	return n > 0 && (size_t)n < len ? buf : NULL;
}
