/* The "none" manager: no writable cgroup (rootless without delegation, no cgroupfs). Nothing is
 * limited or measured; rb_cgroup_create has already written why into every requested limit. */
#include "runtime/sandbox/cgroup-internal.h"

static int none_create(struct rb_cgroup *cg, const struct rb_limits *lim, struct rb_error *err)
{
	return 0;
}
static int none_clone_fd(const struct rb_cgroup *cg)
{
	return -1;
}
static int none_attach(struct rb_cgroup *cg, pid_t pid, struct rb_error *err)
{
	return 0;
}
/* The sandbox still dies with its pid namespace; there is no cgroup to empty. */
static int none_kill(struct rb_cgroup *cg, struct rb_error *err)
{
	return 0;
}
static void none_stats(struct rb_cgroup *cg, struct rb_cgroup_stats *out) {}
static int none_destroy(struct rb_cgroup *cg, struct rb_error *err)
{
	return 0;
}

const struct rb_cgroup_ops rb_cgroup_none_ops = {
    .name = "none",
    .create = none_create,
    .clone_fd = none_clone_fd,
    .attach = none_attach,
    .kill = none_kill,
    .sample = NULL,
    .stats = none_stats,
    .destroy = none_destroy,
};
