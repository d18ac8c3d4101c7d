/* The copy loop (see copyfd.h). */
#define _GNU_SOURCE
/* SHA256_* straight from libcrypto, as common/util.c does (no EVP provider start-up). */
#define OPENSSL_SUPPRESS_DEPRECATED
#include "common/copyfd.h"

#include <errno.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <unistd.h>

#include "common/util.h"

int rb_copy_fd(int in, int out, uint64_t cap, uint64_t *copied, char *sha256_hex, enum rb_copy_fail *why)
{
	SHA256_CTX sha;
	if (sha256_hex)
		SHA256_Init(&sha);
	char buf[65536];
	*copied = 0;
	*why = RB_COPY_OK;
	for (;;) {
		ssize_t n = read(in, buf, sizeof buf);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			*why = RB_COPY_READ;
			return -1;
		}
		if (n == 0)
			break;
		if ((uint64_t)n > cap - *copied) {
			*why = RB_COPY_CAP;
			errno = EFBIG;
			return -1;
		}
		if (sha256_hex)
			SHA256_Update(&sha, buf, (size_t)n);
		if (rb_write_all(out, buf, (size_t)n) < 0) {
			*why = RB_COPY_WRITE;
			return -1;
		}
		*copied += (uint64_t)n;
	}
	if (sha256_hex) {
		unsigned char md[SHA256_DIGEST_LENGTH];
		SHA256_Final(md, &sha);
		for (size_t i = 0; i < SHA256_DIGEST_LENGTH; i++)
			snprintf(sha256_hex + 2 * i, 3, "%02x", md[i]);
	}
	return 0;
}
