/* The daemon's hook for the E2B front end: its options (--e2b-listen, --e2b-keys, --e2b-new-key),
 * taken out of argv before runbox serve's own, their usage lines, and --e2b-new-key's run. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "serve/e2b.h"

void rb_e2b_usage(FILE *f)
{
	fputs("  --e2b-listen HOST:PORT  also serve E2B's API on loopback TCP (docs/e2b.md)\n"
	      "  --e2b-keys FILE   its API keys (a 0600 JSON file)\n"
	      "  --e2b-new-key TENANT  with --e2b-keys: add a key for TENANT, print it and exit\n",
	      f);
}

/* The value of option name at argv[*i] ("--name VALUE" or "--name=VALUE"), or NULL. */
static const char *value_of(const char *name, int argc, char **argv, int *i, int *used, bool *missing)
{
	size_t n = strlen(name);
	const char *a = argv[*i];
	if (strncmp(a, "--", 2) != 0 || strncmp(a + 2, name, n) != 0)
		return NULL;
	if (a[2 + n] == '=') {
		*used = 1;
		return a + 3 + n;
	}
	if (a[2 + n] != '\0')
		return NULL;
	if (*i + 1 >= argc) {
		*missing = true;
		return NULL;
	}
	*used = 2;
	return argv[*i + 1];
}

int rb_e2b_options(int *argc, char **argv, struct rb_e2b_opts *o)
{
	static const char *const names[] = {"e2b-listen", "e2b-keys", "e2b-new-key"};
	memset(o, 0, sizeof *o);
	const char **slot[] = {&o->listen, &o->keys, &o->new_key};
	int out = 1;
	for (int i = 1; i < *argc;) {
		if (!strcmp(argv[i], "--")) {
			while (i < *argc)
				argv[out++] = argv[i++];
			break;
		}
		int used = 0;
		bool missing = false;
		for (size_t k = 0; k < sizeof names / sizeof names[0] && !used && !missing; k++) {
			const char *v = value_of(names[k], *argc, argv, &i, &used, &missing);
			if (v)
				*slot[k] = v;
			if (missing) {
				rb_err("serve: --%s: needs a value", names[k]);
				return -1;
			}
		}
		if (used) {
			i += used;
			continue;
		}
		argv[out++] = argv[i++];
	}
	argv[out] = NULL;
	*argc = out;
	if ((o->listen || o->new_key) && !o->keys) {
		rb_err("serve: --e2b-listen and --e2b-new-key need --e2b-keys FILE");
		return -1;
	}
	if (!o->new_key)
		return 0;
	char key[96];
	struct rb_error err;
	if (rb_e2b_issue_key(o->keys, o->new_key, key, sizeof key, &err) < 0) {
		rb_err("serve: %s", err.msg);
		return -1;
	}
	printf("%s\n", key);
	return 1;
}
