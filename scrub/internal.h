/* What scrub/scrub.c (exact pass, merging, output), scrub/rules.c (format and
 * keyword passes) and scrub/stream.c (streams) share: the span list every pass
 * appends to, rule ids, byte classes, the passes and the output. */
#ifndef RB_SCRUB_INTERNAL_H
#define RB_SCRUB_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "scrub/scrub.h"

/* Every format and keyword rule: its id suffix and the name its redactions carry
 * (docs/scrub.md lists them). Exact rules of a scrubber follow RB_SR_FIRST_EXACT. */
#define RB_SCRUB_RULES(X)                                                                                              \
	X(AWS_KEY_ID, "aws-access-key-id")                                                                             \
	X(AWS_SESSION, "aws-session-token")                                                                            \
	X(AWS_APPSYNC, "aws-appsync-key")                                                                              \
	X(GITHUB_PAT, "github-pat")                                                                                    \
	X(GITHUB_OAUTH, "github-oauth")                                                                                \
	X(GITHUB_APP, "github-app-token")                                                                              \
	X(GITHUB_REFRESH, "github-refresh-token")                                                                      \
	X(GITHUB_FINE_GRAINED, "github-fine-grained-pat")                                                              \
	X(GITLAB_PAT, "gitlab-pat")                                                                                    \
	X(GITLAB_DEPLOY, "gitlab-deploy-token")                                                                        \
	X(GITLAB_RUNNER, "gitlab-runner-token")                                                                        \
	X(GITLAB_CI_BUILD, "gitlab-ci-build-token")                                                                    \
	X(GITLAB_OTHER, "gitlab-token")                                                                                \
	X(SLACK_TOKEN, "slack-token")                                                                                  \
	X(SLACK_APP, "slack-app-token")                                                                                \
	X(SLACK_WEBHOOK, "slack-webhook")                                                                              \
	X(STRIPE, "stripe-key")                                                                                        \
	X(STRIPE_WEBHOOK, "stripe-webhook-secret")                                                                     \
	X(GCP_API_KEY, "gcp-api-key")                                                                                  \
	X(GOOGLE_OAUTH, "google-oauth-token")                                                                          \
	X(GOOGLE_REFRESH, "google-refresh-token")                                                                      \
	X(GOOGLE_CLIENT_SECRET, "google-client-secret")                                                                \
	X(SALESFORCE, "salesforce-access-token")                                                                       \
	X(PRIVATE_KEY, "private-key")                                                                                  \
	X(JWT, "jwt")                                                                                                  \
	X(ANTHROPIC, "anthropic-api-key")                                                                              \
	X(ANTHROPIC_ADMIN, "anthropic-admin-key")                                                                      \
	X(OPENAI, "openai-api-key")                                                                                    \
	X(SK_KEY, "sk-api-key")                                                                                        \
	X(NPM, "npm-token")                                                                                            \
	X(PYPI, "pypi-token")                                                                                          \
	X(HUGGINGFACE, "huggingface-token")                                                                            \
	X(AZURE_STORAGE, "azure-storage-key")                                                                          \
	X(AZURE_SAS_KEY, "azure-shared-access-key")                                                                    \
	X(AZURE_SAS_SIG, "azure-sas-signature")                                                                        \
	X(AZURE_KEY, "azure-identifiable-key")                                                                         \
	X(AZURE_DEVOPS, "azure-devops-pat")                                                                            \
	X(AZURE_CLIENT_SECRET, "azure-client-secret")                                                                  \
	X(SENDGRID, "sendgrid-api-key")                                                                                \
	X(TWILIO_KEY, "twilio-api-key")                                                                                \
	X(TELEGRAM, "telegram-bot-token")                                                                              \
	X(DISCORD_TOKEN, "discord-bot-token")                                                                          \
	X(DISCORD_WEBHOOK, "discord-webhook")                                                                          \
	X(TEAMS_WEBHOOK, "teams-webhook")                                                                              \
	X(ZAPIER_WEBHOOK, "zapier-webhook")                                                                            \
	X(MAILGUN, "mailgun-api-key")                                                                                  \
	X(MAILCHIMP, "mailchimp-api-key")                                                                              \
	X(BREVO, "brevo-api-key")                                                                                      \
	X(VAULT, "vault-token")                                                                                        \
	X(TERRAFORM, "terraform-cloud-token")                                                                          \
	X(NEWRELIC, "newrelic-key")                                                                                    \
	X(ATLASSIAN, "atlassian-api-token")                                                                            \
	X(BITBUCKET, "bitbucket-app-password")                                                                         \
	X(LANGSMITH, "langsmith-api-key")                                                                              \
	X(ONEPASSWORD, "1password-service-token")                                                                      \
	X(ONEPASSWORD_SECRET_KEY, "1password-secret-key")                                                              \
	X(DOPPLER, "doppler-token")                                                                                    \
	X(DIGITALOCEAN, "digitalocean-token")                                                                          \
	X(SHOPIFY, "shopify-token")                                                                                    \
	X(DATABRICKS, "databricks-token")                                                                              \
	X(NOTION, "notion-token")                                                                                      \
	X(LINEAR, "linear-api-key")                                                                                    \
	X(AGE, "age-secret-key")                                                                                       \
	X(MAPBOX, "mapbox-secret-token")                                                                               \
	X(DYNATRACE, "dynatrace-token")                                                                                \
	X(POSTMAN, "postman-api-key")                                                                                  \
	X(GRAFANA, "grafana-token")                                                                                    \
	X(SENTRY, "sentry-token")                                                                                      \
	X(SQUARE, "square-token")                                                                                      \
	X(HEROKU, "heroku-api-key")                                                                                    \
	X(CLOUDFLARE, "cloudflare-origin-ca-key")                                                                      \
	X(DOCKER, "docker-hub-token")                                                                                  \
	X(SUPABASE, "supabase-token")                                                                                  \
	X(PLANETSCALE, "planetscale-token")                                                                            \
	X(ARTIFACTORY, "artifactory-token")                                                                            \
	X(GROQ, "groq-api-key")                                                                                        \
	X(REPLICATE, "replicate-api-token")                                                                            \
	X(XAI, "xai-api-key")                                                                                          \
	X(PERPLEXITY, "perplexity-api-key")                                                                            \
	X(PULUMI, "pulumi-token")                                                                                      \
	X(FLY, "flyio-token")                                                                                          \
	X(FIGMA, "figma-token")                                                                                        \
	X(AIRTABLE, "airtable-pat")                                                                                    \
	X(CONTENTFUL, "contentful-token")                                                                              \
	X(DROPBOX, "dropbox-token")                                                                                    \
	X(RUBYGEMS, "rubygems-token")                                                                                  \
	X(NUGET, "nuget-api-key")                                                                                      \
	X(BUILDKITE, "buildkite-token")                                                                                \
	X(CIRCLECI, "circleci-token")                                                                                  \
	X(EASYPOST, "easypost-api-key")                                                                                \
	X(FLUTTERWAVE, "flutterwave-secret-key")                                                                       \
	X(SHIPPO, "shippo-token")                                                                                      \
	X(TYPEFORM, "typeform-token")                                                                                  \
	X(FACEBOOK, "facebook-access-token")                                                                           \
	X(ALIBABA, "alibaba-access-key-id")                                                                            \
	X(CLOJARS, "clojars-token")                                                                                    \
	X(DEFINED_NET, "defined-networking-key")                                                                       \
	X(DUFFEL, "duffel-token")                                                                                      \
	X(FRAMEIO, "frameio-token")                                                                                    \
	X(HARNESS, "harness-pat")                                                                                      \
	X(INFRACOST, "infracost-key")                                                                                  \
	X(INTRA42, "intra42-secret")                                                                                   \
	X(MAXMIND, "maxmind-license-key")                                                                              \
	X(OCTOPUS, "octopus-deploy-key")                                                                               \
	X(OPENSHIFT, "openshift-token")                                                                                \
	X(PREFECT, "prefect-token")                                                                                    \
	X(README, "readme-api-key")                                                                                    \
	X(SCALINGO, "scalingo-token")                                                                                  \
	X(SETTLEMINT, "settlemint-token")                                                                              \
	X(SOURCEGRAPH, "sourcegraph-token")                                                                            \
	X(YANDEX, "yandex-api-key")                                                                                    \
	X(RENDER, "render-api-key")                                                                                    \
	X(TAILSCALE, "tailscale-key")                                                                                  \
	X(NETLIFY, "netlify-token")                                                                                    \
	X(LAUNCHDARKLY, "launchdarkly-key")                                                                            \
	X(PLAID, "plaid-token")                                                                                        \
	X(RAZORPAY, "razorpay-key")                                                                                    \
	X(LANGFUSE, "langfuse-secret-key")                                                                             \
	X(AWS_BEDROCK, "aws-bedrock-api-key")                                                                          \
	X(CLICKHOUSE, "clickhouse-api-secret")                                                                         \
	X(SONAR, "sonarqube-token")                                                                                    \
	X(ADOBE, "adobe-client-secret")                                                                                \
	X(AUTHRESS, "authress-key")                                                                                    \
	X(GITLAB_SESSION, "gitlab-session-cookie")                                                                     \
	X(JWT_B64, "jwt-base64")                                                                                       \
	X(TWITTER_BEARER, "twitter-bearer-token")                                                                      \
	X(YANDEX_IAM, "yandex-iam-token")                                                                              \
	X(ADAFRUIT, "adafruit-io-key")                                                                                 \
	X(APIFY, "apify-token")                                                                                        \
	X(BITBUCKET_DC, "bitbucket-access-token")                                                                      \
	X(BANNERBEAR, "bannerbear-api-key")                                                                            \
	X(CLOUDFLARE_TOKEN, "cloudflare-api-token")                                                                    \
	X(DENO, "deno-deploy-token")                                                                                   \
	X(ELEVENLABS, "elevenlabs-api-key")                                                                            \
	X(ENDORLABS, "endorlabs-key")                                                                                  \
	X(FINAGE, "finage-api-key")                                                                                    \
	X(FLEETBASE, "fleetbase-key")                                                                                  \
	X(FLEXPORT, "flexport-key")                                                                                    \
	X(FULLSTORY, "fullstory-api-key")                                                                              \
	X(GEMINI, "gemini-exchange-key")                                                                               \
	X(HUBSPOT, "hubspot-pat")                                                                                      \
	X(KLAVIYO, "klaviyo-api-key")                                                                                  \
	X(CLICKUP, "clickup-token")                                                                                    \
	X(LOB, "lob-api-key")                                                                                          \
	X(GOCARDLESS, "gocardless-token")                                                                              \
	X(LOCATIONIQ, "locationiq-token")                                                                              \
	X(NIGHTFALL, "nightfall-api-key")                                                                              \
	X(NVIDIA, "nvidia-api-key")                                                                                    \
	X(OPENROUTER, "openrouter-api-key")                                                                            \
	X(PAGARME, "pagarme-api-key")                                                                                  \
	X(PINECONE, "pinecone-api-key")                                                                                \
	X(POSTHOG, "posthog-personal-key")                                                                             \
	X(PUBNUB, "pubnub-key")                                                                                        \
	X(RAMP, "ramp-client-secret")                                                                                  \
	X(RECHARGE, "recharge-api-key")                                                                                \
	X(ROBINHOOD, "robinhood-crypto-key")                                                                           \
	X(ROOTLY, "rootly-api-key")                                                                                    \
	X(SALAD, "saladcloud-api-key")                                                                                 \
	X(SOURCEGRAPH_CODY, "sourcegraph-cody-token")                                                                  \
	X(SPECTRAL, "spectralops-token")                                                                               \
	X(PGANALYZE, "pganalyze-key")                                                                                  \
	X(STRIPE_CLIENT_SECRET, "stripe-client-secret")                                                                \
	X(TINES, "tines-webhook")                                                                                      \
	X(TRUFFLEHOG, "trufflehog-enterprise-key")                                                                     \
	X(UBIDOTS, "ubidots-token")                                                                                    \
	X(VOICEFLOW, "voiceflow-api-key")                                                                              \
	X(ZOHO, "zoho-token")                                                                                          \
	X(TEAMWORK, "teamwork-token")                                                                                  \
	X(PHOTOROOM, "photoroom-api-key")                                                                              \
	X(TICKETTAILOR, "tickettailor-api-key")                                                                        \
	X(AZURE_REFRESH, "azure-entra-refresh-token")                                                                  \
	X(URL_POSTGRES, "postgres-url")                                                                                \
	X(URL_MYSQL, "mysql-url")                                                                                      \
	X(URL_MONGODB, "mongodb-url")                                                                                  \
	X(URL_REDIS, "redis-url")                                                                                      \
	X(URL_AMQP, "amqp-url")                                                                                        \
	X(URL_FTP, "ftp-url")                                                                                          \
	X(URL_SQLSERVER, "sqlserver-url")                                                                              \
	X(URL_OTHER, "url-credentials")                                                                                \
	X(CONNSTR, "connection-string-password")                                                                       \
	X(CURL_USER, "curl-user-password")                                                                             \
	X(GENERIC, "generic-secret")

