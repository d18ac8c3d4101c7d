/* The scrubber's format rules (pass 2): a table of families, each anchors (vendor prefixes,
 * or markers inside the token) sharing a small spec of the charset runs around them; the
 * prefilter finds candidates, their first two bytes' bucket the anchors to compare, then the
 * spec is checked. PEM blocks, JWTs and URLs with a
 * password have hand-written matchers. No regex. docs/scrub.md lists every rule. */
#define _GNU_SOURCE
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "scrub/internal.h"

#define RB_SR_NAME_(id, name) [RB_SR_##id] = (name),
const char *const rb_scrub_rule_names[RB_SR_FIRST_EXACT] = {RB_SCRUB_RULES(RB_SR_NAME_)};
#undef RB_SR_NAME_

#define C_UP    RB_C_UP
#define C_LO    RB_C_LO
#define C_DIG   RB_C_DIG
#define C_US    RB_C_US
#define C_DASH  RB_C_DASH
#define C_PLUS  RB_C_PLUS
#define C_SLASH RB_C_SLASH
#define C_EQ    RB_C_EQ
#define C_DOT   RB_C_DOT
#define C_ALNUM RB_C_ALNUM
#define C_HEX   (RB_C_DIG | RB_C_HEXLO | RB_C_HEXUP)
#define C_B64   (RB_C_PLUS | RB_C_SLASH | RB_C_EQ)

const uint16_t rb_scrub_cls[256] = {
    ['A' ... 'F'] = RB_C_UP | RB_C_HEXUP,
    ['G' ... 'Z'] = RB_C_UP,
    ['a' ... 'f'] = RB_C_LO | RB_C_HEXLO,
    ['g' ... 'z'] = RB_C_LO,
    ['0' ... '9'] = RB_C_DIG,
    ['_'] = RB_C_US,
    ['-'] = RB_C_DASH,
    ['+'] = RB_C_PLUS,
    ['/'] = RB_C_SLASH,
    ['='] = RB_C_EQ,
    ['.'] = RB_C_DOT,
    ['~'] = RB_C_TILDE,
    ['@'] = RB_C_AT,
    ['%'] = RB_C_PCT,
    ['!'] = RB_C_SYM,
    ['#'] = RB_C_SYM,
    ['$'] = RB_C_SYM,
    ['&'] = RB_C_SYM,
    ['*'] = RB_C_SYM,
    ['^'] = RB_C_SYM,
    ['|'] = RB_C_SYM,
    ['?'] = RB_C_SYM,
    [','] = RB_C_SYM,
    [';'] = RB_C_SYM,
    [':'] = RB_C_SYM,
    ['<'] = RB_C_SYM,
    ['>'] = RB_C_SYM,
    ['('] = RB_C_SYM,
    [')'] = RB_C_SYM,
    ['['] = RB_C_SYM,
    [']'] = RB_C_SYM,
    ['{'] = RB_C_SYM,
    ['}'] = RB_C_SYM,
    ['\''] = RB_C_SYM,
    ['"'] = RB_C_SYM,
    ['`'] = RB_C_SYM,
    ['\\'] = RB_C_SYM,
};
#define cls rb_scrub_cls

/* The charsets a spec names with "%<letter>": */
static uint16_t spec_class(char c)
{
	switch (c) {
	case 'a': return C_ALNUM;                                           /* [A-Za-z0-9] */
	case 'u': return C_ALNUM | C_US | C_DASH;                           /* [A-Za-z0-9_-] */
	case 's': return C_ALNUM | C_US;                                    /* [A-Za-z0-9_] */
	case 'h': return C_DIG | RB_C_HEXLO;                                /* [0-9a-f] */
	case 'H': return C_HEX;                                             /* [0-9A-Fa-f] */
	case 'U': return C_UP | C_DIG;                                      /* [A-Z0-9] */
	case 'L': return C_LO | C_DIG;                                      /* [a-z0-9] */
	case 'd': return C_DIG;                                             /* [0-9] */
	case 'l': return C_UP | C_LO;                                       /* [A-Za-z] */
	case 'b': return C_ALNUM | C_PLUS | C_SLASH;                        /* [A-Za-z0-9+/] */
	case 'B': return C_ALNUM | C_B64;                                   /* [A-Za-z0-9+/=] */
	case 'x': return C_ALNUM | C_B64 | C_US | C_DASH;                   /* any base64 alphabet */
	case 't': return C_ALNUM | C_US | C_DASH | C_EQ;                    /* [A-Za-z0-9_=-] */
	case 'p': return C_ALNUM | C_US | C_DASH | C_B64;                   /* webhook paths */
	case 'w': return C_ALNUM | C_US | C_DASH | C_B64 | RB_C_AT | C_DOT; /* Teams paths */
	case 'e': return C_ALNUM | C_US | C_DASH | C_DOT | RB_C_TILDE;      /* Entra secrets */
	case 'q': return C_ALNUM | C_B64 | RB_C_PCT;                        /* URL-encoded base64 */
	case 'c': return C_ALNUM | C_DASH;                                  /* [A-Za-z0-9-] */
	case 'P': return C_ALNUM | RB_C_PCT;                                /* URL-encoded, no +/= */
	default: return 0;
	}
}

enum kind { K_SPEC, K_SK, K_PEM, K_JWT, K_URL, K_CURL };
enum {
	F_CI = 1,    /* the anchor in any case */
	F_MIXED = 2, /* the redaction holds an upper-case letter, a lower-case one and a digit */
	F_NOLEFT = 4 /* the anchor may follow a letter (a host name's tail: x.webhook.office.com) */
};

/* A family: the charset runs of back, then one of its anchors, then those of fwd; every
 * anchor of a family shares its spec, rule, kind and flags. A spec is literal bytes and runs
 * "%<class><min>[,[<max>]]" (no max: exactly min; "," alone: up to SPEC_MAX). '!' in fwd: the
 * redaction starts here (a key such as "AccountKey=" stays); '\\' makes the next byte literal. */
#define FAMILY_ANCHORS 16
struct fmt_family {
	const char *back, *fwd;
	uint8_t rule;
	uint8_t kind;
	uint8_t flags;
	const char *anchors[FAMILY_ANCHORS]; /* NULL-terminated */
};
#define SPEC_MAX 8192

#define F(b, f, r, fl, ...)                                                                                            \
	{                                                                                                              \
		b, f, RB_SR_##r, K_SPEC, fl,                                                                           \
		{                                                                                                      \
			__VA_ARGS__, NULL                                                                              \
		}                                                                                                      \
	}
#define K(r, k, ...)                                                                                                   \
	{                                                                                                              \
		NULL, NULL, RB_SR_##r, k, 0,                                                                           \
		{                                                                                                      \
			__VA_ARGS__, NULL                                                                              \
		}                                                                                                      \
	}
/* Of the anchors that match at one position, the first in this table wins: longer anchors
 * first. */
