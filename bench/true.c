/* The benchmark payload: a static `true` for the peers' two-file rootfs (ANCHORS §3).
 * With an argument N it sleeps N ms first, so bench/rss.py can sample a runner mid-step. */
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv)
{
	if (argc > 1) {
		long ms = strtol(argv[1], NULL, 10);
		struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L };
		nanosleep(&ts, NULL);
	}
	return 0;
}