#define RB_SR_ENUM_(id, name) RB_SR_##id,
enum rb_scrub_rule_id { RB_SCRUB_RULES(RB_SR_ENUM_) RB_SR_FIRST_EXACT };
#undef RB_SR_ENUM_

extern const char *const rb_scrub_rule_names[RB_SR_FIRST_EXACT];

/* Pass numbers: on a tie in length, the earlier pass names the merged redaction. */
enum { RB_SCRUB_PASS_EXACT, RB_SCRUB_PASS_FORMAT, RB_SCRUB_PASS_KEYWORD };

struct rb_scrub_span {
	size_t start, end; /* [start, end) in the input */
	uint32_t rule;
	uint32_t pass;
};

struct rb_scrub_spans {
	struct rb_scrub_span *v;
	size_t n, cap;
	bool oom; /* a push failed: the call fails rather than store a buffer half scrubbed */
};

/* Appends a span, skipping one that lies inside the previous span of the same pass. */
void rb_scrub_spans_push(struct rb_scrub_spans *sp, size_t start, size_t end, uint32_t rule, uint32_t pass);

/* The first position p >= i with p + 1 < len whose two bytes are set in the bigram bitmap
 * bm, or len. Both scanning passes spend most of their time here: eight positions per step
 * with one branch, so the loads and tests of a step run in parallel. */
