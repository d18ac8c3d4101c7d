/* The table `inet runbox`: built as libnftnl objects, sent in one atomic netlink batch; its
 * counters read back with one GETOBJ dump. The bytecode mirrors what nft(8) generates for the
 * same rules, so `nft list table inet runbox` prints them readably (the golden test). */
#define _GNU_SOURCE
#include "runtime/sandbox/nft.h"

#include <netinet/in.h> /* before the linux/ headers, which otherwise redefine its types */

#include <errno.h>
#include <libmnl/libmnl.h>
#include <libnftnl/chain.h>
#include <libnftnl/common.h>
#include <libnftnl/expr.h>
#include <libnftnl/object.h>
#include <libnftnl/rule.h>
#include <libnftnl/table.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "common/cleanup.h"
#include "common/util.h"

#define BATCH_LIMIT ((size_t)32 * 1024)
#define RECV_SIZE   ((size_t)64 * 1024)
#define L4_ANY      (-1)

/* What each counter catches: the family, and the layer-4 protocol (or any). */
static const struct {
	const char *name;
	uint8_t nfproto;
	int l4proto;
} counters[RB_NFT_NCOUNTERS] = {
    [RB_NFT_IPV4_TCP] = {"blocked_ipv4_tcp", NFPROTO_IPV4, IPPROTO_TCP},
    [RB_NFT_IPV4_UDP] = {"blocked_ipv4_udp", NFPROTO_IPV4, IPPROTO_UDP},
    [RB_NFT_IPV4_ICMP] = {"blocked_ipv4_icmp", NFPROTO_IPV4, IPPROTO_ICMP},
    [RB_NFT_IPV4_OTHER] = {"blocked_ipv4_other", NFPROTO_IPV4, L4_ANY},
    [RB_NFT_IPV6_TCP] = {"blocked_ipv6_tcp", NFPROTO_IPV6, IPPROTO_TCP},
    [RB_NFT_IPV6_UDP] = {"blocked_ipv6_udp", NFPROTO_IPV6, IPPROTO_UDP},
    [RB_NFT_IPV6_ICMP] = {"blocked_ipv6_icmp", NFPROTO_IPV6, IPPROTO_ICMPV6},
    [RB_NFT_IPV6_OTHER] = {"blocked_ipv6_other", NFPROTO_IPV6, L4_ANY},
};

const char *rb_nft_counter_name(enum rb_nft_counter c)
{
	return (unsigned)c < RB_NFT_NCOUNTERS ? counters[c].name : "?";
}

int rb_nft_open(struct rb_error *err)
{
	_cleanup_close_ int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
	if (fd < 0)
		return rb_error_set(err, errno, "socket(NETLINK_NETFILTER)");
	struct sockaddr_nl sa = {.nl_family = AF_NETLINK};
	if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0)
		return rb_error_set(err, errno, "bind(NETLINK_NETFILTER)");
	return rb_steal_fd(&fd);
}

/* ---- netlink exchange on a raw fd (the fd may have crossed processes: no libmnl socket) --- */

typedef int (*msg_cb)(const struct nlmsghdr *nlh, void *data);

static uint32_t next_seq(void)
{
	/* Unique enough per exchange; replies outside [seq, seq+n) are stale and skipped. */
	return (uint32_t)rb_now_us() | 1u;
}

static void drain(int fd, char *buf)
{
	while (recv(fd, buf, RECV_SIZE, MSG_DONTWAIT) > 0)
		;
}

/* Sends msg and reads replies until `nacks` acks arrived (or NLMSG_DONE when nacks is 0).
 * The first error reply fails the exchange with errno set to the kernel's error. */
