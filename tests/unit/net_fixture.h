/* Shared by test_net.c and test_nft.c: the spawner S as the runner has it (fork, unshare the
 * netns, rb_net_setup_inside, hand the struct and its fds back over SCM_RIGHTS, exit), and
 * entering and leaving a namespace. Include after cmocka and runtime/sandbox/net.h. */
#ifndef RB_TEST_NET_FIXTURE_H
#define RB_TEST_NET_FIXTURE_H

static int orig_ns = -1;

static void spawn_sandbox_net(enum rb_net_mode mode, struct rb_net *net)
{
	int sp[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct rb_error err = {0};
		struct rb_net n;
		if (unshare(CLONE_NEWNET) < 0 || rb_net_setup_inside(mode, &n, &err) < 0) {
			fprintf(stderr, "S: setup: %s (%s)\n", err.msg, strerror(errno));
			_exit(1);
		}
		int fds[RB_NET_NFDS];
		unsigned k = rb_net_fds(&n, fds, RB_NET_NFDS);
		char cbuf[CMSG_SPACE(sizeof fds)] = {0};
		struct iovec iov = {&n, sizeof n};
		struct msghdr mh = {.msg_iov = &iov,
		                    .msg_iovlen = 1,
		                    .msg_control = cbuf,
		                    .msg_controllen = CMSG_SPACE(k * sizeof(int))};
		struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(k * sizeof(int));
		memcpy(CMSG_DATA(cm), fds, k * sizeof(int));
		_exit(sendmsg(sp[1], &mh, 0) == (ssize_t)sizeof n ? 0 : 2);
	}
	close(sp[1]);
	char cbuf[CMSG_SPACE(RB_NET_NFDS * sizeof(int))];
	struct iovec iov = {net, sizeof *net};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf};
	ssize_t n = recvmsg(sp[0], &mh, MSG_CMSG_CLOEXEC);
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_int_equal(n, sizeof *net);
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
	assert_non_null(cm);
	unsigned k = (unsigned)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
	int fds[RB_NET_NFDS];
	memcpy(fds, CMSG_DATA(cm), k * sizeof(int));
	rb_net_adopt_fds(net, fds, k);
	close(sp[0]);
}

static void enter(int nsfd)
{
	assert_int_equal(setns(nsfd, CLONE_NEWNET), 0);
}
static void leave(void)
{
	assert_int_equal(setns(orig_ns, CLONE_NEWNET), 0);
}

#endif