static const struct fmt_family families[] = {
    /* AWS: access key ids; STS session tokens (base64 of a protobuf that starts alike); AppSync */
    F(NULL, "%U16", AWS_KEY_ID, 0, "AKIA", "ASIA", "ABIA", "ACCA"),
    F(NULL, "%U17", AWS_KEY_ID, 0, "A3T"),
    F(NULL, "%B100,", AWS_SESSION, 0, "IQoJb3JpZ2lu", "IgoJb3JpZ2lu", "AgoJb3JpZ2lu", "FwoGZXIvYXdz", "FQoGZXIvYXdz",
      "AQoDYXdz", "FQoDYXdz"),
    F(NULL, "%L26", AWS_APPSYNC, 0, "da2-"),
    /* GitHub: classic tokens are 36 after the prefix today; longer ones are announced */
    F(NULL, "%s60,255", GITHUB_FINE_GRAINED, 0, "github_pat_"),
    F(NULL, "%a36,255", GITHUB_PAT, 0, "ghp_"),
    F(NULL, "%a36,255", GITHUB_OAUTH, 0, "gho_"),
    F(NULL, "%a36,255", GITHUB_APP, 0, "ghu_", "ghs_"),
    F(NULL, "%a36,255", GITHUB_REFRESH, 0, "ghr_"),
    /* GitLab */
    F(NULL, "%u27,300.%L9", GITLAB_PAT, 0, "glpat-"), /* routable: a dot and its suffix too */
    F(NULL, "%u27,300.%L2.%L9", GITLAB_PAT, 0, "glpat-"),
    F(NULL, "%u27,300.%L9", GITLAB_RUNNER, 0, "glrt-"),
    F(NULL, "%u20,", GITLAB_PAT, 0, "glpat-"),
    F(NULL, "%u20,", GITLAB_DEPLOY, 0, "gldt-"),
    F(NULL, "%u20,", GITLAB_RUNNER, 0, "glrt-", "glrtr-", "GR1348941"),
    F(NULL, "%u20,", GITLAB_CI_BUILD, 0, "glcbt-"),
    F(NULL, "%u20,", GITLAB_OTHER, 0, "glptt-", "glft-", "glimt-"),
    F(NULL, "%u50,", GITLAB_OTHER, 0, "glagent-"),
    F(NULL, "%u20,", GITLAB_OTHER, 0, "gloas-", "glsoat-", "glffct-"),
    F(NULL, "!%L32", GITLAB_SESSION, 0, "_gitlab_session="),
    /* Slack */
    F(NULL, "%c10,", SLACK_TOKEN, 0, "xoxe.xoxp-", "xoxe.xoxb-", "xoxb-", "xoxp-", "xoxe-", "xoxa-", "xoxr-", "xoxs-",
      "xoxo-"),
    F(NULL, "%c10,", SLACK_APP, 0, "xapp-"),
    F(NULL, "%p20,", SLACK_WEBHOOK, 0, "hooks.slack.com/services/", "hooks.slack.com/workflows/",
      "hooks.slack.com/triggers/"),
    F(NULL, "%d3,12/%a4,16", ZAPIER_WEBHOOK, 0, "hooks.zapier.com/hooks/catch/"),
    /* Stripe */
    F(NULL, "%a16,", STRIPE, 0, "sk_live_", "sk_test_", "sk_prod_", "rk_live_", "rk_test_", "rk_prod_"),
    F(NULL, "%a32,", STRIPE_WEBHOOK, 0, "whsec_"),
    F(NULL, "%a24_secret_%a25", STRIPE_CLIENT_SECRET, 0, "pi_"),
    /* other sk_ keys: Recharge, Photoroom, Ticket Tailor, ElevenLabs */
    F(NULL, "%d1,2x%d1_%h64", RECHARGE, 0, "sk_test_", "sk_"),
    F(NULL, "%a1,64_%H40", PHOTOROOM, 0, "sk_pr_"),
    F(NULL, "%d4_%d6_%h32", TICKETTAILOR, 0, "sk_"),
    F(NULL, "%h48", ELEVENLABS, 0, "sk_"),
    /* Google */
    F(NULL, "%u35", GCP_API_KEY, 0, "AIza"),
    F(NULL, "%u20,", GOOGLE_OAUTH, 0, "ya29."),
    F(NULL, "%u30,", GOOGLE_REFRESH, 0, "1//0"),
    F(NULL, "%u28", GOOGLE_CLIENT_SECRET, 0, "GOCSPX-"),
    F(NULL, "%a12,15\\!%e80,", SALESFORCE, 0, "00D"), /* org id ! session: an OAuth access token */
    K(PRIVATE_KEY, K_PEM, "-----BEGIN "),
    F(NULL, "%B50,", GRAFANA, 0, "eyJrIjoi"), /* a Grafana API key: base64 of {"k":" */
    K(JWT, K_JWT, "eyJ", "ewogIC", "ewoi"),   /* compact JSON, or pretty-printed: "{\n  ", "{\n\"" */
    /* a JWT in base64 again: base64 of eyJhbGciOi", eyJ0eXAiOi", eyJraWQiOi" */
    F(NULL, "%B40,", JWT_B64, 0, "ZXlKaGJHY2lPaU", "ZXlKMGVYQWlPaU", "ZXlKcmFXUWlPaU"),
    /* Anthropic, OpenAI, and sk- keys of other AI vendors */
    F(NULL, "%u20,", ANTHROPIC, 0, "sk-ant-api03-"),
    F(NULL, "%u20,", ANTHROPIC_ADMIN, 0, "sk-ant-admin01-"),
    F(NULL, "%u20,", ANTHROPIC, 0, "sk-ant-oat01-", "sk-ant-ort01-"),
    F(NULL, "%u20,", OPENAI, 0, "sk-proj-", "sk-svcacct-", "sk-admin-", "sk-None-"),
    F(NULL, "%h8-%h4-%h4-%h4-%h12", LANGFUSE, 0, "sk-lf-"),
    F(NULL, "%h64", OPENROUTER, 0, "sk-or-v1-"),
    K(SK_KEY, K_SK, "sk-"),
    F(NULL, "%u10,.%u16,", MAPBOX, 0, "sk.eyJ"),
    F(NULL, "%a36", NPM, 0, "npm_"),
    F(NULL, "%u70,", PYPI, 0, "pypi-AgE"), /* a macaroon: 150+ in practice */
    F(NULL, "%a30,40", HUGGINGFACE, 0, "hf_", "api_org_"),
    /* Azure: keys in connection strings, SAS signatures, identifiable keys (a marker at a
     * fixed offset), Entra client secrets (a digit and "Q~" at offset 3) */
    F(NULL, "!%B20,", AZURE_STORAGE, F_CI, "AccountKey="),
    F(NULL, "!%B20,", AZURE_SAS_KEY, F_CI, "SharedAccessKey="),
    F(NULL, "!%q20,", AZURE_SAS_SIG, F_MIXED, "sig="),
    F("%b76", "%b6==", AZURE_STORAGE, 0, "+ASt"),
    F("%b76", "%b6==", AZURE_KEY, 0, "ACDb"),
    F("%b33", "%b5=", AZURE_KEY, 0, "+ASb", "+AEh", "+ARm"),
    F("%b42", "%a6", AZURE_KEY, 0, "+ACR"),
    F("%u44", "%u6==", AZURE_KEY, 0, "AzFu"),
    F("%a42", "%a6", AZURE_KEY, 0, "AzSe"),
    F("%a52", "%a18AZDO%a4", AZURE_DEVOPS, 0, "JQQJ99"),
    F("%a52", "%a27", AZURE_KEY, 0, "JQQJ9"),
    F("%e3%d1", "%e30,36", AZURE_CLIENT_SECRET, 0, "Q~"),
    /* Entra refresh tokens: [01].A<client>[.<digit>].Ag<body>[.A<tail>] */
    F(NULL, "%u50,.%d1.Ag%u250,.A%u200,", AZURE_REFRESH, 0, "0.A", "1.A"),
    F(NULL, "%u50,.Ag%u250,.A%u200,", AZURE_REFRESH, 0, "0.A", "1.A"),
    F(NULL, "%u50,.%d1.Ag%u250,", AZURE_REFRESH, 0, "0.A", "1.A"),
    F(NULL, "%u50,.Ag%u250,", AZURE_REFRESH, 0, "0.A", "1.A"),
    /* messaging and mail */
    F(NULL, "%u16,32.%u30,50", SENDGRID, 0, "SG."),
    F(NULL, "%H32", TWILIO_KEY, 0, "SK"),
    F("%d5,16", "%u34", TELEGRAM, 0, ":A"),
    F(NULL, "%d17,20/%u60,70", DISCORD_WEBHOOK, 0, "discord.com/api/webhooks/", "discordapp.com/api/webhooks/"),
    /* a Discord bot token's first part is the base64 of a numeric id: [MNO][DTjz] */
    F(NULL, "%u20,28.%u6,7.%u25,45", DISCORD_TOKEN, 0, "MT", "Mj", "Mz", "MD", "NT", "Nj", "Nz", "ND", "OT", "Oj", "Oz",
      "OD"),
    F(NULL, "%w20,", TEAMS_WEBHOOK, F_NOLEFT, ".webhook.office.com/webhookb2/"),
    F(NULL, "%w20,", TEAMS_WEBHOOK, 0, "outlook.office.com/webhook/", "outlook.office365.com/webhook/"),
    F(NULL, "%h32", MAILGUN, 0, "key-"),
    F("%h32", "%d1,2", MAILCHIMP, 0, "-us"),
    F(NULL, "%h64-%a16", BREVO, 0, "xkeysib-", "xsmtpsib-"),
    /* HashiCorp */
    F(NULL, "%u24,", VAULT, F_MIXED, "hvs.", "hvb.", "hvr."),
    F(NULL, "%a24", VAULT, F_MIXED, "s."),
    F("%a14", "%t60,", TERRAFORM, 0, ".atlasv1."),
    /* New Relic: user, admin, browser, insights and REST keys; license keys end in NRAL */
    F(NULL, "%U27", NEWRELIC, 0, "NRAK-"),
    F(NULL, "%H27", NEWRELIC, 0, "NRAA-"),
    F(NULL, "%H19", NEWRELIC, 0, "NRJS-", "NRBR-"),
    F(NULL, "%u32", NEWRELIC, 0, "NRII-", "NRIQ-"),
    F(NULL, "%H42", NEWRELIC, 0, "NRRA-"),
    F("%H36", "", NEWRELIC, 0, "NRAL"),
    F("eu01xx%H30", "", NEWRELIC, 0, "NRAL"),
    F("AA%h40", "", NEWRELIC, 0, "-NRMA"), /* mobile app tokens */
    F("eu01xx%h36", "", NEWRELIC, 0, "-NRMA"),
    /* Atlassian */
    F(NULL, "%t150,300", ATLASSIAN, 0, "ATATT", "ATCTT"),
    F(NULL, "%a28,40", BITBUCKET, 0, "ATBB"),
    F(NULL, "%h32_%h10", LANGSMITH, 0, "lsv2_pt_", "lsv2_sk_"),
    /* 1Password: service-account tokens (base64 JSON, often over 512 bytes); account secret keys */
    F(NULL, "%B100,", ONEPASSWORD, 0, "ops_eyJ"),
    F(NULL, "%U6-%U11-%U5-%U5-%U5", ONEPASSWORD_SECRET_KEY, 0, "A3-"),
    F(NULL, "%U6-%U6-%U5-%U5-%U5-%U5", ONEPASSWORD_SECRET_KEY, 0, "A3-"),
    F(NULL, "%a40,44", DOPPLER, 0, "dp.pt.", "dp.st.", "dp.sa.", "dp.ct.", "dp.scim.", "dp.audit."),
    F(NULL, "%h64", DIGITALOCEAN, 0, "dop_v1_", "doo_v1_", "dor_v1_"),
    F(NULL, "%H32", SHOPIFY, 0, "shpat_", "shpss_", "shpca_", "shppa_"),
    F(NULL, "%h32", DATABRICKS, 0, "dapi"),
    F(NULL, "%a43", NOTION, 0, "secret_"),
    F(NULL, "%a40,50", NOTION, 0, "ntn_"),
    F(NULL, "%a40,64", LINEAR, 0, "lin_api_", "lin_oauth_"),
    F(NULL, "%U58", AGE, 0, "AGE-SECRET-KEY-1"),
    F(NULL, "%l1%d2.%U24.%U64", DYNATRACE, 0, "dt0"),
    F(NULL, "%h24-%h34", POSTMAN, 0, "PMAK-"),
    F(NULL, "%B32,", GRAFANA, 0, "glc_"),
    F(NULL, "%a32_%H8", GRAFANA, 0, "glsa_"),
    F(NULL, "%x50,", SENTRY, 0, "sntrys_eyJ"),
    F(NULL, "%h64", SENTRY, 0, "sntryu_"),
    F(NULL, "%u22", SQUARE, 0, "sq0atp-"),
    F(NULL, "%u40,50", SQUARE, 0, "sq0csp-"),
    F(NULL, "%u60", SQUARE, 0, "EAAA"),
    F(NULL, "%a100,", FACEBOOK, F_MIXED, "EAA"),
    F(NULL, "%u50,70", HEROKU, 0, "HRKU-"),
    F(NULL, "%h24-%h146", CLOUDFLARE, 0, "v1.0-"),
    F(NULL, "%u20,40", DOCKER, 0, "dckr_pat_", "dckr_oat_"),
    F(NULL, "%h40", SUPABASE, 0, "sbp_"),
    F(NULL, "%u20,", SUPABASE, 0, "sb_secret_"),
    F(NULL, "%u32,64", PLANETSCALE, 0, "pscale_tkn_", "pscale_pw_", "pscale_oauth_"),
    F(NULL, "%a69", ARTIFACTORY, 0, "AKCp"),
    F(NULL, "%a50,", ARTIFACTORY, 0, "cmVmdGtuOjAxOj"), /* base64 of "reftkn:01:" */
    F(NULL, "%a52", GROQ, 0, "gsk_"),
    F(NULL, "%a37", REPLICATE, 0, "r8_"),
    F(NULL, "%a80", XAI, 0, "xai-"),
    F(NULL, "%a48", PERPLEXITY, 0, "pplx-"),
    F(NULL, "%h40", PULUMI, 0, "pul-"),
    F(NULL, "%u43", FLY, 0, "fo1_"),
    F(NULL, "%x40,", FLY, 0, "fm2_"),
    F(NULL, "%x100,", FLY, 0, "fm1a_", "fm1r_"),
    F(NULL, "%u40,", FIGMA, 0, "figd_"),
    F(NULL, "%a14.%h64", AIRTABLE, 0, "pat"),
    F(NULL, "%u43", CONTENTFUL, 0, "CFPAT-"),
    F(NULL, "%e130,", DROPBOX, F_MIXED, "sl."),
    F(NULL, "%h48", RUBYGEMS, 0, "rubygems_"),
    F(NULL, "%L43", NUGET, 0, "oy2"),
    F(NULL, "%h40", BUILDKITE, 0, "bkua_"),
    F(NULL, "%u20,", CIRCLECI, 0, "CCIPAT_"),
    F(NULL, "%a54", EASYPOST, 0, "EZAK", "EZTK"),
    F(NULL, "%h32-X", FLUTTERWAVE, 0, "FLWSECK_TEST-", "FLWSECK-"),
    F(NULL, "%h12", FLUTTERWAVE, 0, "FLWSECK_TEST-", "FLWSECK_TEST"), /* encryption keys */
    F(NULL, "%h40", SHIPPO, 0, "shippo_live_", "shippo_test_"),
    F(NULL, "%x40,", TYPEFORM, 0, "tfp_"),
    /* more vendors whose tokens carry their own prefix (cross-checked against the public
     * gitleaks and trufflehog rule sets, written from the vendors' documented shapes) */
    F(NULL, "%a20", ALIBABA, F_MIXED, "LTAI"),
    F(NULL, "%L60", CLOJARS, 0, "CLOJARS_"),
    F(NULL, "%u26-%u52", DEFINED_NET, 0, "dnkey-"),
    F(NULL, "%t43", DUFFEL, 0, "duffel_test_", "duffel_live_"),
    F(NULL, "%t64", FRAMEIO, 0, "fio-u-"),
    F(NULL, "%a22.%H24.%a20", HARNESS, 0, "pat."),
    F(NULL, "%a32", INFRACOST, 0, "ico-"),
    F(NULL, "%h64", INTRA42, 0, "s-s4t2ud-", "s-s4t2af-", "u-s4t2ud-", "u-s4t2af-"),
    F("%a6_%a29", "", MAXMIND, 0, "_mmk"),
    F(NULL, "%U26,32", OCTOPUS, 0, "API-"),
    F(NULL, "%u43", OPENSHIFT, 0, "sha256~"),
    F(NULL, "%a36", PREFECT, 0, "pnu_"),
    F(NULL, "%L70", README, 0, "rdme_"),
    F(NULL, "%u48", SCALINGO, 0, "tk-us-"),
    F(NULL, "%a16", SETTLEMINT, F_MIXED, "sm_pat_", "sm_aat_", "sm_sat_"),
    F(NULL, "%H16_%H40", SOURCEGRAPH, 0, "sgp_"),
    F(NULL, "%H40", SOURCEGRAPH, 0, "sgp_local_", "sgp_"),
    F(NULL, "%u35,38", YANDEX, F_MIXED, "AQVN"),
    F(NULL, "%a32", RENDER, F_MIXED, "rnd_"),
    F(NULL, "%a8,-%a20,", TAILSCALE, 0, "tskey-api-", "tskey-auth-", "tskey-client-"),
    F(NULL, "%L3,12-%a8,-%a20,", TAILSCALE, 0, "tskey-"),
    F(NULL, "%a36", NETLIFY, 0, "nfp_"),
    F(NULL, "%h8-%h4-%h4-%h4-%h12", LAUNCHDARKLY, 0, "sdk-", "api-"),
    F(NULL, "%h8-%h4-%h4-%h4-%h12", PLAID, 0, "access-production-", "access-development-", "access-sandbox-"),
    F(NULL, "%b109,269", AWS_BEDROCK, 0, "ABSK"),
    F(NULL, "%x0,", AWS_BEDROCK, 0, "bedrock-api-key-YmVkcm9jay5hbWF6b25hd3MuY29t"),
    F(NULL, "%a38", CLICKHOUSE, F_MIXED, "4b1d"),
    F(NULL, "%h40", SONAR, 0, "squ_", "sqp_", "sqa_"),
    F(NULL, "%a59", SONAR, 0, "sqco_"),
    F(NULL, "%a14", RAZORPAY, 0, "rzp_live_", "rzp_test_"),
    /* cross-checked against gitleaks' config/gitleaks.toml and trufflehog's pkg/detectors:
     * the formats there that carry a prefix (docs/scrub.md, "Coverage") */
    F(NULL, "%a32", ADOBE, 0, "p8e-"),
    F("%l2,8_%a5,30.%a4,6", "%c10,32.%x30,120", AUTHRESS, 0, ".acc_", ".acc-"),
    F(NULL, "%P80,110", TWITTER_BEARER, 0, "AAAAAAAAAAAAAAAAAAAAA"), /* 21 A, then URL-encoded base64 */
    F(NULL, "%t20,.%t86,88", YANDEX_IAM, F_MIXED, "t1."),
    F("%d14,15", "%H32", FACEBOOK, 0, "0|", "1|", "2|", "3|", "4|", "5|", "6|", "7|", "8|", "9|"), /* app id|secret */
    F("%d15,16", "%H32", FACEBOOK, 0, "%7C", "%7c"),
    F(NULL, "%a28", ADAFRUIT, F_MIXED, "aio_"),
    F(NULL, "%a36", APIFY, 0, "apify_api_"),
    F(NULL, "%w40,50", BITBUCKET_DC, 0, "BBDC-"),
    F(NULL, "%h30", BANNERBEAR, 0, "bb_pr_", "bb_ma_"),
    F(NULL, "%a48", CLOUDFLARE_TOKEN, 0, "cfut_", "cfat_", "cfk_"),
    F(NULL, "%a36", DENO, 0, "ddp_", "ddw_"),
    F(NULL, "%c16", ENDORLABS, 0, "endr+"),
    F(NULL, "%t40,54", FIGMA, 0, "figp_"),
    F(NULL, "%U32", FINAGE, 0, "API_KEY"),
    F(NULL, "%a20", FLEETBASE, 0, "flb_live_"),
    F(NULL, "%u40", FLEXPORT, 0, "shltm_"),
    F(NULL, "%b100", FULLSTORY, 0, "na1."),
    F(NULL, "%a20", GEMINI, F_MIXED, "master-", "account-"),
    F(NULL, "%H8-%H4-%H4-%H4-%H12", HUBSPOT, 0, "pat-na1-", "pat-eu1-"),
    F(NULL, "%h34", KLAVIYO, 0, "pk_"),
    F(NULL, "%d7,9_%U32", CLICKUP, 0, "pk_"),
    F(NULL, "%h35", LOB, 0, "live_", "test_"),
    F(NULL, "%u40", GOCARDLESS, F_MIXED, "live_"),
    F(NULL, "%h32", LOCATIONIQ, 0, "pk."),
    F(NULL, "%a32", NIGHTFALL, 0, "NF-"),
    F(NULL, "%u64", NVIDIA, 0, "nvapi-"),
    F(NULL, "%a30", PAGARME, 0, "ak_live_"),
    F(NULL, "%a5,6_%a63", PINECONE, 0, "pcsk_"),
    F(NULL, "%s43,48", POSTHOG, 0, "phx_"),
    F(NULL, "%L8-%L4-%L4-%L4-%L12", PUBNUB, 0, "pub-c-", "sub-c-"),
    F(NULL, "%a48", RAMP, 0, "ramp_sec_"),
    F(NULL, "%H8-%H4-%H4-%H4-%H12", ROBINHOOD, 0, "rh-api-"),
    F(NULL, "%h64", ROOTLY, 0, "rootly_"),
    F(NULL, "%a1,7_%a7,235", SALAD, 0, "salad_cloud_"),
    F(NULL, "%h64", SOURCEGRAPH_CODY, 0, "slk_"),
    F(NULL, "%L32", SPECTRAL, 0, "spu-"),
    F(NULL, "%a27", PGANALYZE, 0, "pgar_"),
    F(NULL, "%L32/%L32", TINES, F_NOLEFT, ".tines.com/webhook/"),
    F(NULL, "%h16", TRUFFLEHOG, 0, "thog-key-"),
    F(NULL, "%h32", TRUFFLEHOG, 0, "thog-secret-"),
    F(NULL, "%a30", UBIDOTS, 0, "BBFF-"),
    F(NULL, "%H24.%a16", VOICEFLOW, 0, "VF.DM.", "VF.WS.", "VF."),
    F(NULL, "%h32.%h32", ZOHO, 0, "1000."),
    F(NULL, "%a71=", TEAMWORK, 0, "tkn.v1_"),
    /* scheme://user:password@host */
    K(URL_OTHER, K_URL, "://"),
    /* curl -u user:password, --user, --proxy-user */
    K(CURL_USER, K_CURL, "-u ", "--user ", "--user=", "--proxy-user ", "--proxy-user="),

};
#undef F
#undef K
#define N_FAMILIES (sizeof families / sizeof families[0])
_Static_assert(N_FAMILIES <= RB_SCRUB_FAMILIES_MAX, "a spec slot per family");

