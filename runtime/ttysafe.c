/* Terminal-safe copies of a step's output (see ttysafe.h). */
#include "runtime/ttysafe.h"

#include <stdio.h>

size_t rb_ttysafe(struct rb_ttysafe *st, const char *in_, size_t len, char *out)
{
	const unsigned char *in = (const unsigned char *)in_;
	size_t j = 0;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = in[i];
		if (st->lead) {
			st->lead = 0;
			if (c >= 0x80 && c <= 0x9f) {
				j += (size_t)snprintf(out + j, 8, "\\u%04x", c);
				continue;
			}
			out[j++] = (char)0xc2;
		}
		if (c == 0xc2) {
			st->lead = c; /* decided by the next byte, maybe in the next chunk */
		} else if ((c < 0x20 && c != '\n' && c != '\t' && c != '\r') || c == 0x7f) {
			j += (size_t)snprintf(out + j, 8, "\\x%02x", c);
		} else {
			out[j++] = (char)c;
		}
	}
	return j;
}

size_t rb_ttysafe_end(struct rb_ttysafe *st, char *out)
{
	if (!st->lead)
		return 0;
	st->lead = 0;
	out[0] = (char)0xc2;
	return 1;
}
