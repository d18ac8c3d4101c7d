/* /v1/approvals: the connector calls held for approval in the daemon's live runs, listed and
 * decided over the API as `runbox approve|deny` does (runtime/run/approvals.h); a tenant's key
 * sees and decides its tenant's only. */
#include <errno.h>
#include <string.h>

#include "common/paths.h"
#include "runtime/run/approvals.h"
#include "serve/serve.h"

unsigned rb_serve_approvals(struct rb_serve *sv, const char *id, const char *what, const char *tenant, json_t **reply)
{
	struct rb_paths paths;
	struct rb_error err;
	if (rb_paths_init(&paths, rb_serve_host(sv), rb_serve_state_dir(sv), &err) < 0)
		return rb_serve_error(&err, reply);
	if (!id) {
		*reply = json_pack("{s:o}", "approvals", rb_approvals_pending(paths.run_dir, tenant));
		return 200;
	}
	if (rb_approval_decide(paths.run_dir, id, tenant, what, &err) < 0) {
		*reply = json_pack("{s:s}", "error", err.msg);
		return err.errnum == ENOENT ? 404 : err.errnum == EEXIST ? 409 : 500;
	}
	*reply = json_pack("{s:s, s:s}", "id", id, "decision", what);
	return 200;
}
