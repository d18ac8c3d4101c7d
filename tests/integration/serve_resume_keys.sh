#!/usr/bin/env bash
# A resume goes through the key check a create makes (serve/keys.h rb_serve_key_may_create):
# two keys of one tenant, one broad and one held to the policy `default` and the image
# `minimal`. A session the broad key made with the operator's policy `wide` is not the narrow
# key's to resume (403, closed or live), while the broad key resumes it (control) and the narrow
# key resumes a session of its own policy and image (control).
# modes: root user unshare subids
. "$(dirname "$0")/../lib.sh"
lib_init serve_resume_keys

serve_client
PORT=$((20000 + RANDOM % 20000))
MARK=$(new_marker)
KW=kw-$MARK-broad-key-of-tk
KN=kn-$MARK-narrow-key-of-tk
serve_keys "$(printf '{"%s": {"tenant": "tk"}, "%s": {"tenant": "tk", "policies": ["default"], "images": ["minimal"]}}' "$KW" "$KN")"
# The operator's policy `wide`: default's copy under another name, beyond the narrow key.
mkdir -p "$T/cfg/policies"
chmod a+rX "$T/cfg" "$T/cfg/policies"
policy_variant default "$T/cfg/policies/wide.json" wide "pass"
RBX_ENV=("RUNBOX_CONFIG_DIR=$T/cfg")

gone() { api GET "/v1/sessions/$1"; [ "$ST" = 404 ]; }

serve_start serve.log --listen "127.0.0.1:$PORT" --keys "$T/keys.json" || exit 0

# closed_with_snapshot POLICY: a session of the broad key, snapshotted, closed by its idle timeout.
closed_with_snapshot() {
	tcp "$KW" POST /v1/sessions "{\"image\": \"minimal\", \"policy\": \"$1\", \"idle_timeout\": 2}"
	local s
	s=$(jv 'r["id"]')
	tcp "$KW" POST "/v1/sessions/$s/snapshots" '{}'
	echo "$s"
}
WIDE=$(closed_with_snapshot wide)
OWN=$(closed_with_snapshot default)
WIDE2=$(closed_with_snapshot wide)
if ! wait_for gone "$WIDE" || ! wait_for gone "$OWN" || ! wait_for gone "$WIDE2"; then
	not_ok "idle sessions close" "$ST $R"
fi

tcp "$KN" POST "/v1/sessions/$WIDE/resume" '{}'
narrow="$ST $R"
tcp "$KN" GET /v1/sessions
n_listed=$(jv 'len(r["sessions"])')
if [[ "$narrow" == 403*"not this key's to resume"*"policy \`wide\`"* ]] && [ "$n_listed" = 0 ]; then
	ok "a closed session of the policy wide is not the narrow key's to resume (403 naming the policy; no session made)"
else not_ok "a narrower key resumes a broader session" "$narrow; sessions listed: $n_listed"; fi

tcp "$KN" POST "/v1/sessions/$OWN/resume" '{}'
own_raw=$R; own="$ST $(jv '[r["resumed"], r["policy"], r["image"]]')"
OWN2=$(jv 'r["id"]')
tcp "$KW" POST "/v1/sessions/$WIDE2/resume" '{}'
wide="$ST $(jv '[r["resumed"], r["policy"], r["image"]]')"
WIDE3=$(jv 'r["id"]')
if [ "$own" = '201 ["snapshot", "default", "minimal"]' ] && [ "$wide" = '201 ["snapshot", "wide", "minimal"]' ]; then
	ok "control: the narrow key resumes a session of its policy and image, the broad key one of wide"
else not_ok "control: resumes within each key's policies" "narrow: $own $own_raw; broad: $wide"; fi

# Live: reconnecting is refused the same way, and allowed for the broad key.
tcp "$KN" POST "/v1/sessions/$WIDE3/resume" '{}'
live_narrow="$ST $R"
tcp "$KW" POST "/v1/sessions/$WIDE3/resume" '{}'
live_wide="$ST $(jv 'r["resumed"]')"
tcp "$KN" POST "/v1/sessions/$OWN2/resume" '{}'
live_own="$ST $(jv 'r["resumed"]')"
if [[ "$live_narrow" == 403*"policy \`wide\`"* ]] && [ "$live_wide" = "200 live" ] && [ "$live_own" = "200 live" ]; then
	ok "a live session of the policy wide is not the narrow key's to resume (control: the broad key's, and the narrow key's own, reconnect)"
else not_ok "a live resume is checked as a create" "narrow: $live_narrow; broad: $live_wide; own: $live_own"; fi

kill -TERM "$DPID" 2>/dev/null
wait "$DPID" 2>/dev/null
