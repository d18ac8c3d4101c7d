/* The runner's side of the gateway daemon (`runbox gateway serve`, common/gwsock.h): hands a
 * run's endpoint listeners and grant to it, and knows once it serves them. */
#ifndef RB_GWREG_H
#define RB_GWREG_H

#include <jansson.h>

#include "common/error.h"

/* Sends grant (one JSON line's text, no newline) with fds (SCM_RIGHTS) to the daemon at path
 * and waits for its answer, at most timeout_ms. 1: it serves the run; *conn is the registration
 * (the run is served while it stays open), and the call records it sent before its ready are
 * appended to *early (created when NULL). 0: no daemon answers at path (nothing listens there,
 * or it cannot be connected to); err says why. -1: the daemon refused the run or failed, or
 * said nothing within timeout_ms: err names the socket and the daemon's reason. */
int rb_gwreg_register(const char *path, const char *grant, const int *fds, unsigned n_fds, int timeout_ms, int *conn,
                      json_t **early, struct rb_error *err);

#endif
