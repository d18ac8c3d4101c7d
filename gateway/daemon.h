/* `runbox gateway serve`: the gateway as a daemon holding the operator's config and secrets,
 * serving the endpoints of the runs that register with it over a unix socket
 * (common/gwsock.h), each with the per-run gateway's own code (gateway/endpoint.h). */
#ifndef RB_GATEWAY_DAEMON_H
#define RB_GATEWAY_DAEMON_H

#include "common/host.h"

/* argv[0] is "serve"; [--config FILE] [--socket PATH]. host: the environment its places
 * (state, config and socket directories) are read from. Returns the exit status. */
int rb_gwd_main(int argc, char **argv, const struct rb_host *host);

#endif
