/* Shared helpers: duration and size parsing, file I/O, directory trees, sha256, ids. */
#define _GNU_SOURCE
/* The SHA256_* calls go straight to libcrypto's implementation; EVP_sha256() (and HMAC(),
 * which uses it) would first initialise OpenSSL 3's provider machinery, ~5 million
 * instructions on every start. */
#define OPENSSL_SUPPRESS_DEPRECATED
#include "common/util.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/asan_interface.h>
#endif
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"

void rb_json_decrefp(void *p)
{
	json_t **j = p;
	if (*j)
		json_decref(*j);
}

json_t *rb_json_strv(char *const *v, size_t *bad)
{
	json_t *a = json_array();
	for (size_t i = 0; a && v && v[i]; i++) {
		json_t *s = json_string(v[i]);
		if (!s || json_array_append_new(a, s) < 0) {
			*bad = i;
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

int rb_parse_duration_ms(const char *s, uint64_t *out_ms)
{
	/* A digit first (strtod would skip spaces, take a sign, "inf" or hex) and a unit last: a
	 * bare "10" could mean seconds or milliseconds, the confusion that makes a limit wrong. */
	if (!s || !isdigit((unsigned char)*s))
		return -1;
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || v < 0 || !isfinite(v))
		return -1;
	for (const char *p = s; p < end; p++)
		if (!isdigit((unsigned char)*p) && *p != '.')
			return -1; /* no exponent, no hex: "1e3s" is not how anyone writes a duration */
	double scale;
	if (!strcmp(end, "s"))
		scale = 1000;
	else if (!strcmp(end, "ms"))
		scale = 1;
	else if (!strcmp(end, "us"))
		scale = 0.001;
	else if (!strcmp(end, "m"))
		scale = 60000;
	else if (!strcmp(end, "h"))
		scale = 3600000;
	else
		return -1;
	double ms = v * scale;
	if (ms > (double)UINT64_MAX / 2)
		return -1;
	*out_ms = (uint64_t)(ms + 0.5);
	return 0;
}

int rb_parse_size(const char *s, uint64_t *out_bytes)
{
	if (!s || !*s || !isdigit((unsigned char)*s))
		return -1;
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || v < 0 || !isfinite(v))
		return -1;
	uint64_t mult = 1;
	switch (toupper((unsigned char)*end)) {
	case '\0': break;
	case 'B': mult = 1; break;
	case 'K': mult = 1ULL << 10; break;
	case 'M': mult = 1ULL << 20; break;
	case 'G': mult = 1ULL << 30; break;
	case 'T': mult = 1ULL << 40; break;
	default: return -1;
	}
	if (*end && toupper((unsigned char)*end) != 'B') {
		end++;
		if (!strcasecmp(end, "ib") || !strcasecmp(end, "b"))
			end += strlen(end);
	} else if (*end) {
		end++;
	}
	if (*end)
		return -1;
	double b = v * (double)mult;
	if (b >= 18446744073709551615.0)
		return -1;
	*out_bytes = (uint64_t)b;
	return 0;
}

const char *rb_fmt_duration(uint64_t ms, char *buf, size_t len)
{
	if (ms % 3600000 == 0)
		snprintf(buf, len, "%" PRIu64 "h", ms / 3600000);
	else if (ms % 60000 == 0)
		snprintf(buf, len, "%" PRIu64 "m", ms / 60000);
	else if (ms % 1000 == 0)
		snprintf(buf, len, "%" PRIu64 "s", ms / 1000);
	else
		snprintf(buf, len, "%" PRIu64 "ms", ms);
	return buf;
}

const char *rb_fmt_size(uint64_t b, char *buf, size_t len)
{
	static const char units[] = "TGMK";
	for (int i = 0; b && i < 4; i++) {
		uint64_t u = 1ull << (10 * (4 - i));
		if (b % u == 0) {
			snprintf(buf, len, "%" PRIu64 "%c", b / u, units[i]);
			return buf;
		}
	}
	snprintf(buf, len, "%" PRIu64, b);
	return buf;
}

static int read_fd(int fd, const char *path, size_t max, char **out, size_t *out_len, struct rb_error *err);

bool rb_find_in_path(const char *prog, char *out, size_t size)
{
	const char *path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
	for (const char *p = path; *p;) {
		size_t n = strcspn(p, ":");
		if (n > 0 && n < PATH_MAX && (size_t)snprintf(out, size, "%.*s/%s", (int)n, p, prog) < size &&
		    access(out, X_OK) == 0)
			return true;
		p += n;
		p += strspn(p, ":");
	}
	if (size)
		out[0] = '\0';
	return false;
}

int rb_read_file(const char *path, size_t max, char **out, size_t *out_len, struct rb_error *err)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return rb_error_set(err, errno, "open `%s`", path);
	return read_fd(fd, path, max, out, out_len, err);
}