/* A PEM block whose END line is missing is redacted through its body: these bytes. */
#define PEM_LABEL_MAX  48
#define PEM_SEARCH_MAX (64U << 10) /* a 4096-bit RSA key is 3.2 KiB of PEM */
#define PEM_END_TRIES  8

static inline bool is_hex(unsigned char c)
{
	return cls[c] & C_HEX;
}

/* Positions of "-----END " lines, found lazily and once per scan: many BEGIN lines without
 * their END then cost one search of the buffer, not one each. */
struct pem_ends {
	size_t *v;
	size_t n, cap;
	size_t scanned; /* searched up to here */
	size_t next;    /* first index that may still be at or after a BEGIN */
};

#define RUN_SLOTS 16
/* State of one format scan. Candidates can start every few bytes inside one long run of
 * token bytes ("sk-sk-sk-..."): the last run seen per charset, and the next OpenAI marker,
 * are remembered so that each byte is scanned a bounded number of times. */
struct scan {
	const struct rb_scrub_rule_tables *t;
	const unsigned char *in;
	size_t len;
	struct {
		uint16_t cs;
		size_t start, end;
	} runs[RUN_SLOTS];
	unsigned next_slot;
	size_t openai_mark; /* position of the next "T3BlbkFJ" at or after the last query, or len */
	bool openai_known;
	struct pem_ends pe;
	bool oom;
	/* url_segment_word's last "://" (its second '/' at url_scheme) and the bytes after it,
	 * up to url_clean, known to hold no break */
	bool url_known;
	size_t url_scheme, url_clean;
};

