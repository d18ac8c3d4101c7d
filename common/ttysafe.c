/* Terminal-safe copies of a step's output (see ttysafe.h). */
#include "common/ttysafe.h"

#include <stdio.h>
#include <string.h>

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

/* The length of the valid UTF-8 sequence at p (RFC 3629: no overlong forms, surrogates or
 * code points above U+10FFFF), or 0. */
static size_t utf8_len(const unsigned char *p)
{
	unsigned char c = p[0];
	if (c < 0x80)
		return 1;
	size_t n;
	unsigned char lo = 0x80, hi = 0xbf;
	if (c >= 0xc2 && c <= 0xdf)
		n = 2;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3, lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4, lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
	else
		return 0;
	if (p[1] < lo || p[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if (p[i] < 0x80 || p[i] > 0xbf)
			return 0;
	return n;
}

size_t rb_ttysafe_line(const char *in_, char *out, size_t out_size)
{
	const unsigned char *in = (const unsigned char *)in_;
	size_t j = 0;
	if (!out_size)
		return 0;
	while (*in) {
		char esc[8];
		size_t n = utf8_len(in), w;
		const char *piece = (const char *)in;
		if (n == 1 && ((*in < 0x20 && *in != '\t') || *in == 0x7f)) {
			w = (size_t)snprintf(esc, sizeof esc, "\\x%02x", *in), piece = esc;
		} else if (n == 2 && in[0] == 0xc2 && in[1] <= 0x9f) {
			w = (size_t)snprintf(esc, sizeof esc, "\\u%04x", in[1]), piece = esc;
		} else if (n == 0) {
			w = (size_t)snprintf(esc, sizeof esc, "\\x%02x", *in), piece = esc;
			n = 1;
		} else {
			w = n;
		}
		if (j + w >= out_size)
			break;
		memcpy(out + j, piece, w);
		j += w;
		in += n;
	}
	out[j] = '\0';
	return j;
}

void rb_ttysafe_fputs(FILE *f, const char *s)
{
	/* Piece by piece: rb_ttysafe_line escapes a byte to at most 4, so 256 bytes of input
	 * always fit the buffer, and a UTF-8 character is never cut (pieces end before a
	 * continuation byte). */
	char piece[257], out[4 * 256 + 1];
	size_t len = strlen(s);
	for (size_t at = 0; at < len;) {
		size_t n = len - at < 256 ? len - at : 256;
		while (n < len - at && n > 1 && ((unsigned char)s[at + n] & 0xc0) == 0x80)
			n--;
		memcpy(piece, s + at, n);
		piece[n] = '\0';
		rb_ttysafe_line(piece, out, sizeof out);
		fputs(out, f);
		at += n;
	}
}
