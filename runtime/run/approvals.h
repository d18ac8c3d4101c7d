/* The operator's side of held connector calls (gateway/approval.c holds them): the requests
 * pending under the live runs' <run dir>/approvals/, and the decision on one, for `runbox
 * approve|deny` and runbox serve's /v1/approvals. */
#ifndef RB_APPROVALS_H
#define RB_APPROVALS_H

#include <jansson.h>

#include "common/error.h"

/* The requests still undecided, a new array of their JSON; tenant non-NULL: that tenant's only. */
json_t *rb_approvals_pending(const char *run_dir, const char *tenant);
/* Records what ("approved" or "denied") for request id, first decision wins (link()). tenant
 * non-NULL: a request of another tenant is as one that does not exist. Errors: ENOENT (no
 * such pending request in a live run), EEXIST (decided already: the message says how), else
 * the file that could not be written. */
int rb_approval_decide(const char *run_dir, const char *id, const char *tenant, const char *what, struct rb_error *err);

#endif