static inline size_t rb_scrub_next_bigram(const uint64_t *bm, const unsigned char *in, size_t i, size_t len)
{
#define RB_BG_(k)                                                                                                      \
	((unsigned)(bm[(in[i + (k)] | (unsigned)in[i + (k) + 1] << 8) >> 6] >>                                         \
	            ((in[i + (k)] | (unsigned)in[i + (k) + 1] << 8) & 63)) &                                           \
	 1U) << (k)
	while (i + 9 <= len) {
		unsigned hit =
		    RB_BG_(0) | RB_BG_(1) | RB_BG_(2) | RB_BG_(3) | RB_BG_(4) | RB_BG_(5) | RB_BG_(6) | RB_BG_(7);
		if (hit)
			return i + (size_t)__builtin_ctz(hit);
		i += 8;
	}
#undef RB_BG_
	for (; i + 1 < len; i++) {
		unsigned b = in[i] | (unsigned)in[i + 1] << 8;
		if (bm[b >> 6] & (1ULL << (b & 63)))
			return i;
	}
	return len;
}

/* The hash of three bytes the prefilters confirm. */
static inline unsigned rb_scrub_tri(unsigned a, unsigned b, unsigned c)
{
	return ((a | b << 8) ^ (c * 0x9e5U)) & 0xffffU;
}

