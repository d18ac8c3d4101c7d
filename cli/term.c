/* The caller's terminal during `runbox run -t`: raw mode and its restoring on every way out,
 * and SIGWINCH turned into size records on a pipe (cli/term.h). */
#define _GNU_SOURCE
#include "cli/term.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

/* Signals are process-wide: their handlers find the terminal and its saved settings only in
 * globals. One terminal per process (the CLI's stdin). */
static int term_fd = -1;
static struct termios term_saved, term_raw;
static volatile sig_atomic_t term_is_raw;
static int winch_src = -1, winch_w = -1;

bool rb_term_size(int fd, struct rb_tty_size *out)
{
	struct winsize ws;
	if (ioctl(fd, TIOCGWINSZ, &ws) < 0 || !ws.ws_row || !ws.ws_col)
		return false;
	*out = (struct rb_tty_size){ws.ws_row, ws.ws_col};
	return true;
}

void rb_term_restore(void)
{
	if (!term_is_raw)
		return;
	term_is_raw = 0;
	int saved = errno;
	while (tcsetattr(term_fd, TCSAFLUSH, &term_saved) < 0 && errno == EINTR)
		;
	errno = saved;
}

/* A signal that would end runbox: the terminal first, then the signal's own action (the
 * handler was installed with SA_RESETHAND, so raise meets the default). */
static void on_fatal(int sig)
{
	rb_term_restore();
	raise(sig);
}

/* Continued after a stop (SIGSTOP from outside: ^Z is the step's byte): the shell that ran the
 * job in between set its own modes; raw again. */
static void on_cont(int sig)
{
	int saved = errno;
	if (term_is_raw)
		tcsetattr(term_fd, TCSANOW, &term_raw);
	errno = saved;
}

/* Whether sig's default action ends the process (those that stop, continue or are ignored by
 * default are left alone, as are SIGKILL and SIGSTOP, which nothing catches). */
static bool ends_process(int sig)
{
	switch (sig) {
	case SIGKILL:
	case SIGSTOP:
	case SIGCHLD:
	case SIGCONT:
	case SIGURG:
	case SIGWINCH:
	case SIGTSTP:
	case SIGTTIN:
	case SIGTTOU: return false;
	default: return true;
	}
}

int rb_term_raw(int fd)
{
	if (tcgetattr(fd, &term_saved) < 0)
		return -1;
	term_raw = term_saved;
	cfmakeraw(&term_raw);
	term_fd = fd;
	static bool once;
	if (!once) {
		once = true;
		atexit(rb_term_restore);
		/* Only where the disposition is the default: what runbox catches itself (SIGINT and
		 * SIGTERM, its cancel; SIGPIPE) ends through its normal path, which restores. */
		for (int sig = 1; sig < NSIG; sig++) {
			struct sigaction old;
			if (!ends_process(sig) || sigaction(sig, NULL, &old) < 0 || old.sa_handler != SIG_DFL)
				continue;
			struct sigaction sa = {.sa_handler = on_fatal, .sa_flags = SA_RESETHAND | SA_NODEFER};
			sigemptyset(&sa.sa_mask);
			sigaction(sig, &sa, NULL); /* glibc's own real-time signals refuse: fine */
		}
		struct sigaction sc = {.sa_handler = on_cont, .sa_flags = SA_RESTART};
		sigemptyset(&sc.sa_mask);
		sigaction(SIGCONT, &sc, NULL);
	}
	if (tcsetattr(fd, TCSANOW, &term_raw) < 0)
		return -1;
	term_is_raw = 1;
	return 0;
}

static void on_winch(int sig)
{
	int saved = errno;
	struct winsize ws;
	if (ioctl(winch_src, TIOCGWINSZ, &ws) == 0 && ws.ws_row && ws.ws_col) {
		struct rb_tty_size rec = {ws.ws_row, ws.ws_col};
		if (write(winch_w, &rec, sizeof rec) < 0)
			(void)0; /* the pipe is full: sizes wait there already, the newest is lost */
	}
	errno = saved;
}

int rb_term_watch_size(int fd)
{
	int p[2];
	if (winch_w >= 0)
		return errno = EBUSY, -1;
	if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0)
		return -1;
	winch_src = fd;
	winch_w = p[1];
	struct sigaction sa = {.sa_handler = on_winch, .sa_flags = SA_RESTART};
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGWINCH, &sa, NULL) < 0) {
		close(p[0]);
		close(p[1]);
		winch_w = -1;
		return -1;
	}
	return p[0];
}
