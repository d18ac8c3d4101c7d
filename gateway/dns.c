/* The sandbox's DNS stub (see dns.h): the packet answer, and the thread serving the socket. */
#define _GNU_SOURCE
#include "gateway/dns.h"

#include "common/util.h"
#include "gateway/cpushare.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define HDR        12
#define RCODE_FORM 1
#define RCODE_REF  5

/* The question's name at q[*off], into name; *off moves past it. false when it does not parse
 * (a pointer, a label past the end, more than 255 bytes). */
static bool qname(const uint8_t *q, size_t n, size_t *off, char *name, size_t max)
{
	size_t o = *off, w = 0, total = 0;
	name[0] = '\0';
	for (;;) {
		if (o >= n)
			return false;
		unsigned len = q[o++];
		if (len == 0)
			break;
		if (len > 63 || o + len > n || (total += len + 1) > 255)
			return false;
		for (unsigned i = 0; i < len; i++) {
			unsigned char c = q[o + i];
			char buf[8];
			if (c >= 'A' && c <= 'Z')
				c = (unsigned char)(c - 'A' + 'a');
			if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_')
				snprintf(buf, sizeof buf, "%c", c);
			else
				snprintf(buf, sizeof buf, "\\%03u", c);
			size_t bl = strlen(buf);
			if (w + bl + 2 > max)
				return false;
			memcpy(name + w, buf, bl);
			w += bl;
		}
		name[w++] = '.';
		name[w] = '\0';
		o += len;
	}
	if (w > 1)
		name[--w] = '\0'; /* no trailing dot */
	*off = o;
	return true;
}

size_t rb_gw_dns_refuse(const uint8_t *q, size_t n, uint8_t *out, size_t out_max, char *name, size_t name_max,
                        unsigned *qtype)
{
	name[0] = '\0';
	*qtype = 0;
	if (n < HDR || out_max < HDR || (q[2] & 0x80))
		return 0; /* not a query: nothing to answer */
	unsigned qd = (unsigned)q[4] << 8 | q[5];
	size_t off = HDR;
	bool ok = qd == 1 && qname(q, n, &off, name, name_max) && off + 4 <= n && off + 4 <= out_max;
	memcpy(out, q, 2);                        /* the id */
	out[2] = (uint8_t)(0x80 | (q[2] & 0x79)); /* QR, the opcode and RD as asked; not AA, not TC */
	out[3] = ok ? RCODE_REF : RCODE_FORM;     /* no RA: this stub recurses for nobody */
	memset(out + 4, 0, HDR - 4);
	if (!ok) {
		name[0] = '\0';
		return HDR;
	}
	*qtype = (unsigned)q[off] << 8 | q[off + 1];
	out[5] = 1;
	memcpy(out + HDR, q + HDR, off + 4 - HDR);
	return off + 4;
}

struct rb_gw_dns {
	const struct rb_gw_ctx *ctx;
	int fd, stop_fd;
	pthread_t thread;
	char seen[RB_GW_DNS_NAMES][300]; /* "type name" already recorded */
	unsigned n_seen, max_names;
	uint64_t unnamed; /* lookups of new names past the table: answered and counted, not named */
};

static const char *type_name(unsigned t, char *buf, size_t n)
{
	switch (t) {
	case 1: return "A";
	case 28: return "AAAA";
	case 5: return "CNAME";
	case 15: return "MX";
	case 16: return "TXT";
	case 33: return "SRV";
	case 65: return "HTTPS";
	case 12: return "PTR";
	default: snprintf(buf, n, "TYPE%u", t); return buf;
	}
}

static void table_full(struct rb_gw_dns *d)
{
	char err[200];
	snprintf(err, sizeof err,
	         "the DNS stub's table of %u names is full: lookups of further names are answered REFUSED and "
	         "counted, not named",
	         d->max_names);
	rb_gw_record(d->ctx, json_pack("{s:s, s:s, s:i, s:s, s:I, s:s, s:s}", "door", "dns", "method", "table",
	                               "status", RCODE_REF, "rule", "dns.table", "names", (json_int_t)d->max_names,
	                               "host", "127.0.0.1:53", "error", err));
}

/* The count of lookups not named: at stop, and as it passes each power of two, so a gateway
 * killed later still leaves at least half of it in the record. */
