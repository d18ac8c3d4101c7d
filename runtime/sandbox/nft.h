/* The sandbox's nftables table `inet runbox`, built with libnftnl and sent as one netlink batch
 * (never by running nft), and its named counters, read back over the same netlink socket. */
#ifndef RB_NFT_H
#define RB_NFT_H

#include <stdint.h>

#include "common/error.h"

#define RB_NFT_TABLE "runbox"

/* One named counter per family and protocol for the output chain's drops. */
enum rb_nft_counter {
	RB_NFT_IPV4_TCP,
	RB_NFT_IPV4_UDP,
	RB_NFT_IPV4_ICMP,
	RB_NFT_IPV4_OTHER,
	RB_NFT_IPV6_TCP,
	RB_NFT_IPV6_UDP,
	RB_NFT_IPV6_ICMP,
	RB_NFT_IPV6_OTHER,
	RB_NFT_NCOUNTERS
};

struct rb_nft_count {
	uint64_t packets;
	uint64_t bytes;
};

/* "blocked_ipv4_tcp", ..., "blocked_ipv6_other": the counter objects' names in the table. */
const char *rb_nft_counter_name(enum rb_nft_counter c);

/* A NETLINK_NETFILTER socket (SOCK_CLOEXEC, bound) in the caller's current network namespace;
 * it stays bound to that namespace wherever the fd travels. Returns the fd or -1. */
int rb_nft_open(struct rb_error *err);

/* Creates table inet runbox with its counters and output chain in one atomic batch.
 * Fails (EEXIST) when the table is already there. */
int rb_nft_install(int nft_fd, struct rb_error *err);

/* Reads every counter with one NFT_MSG_GETOBJ dump; all must be present. */
int rb_nft_read(int nft_fd, struct rb_nft_count out[RB_NFT_NCOUNTERS], struct rb_error *err);

/* NFT_MSG_GETTABLE / NFT_MSG_DELTABLE for table inet runbox: 0 on success, -1 with
 * err->errnum set (ENOENT, EPERM, ...). Delete resets a namespace for reuse (a pool). */
int rb_nft_get_table(int nft_fd, struct rb_error *err);
int rb_nft_delete_table(int nft_fd, struct rb_error *err);

#endif