/* A candidate filter over the first three bytes of a set of prefixes (scrub/prefilter.c):
 * each prefix in one of 32 buckets (bucket & 7 in set bucket >> 3), by the low and high nibble
 * of each of its bytes. */
#define RB_SCRUB_PF_SETS 4
struct rb_scrub_prefilter {
	uint8_t lo[RB_SCRUB_PF_SETS][3][16], hi[RB_SCRUB_PF_SETS][3][16]; /* sets of 8 buckets */
	unsigned nsets;                                                   /* sets in use: 1, 2, or all */
	uint64_t bigram[65536 / 64];                                      /* exact first two bytes */
	uint64_t trigram[65536 / 64];                                     /* hashes of the three (rb_scrub_tri) */
	bool simd;                                                        /* AVX2 at hand: 32 positions a step */
};
void rb_scrub_prefilter_add(struct rb_scrub_prefilter *p, unsigned c0, unsigned c1, unsigned c2, unsigned bucket);
/* The CPU runs AVX2 code (and the OS keeps its registers). */
bool rb_scrub_have_avx2(void);
/* After the last add: chooses the AVX2 path where the CPU has it. */
void rb_scrub_prefilter_done(struct rb_scrub_prefilter *p);
/* The first position j >= i whose first two bytes are some prefix's and, where j + 2 < len
 * leaves room, whose three bytes hash like one (a superset: callers confirm); len when none. */