static int exchange(int fd, const void *msg, size_t len, uint32_t seq_lo, uint32_t seq_hi, unsigned nacks, msg_cb cb,
                    void *data)
{
	_cleanup_free_ char *buf = malloc(RECV_SIZE);
	if (!buf)
		return -1;
	struct sockaddr_nl self = {0};
	socklen_t sl = sizeof self;
	if (getsockname(fd, (struct sockaddr *)&self, &sl) < 0)
		// cppcheck-suppress memleak ; buf is _cleanup_free_, which cppcheck does not model
		return -1;
	drain(fd, buf);
	struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
	if (sendto(fd, msg, len, 0, (struct sockaddr *)&kernel, sizeof kernel) < 0)
		return -1;
	unsigned acks = 0;
	for (;;) {
		ssize_t n = recv(fd, buf, RECV_SIZE, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		int left = (int)n;
		for (const struct nlmsghdr *nlh = (const void *)buf; mnl_nlmsg_ok(nlh, left);
		     nlh = mnl_nlmsg_next(nlh, &left)) {
			if (nlh->nlmsg_pid != self.nl_pid || nlh->nlmsg_seq < seq_lo || nlh->nlmsg_seq > seq_hi)
				continue;
			if (nlh->nlmsg_type == NLMSG_ERROR) {
				const struct nlmsgerr *e = mnl_nlmsg_get_payload(nlh);
				if (e->error) {
					errno = -e->error;
					return -1;
				}
				if (++acks == nacks)
					return 0;
			} else if (nlh->nlmsg_type == NLMSG_DONE) {
				if (nacks == 0)
					return 0;
			} else if (cb && cb(nlh, data) < 0) {
				return -1;
			}
		}
	}
}

/* ---- expressions: the same bytecode nft emits for the equivalent rule text ---------------- */

static int add_expr(struct nftnl_rule *r, struct nftnl_expr *e)
{
	if (!e)
		return -1;
	nftnl_rule_add_expr(r, e);
	return 0;
}

static int meta(struct nftnl_rule *r, uint32_t key)
{
	struct nftnl_expr *e = nftnl_expr_alloc("meta");
	if (!e)
		return -1;
	nftnl_expr_set_u32(e, NFTNL_EXPR_META_KEY, key);
	nftnl_expr_set_u32(e, NFTNL_EXPR_META_DREG, NFT_REG_1);
	return add_expr(r, e);
}

static int payload(struct nftnl_rule *r, uint32_t offset, uint32_t len)
{
	struct nftnl_expr *e = nftnl_expr_alloc("payload");
	if (!e)
		return -1;
	nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_BASE, NFT_PAYLOAD_NETWORK_HEADER);
	nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_OFFSET, offset);
	nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_LEN, len);
	nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_DREG, NFT_REG_1);
	return add_expr(r, e);
}

static int cmp_eq(struct nftnl_rule *r, const void *data, uint32_t len)
{
	struct nftnl_expr *e = nftnl_expr_alloc("cmp");
	if (!e)
		return -1;
	nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_SREG, NFT_REG_1);
	nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_OP, NFT_CMP_EQ);
	nftnl_expr_set(e, NFTNL_EXPR_CMP_DATA, data, len);
	return add_expr(r, e);
}

static int verdict(struct nftnl_rule *r, int v)
{
	struct nftnl_expr *e = nftnl_expr_alloc("immediate");
	if (!e)
		return -1;
	nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, NFT_REG_VERDICT);
	nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_VERDICT, (uint32_t)v);
	return add_expr(r, e);
}

static int counter_ref(struct nftnl_rule *r, const char *name)
{
	struct nftnl_expr *e = nftnl_expr_alloc("objref");
	if (!e)
		return -1;
	nftnl_expr_set_u32(e, NFTNL_EXPR_OBJREF_IMM_TYPE, NFT_OBJECT_COUNTER);
	nftnl_expr_set_str(e, NFTNL_EXPR_OBJREF_IMM_NAME, name);
	return add_expr(r, e);
}

static int match_family(struct nftnl_rule *r, uint8_t nfproto)
{
	return meta(r, NFT_META_NFPROTO) || cmp_eq(r, &nfproto, 1);
}

static const uint8_t net127 = 127; /* 127.0.0.0/8: nft compares the first byte only */
static const struct in6_addr lo6 = IN6ADDR_LOOPBACK_INIT;
#define IP4_DADDR 16
#define IP6_DADDR 24

/* ---- the batch ------------------------------------------------------------------------------ */

