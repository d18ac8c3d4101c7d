/* The sandbox's network namespace from the inside: lo up and default routes through lo
 * (rtnetlink with libmnl), the nftables table (runtime/sandbox/nft.c), the gateway listeners; and the
 * runner's side: passing the fds across, reading the counters into the result. */
#define _GNU_SOURCE
#include "runtime/sandbox/net.h"

#include <netinet/in.h> /* before the linux/ headers, which otherwise redefine its types */

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <libmnl/libmnl.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"

#define LO_IFINDEX      1 /* lo is always ifindex 1 in a network namespace */
#define LISTEN_BACKLOG  128
#define SAME_PORT_TRIES 8

/* One rtnetlink request and its ack. */
static int rtnl_talk(struct mnl_socket *nl, struct nlmsghdr *nlh)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	nlh->nlmsg_flags |= NLM_F_REQUEST | NLM_F_ACK;
	nlh->nlmsg_seq = (uint32_t)rb_now_us();
	if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0)
		return -1;
	for (;;) {
		ssize_t n = mnl_socket_recvfrom(nl, buf, sizeof buf);
		if (n < 0)
			return -1;
		int r = mnl_cb_run(buf, (size_t)n, nlh->nlmsg_seq, mnl_socket_get_portid(nl), NULL, NULL);
		if (r <= MNL_CB_STOP)
			return r < 0 ? -1 : 0;
	}
}

static int link_up(struct mnl_socket *nl, struct rb_error *err)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = RTM_NEWLINK;
	struct ifinfomsg *ifm = mnl_nlmsg_put_extra_header(nlh, sizeof *ifm);
	ifm->ifi_family = AF_UNSPEC;
	ifm->ifi_index = LO_IFINDEX;
	ifm->ifi_flags = IFF_UP;
	ifm->ifi_change = IFF_UP;
	if (rtnl_talk(nl, nlh) < 0)
		return rb_error_set(err, errno, "rtnetlink: set lo up");
	return 0;
}

/* `ip route add default dev lo` (and `ip -6 ...`): every destination then meets the output
 * hook, where the table counts it, instead of failing unseen at route lookup. */
static int default_route(struct mnl_socket *nl, int family)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = RTM_NEWROUTE;
	nlh->nlmsg_flags = NLM_F_CREATE | NLM_F_EXCL;
	struct rtmsg *rtm = mnl_nlmsg_put_extra_header(nlh, sizeof *rtm);
	rtm->rtm_family = (unsigned char)family;
	rtm->rtm_dst_len = 0;
	rtm->rtm_table = RT_TABLE_MAIN;
	rtm->rtm_protocol = RTPROT_BOOT;
	rtm->rtm_scope = RT_SCOPE_LINK; /* no gateway: the destination is "on" lo */
	rtm->rtm_type = RTN_UNICAST;
	mnl_attr_put_u32(nlh, RTA_OIF, LO_IFINDEX);
	return rtnl_talk(nl, nlh);
}

static int routes(struct mnl_socket *nl, bool *ipv6, struct rb_error *err)
{
	if (default_route(nl, AF_INET) < 0)
		return rb_error_set(err, errno, "rtnetlink: add IPv4 default route via lo");
	*ipv6 = default_route(nl, AF_INET6) == 0;
	if (!*ipv6) {
		/* IPv6 off (boot option, module absent, disable_ipv6): nothing to route, and the
		 * table's ip6 rules stay in place for the day it is switched on. */
		if (errno != EAFNOSUPPORT && errno != EOPNOTSUPP && errno != EACCES && errno != ENODEV)
			return rb_error_set(err, errno, "rtnetlink: add IPv6 default route via lo");
		rb_debug("net: IPv6 unavailable in the sandbox netns (%s)", strerror(errno));
	}
	return 0;
}

