/* The Connect protocol's JSON codec as the E2B front end speaks it: 5-byte envelopes (flags, a
 * big-endian length), errors as {code, message}, base64 for bytes, E2B's error bodies. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/evp.h>

#include "serve/e2b_internal.h"

int e2b_envelope(char **buf, size_t *len, size_t *cap, unsigned flags, const json_t *msg)
{
	char *text = json_dumps(msg, JSON_COMPACT);
	if (!text)
		return -1;
	size_t n = strlen(text);
	if (*len + 5 + n > *cap) {
		size_t nc = (*len + 5 + n) * 2;
		char *nb = realloc(*buf, nc);
		if (!nb) {
			free(text);
			return -1;
		}
		*buf = nb;
		*cap = nc;
	}
	unsigned char *p = (unsigned char *)*buf + *len;
	p[0] = (unsigned char)flags;
	p[1] = (unsigned char)(n >> 24);
	p[2] = (unsigned char)(n >> 16);
	p[3] = (unsigned char)(n >> 8);
	p[4] = (unsigned char)n;
	memcpy(p + 5, text, n);
	*len += 5 + n;
	free(text);
	return 0;
}

json_t *e2b_rpc_body(const char *body, size_t len, bool enveloped, const char **why)
{
	if (enveloped) {
		const unsigned char *p = (const unsigned char *)body;
		if (len < 5) {
			*why = "the request is not one Connect envelope";
			return NULL;
		}
		size_t n = (size_t)p[1] << 24 | (size_t)p[2] << 16 | (size_t)p[3] << 8 | p[4];
		if (p[0] != 0 || n != len - 5) {
			*why = p[0] != 0 ? "compressed or flagged request envelopes are not supported"
			                 : "the request envelope's length is not the body's";
			return NULL;
		}
		body += 5;
		len = n;
	}
	if (!len)
		return json_object();
	json_t *v = json_loadb(body, len, JSON_REJECT_DUPLICATES, NULL);
	if (!v || !json_is_object(v)) {
		json_decref(v);
		*why = "the request message is not a JSON object";
		return NULL;
	}
	return v;
}

static unsigned status_of_code(const char *code)
{
	static const struct {
		const char *code;
		unsigned status;
	} t[] = {{"canceled", 499},           {"invalid_argument", 400},    {"deadline_exceeded", 504},
	         {"not_found", 404},          {"already_exists", 409},      {"permission_denied", 403},
	         {"resource_exhausted", 429}, {"failed_precondition", 400}, {"aborted", 409},
	         {"unimplemented", 501},      {"unavailable", 503},         {"unauthenticated", 401}};
	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
		if (!strcmp(code, t[i].code))
			return t[i].status;
	return 500;
}

void e2b_rpc_error(struct e2b_reply *rp, const char *code, const char *msg)
{
	rp->status = status_of_code(code);
	rp->json = json_pack("{s:s, s:s}", "code", code, "message", msg);
}

const char *e2b_code_of_status(unsigned status)
{
	switch (status) {
	case 400: return "invalid_argument";
	case 401: return "unauthenticated";
	case 403: return "permission_denied";
	case 404: return "not_found";
	case 409: return "failed_precondition";
	case 413: return "resource_exhausted";
	case 503: return "unavailable";
	default: return "internal";
	}
}

char *e2b_b64(const void *data, size_t len)
{
	char *out = malloc(4 * ((len + 2) / 3) + 1);
	if (out)
		EVP_EncodeBlock((unsigned char *)out, data, (int)len);
	return out;
}

char *e2b_unb64(const char *s, size_t *len)
{
	size_t n = strlen(s);
	/* Padded to a multiple of 4 (the JSON codec may drop the padding). */
	char *padded = malloc(n + 4);
	if (!padded)
		return NULL;
	memcpy(padded, s, n);
	while (n % 4)
		padded[n++] = '=';
	padded[n] = '\0';
	unsigned char *out = malloc(n / 4 * 3 + 1);
	int r = out ? EVP_DecodeBlock(out, (unsigned char *)padded, (int)n) : -1;
	if (r < 0) {
		free(padded);
		free(out);
		return NULL;
	}
	/* EVP_DecodeBlock counts the padding's zero bytes. */
	size_t pad = 0;
	while (pad < 2 && n > pad && padded[n - 1 - pad] == '=')
		pad++;
	free(padded);
	*len = (size_t)r - pad;
	return (char *)out;
}

void e2b_api_error(struct e2b_reply *rp, unsigned status, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	rp->status = status;
	rp->json = json_pack("{s:i, s:s}", "code", (int)status, "message", msg);
}

const char *e2b_native_msg(const json_t *reply)
{
	const char *m = json_string_value(json_object_get(reply, "error"));
	return m ? m : "runbox serve failed";
}

void e2b_time(int64_t ms, char *out, size_t len)
{
	time_t s = (time_t)(ms / 1000);
	struct tm tm;
	gmtime_r(&s, &tm);
	char base[32];
	strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(out, len, "%s.%03dZ", base, (int)(ms % 1000));
}

int64_t e2b_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
