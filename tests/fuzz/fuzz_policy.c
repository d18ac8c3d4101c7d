/* Fuzz target: the policy parser (rb_policy_parse). Any text is refused or parsed; a parsed
 * policy names its seccomp profile as a plain file name and hashes the same twice. */
#define _GNU_SOURCE
#include "common/error.h"
#include "policy/policy.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = fuzz_cstr(data, size);
	if (!text)
		return 0;
	struct rb_policy a, b;
	struct rb_error err = {0};
	/* data_dir "." (the fuzzers run from the checkout): the profile file is read and hashed. */
	int ra = rb_policy_parse(text, "fuzz.json", ".", &a, &err);
	if (ra == 0) {
		if (memchr(a.name, '\0', sizeof a.name) == NULL)
			FUZZ_FAIL("policy name not NUL-terminated");
		if (strlen(a.hash) != 64 || strspn(a.hash, "0123456789abcdef") != 64)
			FUZZ_FAIL("policy hash '%.80s' is not 64 hex digits", a.hash);
		if (strchr(a.seccomp_profile, '/') || strcmp(a.seccomp_profile, "..") == 0)
			FUZZ_FAIL("seccomp profile '%s' is a path, not a name under policy/seccomp/",
			          a.seccomp_profile);
		struct rb_error err2 = {0};
		if (rb_policy_parse(text, "fuzz.json", ".", &b, &err2) != 0)
			FUZZ_FAIL("a policy parsed once is refused the second time: %s", err2.msg);
		if (strcmp(a.hash, b.hash) != 0)
			FUZZ_FAIL("one policy text, two hashes: %s %s", a.hash, b.hash);
		rb_policy_free(&b);
		rb_policy_free(&a);
	} else if (err.msg[0] == '\0') {
		FUZZ_FAIL("a refused policy comes with no message");
	}
	free(text);
	return 0;
}