struct batch {
	struct mnl_nlmsg_batch *b;
	uint32_t seq;
	unsigned nmsgs; /* messages that will be acked (all but begin/end) */
	bool full;
};

static struct nlmsghdr *msg(struct batch *bt, uint16_t type, uint16_t flags)
{
	return nftnl_nlmsg_build_hdr(mnl_nlmsg_batch_current(bt->b), type, NFPROTO_INET, flags | NLM_F_ACK, bt->seq++);
}

static void next(struct batch *bt, bool acked)
{
	if (!mnl_nlmsg_batch_next(bt->b))
		bt->full = true;
	if (acked)
		bt->nmsgs++;
}

static int put_rule(struct batch *bt, struct nftnl_rule *r, const char *chain)
{
	nftnl_rule_set_u32(r, NFTNL_RULE_FAMILY, NFPROTO_INET);
	nftnl_rule_set_str(r, NFTNL_RULE_TABLE, RB_NFT_TABLE);
	nftnl_rule_set_str(r, NFTNL_RULE_CHAIN, chain);
	nftnl_rule_nlmsg_build_payload(msg(bt, NFT_MSG_NEWRULE, NLM_F_CREATE | NLM_F_APPEND), r);
	nftnl_rule_free(r);
	next(bt, true);
	return 0;
}

static struct nftnl_rule *new_rule(void)
{
	return nftnl_rule_alloc();
}

/* Puts rule r unless building its expressions failed (then frees it); r may be NULL. */
static int emit(struct batch *bt, struct nftnl_rule *r, const char *chain, bool failed)
{
	if (failed) {
		if (r)
			nftnl_rule_free(r);
		return -1;
	}
	return put_rule(bt, r, chain);
}

static int put_chain(struct batch *bt, const char *name, uint32_t hook)
{
	struct nftnl_chain *c = nftnl_chain_alloc();
	if (!c)
		return -1;
	nftnl_chain_set_str(c, NFTNL_CHAIN_TABLE, RB_NFT_TABLE);
	nftnl_chain_set_str(c, NFTNL_CHAIN_NAME, name);
	nftnl_chain_set_u32(c, NFTNL_CHAIN_HOOKNUM, hook);
	nftnl_chain_set_s32(c, NFTNL_CHAIN_PRIO, 0); /* "priority filter" */
	nftnl_chain_set_str(c, NFTNL_CHAIN_TYPE, "filter");
	nftnl_chain_set_u32(c, NFTNL_CHAIN_POLICY, NF_DROP);
	nftnl_chain_nlmsg_build_payload(msg(bt, NFT_MSG_NEWCHAIN, NLM_F_CREATE | NLM_F_EXCL), c);
	nftnl_chain_free(c);
	next(bt, true);
	return 0;
}

/* "meta nfproto F [meta l4proto P] counter name "N" drop" for counter c. */
static int put_count_drop(struct batch *bt, const char *chain, enum rb_nft_counter c)
{
	struct nftnl_rule *r = new_rule();
	if (!r)
		return -1;
	uint8_t l4 = (uint8_t)counters[c].l4proto;
	return emit(bt, r, chain,
	            match_family(r, counters[c].nfproto) ||
	                (counters[c].l4proto != L4_ANY && (meta(r, NFT_META_L4PROTO) || cmp_eq(r, &l4, 1))) ||
	                counter_ref(r, counters[c].name) || verdict(r, NF_DROP));
}

/* output: "ip daddr 127.0.0.0/8 accept", "ip6 daddr ::1 accept", then count and drop. */
static int put_output(struct batch *bt)
{
	if (put_chain(bt, "output", NF_INET_LOCAL_OUT) < 0)
		return -1;
	struct nftnl_rule *r4 = new_rule();
	if (emit(bt, r4, "output",
	         !r4 || match_family(r4, NFPROTO_IPV4) || payload(r4, IP4_DADDR, 1) || cmp_eq(r4, &net127, 1) ||
	             verdict(r4, NF_ACCEPT)) < 0)
		return -1;
	struct nftnl_rule *r6 = new_rule();
	if (emit(bt, r6, "output",
	         !r6 || match_family(r6, NFPROTO_IPV6) || payload(r6, IP6_DADDR, 16) || cmp_eq(r6, &lo6, 16) ||
	             verdict(r6, NF_ACCEPT)) < 0)
		return -1;
	for (int c = 0; c < RB_NFT_NCOUNTERS; c++)
		if (put_count_drop(bt, "output", (enum rb_nft_counter)c) < 0)
			return -1;
	return 0;
}

