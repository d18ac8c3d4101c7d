/* Output copied to an operator's terminal: control bytes are shown, never obeyed, so a step
 * cannot retitle the window, move the cursor, or answer for the operator (OSC, CSI, DCS). */
#ifndef RB_TTYSAFE_H
#define RB_TTYSAFE_H

#include <stddef.h>
#include <stdio.h>

/* State carried between chunks: a UTF-8 lead byte 0xC2 whose next byte has not come yet. */
struct rb_ttysafe {
	unsigned char lead;
};

/* Room out needs for len input bytes (the worst case: every byte shown as "\xNN"). */
#define RB_TTYSAFE_ROOM(len) (4 * (len) + 8)

/* Copies in[0..len) into out: C0 control bytes other than \n, \t and \r, and DEL, become the
 * text \xNN; the C1 controls U+0080..U+009F (UTF-8 C2 80..C2 9F) become \u00NN. Every other
 * byte is copied as is. Returns the bytes written. */
size_t rb_ttysafe(struct rb_ttysafe *st, const char *in, size_t len, char *out);
/* The end of the stream: a held lead byte, as it was. Returns the bytes written (0 or 1). */
size_t rb_ttysafe_end(struct rb_ttysafe *st, char *out);

/* One line of a message (the logger's, a listing's field), which may hold text chosen inside a
 * sandbox (a file's name, a step's output, a path): as rb_ttysafe, and \n and \r as \x0a and
 * \x0d, and every byte that is not part of valid UTF-8 as \xNN, so the text can neither start
 * a line of its own, nor overwrite this one, nor be a control in another encoding. \t and
 * valid UTF-8 (é, €) stay. Writes at most out_size - 1 bytes and a NUL, never a cut escape or
 * character; returns the length written. */
size_t rb_ttysafe_line(const char *in, char *out, size_t out_size);
/* Writes s to f as rb_ttysafe_line shows it, whatever its length. */
void rb_ttysafe_fputs(FILE *f, const char *s);

#endif