#define URL_WORD_MAX 12   /* "bot", "file", "token", "key": a path segment's word before a token */
#define URL_BACK_MAX 2048 /* how far back on its line a path may look for its scheme's "://" */

static bool url_break(unsigned char c)
{
	return c <= ' ' || c == '"' || c == '\'' || c == '<' || c == '>' || c == '`';
}

/* Does the lower-case word ending at i begin a path segment of a URL ("://host/bot<token>",
 * Telegram's documented form, or "/api/key<token>")? Its '/' must follow "://" on the same
 * URL: no space, quote or angle bracket between. The last "://" found and how far the bytes
 * after it are known to hold no break are kept, so the candidates of one long URL look back
 * only to the one before (each byte is looked at a bounded number of times). */
static bool url_segment_word(struct scan *sc, size_t i)
{
	const unsigned char *in = sc->in;
	size_t w = i;
	while (w > 0 && i - w < URL_WORD_MAX && (cls[in[w - 1]] & C_LO))
		w--;
	if (w == i || w < 2 || in[w - 1] != '/' || !(cls[in[w - 2]] & C_ALNUM))
		return false;
	size_t lim = w > URL_BACK_MAX ? w - URL_BACK_MAX : 0;
	for (size_t q = w - 2; q >= lim + 2; q--) {
		if (sc->url_known && q < sc->url_clean && sc->url_scheme <= q) {
			/* no break from here to url_clean, and no "://" after url_scheme */
			sc->url_clean = w - 1;
			return sc->url_scheme >= lim;
		}
		if (url_break(in[q]))
			return false;
		if (in[q] == '/' && in[q - 1] == '/' && in[q - 2] == ':') {
			/* the word's '/' follows a host: it starts the path or a segment */
			sc->url_known = true;
			sc->url_scheme = q;
			sc->url_clean = w - 1;
			return true;
		}
	}
	return false;
}

/* A token starts at i only after a non-alphanumeric byte, the start, a %XX escape, a
 * backslash escape (\n in JSON) or a URL path segment's word (/bot<token>): inside a longer
 * word it is most likely not a token. */
static bool left_ok(struct scan *sc, size_t i)
{
	const unsigned char *in = sc->in;
	if (i == 0 || !(cls[in[i - 1]] & C_ALNUM))
		return true;
	if (i >= 3 && in[i - 3] == '%' && is_hex(in[i - 2]) && is_hex(in[i - 1]))
		return true;
	if (i >= 2 && in[i - 2] == '\\')
		return true;
	return (cls[in[i - 1]] & C_LO) && url_segment_word(sc, i);
}

/* Length of the run of charset cs bytes at i. */
static size_t run(struct scan *sc, size_t i, uint16_t cs)
{
	size_t k = 0;
	while (k < RUN_SLOTS && sc->runs[k].cs && sc->runs[k].cs != cs)
		k++;
	if (k == RUN_SLOTS)
		k = sc->next_slot++ % RUN_SLOTS;
	if (sc->runs[k].cs == cs && i >= sc->runs[k].start && i <= sc->runs[k].end)
		return sc->runs[k].end - i;
	size_t j = i;
	while (j < sc->len && (cls[sc->in[j]] & cs))
		j++;
	sc->runs[k].cs = cs;
	sc->runs[k].start = i;
	sc->runs[k].end = j;
	return j - i;
}

/* Does [i, i + n) hold "T3BlbkFJ"? */
static bool openai_marker(struct scan *sc, size_t i, size_t n)
{
	if (!sc->openai_known || sc->openai_mark < i) {
		const unsigned char *m = memmem(sc->in + i, sc->len - i, "T3BlbkFJ", 8);
		sc->openai_mark = m ? (size_t)(m - sc->in) : sc->len;
		sc->openai_known = true;
	}
	return sc->openai_mark + 8 <= i + n;
}

/* One element of a spec at *p: a run (class, min, max) or a literal byte (cs 0). */
struct elem {
	uint16_t cs;
	unsigned char lit;
	size_t min, max;
};

static const char *next_elem(const char *p, struct elem *e)
{
	if (*p == '\\' && p[1]) { /* a literal '!' or '%' */
		*e = (struct elem){0, (unsigned char)p[1], 1, 1};
		return p + 2;
	}
	if (*p != '%') {
		*e = (struct elem){0, (unsigned char)*p, 1, 1};
		return p + 1;
	}
	e->lit = 0; /* a run: lit is unused, but every field is written */
	e->cs = spec_class(p[1]);
	char *q;
	e->min = strtoul(p + 2, &q, 10);
	e->max = e->min;
	if (*q == ',') {
		q++;
		e->max = (*q >= '0' && *q <= '9') ? strtoul(q, &q, 10) : SPEC_MAX;
	}
	return q;
}

static unsigned flip_case(unsigned c)
{
	return (cls[c] & C_UP) ? c + 32 : (cls[c] & C_LO) ? c - 32 : c;
}

