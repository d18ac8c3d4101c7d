/* What every fuzz target shares: libFuzzer's entry point, a NUL-terminated copy of the input,
 * and a failure that names the property broken (abort, so libFuzzer and the driver see it). */
#ifndef RB_FUZZ_H
#define RB_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A malloc'd copy of data with a NUL after it (the parsers take C strings), or NULL. */
static inline char *fuzz_cstr(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	if (s) {
		memcpy(s, data, size);
		s[size] = '\0';
	}
	return s;
}

#define FUZZ_FAIL(...)                                                                                                 \
	do {                                                                                                           \
		fprintf(stderr, "fuzz property broken: " __VA_ARGS__);                                                 \
		fputc('\n', stderr);                                                                                   \
		abort();                                                                                               \
	} while (0)

#endif
