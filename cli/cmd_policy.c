/* `runbox policy validate FILE` (the policy, its seccomp filter built, and what it leaves open)
 * and `runbox policy show NAME`. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "common/log.h"
#include "common/paths.h"
#include "common/util.h"
#include "policy/policy.h"
#include "runtime/sandbox/seccomp.h"

static void print_open(void *ctx, const char *text)
{
	(void)ctx;
	printf("  open: %s\n", text);
}

int rb_cmd_policy(int argc, char **argv)
{
	static const char usage[] = "usage: runbox policy validate FILE | runbox policy show NAME|FILE\n";
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			fputs(usage, stdout);
			return 0;
		}
		/* No option applies here: one is refused by name, never taken as a file. */
		if (argv[i][0] == '-' && argv[i][1]) {
			rb_err("policy: unknown option `%s` (see `runbox policy --help`)", argv[i]);
			return 125;
		}
	}
	if (argc > 3) {
		rb_err("policy: unexpected argument `%s` (see `runbox policy --help`)", argv[3]);
		return 125;
	}
	if (argc != 3 || (strcmp(argv[1], "validate") != 0 && strcmp(argv[1], "show") != 0)) {
		fputs(usage, stderr);
		return 125;
	}
	struct rb_error err;
	struct rb_paths paths;
	if (rb_paths_init(&paths, rb_cli_host(), NULL, &err) < 0) {
		rb_err("%s", err.msg);
		return 125;
	}
	struct rb_policy pol;
	if (rb_policy_load(argv[2], paths.data_dir, paths.config_dir, &pol, &err) < 0) {
		rb_err("%s", err.msg);
		rb_policy_free(&pol);
		return 125;
	}
	if (!strcmp(argv[1], "validate")) {
		/* The filter is built as a run builds it (no cache), so a syscall name that run would
		 * refuse fails here too. */
		struct rb_bpf bpf = {0};
		if (rb_seccomp_prepare(&pol, paths.data_dir, NULL, &bpf, &err) < 0) {
			rb_err("policy %s: %s", pol.source, err.msg);
			rb_policy_free(&pol);
			return 125;
		}
		rb_seccomp_free(&bpf);
		printf("%s: valid policy `%s`, hash %s\n", pol.source, pol.name, pol.hash);
		rb_policy_open_settings(&pol, print_open, NULL);
	} else {
		char *text = NULL;
		if (rb_read_file(pol.source, 1 << 20, &text, NULL, &err) < 0) {
			rb_err("%s", err.msg);
			rb_policy_free(&pol);
			return 125;
		}
		printf("# %s\n# hash %s\n%s", pol.source, pol.hash, text);
		if (text[0] && text[strlen(text) - 1] != '\n')
			putchar('\n');
		free(text);
	}
	rb_policy_free(&pol);
	return 0;
}
