/* The sandbox's network namespace: made and ruled by the runner before the sandbox's user
 * namespace exists (SPEC "Network namespace ownership"), so root inside cannot change it.
 * Only lo, default routes through lo, table inet runbox, and (mode gateway) the listener. */
#ifndef RB_NET_H
#define RB_NET_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "policy/policy.h"
#include "runtime/sandbox/nft.h"

#define RB_NET_NFDS 6

struct rb_net {
	/* File descriptors, all O_CLOEXEC, -1 when absent. rb_net_fds lists them in this order
	 * (absent ones skipped) for SCM_RIGHTS; rb_net_adopt_fds restores them. */
	int netns_fd;   /* /proc/self/ns/net of the sandbox's namespace: keeps it alive */
	int nft_fd;     /* NETLINK_NETFILTER socket opened inside the namespace: counters */
	int listen_fd4; /* gateway listener on 127.0.0.1:port (mode gateway) */
	int listen_fd6; /* gateway listener on [::1]:port6 (mode gateway, IPv6 enabled) */
	int rtnl_fd;    /* NETLINK_ROUTE socket inside the namespace, until rb_net_finish */
	int dns_fd;     /* UDP on 127.0.0.1:53 (mode gateway): the gateway's DNS stub answers there */

	/* Plain values: the caller copies them from S to the runner (e.g. the whole struct as the
	 * message's bytes, then rb_net_adopt_fds for the fds). */
	enum rb_net_mode mode;
	bool ipv6;      /* ::1 exists and the IPv6 default route through lo is in place */
	uint16_t port;  /* gateway port on 127.0.0.1; 0 in mode none */
	uint16_t port6; /* gateway port on ::1 (equal to port whenever it could be); 0 if none */
};

/* A struct rb_net that owns nothing: use it instead of zeroing (fd 0 is a valid fd). */
#define RB_NET_INIT                                                                                                    \
	{                                                                                                              \
		.netns_fd = -1, .nft_fd = -1, .listen_fd4 = -1, .listen_fd6 = -1, .rtnl_fd = -1, .dns_fd = -1          \
	}

struct rb_net_counters {
	struct rb_nft_count c[RB_NFT_NCOUNTERS]; /* indexed by enum rb_nft_counter */
};

/* In two halves, so the second can run beside the sandbox's root being built:
 * rb_net_prepare_inside runs in the spawner, already inside a fresh network namespace that it
 * may administer: lo up, the netfilter and rtnetlink sockets, and in mode gateway the
 * listeners. Nothing can leave yet: there is no route but lo's own. rb_net_finish runs in the
 * runner, through those sockets (they stay bound to the namespace): table inet runbox in one
 * batch, then default routes through lo (IPv4 and, when enabled, IPv6). No step may start
 * before it returned 0. rb_net_setup_inside is both at once. Fill out (all fds O_CLOEXEC); on
 * failure what was opened is closed and out's fds are -1. */
int rb_net_prepare_inside(enum rb_net_mode mode, struct rb_net *out, struct rb_error *err);
int rb_net_finish(struct rb_net *net, struct rb_error *err);
int rb_net_setup_inside(enum rb_net_mode mode, struct rb_net *out, struct rb_error *err);

/* Lists net's present fds in the fixed order of struct rb_net (at most max); returns how many. */
unsigned rb_net_fds(const struct rb_net *net, int *fds, unsigned max);

/* On the receiving side: net holds the sender's struct (its fd fields as the sender had them,
 * which say which fds are present); replaces them, in rb_net_fds order, with the received fds.
 * A field with no received fd left becomes -1; surplus received fds are closed. */
void rb_net_adopt_fds(struct rb_net *net, const int *fds, unsigned n);

/* Reads the drop counters through nft_fd; works from any namespace (the socket stays bound to
 * the sandbox's), as long as the caller has CAP_NET_ADMIN over the namespace's owner. */
int rb_net_read_counters(struct rb_net *net, struct rb_net_counters *out, struct rb_error *err);

/* {"blocked_packets": n, "blocked_bytes": n, "by_protocol": {"ipv4_tcp": n, ...}} for the
 * result's "egress" key (packets per protocol). */
json_t *rb_net_counters_json(const struct rb_net_counters *c);

/* The URL the sandbox gets as RUNBOX_API_URL ("http://127.0.0.1:PORT"); empty in mode none.
 * An address literal, not "localhost": nothing in the sandbox may redirect it. */
void rb_net_api_url(const struct rb_net *net, char *out, size_t outlen);

/* Closes the gateway's listeners and the DNS socket (the runner holds the last reference once the gateway is
 * gone): a connect inside is then refused at once (ECONNREFUSED), and one waiting in the
 * backlog is reset, instead of hanging until the step's deadline. The port stays in net. */
void rb_net_close_gateway(struct rb_net *net);

void rb_net_close(struct rb_net *net);

#endif
