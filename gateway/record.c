/* The sent record of a call and its id (see record.h). */
#define _GNU_SOURCE
#include "gateway/record.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

/* A fresh id; should the kernel have no random bytes, the clock's still tell calls apart. */
static void call_id(char out[RB_GW_CALL_ID_MAX])
{
	uint64_t r;
	if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		r = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	}
	snprintf(out, RB_GW_CALL_ID_MAX, "call-%016llx", (unsigned long long)r);
}

/* url's path alone (no query, no userinfo), or NULL. */
static char *url_path(const char *url)
{
	CURLU *u = url ? curl_url() : NULL;
	char *path = NULL, *out = NULL;
	if (u && curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
	    curl_url_get(u, CURLUPART_PATH, &path, 0) == CURLUE_OK)
		out = strdup(path);
	curl_free(path);
	curl_url_cleanup(u);
	return out;
}

void rb_gw_record_sent(const struct rb_gw_ctx *ctx, const struct rb_gw_sent *s, json_t **link)
{
	char id[RB_GW_CALL_ID_MAX];
	call_id(id);
	char *path = url_path(s->url);
	json_t *ev = json_pack("{s:s, s:s, s:s, s:s?, s:s, s:s?, s:s?, s:s?, s:I}", "phase", "sent", "id", id, "door",
	                       s->door, "connector", s->name, "method", s->method, "host", s->host, "route", s->route,
	                       "path", path, "bytes_up", (json_int_t)s->bytes_up);
	free(path);
	rb_gw_record(ctx, ev);
	if (!*link)
		*link = json_object();
	json_object_set_new(*link, "id", json_string(id));
}