static int listen_on(int family, uint16_t port, uint16_t *bound)
{
	_cleanup_close_ int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	struct sockaddr_storage ss = {0};
	socklen_t len;
	if (family == AF_INET) {
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;
		a->sin_family = AF_INET;
		a->sin_port = htons(port);
		a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		len = sizeof *a;
	} else {
		int one = 1;
		if (setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one) < 0)
			return -1;
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
		a->sin6_family = AF_INET6;
		a->sin6_port = htons(port);
		a->sin6_addr = in6addr_loopback;
		len = sizeof *a;
	}
	if (bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, LISTEN_BACKLOG) < 0)
		return -1;
	len = sizeof ss;
	if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
		return -1;
	*bound =
	    ntohs(family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port : ((struct sockaddr_in6 *)&ss)->sin6_port);
	return rb_steal_fd(&fd);
}

/* The gateway listeners: 127.0.0.1 on an ephemeral port, ::1 on the same port (a fresh netns
 * has nothing else bound, so this holds unless IPv6 is off, when there is no ::1 listener). */
static int listeners(struct rb_net *net, struct rb_error *err)
{
	for (int i = 0; i < SAME_PORT_TRIES; i++) {
		net->listen_fd4 = listen_on(AF_INET, 0, &net->port);
		if (net->listen_fd4 < 0)
			return rb_error_set(err, errno, "gateway listener on 127.0.0.1");
		net->listen_fd6 = listen_on(AF_INET6, net->port, &net->port6);
		if (net->listen_fd6 >= 0)
			return 0;
		if (errno != EADDRINUSE) {
			rb_debug("net: no gateway listener on ::1 (%s)", strerror(errno));
			net->port6 = 0;
			return 0;
		}
		close(net->listen_fd4);
		net->listen_fd4 = -1;
	}
	/* The same port kept being taken on ::1: two ports, then. */
	net->listen_fd4 = listen_on(AF_INET, 0, &net->port);
	if (net->listen_fd4 < 0)
		return rb_error_set(err, errno, "gateway listener on 127.0.0.1");
	net->listen_fd6 = listen_on(AF_INET6, 0, &net->port6);
	if (net->listen_fd6 < 0) {
		rb_debug("net: no gateway listener on ::1 (%s)", strerror(errno));
		net->port6 = 0;
	}
	return 0;
}

/* Where the sandbox's resolver looks (glibc's default, and /etc/resolv.conf's nameserver): a
 * lookup gets the gateway's REFUSED at once instead of a timeout. Port 53 needs the
 * namespace's CAP_NET_BIND_SERVICE, which the spawner holds here. */
static int dns_socket(void)
{
	_cleanup_close_ int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = {
	    .sin_family = AF_INET, .sin_port = htons(53), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) < 0)
		return -1;
	return rb_steal_fd(&fd);
}

static int prepare(enum rb_net_mode mode, struct rb_net *out, struct rb_error *err)
{
	struct mnl_socket *nl = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC);
	if (!nl)
		return rb_error_set(err, errno, "rtnetlink socket");
	/* lo first: the listeners need 127.0.0.1 and ::1, which exist once lo is up. Nothing
	 * can be routed out yet: there are no routes until rb_net_finish, after the table. */
	int r = mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0 ? rb_error_set(err, errno, "rtnetlink bind")
	                                                       : link_up(nl, err);
	mnl_socket_close(nl);
	if (r < 0)
		return -1;
	/* A socket belongs to the namespace it was made in, wherever it is used from: this one
	 * is for rb_net_finish's routes. */
	out->rtnl_fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (out->rtnl_fd < 0)
		return rb_error_set(err, errno, "rtnetlink socket");
	if ((out->nft_fd = rb_nft_open(err)) < 0)
		return -1;
	if (mode == RB_NET_GATEWAY && listeners(out, err) < 0)
		return -1;
	if (mode == RB_NET_GATEWAY && (out->dns_fd = dns_socket()) < 0)
		return rb_error_set(err, errno, "DNS stub socket on 127.0.0.1:53");
	out->netns_fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	if (out->netns_fd < 0)
		return rb_error_set(err, errno, "open `/proc/self/ns/net`");
	return 0;
}

int rb_net_prepare_inside(enum rb_net_mode mode, struct rb_net *out, struct rb_error *err)
{
	*out = (struct rb_net)RB_NET_INIT;
	out->mode = mode;
	if (prepare(mode, out, err) < 0) {
		rb_net_close(out);
		return -1;
	}
	return 0;
}

