/* JSON as runbox prints it (results, listings, exports): text from a sandbox cannot reach a
 * terminal as a control character, even inside a JSON string. */
#ifndef RB_JSONOUT_H
#define RB_JSONOUT_H

#include <jansson.h>
#include <stdio.h>

/* Numbers printed with 15 significant digits: a time of 85.767 ms prints as 85.767, not as the
 * double's 85.766999999999996. Every printed result and listing uses it (rb_json_print adds it). */
#define RB_JSON_REAL_PRECISION JSON_REAL_PRECISION(15)

/* Writes v (json_dumps flags, RB_JSON_REAL_PRECISION unless flags name a precision) and a newline to f, with DEL and
 * the C1 controls U+0080..U+009F escaped as \u007f and \u0080..\u009f; jansson escapes the C0 controls itself. The same
 * JSON value, and every other character (é, emoji) as it was. 0, or -1 with errno (EPIPE). */
int rb_json_print(FILE *f, const json_t *v, size_t flags);

/* The same escaping of text jansson dumped (valid UTF-8, so 0xC2 is always a lead byte and
 * 0x7F only ever inside a string); returns a new string, or NULL when memory ran out. */
char *rb_json_escape_controls(const char *dumped);

#endif
