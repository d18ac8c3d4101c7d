/* The host context's environment (see host.h). */
#include "common/host.h"

#include <string.h>

const char *rb_host_getenv(const struct rb_host *host, const char *name)
{
	if (!host || !host->env || !name || !*name || strchr(name, '='))
		return NULL;
	size_t n = strlen(name);
	for (char *const *e = host->env; *e; e++)
		if (!strncmp(*e, name, n) && (*e)[n] == '=')
			return *e + n + 1;
	return NULL;
}
