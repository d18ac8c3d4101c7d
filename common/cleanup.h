/* Cleanup by attribute (systemd, crun, bubblewrap): early returns stay correct. */
#ifndef RB_CLEANUP_H
#define RB_CLEANUP_H

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static inline void rb_freep(void *p)
{
	free(*(void **)p);
}
static inline void rb_closep(int *fd)
{
	if (*fd >= 0) {
		int saved = errno;
		close(*fd);
		errno = saved;
	}
}
static inline void rb_fclosep(FILE **f)
{
	if (*f)
		fclose(*f);
}
static inline void rb_closedirp(DIR **d)
{
	if (*d)
		closedir(*d);
}

#define _cleanup_free_     __attribute__((cleanup(rb_freep)))
#define _cleanup_close_    __attribute__((cleanup(rb_closep)))
#define _cleanup_fclose_   __attribute__((cleanup(rb_fclosep)))
#define _cleanup_closedir_ __attribute__((cleanup(rb_closedirp)))
#define _cleanup_json_     __attribute__((cleanup(rb_json_decrefp)))

/* Hands ownership out of a cleanup variable. */
static inline int rb_steal_fd(int *fd)
{
	int r = *fd;
	*fd = -1;
	return r;
}
#define rb_steal_ptr(p)                                                                                                \
	({                                                                                                             \
		__typeof__(*(p)) _r = *(p);                                                                            \
		*(p) = NULL;                                                                                           \
		_r;                                                                                                    \
	})

struct json_t;
void rb_json_decrefp(void *p); /* defined in common/util.c, wraps json_decref */

#define RB_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#endif