static int put_table(struct batch *bt)
{
	struct nftnl_table *t = nftnl_table_alloc();
	if (!t)
		return -1;
	nftnl_table_set_str(t, NFTNL_TABLE_NAME, RB_NFT_TABLE);
	nftnl_table_nlmsg_build_payload(msg(bt, NFT_MSG_NEWTABLE, NLM_F_CREATE | NLM_F_EXCL), t);
	nftnl_table_free(t);
	next(bt, true);
	for (int c = 0; c < RB_NFT_NCOUNTERS; c++) {
		struct nftnl_obj *o = nftnl_obj_alloc();
		if (!o)
			return -1;
		nftnl_obj_set_str(o, NFTNL_OBJ_TABLE, RB_NFT_TABLE);
		nftnl_obj_set_str(o, NFTNL_OBJ_NAME, counters[c].name);
		nftnl_obj_set_u32(o, NFTNL_OBJ_TYPE, NFT_OBJECT_COUNTER);
		nftnl_obj_nlmsg_build_payload(msg(bt, NFT_MSG_NEWOBJ, NLM_F_CREATE | NLM_F_EXCL), o);
		nftnl_obj_free(o);
		next(bt, true);
	}
	return 0;
}

int rb_nft_install(int nft_fd, struct rb_error *err)
{
	/* libmnl's batch wants a buffer twice its limit. */
	_cleanup_free_ char *buf = malloc(2 * BATCH_LIMIT);
	if (!buf)
		return rb_error_set(err, ENOMEM, "nftables batch");
	struct batch bt = {.b = mnl_nlmsg_batch_start(buf, BATCH_LIMIT), .seq = next_seq()};
	uint32_t seq_lo = bt.seq;
	nftnl_batch_begin(mnl_nlmsg_batch_current(bt.b), bt.seq++);
	next(&bt, false);
	int r = put_table(&bt);
	if (r == 0)
		r = put_output(&bt);
	nftnl_batch_end(mnl_nlmsg_batch_current(bt.b), bt.seq++);
	next(&bt, false);
	size_t len = mnl_nlmsg_batch_size(bt.b);
	mnl_nlmsg_batch_stop(bt.b);
	if (r < 0 || bt.full)
		return rb_error_set(err, ENOMEM, "nftables: building table inet %s", RB_NFT_TABLE);
	if (exchange(nft_fd, buf, len, seq_lo, bt.seq, bt.nmsgs, NULL, NULL) < 0)
		return rb_error_set(err, errno, "nftables: installing table inet %s", RB_NFT_TABLE);
	return 0;
}

/* ---- reading ------------------------------------------------------------------------------- */

struct read_ctx {
	struct rb_nft_count *out;
	bool seen[RB_NFT_NCOUNTERS];
};

static int on_obj(const struct nlmsghdr *nlh, void *data)
{
	struct read_ctx *ctx = data;
	struct nftnl_obj *o = nftnl_obj_alloc();
	if (!o)
		return -1;
	int r = nftnl_obj_nlmsg_parse(nlh, o);
	const char *table = nftnl_obj_get_str(o, NFTNL_OBJ_TABLE);
	const char *name = nftnl_obj_get_str(o, NFTNL_OBJ_NAME);
	if (r == 0 && table && name && !strcmp(table, RB_NFT_TABLE) &&
	    nftnl_obj_get_u32(o, NFTNL_OBJ_TYPE) == NFT_OBJECT_COUNTER) {
		for (int c = 0; c < RB_NFT_NCOUNTERS; c++) {
			if (strcmp(name, counters[c].name) != 0)
				continue;
			ctx->out[c].packets = nftnl_obj_get_u64(o, NFTNL_OBJ_CTR_PKTS);
			ctx->out[c].bytes = nftnl_obj_get_u64(o, NFTNL_OBJ_CTR_BYTES);
			ctx->seen[c] = true;
		}
	}
	nftnl_obj_free(o);
	return 0;
}