/* How rare each printable byte is in text: -log2 of its share of 28 MB of Python's standard
 * library, C headers and Debian's copyright files (Debian 12), rounded; other bytes 20. */
static const uint8_t byte_rarity[95] = {
    3,  14, 9, 9, 17, 13, 13, 9, 8, 8, 8,  11, 7, 8, 6, 5, 8, 8,  8, 9, 10, 11, 10, 11, 10, 9, 8,  10, 11, 9,  10, 15,
    11, 7,  9, 8, 8,  7,  8,  9, 9, 7, 11, 11, 7, 9, 7, 7, 8, 12, 7, 7, 7,  8,  10, 9,  11, 9, 11, 11, 12, 11, 14, 6,
    12, 5,  6, 5, 6,  4,  6,  7, 6, 4, 10, 8,  5, 6, 5, 5, 5, 10, 5, 4, 4,  6,  8,  8,  8,  7, 10, 12, 13, 12, 17};

static unsigned rarity(unsigned char c)
{
	return c >= 32 && c < 127 ? byte_rarity[c - 32] : 20;
}

/* The offset of anchor a's key: of its three-byte windows that start at most
 * RB_SCRUB_KEY_OFF_MAX in, the one whose bytes are rarest in text (the first of equals), so
 * that fewer positions of ordinary text pass the prefilter ("-----BEGIN" by "BEG", not by
 * the "---" of every Markdown table). A two-byte anchor is keyed by its start. */
static uint8_t anchor_key(const struct rb_scrub_anchor *a)
{
	unsigned best = 0, best_rarity = 0;
	for (unsigned o = 0; a->len >= 3 && o + 3 <= a->len && o <= RB_SCRUB_KEY_OFF_MAX; o++) {
		const unsigned char *w = (const unsigned char *)a->s + o;
		unsigned r = rarity(w[0]) + rarity(w[1]) + rarity(w[2]);
		if (r > best_rarity)
			best = o, best_rarity = r;
	}
	return (uint8_t)best;
}

/* The distinct (first, second) byte pairs anchor a's key starts with: one, or up to four for
 * an anchor of any case. */
static size_t key_pairs(const struct fmt_family *f, const struct rb_scrub_anchor *a, unsigned pairs[4][2])
{
	const unsigned char *p = (const unsigned char *)a->s + a->key;
	size_t n = 0;
	for (unsigned v = 0; v < ((f->flags & F_CI) ? 4U : 1U); v++) {
		unsigned c0 = (v & 1) ? flip_case(p[0]) : p[0], c1 = (v & 2) ? flip_case(p[1]) : p[1];
		size_t k = 0;
		while (k < n && !(pairs[k][0] == c0 && pairs[k][1] == c1))
			k++;
		if (k == n)
			pairs[n][0] = c0, pairs[n][1] = c1, n++;
	}
	return n;
}

/* The bytes an anchor's key may hold at each of its three places (a set of 256 bits each):
 * each case of its key's bytes for an anchor of any case; for a two-byte anchor, third, each
 * byte its body may start with. */
typedef uint64_t byteset[4];

static void key_sets(const struct fmt_family *f, const struct rb_scrub_anchor *a, byteset set[3])
{
	const unsigned char *p = (const unsigned char *)a->s + a->key;
	memset(set, 0, 3 * sizeof set[0]);
	for (int k = 0; k < 3; k++) {
		if (k == 2 && a->len < 3) {
			struct elem e;
			next_elem(f->fwd, &e);
			for (unsigned c = 1; c < 256; c++)
				if (e.cs ? (cls[c] & e.cs) != 0 : c == e.lit)
					set[k][c >> 6] |= 1ULL << (c & 63);
			continue;
		}
		set[k][p[k] >> 6] |= 1ULL << (p[k] & 63);
		if (f->flags & F_CI)
			set[k][flip_case(p[k]) >> 6] |= 1ULL << (flip_case(p[k]) & 63);
	}
}

/* A bucket of the prefilter as its nibble tables see it: the low and high nibbles allowed at
 * each place (bits of 16); a byte passes where both of its nibbles are allowed. */
struct nibbles {
	uint16_t lo[3], hi[3];
};

/* The share of text positions a bucket lets through, by the bytes' rarity taken one by one. */
static double bucket_share(const struct nibbles *n)
{
	double share = 1;
	for (int k = 0; k < 3; k++) {
		double q = 0;
		for (unsigned c = 0; c < 256; c++)
			if ((n->lo[k] >> (c & 15) & 1) && (n->hi[k] >> (c >> 4) & 1))
				q += ldexp(1, -(int)rarity((unsigned char)c));
		share *= q;
	}
	return share;
}

static void nibbles_add(struct nibbles *n, byteset set[3])
{
	for (int k = 0; k < 3; k++)
		for (unsigned c = 0; c < 256; c++)
			if (set[k][c >> 6] >> (c & 63) & 1)
				n->lo[k] |= (uint16_t)(1U << (c & 15)), n->hi[k] |= (uint16_t)(1U << (c >> 4));
}

/* The prefilter's tables of the anchors' keys. Each key goes to the bucket it widens least
 * (what a bucket lets through is every mix of the nibbles its keys hold at each place: "nd"
 * and "MT" in one bucket pass "Nd" too), the widest keys first: a two-byte anchor's key, which
 * allows any byte its body may start with third, gets a bucket where its first two bytes are
 * those of few other keys. */
static void anchor_prefilter(struct rb_scrub_rule_tables *t)
{
	struct nibbles bk[RB_SCRUB_PF_SETS * 8] = {0};
	double share[RB_SCRUB_PF_SETS * 8] = {0};
	uint16_t order[RB_SCRUB_ANCHORS_MAX];
	double width[RB_SCRUB_ANCHORS_MAX];
	for (size_t k = 0; k < t->n_anchors; k++) {
		byteset set[3];
		struct nibbles alone = {0};
		key_sets(&families[t->anchor[k].family], &t->anchor[k], set);
		nibbles_add(&alone, set);
		width[k] = bucket_share(&alone);
		size_t at = k; /* widest first, table order among equals */
		while (at > 0 && width[order[at - 1]] < width[k])
			order[at] = order[at - 1], at--;
		order[at] = (uint16_t)k;
	}
	for (size_t i = 0; i < t->n_anchors; i++) {
		const struct rb_scrub_anchor *a = &t->anchor[order[i]];
		byteset set[3];
		key_sets(&families[a->family], a, set);
		unsigned best = 0;
		double best_growth = 0;
		for (unsigned b = 0; b < RB_SCRUB_PF_SETS * 8; b++) {
			struct nibbles n = bk[b];
			nibbles_add(&n, set);
			double growth = bucket_share(&n) - share[b];
			if (b == 0 || growth < best_growth)
				best = b, best_growth = growth;
		}
		nibbles_add(&bk[best], set);
		share[best] += best_growth;
		for (unsigned c0 = 0; c0 < 256; c0++)
			for (unsigned c1 = 0; c1 < 256 && (set[0][c0 >> 6] >> (c0 & 63) & 1); c1++)
				for (unsigned c2 = 0; c2 < 256 && (set[1][c1 >> 6] >> (c1 & 63) & 1); c2++)
					if (set[2][c2 >> 6] >> (c2 & 63) & 1)
						rb_scrub_prefilter_add(&t->anchors, c0, c1, c2, best);
	}
}

/* Appends spec's elements to t->elem; returns how many (room: the families' specs take a few
 * hundred of RB_SCRUB_ELEMS_MAX). */
static size_t parse_spec(struct rb_scrub_rule_tables *t, const char *p)
{
	size_t n = 0;
	while (p && *p && t->n_elems < RB_SCRUB_ELEMS_MAX) {
		struct rb_scrub_elem *x = &t->elem[t->n_elems++];
		n++;
		if (*p == '!') {
			*x = (struct rb_scrub_elem){.red = true};
			p++;
			continue;
		}
		struct elem e;
		p = next_elem(p, &e);
		*x = (struct rb_scrub_elem){.cs = e.cs, .lit = e.lit, .min = (uint16_t)e.min, .max = (uint16_t)e.max};
	}
	return n;
}