size_t rb_scrub_prefilter_next(const struct rb_scrub_prefilter *p, const unsigned char *in, size_t i, size_t len);
/* One scan's place in the AVX2 path: the 32-byte window last tested and its positions that
 * passed the nibble tables, so that the next call goes on in that window rather than testing
 * it again (a scan asks once per candidate). Zeroed before the scan's first call. */
struct rb_scrub_pf_cursor {
	size_t base;
	uint32_t bits;
	bool valid;
};
/* rb_scrub_prefilter_next through cur: the same positions, for calls whose i never goes back. */
size_t rb_scrub_prefilter_next_at(const struct rb_scrub_prefilter *p, struct rb_scrub_pf_cursor *cur,
                                  const unsigned char *in, size_t i, size_t len);

/* Byte classes the format and keyword passes share (scrub/rules.c). */
enum {
	RB_C_UP = 1 << 0,     /* A-Z */
	RB_C_LO = 1 << 1,     /* a-z */
	RB_C_DIG = 1 << 2,    /* 0-9 */
	RB_C_US = 1 << 3,     /* _ */
	RB_C_DASH = 1 << 4,   /* - */
	RB_C_PLUS = 1 << 5,   /* + */
	RB_C_SLASH = 1 << 6,  /* / */
	RB_C_EQ = 1 << 7,     /* = */
	RB_C_DOT = 1 << 8,    /* . */
	RB_C_TILDE = 1 << 9,  /* ~ */
	RB_C_AT = 1 << 10,    /* @ */
	RB_C_PCT = 1 << 11,   /* % */
	RB_C_HEXLO = 1 << 12, /* a-f */
	RB_C_HEXUP = 1 << 13, /* A-F */
	RB_C_SYM = 1 << 14,   /* other printable punctuation a password may hold: !#$&*^|?,;:<>()[]{}' " ` \ */
};
#define RB_C_ALNUM (RB_C_UP | RB_C_LO | RB_C_DIG)
extern const uint16_t rb_scrub_cls[256];

/* Looks like a placeholder rather than a secret: a stopword (EXAMPLE, your_, changeme, ...),
 * a long run of one byte (xxxx, XXXX, 0000), few distinct bytes, or a counting sequence. */
bool rb_scrub_placeholder(const unsigned char *v, size_t n);

/* One anchor of the format rules (scrub/rules.c), flattened from its family's table. */
struct rb_scrub_anchor {
	const char *s;
	uint32_t head, mask; /* its first four bytes (fewer: masked), as memcpy loads them */
	uint16_t family;
	uint8_t len;
	uint8_t key; /* the prefilter finds it by its three bytes at s + key (its rarest in text) */
};
/* The furthest an anchor's key lies from its start. */
#define RB_SCRUB_KEY_OFF_MAX    8
#define RB_SCRUB_ANCHORS_MAX    1024
#define RB_SCRUB_ANCHOR_BUCKETS 4096
#define RB_SCRUB_ANCHOR_ITEMS   4096

