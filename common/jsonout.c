/* Printed JSON with DEL and C1 controls escaped (see jsonout.h). */
#include "common/jsonout.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"

char *rb_json_escape_controls(const char *dumped)
{
	size_t n = strlen(dumped), extra = 0;
	for (size_t i = 0; i < n; i++)
		if (dumped[i] == 0x7f)
			extra += 5; /* 1 byte -> \u007f */
		else if ((unsigned char)dumped[i] == 0xc2 && i + 1 < n && (unsigned char)dumped[i + 1] >= 0x80 &&
		         (unsigned char)dumped[i + 1] <= 0x9f)
			extra += 4; /* 2 bytes -> \u00NN */
	char *out = malloc(n + extra + 1);
	if (!out)
		return NULL;
	static const char hex[] = "0123456789abcdef";
	size_t j = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)dumped[i], cp = 0;
		if (c == 0x7f)
			cp = 0x7f;
		else if (c == 0xc2 && i + 1 < n && (unsigned char)dumped[i + 1] >= 0x80 &&
		         (unsigned char)dumped[i + 1] <= 0x9f)
			cp = (unsigned char)dumped[++i];
		if (!cp) {
			out[j++] = (char)c;
			continue;
		}
		memcpy(out + j, "\\u00", 4);
		out[j + 4] = hex[cp >> 4];
		out[j + 5] = hex[cp & 0xf];
		j += 6;
	}
	out[j] = '\0';
	return out;
}

int rb_json_print(FILE *f, const json_t *v, size_t flags)
{
	if (!(flags & JSON_REAL_PRECISION(31)))
		flags |= RB_JSON_REAL_PRECISION;
	_cleanup_free_ char *text = json_dumps(v, flags);
	_cleanup_free_ char *safe = text ? rb_json_escape_controls(text) : NULL;
	if (!safe) {
		errno = ENOMEM;
		return -1;
	}
	if (fputs(safe, f) == EOF || fputc('\n', f) == EOF)
		return -1;
	return 0;
}