int rb_read_document(const char *path, size_t max, char **out, struct rb_error *err)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return rb_error_set(err, errno, "`%s`", path);
	struct stat st;
	if (fstat(fd, &st) < 0)
		return rb_error_set(err, errno, "`%s`", path);
	if (!S_ISREG(st.st_mode))
		return rb_error_set(err, EINVAL, "`%s`: not a regular file", path);
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	if (read_fd(fd, path, max, &text, &len, err) < 0)
		return -1;
	if (!text || strlen(text) != len)
		return rb_error_set(err, EINVAL, "`%s`: contains a NUL byte", path);
	*out = rb_steal_ptr(&text);
	return 0;
}

static int read_fd(int fd, const char *path, size_t max, char **out, size_t *out_len, struct rb_error *err)
{
	size_t cap = 4096, len = 0;
	_cleanup_free_ char *buf = malloc(cap + 1);
	if (!buf)
		return rb_error_set(err, ENOMEM, "read `%s`", path);
	for (;;) {
		if (len == cap) {
			if (cap >= max)
				return rb_error_set(err, EFBIG, "read `%s`: larger than %zu bytes", path, max);
			cap = cap * 2 > max ? max : cap * 2;
			char *nb = realloc(buf, cap + 1);
			if (!nb)
				return rb_error_set(err, ENOMEM, "read `%s`", path);
			buf = nb;
		}
		ssize_t n = read(fd, buf + len, cap - len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return rb_error_set(err, errno, "read `%s`", path);
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	buf[len] = '\0';
	if (out_len)
		*out_len = len;
	*out = rb_steal_ptr(&buf);
	return 0;
}

const char *rb_proc_stat_field(const char *stat, int field)
{
	const char *p = strrchr(stat, ')');
	for (int f = 2; p && *p; p++)
		if (*p == ' ' && ++f == field)
			return p + 1;
	return NULL;
}

bool rb_next_line(const char **p, char *line, size_t n)
{
	if (!**p)
		return false;
	size_t len = strcspn(*p, "\n");
	snprintf(line, n, "%.*s", (int)len, *p);
	*p += len + ((*p)[len] == '\n');
	return true;
}

int rb_write_file(const char *path, const char *data, struct rb_error *err)
{
	_cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return rb_error_set(err, errno, "open `%s`", path);
	size_t len = strlen(data);
	ssize_t n = write(fd, data, len);
	if (n < 0)
		return rb_error_set(err, errno, "write `%s` to `%s`", data, path);
	if ((size_t)n != len)
		return rb_error_set(err, EIO, "short write to `%s`", path);
	return 0;
}

int rb_put_private_file(const char *path, const void *data, size_t len, enum rb_put_mode mode, struct rb_error *err)
{
	char tmp[PATH_MAX];
	if (snprintf(tmp, sizeof tmp, "%s.new-XXXXXX", path) >= (int)sizeof tmp)
		return rb_error_set(err, ENAMETOOLONG, "`%s`", path);
	int fd = mkostemp(tmp, O_CLOEXEC); /* mode 0600 */
	if (fd < 0)
		return rb_error_set(err, errno, "create `%s`", tmp);
	int r = rb_write_all(fd, data, len);
	if (close(fd) < 0)
		r = -1;
	if (r == 0)
		r = mode == RB_PUT_NEW ? link(tmp, path) : rename(tmp, path);
	int e = errno;
	if (r < 0 || mode == RB_PUT_NEW)
		unlink(tmp);
	if (r < 0 && mode == RB_PUT_NEW && e == EEXIST)
		return 1;
	return r < 0 ? rb_error_set(err, e, "write `%s`", path) : 0;
}

/* One loop for both: write(2) on any fd, or send(2) with MSG_NOSIGNAL on a
 * socket whose peer may be gone (EPIPE, not SIGPIPE). */
static int put_all(int fd, const void *p, size_t n, bool socket)
{
	const char *c = p;
	while (n > 0) {
		ssize_t w = socket ? send(fd, c, n, MSG_NOSIGNAL) : write(fd, c, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			if (w == 0)
				errno = EIO;
			return -1;
		}
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

void rb_close_except(unsigned from, const int *keep, unsigned n)
{
	for (;;) {
		unsigned next = ~0U; /* the lowest kept descriptor at or above from */
		for (unsigned i = 0; i < n; i++)
			if (keep[i] >= 0 && (unsigned)keep[i] >= from && (unsigned)keep[i] < next)
				next = (unsigned)keep[i];
		if (next == ~0U) {
			syscall(SYS_close_range, from, ~0U, 0);
			return;
		}
		if (next > from)
			syscall(SYS_close_range, from, next - 1, 0);
		from = next + 1;
	}
}

int rb_write_all(int fd, const void *p, size_t n)
{
	return put_all(fd, p, n, false);
}

int rb_send_all(int fd, const void *p, size_t n)
{
	return put_all(fd, p, n, true);
}

int rb_mkdir_p(const char *path, mode_t mode, struct rb_error *err)
{
	char buf[4096];
	if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
		return rb_error_set(err, ENAMETOOLONG, "mkdir `%s`", path);
	/* Usually all but the last component exist (or all do): one call. */
	if (mkdir(buf, mode) == 0) {
		chmod(buf, mode);
		return 0;
	}
	if (errno == EEXIST)
		return 0;
	if (errno != ENOENT)
		return rb_error_set(err, errno, "mkdir `%s`", buf);
	for (char *p = buf + 1;; p++) {
		if (*p == '/' || *p == '\0') {
			char c = *p;
			*p = '\0';
			if (mkdir(buf, mode) == 0)
				chmod(buf, mode);
			else if (errno != EEXIST)
				return rb_error_set(err, errno, "mkdir `%s`", buf);
			*p = c;
			if (!c)
				break;
		}
	}
	return 0;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	int r = flag == FTW_DP ? rmdir(path) : unlink(path);
	return r < 0 && errno != ENOENT ? -1 : 0;
}

int rb_rm_rf(const char *path, struct rb_error *err)
{
	if (nftw(path, rm_one, 32, FTW_DEPTH | FTW_PHYS | FTW_MOUNT) < 0 && errno != ENOENT)
		return rb_error_set(err, errno, "remove `%s`", path);
	return 0;
}

void rb_sha256_hex(const void *data, size_t len, char out[65])
{
	unsigned char md[SHA256_DIGEST_LENGTH];
	SHA256_CTX ctx;
	SHA256_Init(&ctx);
	SHA256_Update(&ctx, data, len);
	SHA256_Final(md, &ctx);
	for (size_t i = 0; i < 32; i++)
		sprintf(out + 2 * i, "%02x", md[i]);
	out[64] = '\0';
}

void *rb_stack_alloc(size_t size)
{
	char *base =
	    mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
	if (base == MAP_FAILED)
		return NULL;
	if (mprotect(base, 4096, PROT_NONE) < 0) {
		int e = errno;
		munmap(base, size);
		errno = e;
		return NULL;
	}
#ifdef __SANITIZE_ADDRESS__
	/* A stack a clone ran on and left by _exit keeps its frames' poison in the shadow, and a
	 * later mapping at the same address would inherit it. */
	__asan_unpoison_memory_region(base, size);
#endif
	return base;
}

void rb_hmac_sha256(const void *key, size_t keylen, const void *data, size_t len, unsigned char out[32])
{
	enum { BLOCK = 64 };
	unsigned char k[BLOCK] = {0}, pad[BLOCK], inner[SHA256_DIGEST_LENGTH];
	SHA256_CTX ctx;
	if (keylen > BLOCK) { /* a key longer than a block is hashed first */
		SHA256_Init(&ctx);
		SHA256_Update(&ctx, key, keylen);
		SHA256_Final(k, &ctx);
	} else if (keylen) {
		memcpy(k, key, keylen);
	}
	for (int i = 0; i < BLOCK; i++)
		pad[i] = k[i] ^ 0x36;
	SHA256_Init(&ctx);
	SHA256_Update(&ctx, pad, BLOCK);
	SHA256_Update(&ctx, data, len);
	SHA256_Final(inner, &ctx);
	for (int i = 0; i < BLOCK; i++)
		pad[i] = k[i] ^ 0x5c;
	SHA256_Init(&ctx);
	SHA256_Update(&ctx, pad, BLOCK);
	SHA256_Update(&ctx, inner, sizeof inner);
	SHA256_Final(out, &ctx);
	OPENSSL_cleanse(k, sizeof k);
	OPENSSL_cleanse(pad, sizeof pad);
	OPENSSL_cleanse(inner, sizeof inner);
	OPENSSL_cleanse(&ctx, sizeof ctx);
}

uint64_t rb_now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

#ifndef MFD_NOEXEC_SEAL
#define MFD_NOEXEC_SEAL 0x0008U /* Linux 6.3; older kernels refuse it with EINVAL */
#endif

int rb_sealed_memfd(const char *name, const void *data, size_t len, struct rb_error *err)
{
	int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_NOEXEC_SEAL);
	if (fd < 0 && errno == EINVAL) /* before 6.3 */
		fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return rb_error_set(err, errno, "memfd_create `%s`", name);
	const char *p = data;
	for (size_t off = 0; off < len;) {
		ssize_t n = write(fd, p + off, len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int e = n < 0 ? errno : EIO;
			close(fd);
			return rb_error_set(err, e, "write memfd `%s`", name);
		}
		off += (size_t)n;
	}
	if (lseek(fd, 0, SEEK_SET) < 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) < 0) {
		int e = errno;
		close(fd);
		return rb_error_set(err, e, "seal memfd `%s`", name);
	}
	return fd;
}

int rb_random_hex(char *out, size_t n)
{
	unsigned char raw[64];
	size_t k = (n - 1) / 2;
	if (k > sizeof raw || getrandom(raw, k, 0) != (ssize_t)k)
		return -1;
	for (size_t i = 0; i < k; i++)
		snprintf(out + 2 * i, 3, "%02x", raw[i]);
	out[2 * k] = '\0';
	return 0;
}

void rb_new_run_id(char out[24])
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	uint64_t ms = (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
	uint32_t rnd = 0;
	if (getrandom(&rnd, sizeof rnd, 0) != sizeof rnd)
		rnd = (uint32_t)ts.tv_nsec ^ (uint32_t)getpid();
	snprintf(out, 24, "%012" PRIx64 "%08" PRIx32, (uint64_t)(ms & 0xffffffffffffULL), rnd);
}
