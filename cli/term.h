/* The caller's terminal while `runbox run -t` runs a step on a pty of the sandbox's own: raw
 * mode, restored on every way out, and its size changes as records on a pipe. */
#ifndef RB_CLI_TERM_H
#define RB_CLI_TERM_H

#include <stdbool.h>

#include "runtime/run/run.h"

/* The size of the terminal on fd, or false when fd is no terminal (or says 0x0). */
bool rb_term_size(int fd, struct rb_tty_size *out);
/* Puts the terminal on fd in raw mode (cfmakeraw: every byte, ^C and ^D included, goes to the
 * step's terminal, whose line discipline gives them their meaning). Its settings are restored
 * by rb_term_restore, at exit, and from a handler of every signal that would end runbox
 * otherwise (the handler restores, then the signal does what it would have). Returns 0 or -1
 * with errno. */
int rb_term_raw(int fd);
/* The terminal's own settings again, with what is queued on its input discarded (TCSAFLUSH):
 * the bytes a terminal sends to answer a query the step's output made would otherwise be read
 * by the next program, the caller's shell. Idempotent; async-signal-safe. */
void rb_term_restore(void);
/* A nonblocking pipe's read end on which each SIGWINCH puts the new size of the terminal on fd
 * (a struct rb_tty_size record, for rb_step_req.resize_fd), or -1 with errno. */
int rb_term_watch_size(int fd);

#endif
