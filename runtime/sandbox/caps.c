/* Capability dropping through libcap (see caps.h). */
#define _GNU_SOURCE
#include "runtime/sandbox/caps.h"

#include <errno.h>
#include <sys/capability.h>
#include <sys/prctl.h>

int rb_caps_drop_bounding(uint64_t keep, struct rb_error *err)
{
	cap_value_t last = cap_max_bits();
	for (cap_value_t c = 0; c < last; c++) {
		if (c < 64 && (keep & (1ULL << c)))
			continue;
		if (cap_drop_bound(c) < 0 && errno != EINVAL)
			return rb_error_set(err, errno, "drop capability %d from the bounding set", (int)c);
	}
	return 0;
}

int rb_caps_set(uint64_t keep, uid_t uid, struct rb_error *err)
{
	cap_t caps = cap_init();
	if (!caps)
		return rb_error_set(err, errno, "cap_init");
	cap_value_t last = cap_max_bits();
	for (cap_value_t c = 0; c < last && c < 64; c++) {
		if (!(keep & (1ULL << c)))
			continue;
		cap_set_flag(caps, CAP_PERMITTED, 1, &c, CAP_SET);
		cap_set_flag(caps, CAP_EFFECTIVE, 1, &c, CAP_SET);
		/* Inheritable stays empty (Docker since CVE-2022-24769), except where ambient
		 * capabilities need it: a non-root uid granted capabilities. */
		if (uid != 0)
			cap_set_flag(caps, CAP_INHERITABLE, 1, &c, CAP_SET);
	}
	int r = cap_set_proc(caps);
	int e = errno;
	cap_free(caps);
	if (r < 0)
		return rb_error_set(err, e, "set capabilities");
	/* One PR_CAP_AMBIENT_CLEAR_ALL: libcap's cap_reset_ambient() first asks about each
	 * capability in turn, 41 more system calls in every step. EINVAL: no ambient set. */
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		return rb_error_set(err, errno, "clear ambient capabilities");
	if (uid != 0) {
		for (cap_value_t c = 0; c < last && c < 64; c++)
			if ((keep & (1ULL << c)) && cap_set_ambient(c, CAP_SET) < 0)
				return rb_error_set(err, errno, "raise ambient capability %d", (int)c);
	}
	return 0;
}