void rb_scrub_rules_init(struct rb_scrub_rule_tables *t)
{
	memset(t, 0, sizeof *t);
	/* room for every anchor: test_formats has a positive for each family */
	for (size_t i = 0; i < N_FAMILIES; i++) {
		for (size_t k = 0; k < FAMILY_ANCHORS && families[i].anchors[k] && t->n_anchors < RB_SCRUB_ANCHORS_MAX;
		     k++) {
			const char *s = families[i].anchors[k];
			struct rb_scrub_anchor a = {.s = s, .family = (uint16_t)i, .len = (uint8_t)strlen(s)};
			unsigned char h[4] = {0}, m[4] = {0};
			for (size_t q = 0; q < 4 && q < a.len; q++)
				h[q] = (unsigned char)s[q], m[q] = 0xff;
			memcpy(&a.head, h, 4);
			memcpy(&a.mask, m, 4);
			a.key = anchor_key(&a);
			t->anchor[t->n_anchors++] = a;
		}
	}
	/* the specs, parsed once */
	for (size_t i = 0; i < N_FAMILIES; i++) {
		t->back_at[i] = (uint16_t)t->n_elems;
		t->back_n[i] = (uint8_t)parse_spec(t, families[i].back);
		t->fwd_at[i] = (uint16_t)t->n_elems;
		t->fwd_n[i] = (uint8_t)parse_spec(t, families[i].fwd);
	}
	/* the buckets by the key's first two bytes: counted, then filled in table order */
	uint16_t fill[RB_SCRUB_ANCHOR_BUCKETS + 1] = {0};
	for (int pass = 0; pass < 2; pass++) {
		for (size_t k = 0; k < t->n_anchors; k++) {
			unsigned pairs[4][2];
			const struct fmt_family *f = &families[t->anchor[k].family];
			size_t np = key_pairs(f, &t->anchor[k], pairs);
			for (size_t q = 0; q < np; q++) {
				unsigned h = rb_scrub_anchor_bucket(pairs[q][0], pairs[q][1]);
				if (pass == 0)
					t->bucket[h + 1]++;
				else if (fill[h] < RB_SCRUB_ANCHOR_ITEMS)
					t->items[fill[h]++] = (uint16_t)k;
			}
		}
		if (pass == 0) {
			for (size_t h = 0; h < RB_SCRUB_ANCHOR_BUCKETS; h++)
				t->bucket[h + 1] += t->bucket[h];
			memcpy(fill, t->bucket, sizeof fill);
		}
	}
	anchor_prefilter(t);
	rb_scrub_prefilter_done(&t->anchors);
	rb_scrub_keywords_init(t);
}

/* Matches the spec e[0..n) forward from j; returns the end or 0. *red: where a '!' put the
 * redaction's start. *last: the last run's class. */
static size_t spec_fwd(struct scan *sc, const struct rb_scrub_elem *e, size_t n, size_t j, size_t *red, uint16_t *last)
{
	for (; n > 0; n--, e++) {
		if (e->red) {
			*red = j;
			continue;
		}
		if (!e->cs) {
			if (j >= sc->len || sc->in[j] != e->lit)
				return 0;
			j++;
			*last = 0;
			continue;
		}
		size_t r = run(sc, j, e->cs);
		if (r < e->min)
			return 0;
		j += r < e->max ? r : e->max;
		*last = e->cs;
	}
	return j;
}

/* Matches the spec el[0..n) backward from j (the anchor); returns the start, or SIZE_MAX.
 * *first: the class of the outermost run, which must not go on before the start. */
static size_t spec_back(const unsigned char *in, const struct rb_scrub_elem *el, size_t n, size_t j, uint16_t *first)
{
	*first = 0;
	while (n-- > 0) {
		const struct rb_scrub_elem *e = &el[n];
		if (!e->cs) {
			if (j == 0 || in[j - 1] != e->lit)
				return SIZE_MAX;
			j--;
			continue;
		}
		size_t k = 0;
		while (k < e->max && j - k > 0 && (cls[in[j - k - 1]] & e->cs))
			k++;
		if (k < e->min)
			return SIZE_MAX;
		j -= k;
		*first = e->cs;
	}
	return j;
}

/* Upper case, lower case and a digit in v[0..n). */
static bool mixed(const unsigned char *v, size_t n)
{
	unsigned have = 0;
	for (size_t i = 0; i < n; i++)
		have |= cls[v[i]];
	return (have & C_UP) && (have & C_LO) && (have & C_DIG);
}

/* Finds the END lines that start before upto (searching only there: a BEGIN costs at most
 * its window, and the windows of successive BEGINs never overlap in what they search). */
static bool pem_ends_upto(struct pem_ends *pe, const unsigned char *in, size_t len, size_t upto)
{
	if (upto > len)
		upto = len;
	while (pe->scanned < upto) {
		size_t stop = upto + 8 < len ? upto + 8 : len; /* an END starting before upto fits */
		const unsigned char *e = memmem(in + pe->scanned, stop - pe->scanned, "-----END ", 9);
		if (!e) {
			pe->scanned = upto;
			break;
		}
		size_t at = (size_t)(e - in);
		if (pe->n == pe->cap) {
			size_t cap = pe->cap ? pe->cap * 2 : 64;
			size_t *v = realloc(pe->v, cap * sizeof *v);
			if (!v)
				return false;
			pe->v = v;
			pe->cap = cap;
		}
		pe->v[pe->n++] = at;
		pe->scanned = at + 1;
	}
	return true;
}

/* "-----BEGIN <LABEL>PRIVATE KEY[ BLOCK]-----" ... "-----END <same>-----". Returns the end
 * of the block, or 0 when this is no private key. */
static size_t pem_block(const unsigned char *in, size_t i, size_t len, struct pem_ends *pe, bool *oom)
{
	size_t l = i + 11, lab = l; /* after "-----BEGIN " */
	while (l < len && l - lab < PEM_LABEL_MAX && ((cls[in[l]] & (C_UP | C_DIG)) || in[l] == ' '))
		l++;
	if (len - l < 5 || memcmp(in + l, "-----", 5) != 0)
		return 0;
	size_t label_len = l - lab;
	bool key = false;
	static const char *const tails[] = {"PRIVATE KEY", "PRIVATE KEY BLOCK"};
	for (size_t k = 0; k < 2; k++) {
		size_t tl = strlen(tails[k]);
		if (label_len >= tl && memcmp(in + l - tl, tails[k], tl) == 0)
			key = true;
	}
	if (!key)
		return 0;
	size_t body = l + 5;
	/* The matching END line: one of the next PEM_END_TRIES within PEM_SEARCH_MAX. */
	if (pe->scanned < body) /* END lines before this body matter to no later BEGIN either */
		pe->scanned = body;
	if (!pem_ends_upto(pe, in, len, body + PEM_SEARCH_MAX)) {
		*oom = true;
		return 0;
	}
	while (pe->next < pe->n && pe->v[pe->next] < body)
		pe->next++;
	for (size_t k = pe->next; k < pe->n && k - pe->next < PEM_END_TRIES && pe->v[k] - body <= PEM_SEARCH_MAX; k++) {
		size_t after = pe->v[k] + 9;
		if (len - after >= label_len + 5 && memcmp(in + after, in + lab, label_len) == 0 &&
		    memcmp(in + after + label_len, "-----", 5) == 0)
			return after + label_len + 5;
	}
	/* No END: redact the body, base64 lines with their headers and escaped newlines. */
	size_t j = body;
	while (j < len && ((cls[in[j]] & (C_ALNUM | C_B64 | C_DASH)) || (in[j] && strchr(" \t\r\n:,\\", in[j]))))
		j++;
	return j;
}

/* eyJ<header>.<payload>[.<signature>[.<more>]]: a JWS of two or three parts whose payload is
 * JSON too (eyJ), or a JWE of five. Every part is redacted, padding included. */
static size_t jwt(struct scan *sc, size_t i, size_t alen)
{
	const unsigned char *in = sc->in;
	size_t len = sc->len;
	const uint16_t cs = C_ALNUM | C_US | C_DASH | C_EQ;
	size_t n = run(sc, i + alen, cs), j = i + alen + n;
	if (n < 4 || j >= len || in[j] != '.')
		return 0;
	size_t p2 = j + 1, parts = 1;
	while (parts < 5 && j < len && in[j] == '.') {
		size_t m = run(sc, j + 1, cs);
		if (m == 0 && parts >= 2 && (j + 1 >= len || in[j + 1] != '.'))
			break; /* a full stop after the token, not an empty part */
		j += 1 + m;
		parts++;
	}
	bool jws = len - p2 >= 4 && (memcmp(in + p2, "eyJ", 3) == 0 || memcmp(in + p2, "ewo", 3) == 0) && j - p2 >= 8;
	if (!jws && parts < 5)
		return 0;
	if (parts == 2 && j < len && in[j] == '.') /* an unsigned token: "eyJ...eyJ....": the dot */
		j++;
	return j;
}

/* The scheme of a URL with a password names its rule. */
static uint8_t url_rule(const unsigned char *s, size_t n)
{
	static const struct {
		const char *p;
		uint8_t rule;
	} m[] = {
	    {"postgres", RB_SR_URL_POSTGRES},
	    {"mysql", RB_SR_URL_MYSQL},
	    {"mariadb", RB_SR_URL_MYSQL},
	    {"mongodb", RB_SR_URL_MONGODB},
	    {"redis", RB_SR_URL_REDIS},
	    {"amqp", RB_SR_URL_AMQP},
	    {"ftp", RB_SR_URL_FTP},
	    {"sftp", RB_SR_URL_FTP},
	    {"ftps", RB_SR_URL_FTP},
	    {"mssql", RB_SR_URL_SQLSERVER},
	    {"sqlserver", RB_SR_URL_SQLSERVER},
	};
	for (size_t k = 0; k < sizeof m / sizeof m[0]; k++) {
		size_t pl = strlen(m[k].p);
		if (n >= pl && strncasecmp((const char *)s, m[k].p, pl) == 0)
			return m[k].rule;
	}
	return RB_SR_URL_OTHER;
}