/* The bucket of an anchor's first two bytes. */
static inline unsigned rb_scrub_anchor_bucket(unsigned a, unsigned b)
{
	return ((a << 4) ^ b) & (RB_SCRUB_ANCHOR_BUCKETS - 1);
}

/* One element of a format rule's spec, parsed when the scrubber is built (scrub/rules.c): a
 * run of class cs (min to max bytes), a literal byte (cs 0), or where the redaction starts. */
struct rb_scrub_elem {
	uint16_t cs, min, max;
	uint8_t lit;
	bool red;
};
#define RB_SCRUB_ELEMS_MAX    4096
#define RB_SCRUB_FAMILIES_MAX 512

/* Tables of the format and keyword passes: constants (rb_scrub_tables), no mutable globals. */
struct rb_scrub_rule_tables {
	struct rb_scrub_prefilter anchors;  /* the format rules' anchors */
	struct rb_scrub_prefilter keywords; /* the keyword pass's words */
	struct rb_scrub_anchor anchor[RB_SCRUB_ANCHORS_MAX];
	size_t n_anchors;
	/* the anchors whose key's first two bytes fall in bucket h, in table order (of those that
	 * start at one place, the first that matches wins): items[bucket[h] .. bucket[h + 1]),
	 * indexes into anchor[] */
	uint16_t bucket[RB_SCRUB_ANCHOR_BUCKETS + 1];
	uint16_t items[RB_SCRUB_ANCHOR_ITEMS];
	/* each family's back and forward specs: elem[back_at[f] .. + back_n[f]), and so fwd */
	struct rb_scrub_elem elem[RB_SCRUB_ELEMS_MAX];
	size_t n_elems;
	uint16_t back_at[RB_SCRUB_FAMILIES_MAX], fwd_at[RB_SCRUB_FAMILIES_MAX];
	uint8_t back_n[RB_SCRUB_FAMILIES_MAX], fwd_n[RB_SCRUB_FAMILIES_MAX];
};

/* Fills t (the build-time tool scrub/tables_main.c runs it; tests compare). */
void rb_scrub_rules_init(struct rb_scrub_rule_tables *t);
/* rb_scrub_rules_init's tables as constants, written at build time (build/gen/scrub_tables.c):
 * [0] with the scalar prefilter, [1] with AVX2. A scrubber points at one; none builds them. */
extern const struct rb_scrub_rule_tables rb_scrub_tables[2];
/* Pass 2: format rules, found by their anchor (a prefix, or a marker inside the token). */
void rb_scrub_rules_scan(const struct rb_scrub_rule_tables *t, const unsigned char *in, size_t len,
                         struct rb_scrub_spans *sp);
/* Pass 3: values after a keyword (scrub/keyword.c). */
void rb_scrub_keywords_scan(const struct rb_scrub_rule_tables *t, const unsigned char *in, size_t len,
                            struct rb_scrub_spans *sp);
/* The keyword pass's words into t->keywords. */
void rb_scrub_keywords_init(struct rb_scrub_rule_tables *t);
/* Shannon entropy in bits per byte. */
double rb_scrub_entropy(const unsigned char *s, size_t n);

/* The three passes over in[0..len): the merged redactions, sorted and disjoint, in
 * sp->v[0..*n). Returns 0, or -1 with err (out of memory). */
int rb_scrub_find_spans(const struct rb_scrubber *s, const unsigned char *in, size_t len, struct rb_scrub_spans *sp,
                        size_t *n, struct rb_error *err);
/* in[0..len) with the redactions v[0..n) (sorted, disjoint, within len) written in. */
int rb_scrub_render(const struct rb_scrubber *s, const unsigned char *in, size_t len, const struct rb_scrub_span *v,
                    size_t n, struct rb_buf_out *out, struct rb_scrub_counts *counts, struct rb_error *err);
/* How many bytes at the end of in[0..len) are the start of some exact pattern: what more
 * input could still complete into a match. */
size_t rb_scrub_exact_pending(const struct rb_scrubber *s, const unsigned char *in, size_t len);

#endif