static void unnamed_record(struct rb_gw_dns *d, bool final)
{
	char err[200];
	snprintf(err, sizeof err,
	         "%" PRIu64 " lookups of names past the DNS stub's table of %u were answered REFUSED and not named%s",
	         d->unnamed, d->max_names, final ? "" : " so far");
	rb_gw_record(d->ctx, json_pack("{s:s, s:s, s:i, s:s, s:I, s:I, s:s, s:s}", "door", "dns", "method", "table",
	                               "status", RCODE_REF, "rule", "dns.table", "names", (json_int_t)d->max_names,
	                               "unnamed", (json_int_t)d->unnamed, "host", "127.0.0.1:53", "error", err));
}

/* A new name is one record (a refusal: the step's hint and the result list it). */
static void record(struct rb_gw_dns *d, const char *name, unsigned qtype)
{
	char tb[16], key[300];
	const char *type = type_name(qtype, tb, sizeof tb);
	snprintf(key, sizeof key, "%s %s", type, name);
	for (unsigned i = 0; i < d->n_seen; i++)
		if (!strcmp(d->seen[i], key))
			return;
	if (d->n_seen == d->max_names) {
		if (d->unnamed++ == 0) /* said at once: a gateway killed later still leaves this */
			table_full(d);
		else if (!(d->unnamed & (d->unnamed - 1)))
			unnamed_record(d, false);
		return;
	}
	snprintf(d->seen[d->n_seen++], sizeof d->seen[0], "%s", key);
	__atomic_add_fetch(d->ctx->refused, 1, __ATOMIC_RELAXED);
	char err[400];
	snprintf(err, sizeof err, "the lookup of `%s` (%s) was answered REFUSED", name, type);
	rb_gw_record(d->ctx,
	             json_pack("{s:s, s:s, s:s, s:i, s:s, s:s, s:b, s:s, s:s}", "door", "dns", "connector", name,
	                       "method", type, "status", RCODE_REF, "rule", "dns", "host", "127.0.0.1:53", "refused", 1,
	                       "error", err, "hint",
	                       "names are not resolved inside the sandbox: reach hosts through HTTPS_PROXY/HTTP_PROXY "
	                       "(the policy's network.proxy) or a connector; the gateway resolves them"));
}

static void serve_queries(struct rb_gw_dns *d)
{
	uint8_t q[1500], a[1500];
	for (;;) {
		struct pollfd p[2] = {{.fd = d->fd, .events = POLLIN}, {.fd = d->stop_fd, .events = POLLIN}};
		if (poll(p, 2, -1) < 0 && errno != EINTR)
			return;
		if (p[1].revents)
			return;
		if (!p[0].revents)
			continue;
		struct sockaddr_storage from;
		socklen_t fl = sizeof from;
		ssize_t n = recvfrom(d->fd, q, sizeof q, MSG_DONTWAIT, (struct sockaddr *)&from, &fl);
		if (n <= 0)
			continue;
		char name[300];
		unsigned qtype;
		size_t len = rb_gw_dns_refuse(q, (size_t)n, a, sizeof a, name, sizeof name, &qtype);
		if (len > HDR) /* recorded before it is answered: an answered lookup is in the record */
			record(d, name, qtype);
		if (len)
			sendto(d->fd, a, len, MSG_DONTWAIT, (struct sockaddr *)&from, fl);
	}
}

/* The stub's thread: its CPU is the run's (charged when it ends). */
static void *serve(void *cls)
{
	struct rb_gw_dns *d = cls;
	uint64_t cpu0 = rb_gw_thread_cpu_ns();
	serve_queries(d);
	if (d->ctx->cpu)
		rb_gw_cpu_charge(d->ctx->cpu, cpu0, rb_now_us());
	return NULL;
}

int rb_gw_dns_start(const struct rb_gw_ctx *ctx, int fd, int stop_fd, unsigned max_names, struct rb_gw_dns **out)
{
	*out = NULL;
	struct rb_gw_dns *d = calloc(1, sizeof *d);
	if (!d) {
		close(fd);
		return -1;
	}
	d->ctx = ctx, d->fd = fd, d->stop_fd = stop_fd;
	d->max_names = max_names && max_names < RB_GW_DNS_NAMES ? max_names : RB_GW_DNS_NAMES;
	if (pthread_create(&d->thread, NULL, serve, d) != 0) {
		close(fd);
		free(d);
		return -1;
	}
	*out = d;
	return 0;
}

void rb_gw_dns_stop(struct rb_gw_dns *d)
{
	if (!d)
		return;
	pthread_join(d->thread, NULL);
	close(d->fd);
	if (d->unnamed)
		unnamed_record(d, true);
	free(d);
}
