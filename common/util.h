/* Small shared helpers: parsing durations and sizes, whole-file I/O, directories, hashing. */
#ifndef RB_UTIL_H
#define RB_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"

/* "2.5s", "300ms", "1m", "2h", "150us": digits (and a point), then a unit; a bare number is
 * refused, as are signs, exponents and spaces. */
int rb_parse_duration_ms(const char *s, uint64_t *out_ms);
/* How every message asks for one. */
#define RB_DURATION_HINT "a duration like \"30s\" (a number, then us, ms, s, m or h)"
/* "256M", "1G", "4096", "512k" (binary units, case-insensitive, optional "iB"/"B"). */
int rb_parse_size(const char *s, uint64_t *out_bytes);
/* How messages show a duration ("30m", "1801s", "300ms") and a size ("1G", "1073741825"): the
 * largest unit that divides the value exactly, so the text parses back to the same value. */
const char *rb_fmt_duration(uint64_t ms, char *buf, size_t len);
const char *rb_fmt_size(uint64_t bytes, char *buf, size_t len);

/* Reads a whole file (at most max bytes) into a NUL-terminated buffer. */
int rb_read_file(const char *path, size_t max, char **out, size_t *out_len, struct rb_error *err);
/* Reads a document someone wrote (a policy, a manifest, a config, a profile): a regular file
 * (judged on the opened descriptor, so a FIFO or device swapped in can neither block nor feed
 * endless bytes), at most max bytes, holding no NUL byte, as a NUL-terminated string. Errors
 * name the file; the caller prefixes what the document is. */
int rb_read_document(const char *path, size_t max, char **out, struct rb_error *err);
/* The first executable prog in the system's directories (/usr/local/sbin, /usr/local/bin,
 * /usr/sbin, /usr/bin, /sbin, /bin) into out; false, with out empty, when there is none. Never
 * the process's $PATH: the library reads no environment (common/host.h), and a daemon running
 * as root must not run whatever helper (newuidmap, mmdebstrap) its starter's PATH names. */
bool rb_find_in_path(const char *prog, char *out, size_t size);
/* Writes all n bytes of p to fd, retrying short writes and EINTR. 0, or -1 with errno (a write
 * that wrote nothing counts as EIO). */
int rb_write_all(int fd, const void *p, size_t n);
/* Closes every descriptor from `from` up but the n in keep (any order; a negative one is none),
 * with close_range(2). */
void rb_close_except(unsigned from, const int *keep, unsigned n);
/* The same on a socket with send(MSG_NOSIGNAL): a peer gone is EPIPE, never a SIGPIPE. */
int rb_send_all(int fd, const void *p, size_t n);
/* The next line of text at *p (without its newline, cut to fit line[n]) for walking a file
 * read whole; advances *p past it. false at the end. */
bool rb_next_line(const char **p, char *line, size_t n);
/* Field `field` (>= 3, numbered as in proc(5)) of the text of a /proc/PID/stat: counted after
 * the command name's closing parenthesis (field 2, which may hold anything). NULL when the
 * text is shorter. */
const char *rb_proc_stat_field(const char *stat, int field);
/* Writes data to an existing file (cgroup, /proc knobs): open O_WRONLY, one write. */
int rb_write_file(const char *path, const char *data, struct rb_error *err);
/* Puts a private file (0600) holding the len bytes of data at path, whole or not at all: the
 * bytes go to a temporary beside it (mkostemp: a name of its own, never followed) that is then
 * linked into place (RB_PUT_NEW: if nothing is there; of two makers one wins) or renamed over
 * what is there (RB_PUT_REPLACE). path itself is never opened. 0 put; 1 RB_PUT_NEW and path
 * was there (unchanged); -1 with err. */
enum rb_put_mode { RB_PUT_NEW, RB_PUT_REPLACE };
int rb_put_private_file(const char *path, const void *data, size_t len, enum rb_put_mode mode, struct rb_error *err);
/* Fills out (of size n, odd) with (n - 1) / 2 random bytes as lowercase hex and a NUL; -1 with
 * errno when getrandom fails. */
int rb_random_hex(char *out, size_t n);
/* A memfd (close-on-exec, not executable where the kernel says so) holding data, at offset
 * 0, sealed against every change; or -1 with err. What is passed to the sandbox this way is
 * exactly what was written. */
int rb_sealed_memfd(const char *name, const void *data, size_t len, struct rb_error *err);
/* Creates path and its missing parents with mode exactly, whatever the umask; existing
 * directories are fine, and their modes are never changed. */
int rb_mkdir_p(const char *path, mode_t mode, struct rb_error *err);
/* Removes a tree without following symlinks or crossing mount points. */
int rb_rm_rf(const char *path, struct rb_error *err);

/* sha256 of a buffer as 64 hex digits plus NUL. */
void rb_sha256_hex(const void *data, size_t len, char out[65]);
/* HMAC-SHA256 (RFC 2104) of data under key, built on libcrypto's SHA256_* calls: OpenSSL 3's
 * HMAC() fetches the digest through its provider machinery first, 2.3 ms of a run's start
 * measured here. tests/unit/test_token.c checks it against RFC 4231 and against HMAC(). */
/* A stack for clone(2): size bytes of fresh memory (only the pages touched ever cost
 * anything) whose lowest page is a guard page. Returns its base, which munmap(base, size)
 * frees, or NULL with errno. The child's stack pointer starts at base + size. */
void *rb_stack_alloc(size_t size);
void rb_hmac_sha256(const void *key, size_t keylen, const void *data, size_t len, unsigned char out[32]);

/* The strings of a NULL-terminated vector as a JSON array, each one exactly; NULL when one is
 * not valid UTF-8 (JSON carries only text) or memory ran out, with its index in *bad. Never a
 * shorter array: dropping one would shift the rest (argv[2] would become argv[1]). */
struct json_t *rb_json_strv(char *const *v, size_t *bad);

/* Monotonic clock in microseconds. */
uint64_t rb_now_us(void);

/* A time-ordered unique id: 12 hex digits of milliseconds since the epoch, 8 random. */
void rb_new_run_id(char out[24]);

#endif