/* Passwords that stand for one in documentation and templates. */
static bool url_placeholder(const unsigned char *v, size_t n)
{
	static const char *const words[] = {"password", "pass",     "passwd", "pwd", "secret",
	                                    "pw",       "changeme", "none",   "null"};
	if (strchr("$<{[%*", v[0]))
		return true;
	for (size_t k = 0; k < sizeof words / sizeof words[0]; k++)
		if (strlen(words[k]) == n && strncasecmp((const char *)v, words[k], n) == 0)
			return true;
	return rb_scrub_placeholder(v, n);
}

/* Bytes that end a URL's authority (user:password@host): the path, query, fragment, space,
 * quotes and brackets of the text around it. */
static bool authority_end(unsigned char c)
{
	return c <= ' ' || c >= 0x7f || strchr("/?#\"'<>`\\", c);
}

/* scheme://user:password@host at "://" (i): *start, the end of the password. */
static size_t url_password(struct scan *sc, size_t i, size_t *start, uint8_t *rule)
{
	const unsigned char *in = sc->in;
	size_t len = sc->len, k = i;
	while (k > 0 && i - k < 32 && ((cls[in[k - 1]] & (C_ALNUM | C_DASH | C_DOT)) || in[k - 1] == '+'))
		k--;
	if (i - k < 2 || !(cls[in[k]] & (C_UP | C_LO)) || (k > 0 && (cls[in[k - 1]] & C_ALNUM)))
		return 0;
	size_t a = i + 3, e = a, at = 0, colon = 0;
	while (e < len && e - a < 512 && !authority_end(in[e])) {
		if (in[e] == '@')
			at = e;
		else if (in[e] == ':' && !colon && !at)
			colon = e;
		e++;
	}
	if (!at || !colon || colon > at || at - colon < 2)
		return 0;
	if (at + 1 >= len || !((cls[in[at + 1]] & C_ALNUM) || in[at + 1] == '['))
		return 0;
	if (url_placeholder(in + colon + 1, at - colon - 1))
		return 0;
	*start = colon + 1;
	*rule = url_rule(in + k, i - k);
	return at;
}

/* curl's -u/--user/--proxy-user user:password at i (the flag, after a blank, on a line that
 * runs curl): *start, the end of the password. A quoted value ends at its quote. */
static size_t curl_user(struct scan *sc, size_t i, size_t alen, size_t *start)
{
	const unsigned char *in = sc->in;
	size_t len = sc->len;
	if (i == 0 || (in[i - 1] != ' ' && in[i - 1] != '\t'))
		return 0;
	size_t ls = i, lim = i > 512 ? i - 512 : 0;
	while (ls > lim && in[ls - 1] != '\n')
		ls--;
	if (!memmem(in + ls, i - ls, "curl", 4))
		return 0;
	size_t v = i + alen;
	while (v < len && v - i < 24 && in[v] == ' ')
		v++;
	unsigned char qc = 0;
	if (v < len && (in[v] == '"' || in[v] == '\''))
		qc = in[v++];
	size_t u = v;
	while (u < len && u - v < 128 && in[u] > ' ' && in[u] < 0x7f && in[u] != ':' && in[u] != qc)
		u++;
	if (u >= len || in[u] != ':')
		return 0;
	size_t p = u + 1, e = p;
	while (e < len && e - p < 512 && in[e] > ' ' && in[e] < 0x7f && in[e] != qc && !(qc == 0 && in[e] == '\''))
		e++;
	if (qc && (e >= len || in[e] != qc))
		return 0;
	if (e - p < 4 || (v < u && in[v] == '$') || url_placeholder(in + p, e - p))
		return 0;
	bool numeric = true; /* docker -u 1000:1000 is a uid and a gid */
	for (size_t k = p; k < e && numeric; k++)
		numeric = cls[in[k]] & C_DIG;
	if (numeric)
		return 0;
	*start = p;
	return e;
}

/* sk-<body>: OpenAI's when it holds T3BlbkFJ; else another vendor's (DeepSeek, legacy
 * OpenAI, ...) when the body is long and mixed like a random key. */
static size_t sk_key(struct scan *sc, size_t i, uint8_t *rule)
{
	size_t b = i + 3, n = run(sc, b, C_ALNUM | C_US | C_DASH);
	if (n < 20)
		return 0;
	if (openai_marker(sc, b, n)) {
		*rule = RB_SR_OPENAI;
		return b + n;
	}
	const unsigned char *v = sc->in + b;
	bool hex = n == 32;
	for (size_t k = 0; k < n && hex; k++)
		hex = cls[v[k]] & (C_DIG | RB_C_HEXLO);
	if (n > 512 || (!hex && (n < 32 || !mixed(v, n))) || rb_scrub_entropy(v, n) < (hex ? 3.0 : 3.5) ||
	    rb_scrub_placeholder(v, n))
		return 0;
	*rule = RB_SR_SK_KEY;
	return b + n;
}

static size_t spec_rule(struct scan *sc, const struct rb_scrub_anchor *a, size_t i, size_t *start)
{
	const struct fmt_family *r = &families[a->family];
	const struct rb_scrub_rule_tables *t = sc->t;
	size_t alen = a->len;
	const unsigned char *in = sc->in;
	size_t len = sc->len, s = i;
	if (r->back) {
		uint16_t first;
		s = spec_back(in, t->elem + t->back_at[a->family], t->back_n[a->family], i, &first);
		/* the outermost run must not go on before the start, but for a URL path segment's
		 * word (/bot<token>): its run of a fixed length ends where the token does */
		if (s == SIZE_MAX || (s > 0 && (cls[in[s - 1]] & first) && !url_segment_word(sc, s)) || !left_ok(sc, s))
			return 0;
	} else if (!(r->flags & F_NOLEFT) && !left_ok(sc, i)) {
		return 0;
	}
	size_t red = s;
	uint16_t last = 0;
	size_t end = spec_fwd(sc, t->elem + t->fwd_at[a->family], t->fwd_n[a->family], i + alen, &red, &last);
	if (!end)
		return 0;
	/* the token ends here: no more of its own bytes follow */
	if (end < len && (cls[in[end]] & (C_ALNUM | (last & (C_US | C_DASH | C_PLUS | C_SLASH)))))
		return 0;
	/* between a '+' and a '+' or '/': a piece of a longer base64 string (a binary, an image),
	 * not a token of its own */
	if (s > 0 && end < len && (cls[in[s - 1]] & (C_PLUS | C_SLASH)) && (cls[in[end]] & (C_PLUS | C_SLASH)) &&
	    (in[s - 1] == '+' || in[end] == '+'))
		return 0;
	size_t body = red > i ? red : i + alen;
	if (end - body >= 8 ? rb_scrub_placeholder(in + body, end - body) : rb_scrub_placeholder(in + s, end - s))
		return 0;
	if ((r->flags & F_MIXED) && !mixed(in + red, end - red))
		return 0;
	*start = red;
	return end;
}

/* The end of the token rule r matches at i (its anchor already compared), or 0. */
static size_t match_rule(struct scan *sc, const struct rb_scrub_anchor *a, size_t i, size_t *start, uint8_t *rule)
{
	const struct fmt_family *r = &families[a->family];
	size_t alen = a->len;
	*start = i;
	*rule = r->rule;
	switch (r->kind) {
	case K_PEM: return left_ok(sc, i) ? pem_block(sc->in, i, sc->len, &sc->pe, &sc->oom) : 0;
	case K_JWT: return left_ok(sc, i) ? jwt(sc, i, alen) : 0;
	case K_URL: return url_password(sc, i, start, rule);
	case K_SK: return left_ok(sc, i) ? sk_key(sc, i, rule) : 0;
	case K_CURL: return curl_user(sc, i, alen, start);
	default: return spec_rule(sc, a, i, start);
	}
}

static bool rules_kind_url(uint8_t rule)
{
	return (rule >= RB_SR_URL_POSTGRES && rule <= RB_SR_URL_OTHER) || rule == RB_SR_CURL_USER;
}

/* The anchors found and not yet tried, in order of start, then of table: a key is found up to
 * RB_SCRUB_KEY_OFF_MAX after its anchor's start, so an anchor is tried only once no key still
 * to come can start one before it (the order the first match at each place, and the skip past
 * it, depend on). */
struct found {
	struct {
		size_t s;
		unsigned k;
	} v[64];
	size_t n;
};

static void found_add(struct found *q, size_t s, unsigned k)
{
	size_t at = q->n;
	if (q->n == sizeof q->v / sizeof q->v[0]) /* the caller makes room for a bucket's anchors */
		return;
	while (at > 0 && (q->v[at - 1].s > s || (q->v[at - 1].s == s && q->v[at - 1].k >= k)))
		at--;
	if (at < q->n && q->v[at].s == s && q->v[at].k == k) /* an anchor in two buckets of one key */
		return;
	memmove(&q->v[at + 1], &q->v[at], (q->n - at) * sizeof q->v[0]);
	q->v[at].s = s, q->v[at].k = k;
	q->n++;
}

/* Does anchor a's text start at in[i] (of len)? */
static bool anchor_at(const struct rb_scrub_anchor *a, const unsigned char *in, size_t i, size_t len)
{
	if (len - i < a->len)
		return false;
	if (families[a->family].flags & F_CI)
		return strncasecmp((const char *)in + i, a->s, a->len) == 0;
	if (len - i < 4)
		return memcmp(in + i, a->s, a->len) == 0;
	uint32_t w; /* the first four bytes in one compare, then the rest */
	memcpy(&w, in + i, 4);
	return (w & a->mask) == a->head && (a->len <= 4 || memcmp(in + i + 4, a->s + 4, a->len - 4U) == 0);
}