int rb_net_finish(struct rb_net *net, struct rb_error *err)
{
	if (net->rtnl_fd < 0 || net->nft_fd < 0)
		return rb_error_set(err, EBADF, "network: the namespace's sockets are gone");
	/* The table goes in before the routes: nothing can be routed out before it is there. */
	if (rb_nft_install(net->nft_fd, err) < 0)
		return -1;
	struct mnl_socket *nl = mnl_socket_fdopen(net->rtnl_fd);
	if (!nl)
		return rb_error_set(err, errno, "rtnetlink socket");
	net->rtnl_fd = -1; /* nl owns it now */
	int r = mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0 ? rb_error_set(err, errno, "rtnetlink bind")
	                                                       : routes(nl, &net->ipv6, err);
	mnl_socket_close(nl);
	return r;
}

int rb_net_setup_inside(enum rb_net_mode mode, struct rb_net *out, struct rb_error *err)
{
	if (rb_net_prepare_inside(mode, out, err) < 0)
		return -1;
	if (rb_net_finish(out, err) < 0) {
		rb_net_close(out);
		return -1;
	}
	return 0;
}

/* The fd fields in their fixed order. */
static int *fd_slot(struct rb_net *net, unsigned i)
{
	int *slots[RB_NET_NFDS] = {&net->netns_fd,   &net->nft_fd,  &net->listen_fd4,
	                           &net->listen_fd6, &net->rtnl_fd, &net->dns_fd};
	return slots[i];
}

unsigned rb_net_fds(const struct rb_net *net, int *fds, unsigned max)
{
	unsigned n = 0;
	for (unsigned i = 0; i < RB_NET_NFDS && n < max; i++) {
		int fd = *fd_slot((struct rb_net *)net, i);
		if (fd >= 0)
			fds[n++] = fd;
	}
	return n;
}

void rb_net_adopt_fds(struct rb_net *net, const int *fds, unsigned n)
{
	unsigned used = 0;
	for (unsigned i = 0; i < RB_NET_NFDS; i++) {
		int *slot = fd_slot(net, i);
		if (*slot >= 0)
			*slot = used < n ? fds[used++] : -1;
	}
	for (; used < n; used++)
		if (fds[used] >= 0)
			close(fds[used]);
}

int rb_net_read_counters(struct rb_net *net, struct rb_net_counters *out, struct rb_error *err)
{
	if (net->nft_fd < 0)
		return rb_error_set(err, EBADF, "nftables: no netlink socket for the sandbox's counters");
	return rb_nft_read(net->nft_fd, out->c, err);
}

json_t *rb_net_counters_json(const struct rb_net_counters *c)
{
	json_t *by = json_object();
	uint64_t packets = 0, bytes = 0;
	for (int i = 0; i < RB_NFT_NCOUNTERS; i++) {
		/* "blocked_ipv4_tcp" -> "ipv4_tcp" */
		const char *key = rb_nft_counter_name((enum rb_nft_counter)i) + strlen("blocked_");
		json_object_set_new(by, key, json_integer((json_int_t)c->c[i].packets));
		packets += c->c[i].packets;
		bytes += c->c[i].bytes;
	}
	return json_pack("{s:I, s:I, s:o}", "blocked_packets", (json_int_t)packets, "blocked_bytes", (json_int_t)bytes,
	                 "by_protocol", by);
}

void rb_net_api_url(const struct rb_net *net, char *out, size_t outlen)
{
	if (net->mode != RB_NET_GATEWAY || net->port == 0)
		snprintf(out, outlen, "%s", "");
	else
		snprintf(out, outlen, "http://127.0.0.1:%u", (unsigned)net->port);
}

void rb_net_close_gateway(struct rb_net *net)
{
	int *slots[] = {&net->listen_fd4, &net->listen_fd6, &net->dns_fd};
	for (size_t i = 0; i < RB_ARRAY_SIZE(slots); i++) {
		if (*slots[i] >= 0)
			close(*slots[i]);
		*slots[i] = -1;
	}
}

void rb_net_close(struct rb_net *net)
{
	for (unsigned i = 0; i < RB_NET_NFDS; i++) {
		int *slot = fd_slot(net, i);
		if (*slot >= 0)
			close(*slot);
		*slot = -1;
	}
}
