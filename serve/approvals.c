/* /v1/approvals: the connector calls held for approval in the daemon's live runs, listed and
 * decided over the API as `runbox approve|deny` does (runtime/run/approvals.h); a tenant's key
 * sees and decides its tenant's only. */
#include <errno.h>
#include <string.h>

#include "common/paths.h"
#include "runtime/run/approvals.h"
#include "serve/serve.h"

unsigned rb_serve_approvals(struct rb_serve *sv, int n, char *const *seg, const char *method, const char *tenant,
                            json_t **reply)
{
	struct rb_paths paths;
	struct rb_error err;
	bool get = !strcmp(method, "GET"), post = !strcmp(method, "POST");
	bool decide = n == 3 && (!strcmp(seg[2], "approve") || !strcmp(seg[2], "deny"));
	if (n == 1 && !get) {
		*reply = json_pack("{s:s}", "error", "/v1/approvals: GET");
		return 405;
	}
	if (n != 1 && !decide) {
		*reply = json_pack("{s:s}", "error", "no such path (/v1/approvals, /v1/approvals/ID/approve|deny)");
		return 404;
	}
	if (decide && !post) {
		*reply = json_pack("{s:s}", "error", "/v1/approvals/ID/approve|deny: POST");
		return 405;
	}
	if (rb_paths_init(&paths, rb_serve_host(sv), rb_serve_state_dir(sv), &err) < 0)
		return rb_serve_error(&err, reply);
	if (n == 1) {
		*reply = json_pack("{s:o}", "approvals", rb_approvals_pending(paths.run_dir, tenant));
		return 200;
	}
	const char *what = !strcmp(seg[2], "approve") ? "approved" : "denied";
	if (rb_approval_decide(paths.run_dir, seg[1], tenant, what, &err) < 0) {
		*reply = json_pack("{s:s}", "error", err.msg);
		return err.errnum == ENOENT ? 404 : err.errnum == EEXIST ? 409 : 500;
	}
	*reply = json_pack("{s:s, s:s}", "id", seg[1], "decision", what);
	return 200;
}