void rb_scrub_rules_scan(const struct rb_scrub_rule_tables *t, const unsigned char *in, size_t len,
                         struct rb_scrub_spans *sp)
{
	struct scan sc = {.t = t, .in = in, .len = len};
	struct rb_scrub_pf_cursor cur = {0};
	struct found q = {.n = 0};
	/* from: where the next key is looked for; floor: no match starts before it (inside the
	 * last one); won: where the last match started */
	size_t from = 0, floor = 0, won = SIZE_MAX;
	for (;;) {
		/* the candidates whose three bytes may be an anchor's key (three bytes at least) */
		size_t j = rb_scrub_prefilter_next_at(&t->anchors, &cur, in, from, len);
		if (j + 2 >= len)
			j = len;
		unsigned h = j < len ? rb_scrub_anchor_bucket(in[j], in[j + 1]) : 0;
		size_t room = j < len ? t->bucket[h + 1] - t->bucket[h] : 0;
		while (q.n > 0 &&
		       (j == len || q.v[0].s + RB_SCRUB_KEY_OFF_MAX < j || q.n + room > sizeof q.v / sizeof q.v[0])) {
			size_t s = q.v[0].s;
			const struct rb_scrub_anchor *a = &t->anchor[q.v[0].k];
			memmove(&q.v[0], &q.v[1], --q.n * sizeof q.v[0]);
			if (s < floor || s == won)
				continue;
			size_t start = s;
			uint8_t rule = 0;
			size_t end = match_rule(&sc, a, s, &start, &rule);
			if (end) {
				rb_scrub_spans_push(sp, start, end, rule, RB_SCRUB_PASS_FORMAT);
				/* what lies inside is redacted already; a URL's password may be a token
				 * of its own, which names the redaction */
				floor = rules_kind_url(rule) ? start : end;
				won = s;
			}
		}
		if (j == len)
			break;
		if (j < floor) { /* inside a match: a key here starts an anchor before its end */
			from = floor;
			continue;
		}
		for (unsigned k = t->bucket[h]; k < t->bucket[h + 1]; k++) {
			const struct rb_scrub_anchor *a = &t->anchor[t->items[k]];
			if (j >= floor + a->key && anchor_at(a, in, j - a->key, len))
				found_add(&q, j - a->key, t->items[k]);
		}
		from = j + 1;
	}
	free(sc.pe.v);
	if (sc.oom)
		sp->oom = true;
}

/* ---- shared with the keyword pass -------------------------------------------------------- */

/* log2(c) for the counts a value's bytes mostly have, 1-64 (0 for 0, never read) */
// clang-format off
static const double LOG2_SMALL[65] = {
    0, 0.0, 1.0, 1.584962500721156, 2.0, 2.321928094887362, 2.584962500721156, 2.807354922057604, 3.0,
    3.169925001442312, 3.321928094887362, 3.4594316186372973, 3.584962500721156, 3.700439718141092,
    3.807354922057604, 3.9068905956085187, 4.0, 4.087462841250339, 4.169925001442312, 4.247927513443585,
    4.321928094887363, 4.392317422778761, 4.459431618637297, 4.523561956057013, 4.584962500721156,
    4.643856189774724, 4.700439718141092, 4.754887502163468, 4.807354922057604, 4.857980995127572,
    4.906890595608519, 4.954196310386875, 5.0, 5.044394119358453, 5.087462841250339, 5.129283016944966,
    5.169925001442312, 5.20945336562895, 5.247927513443585, 5.285402218862249, 5.321928094887363,
    5.357552004618084, 5.392317422778761, 5.426264754702098, 5.459431618637297, 5.491853096329675,
    5.523561956057013, 5.554588851677638, 5.584962500721156, 5.614709844115208, 5.643856189774724,
    5.672425341971495, 5.700439718141092, 5.727920454563199, 5.754887502163468, 5.78135971352466,
    5.807354922057604, 5.832890014164741, 5.857980995127572, 5.882643049361842, 5.906890595608519,
    5.930737337562887, 5.954196310386875, 5.977279923499917, 6.0
};
// clang-format on

double rb_scrub_entropy(const unsigned char *s, size_t n)
{
	if (n == 0)
		return 0;
	/* H = log2(n) - sum(c * log2(c)) / n over the distinct bytes' counts c: the bytes listed
	 * as they first appear, so the sum visits those only, not all 256 */
	unsigned cnt[256] = {0};
	unsigned char distinct[256];
	unsigned k = 0;
	for (size_t i = 0; i < n; i++)
		if (cnt[s[i]]++ == 0)
			distinct[k++] = s[i];
	double sum = 0;
	for (unsigned j = 0; j < k; j++) {
		// cppcheck-suppress uninitvar ; distinct[0..k) were written as their bytes were first seen
		unsigned c = cnt[distinct[j]];
		sum += (double)c * (c < sizeof LOG2_SMALL / sizeof LOG2_SMALL[0] ? LOG2_SMALL[c] : log2((double)c));
	}
	return log2((double)n) - sum / (double)n;
}

bool rb_scrub_placeholder(const unsigned char *v, size_t n)
{
	/* matched case-insensitively anywhere in the value */
	static const char *const words[] = {
	    "example",   "xxxx",  "your_",    "your-",   "yourkey",  "yourtoken",  "placeholder", "changeme",
	    "change_me", "dummy", "redacted", "notreal", "not_real", "notasecret", "replace_me",  "insert_",
	    "lorem",     "...",   "${",       "{{",      "<",        ">",
	};
	/* the words (bits of words[]) that start with a byte, in either case: one table load per
	 * byte of the value */
#define EITHER_CASE(c, m) [(c)] = (m), [(c)-32] = (m)
	static const uint32_t first[256] = {
	    EITHER_CASE('e', 0x1U),    EITHER_CASE('x', 0x2U),     EITHER_CASE('y', 0x3cU),   EITHER_CASE('p', 0x40U),
	    EITHER_CASE('c', 0x180U),  EITHER_CASE('d', 0x200U),   EITHER_CASE('r', 0x4400U), EITHER_CASE('n', 0x3800U),
	    EITHER_CASE('i', 0x8000U), EITHER_CASE('l', 0x10000U), ['.'] = 0x20000U,          ['$'] = 0x40000U,
	    ['{'] = 0x80000U,          ['<'] = 0x100000U,          ['>'] = 0x200000U};
	/* and the words whose second byte is this one (in either case for a letter, as
	 * strncasecmp compares); "<" and ">" have none, so they pass whatever follows */
	static const uint32_t second[256] = {
	    EITHER_CASE('x', 0x3U),    EITHER_CASE('o', 0x1383cU), EITHER_CASE('l', 0x40U),
	    EITHER_CASE('h', 0x180U),  EITHER_CASE('u', 0x200U),   EITHER_CASE('e', 0x4400U),
	    EITHER_CASE('n', 0x8000U), ['.'] = 0x20000U,           ['{'] = 0xc0000U};
	const uint32_t single = 0x300000U;
#undef EITHER_CASE
	_Static_assert(sizeof words / sizeof words[0] <= 32, "one bit per word");
	if (n == 0)
		return true;
	/* one pass: the words, and the runs and distinct bytes of the tests after it. Most bytes
	 * start no word with the byte after them (two table loads) and follow a byte neither
	 * equal nor one below them, so each test is one branch taken rarely; distinct bytes are counted only until
	 * there are five. */
	size_t longest = 1, cur = 1, up = 1, up_max = 1;
	uint64_t seen[4] = {0};
	size_t distinct = 0;
	for (size_t i = 0; i < n; i++) {
		uint32_t m = first[v[i]] & ((i + 1 < n ? second[v[i + 1]] : 0) | single);
		for (; m; m &= m - 1) {
			const char *w = words[__builtin_ctz(m)];
			size_t wl = strlen(w);
			if (wl > n - i || strncasecmp((const char *)v + i, w, wl) != 0)
				continue;
			/* xxxx or XXXX stands for a value; xXxX is a random token's */
			if (w[0] != 'x' || (v[i] == v[i + 1] && v[i + 1] == v[i + 2] && v[i + 2] == v[i + 3]))
				return true;
		}
		if (distinct <= 4) {
			uint64_t bit = 1ULL << (v[i] & 63);
			if (!(seen[v[i] >> 6] & bit))
				seen[v[i] >> 6] |= bit, distinct++;
		}
		/* v[i] - v[i-1] as unsigned: 0 (a run of one byte), 1 (counting up), else huge */
		unsigned d = i ? (unsigned)v[i] - (unsigned)v[i - 1] : 2;
		if (d == 0) {
			up = 1;
			if (++cur > longest)
				longest = cur;
		} else if (d == 1) {
			cur = 1;
			if (++up > up_max)
				up_max = up;
		} else {
			cur = up = 1;
		}
	}
	size_t run_min = n / 4 > 5 ? n / 4 : 5;
	if (longest >= run_min || (longest == n && n >= 3))
		return true;
	if (n >= 16 && distinct <= 4)
		return true;
	return up_max >= 8; /* 01234567, abcdefgh */
}