int rb_nft_read(int nft_fd, struct rb_nft_count out[RB_NFT_NCOUNTERS], struct rb_error *err)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	uint32_t seq = next_seq();
	struct nlmsghdr *nlh = nftnl_nlmsg_build_hdr(buf, NFT_MSG_GETOBJ, NFPROTO_INET, NLM_F_DUMP, seq);
	struct nftnl_obj *filter = nftnl_obj_alloc();
	if (!filter)
		return rb_error_set(err, ENOMEM, "nftables: reading counters");
	nftnl_obj_set_str(filter, NFTNL_OBJ_TABLE, RB_NFT_TABLE);
	nftnl_obj_set_u32(filter, NFTNL_OBJ_TYPE, NFT_OBJECT_COUNTER);
	nftnl_obj_nlmsg_build_payload(nlh, filter);
	nftnl_obj_free(filter);
	struct read_ctx ctx = {.out = out};
	memset(out, 0, sizeof(struct rb_nft_count) * RB_NFT_NCOUNTERS);
	if (exchange(nft_fd, buf, nlh->nlmsg_len, seq, seq, 0, on_obj, &ctx) < 0)
		return rb_error_set(err, errno, "nftables: reading counters of table inet %s", RB_NFT_TABLE);
	for (int c = 0; c < RB_NFT_NCOUNTERS; c++)
		if (!ctx.seen[c])
			return rb_error_set(err, ENOENT, "nftables: counter `%s` missing from table inet %s",
			                    counters[c].name, RB_NFT_TABLE);
	return 0;
}

static int table_op(int nft_fd, uint16_t type, struct rb_error *err)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	uint32_t seq = next_seq();
	struct nftnl_table *t = nftnl_table_alloc();
	if (!t)
		return rb_error_set(err, ENOMEM, "nftables table");
	nftnl_table_set_str(t, NFTNL_TABLE_NAME, RB_NFT_TABLE);
	size_t len;
	uint32_t seq_hi = seq;
	if (type == NFT_MSG_GETTABLE) {
		struct nlmsghdr *nlh = nftnl_nlmsg_build_hdr(buf, type, NFPROTO_INET, NLM_F_ACK, seq);
		nftnl_table_nlmsg_build_payload(nlh, t);
		len = nlh->nlmsg_len;
	} else {
		/* Changes go in a batch. */
		struct mnl_nlmsg_batch *b = mnl_nlmsg_batch_start(buf, sizeof buf / 2);
		nftnl_batch_begin(mnl_nlmsg_batch_current(b), seq);
		mnl_nlmsg_batch_next(b);
		struct nlmsghdr *nlh =
		    nftnl_nlmsg_build_hdr(mnl_nlmsg_batch_current(b), type, NFPROTO_INET, NLM_F_ACK, seq + 1);
		nftnl_table_nlmsg_build_payload(nlh, t);
		mnl_nlmsg_batch_next(b);
		nftnl_batch_end(mnl_nlmsg_batch_current(b), seq + 2);
		mnl_nlmsg_batch_next(b);
		len = mnl_nlmsg_batch_size(b);
		mnl_nlmsg_batch_stop(b);
		seq_hi = seq + 2;
	}
	nftnl_table_free(t);
	if (exchange(nft_fd, buf, len, seq, seq_hi, 1, NULL, NULL) < 0)
		return rb_error_set(err, errno, "nftables: %s table inet %s",
		                    type == NFT_MSG_GETTABLE ? "get" : "delete", RB_NFT_TABLE);
	return 0;
}

int rb_nft_get_table(int nft_fd, struct rb_error *err)
{
	return table_op(nft_fd, NFT_MSG_GETTABLE, err);
}

int rb_nft_delete_table(int nft_fd, struct rb_error *err)
{
	return table_op(nft_fd, NFT_MSG_DELTABLE, err);
}
