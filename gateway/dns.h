/* The DNS stub on the sandbox's 127.0.0.1:53: every query answered REFUSED at once (the gateway
 * resolves names itself; nothing inside needs to), so a lookup fails fast instead of timing
 * out, and each distinct name asked is recorded so the result can say which. */
#ifndef RB_GATEWAY_DNS_H
#define RB_GATEWAY_DNS_H

#include <stddef.h>
#include <stdint.h>

#include "gateway/connector.h"

/* Distinct (name, type) pairs recorded by name per run. Past it a lookup of a new name is still
 * answered REFUSED and counted: the first one writes a record saying the table is full, the
 * stub's stop one with the count of lookups it did not name ("unnamed"). */
#define RB_GW_DNS_NAMES 64

/* The answer to one query: REFUSED with the question echoed (FORMERR with the header alone when
 * the question does not parse). Returns the answer's length, 0 when there is nothing to answer
 * (shorter than a header, or itself a response). name gets the question's name, lower-cased,
 * dot-separated, other bytes as \DDD ("" when none), and *qtype its type. */
size_t rb_gw_dns_refuse(const uint8_t *q, size_t n, uint8_t *out, size_t out_max, char *name, size_t name_max,
                        unsigned *qtype);

/* Serves fd (a bound UDP socket) until stop_fd is readable: each query answered with
 * rb_gw_dns_refuse, each new name a record (door "dns") through ctx, max_names of them at most
 * (0 or more than RB_GW_DNS_NAMES: RB_GW_DNS_NAMES). Takes fd. */
struct rb_gw_dns;
int rb_gw_dns_start(const struct rb_gw_ctx *ctx, int fd, int stop_fd, unsigned max_names, struct rb_gw_dns **out);
/* After stop_fd became readable: the count record when lookups went unnamed. NULL is fine. */
void rb_gw_dns_stop(struct rb_gw_dns *d);

#endif
