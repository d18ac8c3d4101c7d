/* The scrubber's format rules (pass 2): each rule is an anchor (a vendor prefix, or a marker
 * inside the token) and a small spec of the charset runs around it; a two-byte filter finds
 * the few candidate anchors, then the spec is checked. PEM blocks, JWTs and URLs with a
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
	default: return 0;
	}
}

enum kind { K_SPEC, K_SK, K_PEM, K_JWT, K_URL, K_CURL };
enum {
	F_CI = 1,    /* the anchor in any case */
	F_MIXED = 2, /* the redaction holds an upper-case letter, a lower-case one and a digit */
	F_NOLEFT = 4 /* the anchor may follow a letter (a host name's tail: x.webhook.office.com) */
};

/* A rule: the charset runs of back, then the anchor, then those of fwd. A spec is literal
 * bytes and runs "%<class><min>[,[<max>]]" (no max: exactly min; "," alone: up to
 * SPEC_MAX). '!' in fwd: the redaction starts here (a key such as "AccountKey=" stays); '\\' makes the
 * next byte literal. */
struct fmt_rule {
	const char *back, *anchor, *fwd;
	uint8_t alen;
	uint8_t rule;
	uint8_t kind;
	uint8_t flags;
};
#define SPEC_MAX 8192

#define R(b, a, f, r, fl)                                                                                              \
	{                                                                                                              \
		b, a, f, sizeof(a) - 1, RB_SR_##r, K_SPEC, fl                                                          \
	}
#define K(a, r, k)                                                                                                     \
	{                                                                                                              \
		NULL, a, NULL, sizeof(a) - 1, RB_SR_##r, k, 0                                                          \
	}
/* Of the rules sharing a first byte, the first one that matches wins: longer anchors first. */
static const struct fmt_rule rules[] = {
    /* AWS: access key ids; STS session tokens (base64 of a protobuf that starts alike); AppSync */
    R(NULL, "AKIA", "%U16", AWS_KEY_ID, 0),
    R(NULL, "ASIA", "%U16", AWS_KEY_ID, 0),
    R(NULL, "ABIA", "%U16", AWS_KEY_ID, 0),
    R(NULL, "ACCA", "%U16", AWS_KEY_ID, 0),
    R(NULL, "IQoJb3JpZ2lu", "%B100,", AWS_SESSION, 0),
    R(NULL, "IgoJb3JpZ2lu", "%B100,", AWS_SESSION, 0),
    R(NULL, "AgoJb3JpZ2lu", "%B100,", AWS_SESSION, 0),
    R(NULL, "FwoGZXIvYXdz", "%B100,", AWS_SESSION, 0),
    R(NULL, "FQoGZXIvYXdz", "%B100,", AWS_SESSION, 0),
    R(NULL, "AQoDYXdz", "%B100,", AWS_SESSION, 0),
    R(NULL, "FQoDYXdz", "%B100,", AWS_SESSION, 0),
    R(NULL, "da2-", "%L26", AWS_APPSYNC, 0),
    /* GitHub: classic tokens are 36 after the prefix today; longer ones are announced */
    R(NULL, "github_pat_", "%s60,255", GITHUB_FINE_GRAINED, 0),
    R(NULL, "ghp_", "%a36,255", GITHUB_PAT, 0),
    R(NULL, "gho_", "%a36,255", GITHUB_OAUTH, 0),
    R(NULL, "ghu_", "%a36,255", GITHUB_APP, 0),
    R(NULL, "ghs_", "%a36,255", GITHUB_APP, 0),
    R(NULL, "ghr_", "%a36,255", GITHUB_REFRESH, 0),
    /* GitLab */
    R(NULL, "glpat-", "%u27,300.%L9", GITLAB_PAT, 0), /* routable: a dot and its suffix too */
    R(NULL, "glpat-", "%u20,", GITLAB_PAT, 0),
    R(NULL, "gldt-", "%u20,", GITLAB_DEPLOY, 0),
    R(NULL, "glrt-", "%u20,", GITLAB_RUNNER, 0),
    R(NULL, "glrtr-", "%u20,", GITLAB_RUNNER, 0),
    R(NULL, "GR1348941", "%u20,", GITLAB_RUNNER, 0),
    R(NULL, "glcbt-", "%u20,", GITLAB_CI_BUILD, 0),
    R(NULL, "glptt-", "%u20,", GITLAB_OTHER, 0),
    R(NULL, "glft-", "%u20,", GITLAB_OTHER, 0),
    R(NULL, "glimt-", "%u20,", GITLAB_OTHER, 0),
    R(NULL, "glagent-", "%u50,", GITLAB_OTHER, 0),
    R(NULL, "gloas-", "%u20,", GITLAB_OTHER, 0),
    R(NULL, "glsoat-", "%u20,", GITLAB_OTHER, 0),
    R(NULL, "glffct-", "%u20,", GITLAB_OTHER, 0),
    /* Slack */
    R(NULL, "xoxe.xoxp-", "%c10,", SLACK_TOKEN, 0),
    R(NULL, "xoxe.xoxb-", "%c10,", SLACK_TOKEN, 0),
    R(NULL, "xoxb-", "%c10,", SLACK_TOKEN, 0),
    R(NULL, "xoxp-", "%c10,", SLACK_TOKEN, 0),
    R(NULL, "xoxe-", "%c10,", SLACK_TOKEN, 0),
    R(NULL, "xoxa-", "%c10,", SLACK_TOKEN, 0),
    R(NULL, "xoxr-", "%c10,", SLACK_TOKEN, 0),
    R(NULL, "xoxs-", "%c10,", SLACK_TOKEN, 0),
    R(NULL, "xoxo-", "%c10,", SLACK_TOKEN, 0),
    R(NULL, "xapp-", "%c10,", SLACK_APP, 0),
    R(NULL, "hooks.slack.com/services/", "%p20,", SLACK_WEBHOOK, 0),
    R(NULL, "hooks.slack.com/workflows/", "%p20,", SLACK_WEBHOOK, 0),
    R(NULL, "hooks.slack.com/triggers/", "%p20,", SLACK_WEBHOOK, 0),
    R(NULL, "hooks.zapier.com/hooks/catch/", "%d3,12/%a4,16", ZAPIER_WEBHOOK, 0),
    /* Stripe */
    R(NULL, "sk_live_", "%a16,", STRIPE, 0),
    R(NULL, "sk_test_", "%a16,", STRIPE, 0),
    R(NULL, "sk_prod_", "%a16,", STRIPE, 0),
    R(NULL, "rk_live_", "%a16,", STRIPE, 0),
    R(NULL, "rk_test_", "%a16,", STRIPE, 0),
    R(NULL, "rk_prod_", "%a16,", STRIPE, 0),
    R(NULL, "whsec_", "%a32,", STRIPE_WEBHOOK, 0),
    /* Google */
    R(NULL, "AIza", "%u35", GCP_API_KEY, 0),
    R(NULL, "ya29.", "%u20,", GOOGLE_OAUTH, 0),
    R(NULL, "1//0", "%u30,", GOOGLE_REFRESH, 0),
    R(NULL, "GOCSPX-", "%u28", GOOGLE_CLIENT_SECRET, 0),
    R(NULL, "00D", "%a12,15\\!%e80,", SALESFORCE, 0), /* org id ! session: an OAuth access token */
    K("-----BEGIN ", PRIVATE_KEY, K_PEM),
    R(NULL, "eyJrIjoi", "%B50,", GRAFANA, 0), /* a Grafana API key: base64 of {"k":" */
    K("eyJ", JWT, K_JWT),
    /* Anthropic, OpenAI, and sk- keys of other AI vendors */
    R(NULL, "sk-ant-api03-", "%u20,", ANTHROPIC, 0),
    R(NULL, "sk-ant-admin01-", "%u20,", ANTHROPIC_ADMIN, 0),
    R(NULL, "sk-ant-oat01-", "%u20,", ANTHROPIC, 0),
    R(NULL, "sk-ant-ort01-", "%u20,", ANTHROPIC, 0),
    R(NULL, "sk-proj-", "%u20,", OPENAI, 0),
    R(NULL, "sk-svcacct-", "%u20,", OPENAI, 0),
    R(NULL, "sk-admin-", "%u20,", OPENAI, 0),
    R(NULL, "sk-None-", "%u20,", OPENAI, 0),
    R(NULL, "sk-lf-", "%h8-%h4-%h4-%h4-%h12", LANGFUSE, 0),
    K("sk-", SK_KEY, K_SK),
    R(NULL, "sk.eyJ", "%u10,.%u16,", MAPBOX, 0),
    R(NULL, "npm_", "%a36", NPM, 0),
    R(NULL, "pypi-AgE", "%u70,", PYPI, 0), /* a macaroon: 150+ in practice */
    R(NULL, "hf_", "%a30,40", HUGGINGFACE, 0),
    R(NULL, "api_org_", "%a30,40", HUGGINGFACE, 0),
    /* Azure: keys in connection strings, SAS signatures, identifiable keys (a marker at a
     * fixed offset), Entra client secrets (a digit and "Q~" at offset 3) */
    R(NULL, "AccountKey=", "!%B20,", AZURE_STORAGE, F_CI),
    R(NULL, "SharedAccessKey=", "!%B20,", AZURE_SAS_KEY, F_CI),
    R(NULL, "sig=", "!%q20,", AZURE_SAS_SIG, F_MIXED),
    R("%b76", "+ASt", "%b6==", AZURE_STORAGE, 0),
    R("%b76", "ACDb", "%b6==", AZURE_KEY, 0),
    R("%b33", "+ASb", "%b5=", AZURE_KEY, 0),
    R("%b33", "+AEh", "%b5=", AZURE_KEY, 0),
    R("%b33", "+ARm", "%b5=", AZURE_KEY, 0),
    R("%b42", "+ACR", "%a6", AZURE_KEY, 0),
    R("%u44", "AzFu", "%u6==", AZURE_KEY, 0),
    R("%a42", "AzSe", "%a6", AZURE_KEY, 0),
    R("%a52", "JQQJ99", "%a18AZDO%a4", AZURE_DEVOPS, 0),
    R("%a52", "JQQJ9", "%a27", AZURE_KEY, 0),
    R("%e3%d1", "Q~", "%e30,36", AZURE_CLIENT_SECRET, 0),
    /* messaging and mail */
    R(NULL, "SG.", "%u16,32.%u30,50", SENDGRID, 0),
    R(NULL, "SK", "%H32", TWILIO_KEY, 0),
    R("%d5,16", ":A", "%u34", TELEGRAM, 0),
    R(NULL, "discord.com/api/webhooks/", "%d17,20/%u60,70", DISCORD_WEBHOOK, 0),
    R(NULL, "discordapp.com/api/webhooks/", "%d17,20/%u60,70", DISCORD_WEBHOOK, 0),
    /* a Discord bot token's first part is the base64 of a numeric id: [MNO][DTjz] */
    R(NULL, "MT", "%u20,28.%u6,7.%u25,45", DISCORD_TOKEN, 0),
    R(NULL, "Mj", "%u20,28.%u6,7.%u25,45", DISCORD_TOKEN, 0),
    R(NULL, "Mz", "%u20,28.%u6,7.%u25,45", DISCORD_TOKEN, 0),
    R(NULL, "MD", "%u20,28.%u6,7.%u25,45", DISCORD_TOKEN, 0),
    R(NULL, "NT", "%u20,28.%u6,7.%u25,45", DISCORD_TOKEN, 0),
    R(NULL, "Nj", "%u20,28.%u6,7.%u25,45", DISCORD_TOKEN, 0),
    R(NULL, "Nz", "%u20,28.%u6,7.%u25,45", DISCORD_TOKEN, 0),
    R(NULL, "ND", "%u20,28.%u6,7.%u25,45", DISCORD_TOKEN, 0),
    R(NULL, "OT", "%u20,28.%u6,7.%u25,45", DISCORD_TOKEN, 0),
    R(NULL, "Oj", "%u20,28.%u6,7.%u25,45", DISCORD_TOKEN, 0),
    R(NULL, "Oz", "%u20,28.%u6,7.%u25,45", DISCORD_TOKEN, 0),
    R(NULL, "OD", "%u20,28.%u6,7.%u25,45", DISCORD_TOKEN, 0),
    R(NULL, ".webhook.office.com/webhookb2/", "%w20,", TEAMS_WEBHOOK, F_NOLEFT),
    R(NULL, "outlook.office.com/webhook/", "%w20,", TEAMS_WEBHOOK, 0),
    R(NULL, "outlook.office365.com/webhook/", "%w20,", TEAMS_WEBHOOK, 0),
    R(NULL, "key-", "%h32", MAILGUN, 0),
    R("%h32", "-us", "%d1,2", MAILCHIMP, 0),
    R(NULL, "xkeysib-", "%h64-%a16", BREVO, 0),
    R(NULL, "xsmtpsib-", "%h64-%a16", BREVO, 0),
    /* HashiCorp */
    R(NULL, "hvs.", "%u24,", VAULT, F_MIXED),
    R(NULL, "hvb.", "%u24,", VAULT, F_MIXED),
    R(NULL, "hvr.", "%u24,", VAULT, F_MIXED),
    R(NULL, "s.", "%a24", VAULT, F_MIXED),
    R("%a14", ".atlasv1.", "%t60,", TERRAFORM, 0),
    /* New Relic: user, admin, browser, insights and REST keys; license keys end in NRAL */
    R(NULL, "NRAK-", "%U27", NEWRELIC, 0),
    R(NULL, "NRAA-", "%H27", NEWRELIC, 0),
    R(NULL, "NRJS-", "%H19", NEWRELIC, 0),
    R(NULL, "NRII-", "%u32", NEWRELIC, 0),
    R(NULL, "NRIQ-", "%u32", NEWRELIC, 0),
    R(NULL, "NRRA-", "%H42", NEWRELIC, 0),
    R("%H36", "NRAL", "", NEWRELIC, 0),
    /* Atlassian */
    R(NULL, "ATATT", "%t150,300", ATLASSIAN, 0),
    R(NULL, "ATBB", "%a28,40", BITBUCKET, 0),
    R(NULL, "lsv2_pt_", "%h32_%h10", LANGSMITH, 0),
    R(NULL, "lsv2_sk_", "%h32_%h10", LANGSMITH, 0),
    /* 1Password: service-account tokens (base64 JSON, often over 512 bytes); account secret keys */
    R(NULL, "ops_eyJ", "%B100,", ONEPASSWORD, 0),
    R(NULL, "A3-", "%U6-%U11-%U5-%U5-%U5", ONEPASSWORD_SECRET_KEY, 0),
    R(NULL, "A3-", "%U6-%U6-%U5-%U5-%U5-%U5", ONEPASSWORD_SECRET_KEY, 0),
    R(NULL, "dp.pt.", "%a40,44", DOPPLER, 0),
    R(NULL, "dp.st.", "%a40,44", DOPPLER, 0),
    R(NULL, "dp.sa.", "%a40,44", DOPPLER, 0),
    R(NULL, "dp.ct.", "%a40,44", DOPPLER, 0),
    R(NULL, "dp.scim.", "%a40,44", DOPPLER, 0),
    R(NULL, "dp.audit.", "%a40,44", DOPPLER, 0),
    R(NULL, "dop_v1_", "%h64", DIGITALOCEAN, 0),
    R(NULL, "doo_v1_", "%h64", DIGITALOCEAN, 0),
    R(NULL, "dor_v1_", "%h64", DIGITALOCEAN, 0),
    R(NULL, "shpat_", "%H32", SHOPIFY, 0),
    R(NULL, "shpss_", "%H32", SHOPIFY, 0),
    R(NULL, "shpca_", "%H32", SHOPIFY, 0),
    R(NULL, "shppa_", "%H32", SHOPIFY, 0),
    R(NULL, "dapi", "%h32", DATABRICKS, 0),
    R(NULL, "secret_", "%a43", NOTION, 0),
    R(NULL, "ntn_", "%a40,50", NOTION, 0),
    R(NULL, "lin_api_", "%a40,64", LINEAR, 0),
    R(NULL, "lin_oauth_", "%a40,64", LINEAR, 0),
    R(NULL, "AGE-SECRET-KEY-1", "%U58", AGE, 0),
    R(NULL, "dt0", "%l1%d2.%U24.%U64", DYNATRACE, 0),
    R(NULL, "PMAK-", "%h24-%h34", POSTMAN, 0),
    R(NULL, "glc_", "%B32,", GRAFANA, 0),
    R(NULL, "glsa_", "%a32_%H8", GRAFANA, 0),
    R(NULL, "sntrys_eyJ", "%x50,", SENTRY, 0),
    R(NULL, "sntryu_", "%h64", SENTRY, 0),
    R(NULL, "sq0atp-", "%u22", SQUARE, 0),
    R(NULL, "sq0csp-", "%u43", SQUARE, 0),
    R(NULL, "EAAA", "%u60", SQUARE, 0),
    R(NULL, "EAA", "%a100,", FACEBOOK, F_MIXED),
    R(NULL, "HRKU-", "%u50,70", HEROKU, 0),
    R(NULL, "v1.0-", "%h24-%h146", CLOUDFLARE, 0),
    R(NULL, "dckr_pat_", "%u20,40", DOCKER, 0),
    R(NULL, "dckr_oat_", "%u20,40", DOCKER, 0),
    R(NULL, "sbp_", "%h40", SUPABASE, 0),
    R(NULL, "sb_secret_", "%u20,", SUPABASE, 0),
    R(NULL, "pscale_tkn_", "%u32,64", PLANETSCALE, 0),
    R(NULL, "pscale_pw_", "%u32,64", PLANETSCALE, 0),
    R(NULL, "pscale_oauth_", "%u32,64", PLANETSCALE, 0),
    R(NULL, "AKCp", "%a69", ARTIFACTORY, 0),
    R(NULL, "cmVmdGtuOjAxOj", "%a50,", ARTIFACTORY, 0), /* base64 of "reftkn:01:" */
    R(NULL, "gsk_", "%a52", GROQ, 0),
    R(NULL, "r8_", "%a37", REPLICATE, 0),
    R(NULL, "xai-", "%a80", XAI, 0),
    R(NULL, "pplx-", "%a48", PERPLEXITY, 0),
    R(NULL, "pul-", "%h40", PULUMI, 0),
    R(NULL, "fo1_", "%u43", FLY, 0),
    R(NULL, "fm2_", "%x40,", FLY, 0),
    R(NULL, "figd_", "%u40,", FIGMA, 0),
    R(NULL, "pat", "%a14.%h64", AIRTABLE, 0),
    R(NULL, "CFPAT-", "%u43", CONTENTFUL, 0),
    R(NULL, "sl.", "%e130,", DROPBOX, F_MIXED),
    R(NULL, "rubygems_", "%h48", RUBYGEMS, 0),
    R(NULL, "oy2", "%L43", NUGET, 0),
    R(NULL, "bkua_", "%h40", BUILDKITE, 0),
    R(NULL, "CCIPAT_", "%u20,", CIRCLECI, 0),
    R(NULL, "EZAK", "%a54", EASYPOST, 0),
    R(NULL, "EZTK", "%a54", EASYPOST, 0),
    R(NULL, "FLWSECK_TEST-", "%h32-X", FLUTTERWAVE, 0),
    R(NULL, "FLWSECK-", "%h32-X", FLUTTERWAVE, 0),
    R(NULL, "shippo_live_", "%h40", SHIPPO, 0),
    R(NULL, "shippo_test_", "%h40", SHIPPO, 0),
    R(NULL, "tfp_", "%x40,", TYPEFORM, 0),
    /* more vendors whose tokens carry their own prefix (cross-checked against the public
     * gitleaks and trufflehog rule sets, written from the vendors' documented shapes) */
    R(NULL, "LTAI", "%a20", ALIBABA, F_MIXED),
    R(NULL, "CLOJARS_", "%L60", CLOJARS, 0),
    R(NULL, "dnkey-", "%u26-%u52", DEFINED_NET, 0),
    R(NULL, "duffel_test_", "%t43", DUFFEL, 0),
    R(NULL, "duffel_live_", "%t43", DUFFEL, 0),
    R(NULL, "fio-u-", "%t64", FRAMEIO, 0),
    R(NULL, "pat.", "%a22.%H24.%a20", HARNESS, 0),
    R(NULL, "ico-", "%a32", INFRACOST, 0),
    R(NULL, "s-s4t2ud-", "%h64", INTRA42, 0),
    R(NULL, "s-s4t2af-", "%h64", INTRA42, 0),
    R("%a6_%a29", "_mmk", "", MAXMIND, 0),
    R(NULL, "API-", "%U26,32", OCTOPUS, 0),
    R(NULL, "sha256~", "%u43", OPENSHIFT, 0),
    R(NULL, "pnu_", "%a36", PREFECT, 0),
    R(NULL, "rdme_", "%L70", README, 0),
    R(NULL, "tk-us-", "%u48", SCALINGO, 0),
    R(NULL, "sm_pat_", "%a16", SETTLEMINT, F_MIXED),
    R(NULL, "sm_aat_", "%a16", SETTLEMINT, F_MIXED),
    R(NULL, "sm_sat_", "%a16", SETTLEMINT, F_MIXED),
    R(NULL, "sgp_", "%H16_%H40", SOURCEGRAPH, 0),
    R(NULL, "sgp_local_", "%H40", SOURCEGRAPH, 0),
    R(NULL, "sgp_", "%H40", SOURCEGRAPH, 0),
    R(NULL, "AQVN", "%u35,38", YANDEX, F_MIXED),
    R(NULL, "rnd_", "%a32", RENDER, F_MIXED),
    R(NULL, "tskey-api-", "%a8,-%a20,", TAILSCALE, 0),
    R(NULL, "tskey-auth-", "%a8,-%a20,", TAILSCALE, 0),
    R(NULL, "tskey-client-", "%a8,-%a20,", TAILSCALE, 0),
    R(NULL, "nfp_", "%a36", NETLIFY, 0),
    R(NULL, "sdk-", "%h8-%h4-%h4-%h4-%h12", LAUNCHDARKLY, 0),
    R(NULL, "api-", "%h8-%h4-%h4-%h4-%h12", LAUNCHDARKLY, 0),
    R(NULL, "access-production-", "%h8-%h4-%h4-%h4-%h12", PLAID, 0),
    R(NULL, "access-development-", "%h8-%h4-%h4-%h4-%h12", PLAID, 0),
    R(NULL, "access-sandbox-", "%h8-%h4-%h4-%h4-%h12", PLAID, 0),
    R(NULL, "ABSK", "%b109,269", AWS_BEDROCK, 0),
    R(NULL, "bedrock-api-key-YmVkcm9jay5hbWF6b25hd3MuY29t", "%x0,", AWS_BEDROCK, 0),
    R(NULL, "4b1d", "%a38", CLICKHOUSE, F_MIXED),
    R(NULL, "squ_", "%h40", SONAR, 0),
    R(NULL, "sqp_", "%h40", SONAR, 0),
    R(NULL, "sqa_", "%h40", SONAR, 0),
    R(NULL, "rzp_live_", "%a14", RAZORPAY, 0),
    R(NULL, "rzp_test_", "%a14", RAZORPAY, 0),
    /* scheme://user:password@host */
    K("://", URL_OTHER, K_URL),
    /* curl -u user:password, --user, --proxy-user */
    K("-u ", CURL_USER, K_CURL),
    K("--user ", CURL_USER, K_CURL),
    K("--user=", CURL_USER, K_CURL),
    K("--proxy-user ", CURL_USER, K_CURL),
    K("--proxy-user=", CURL_USER, K_CURL),
};
#undef R
#undef K

/* A PEM block whose END line is missing is redacted through its body: these bytes. */
#define PEM_LABEL_MAX  48
#define PEM_SEARCH_MAX (64U << 10) /* a 4096-bit RSA key is 3.2 KiB of PEM */
#define PEM_END_TRIES  8

static inline bool is_hex(unsigned char c)
{
	return cls[c] & C_HEX;
}

/* A token starts at i only after a non-alphanumeric byte, the start, a %XX escape or a
 * backslash escape (\n in JSON): inside a longer word it is most likely not a token. */
static bool left_ok(const unsigned char *in, size_t i)
{
	if (i == 0 || !(cls[in[i - 1]] & C_ALNUM))
		return true;
	if (i >= 3 && in[i - 3] == '%' && is_hex(in[i - 2]) && is_hex(in[i - 1]))
		return true;
	return i >= 2 && in[i - 2] == '\\';
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
};

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

/* The prefilter's bucket: the second byte's low four bits (of the bucketings measured, the
 * fewest candidates on mixed text: one position in 6, against one in 2.3 by the third byte
 * in 8 buckets). */
static void set_tri(struct rb_scrub_rule_tables *t, unsigned a, unsigned b, unsigned c)
{
	rb_scrub_prefilter_add(&t->anchors, a, b, c, b & 15);
}

void rb_scrub_rules_init(struct rb_scrub_rule_tables *t)
{
	memset(t, 0, sizeof *t);
	for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++) {
		const struct fmt_rule *r = &rules[i];
		const unsigned char *p = (const unsigned char *)r->anchor;
		/* an anchor of any case: every case of its first three bytes */
		for (unsigned v = 0; v < ((r->flags & F_CI) ? 8U : 1U); v++) {
			unsigned c0 = (v & 1) ? flip_case(p[0]) : p[0], c1 = (v & 2) ? flip_case(p[1]) : p[1];
			if (r->alen >= 3) {
				set_tri(t, c0, c1, (v & 4) ? flip_case(p[2]) : p[2]);
			} else { /* a two-byte anchor: with each byte its body may start with */
				struct elem e;
				next_elem(r->fwd, &e);
				for (unsigned c = 1; c < 256; c++)
					if (e.cs ? (cls[c] & e.cs) != 0 : c == e.lit)
						set_tri(t, c0, c1, c);
			}
			uint16_t *slot = t->first[c0];
			size_t k = 0;
			while (k < RB_SCRUB_FIRST_MAX - 1 && slot[k] && slot[k] != i + 1)
				k++;
			if (k < RB_SCRUB_FIRST_MAX - 1) /* room: test_formats has a positive for each list */
				slot[k] = (uint16_t)(i + 1);
		}
	}
	rb_scrub_prefilter_done(&t->anchors);
	rb_scrub_keywords_init(t);
}

/* Matches spec forward from j; returns the end or 0. *red: where a '!' put the redaction's
 * start. *last: the last run's class. */
static size_t spec_fwd(struct scan *sc, const char *p, size_t j, size_t *red, uint16_t *last)
{
	while (*p) {
		if (*p == '!') {
			*red = j;
			p++;
			continue;
		}
		struct elem e;
		p = next_elem(p, &e);
		if (!e.cs) {
			if (j >= sc->len || sc->in[j] != e.lit)
				return 0;
			j++;
			*last = 0;
			continue;
		}
		size_t n = run(sc, j, e.cs);
		if (n < e.min)
			return 0;
		j += n < e.max ? n : e.max;
		*last = e.cs;
	}
	return j;
}

/* Matches spec backward from j (the anchor); returns the start, or SIZE_MAX. *first: the
 * class of the outermost run, which must not go on before the start. */
static size_t spec_back(const unsigned char *in, const char *p, size_t j, uint16_t *first)
{
	struct elem el[8];
	size_t n = 0;
	while (*p && n < 8)
		p = next_elem(p, &el[n++]);
	*first = 0;
	while (n-- > 0) {
		const struct elem *e = &el[n];
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
static size_t jwt(struct scan *sc, size_t i)
{
	const unsigned char *in = sc->in;
	size_t len = sc->len;
	const uint16_t cs = C_ALNUM | C_US | C_DASH | C_EQ;
	size_t n = run(sc, i + 3, cs), j = i + 3 + n;
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
	bool jws = len - p2 >= 4 && memcmp(in + p2, "eyJ", 3) == 0 && j - p2 >= 8;
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
static size_t curl_user(struct scan *sc, size_t i, const struct fmt_rule *r, size_t *start)
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
	size_t v = i + r->alen;
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

static size_t spec_rule(struct scan *sc, const struct fmt_rule *r, size_t i, size_t *start)
{
	const unsigned char *in = sc->in;
	size_t len = sc->len, s = i;
	if (r->back) {
		uint16_t first;
		s = spec_back(in, r->back, i, &first);
		if (s == SIZE_MAX || (s > 0 && (cls[in[s - 1]] & first)) || !left_ok(in, s))
			return 0;
	} else if (!(r->flags & F_NOLEFT) && !left_ok(in, i)) {
		return 0;
	}
	size_t red = s;
	uint16_t last = 0;
	size_t end = spec_fwd(sc, r->fwd, i + r->alen, &red, &last);
	if (!end)
		return 0;
	/* the token ends here: no more of its own bytes follow */
	if (end < len && (cls[in[end]] & (C_ALNUM | (last & (C_US | C_DASH | C_PLUS | C_SLASH)))))
		return 0;
	size_t body = red > i ? red : i + r->alen;
	if (end - body >= 8 ? rb_scrub_placeholder(in + body, end - body) : rb_scrub_placeholder(in + s, end - s))
		return 0;
	if ((r->flags & F_MIXED) && !mixed(in + red, end - red))
		return 0;
	*start = red;
	return end;
}

/* The end of the token rule r matches at i (its anchor already compared), or 0. */
static size_t match_rule(struct scan *sc, const struct fmt_rule *r, size_t i, size_t *start, uint8_t *rule)
{
	*start = i;
	*rule = r->rule;
	switch (r->kind) {
	case K_PEM: return left_ok(sc->in, i) ? pem_block(sc->in, i, sc->len, &sc->pe, &sc->oom) : 0;
	case K_JWT: return left_ok(sc->in, i) ? jwt(sc, i) : 0;
	case K_URL: return url_password(sc, i, start, rule);
	case K_SK: return left_ok(sc->in, i) ? sk_key(sc, i, rule) : 0;
	case K_CURL: return curl_user(sc, i, r, start);
	default: return spec_rule(sc, r, i, start);
	}
}

static bool rules_kind_url(uint8_t rule)
{
	return (rule >= RB_SR_URL_POSTGRES && rule <= RB_SR_URL_OTHER) || rule == RB_SR_CURL_USER;
}

void rb_scrub_rules_scan(const struct rb_scrub_rule_tables *t, const unsigned char *in, size_t len,
                         struct rb_scrub_spans *sp)
{
	struct scan sc = {.in = in, .len = len};
	size_t i = 0;
	/* the candidates whose three bytes may start an anchor */
	while ((i = rb_scrub_prefilter_next(&t->anchors, in, i, len)) < len) {
		if (i + 2 >= len) /* an anchor and its body take three bytes at least */
			break;
		size_t end = 0, start = i;
		uint8_t rule = 0;
		unsigned char c1 = in[i + 1] | 0x20; /* the bigram filter found in[i + 1] */
		for (const uint16_t *k = t->first[in[i]]; *k && !end; k++) {
			const struct fmt_rule *r = &rules[*k - 1];
			if (((unsigned char)r->anchor[1] | 0x20) != c1 || len - i < r->alen)
				continue;
			if ((r->flags & F_CI) ? strncasecmp((const char *)in + i, r->anchor, r->alen) != 0
			                      : memcmp(in + i, r->anchor, r->alen) != 0)
				continue;
			end = match_rule(&sc, r, i, &start, &rule);
		}
		if (end) {
			rb_scrub_spans_push(sp, start, end, rule, RB_SCRUB_PASS_FORMAT);
			/* what lies inside is redacted already; a URL's password may be a token of
			 * its own, which names the redaction */
			i = rules_kind_url(rule) ? start : end;
		} else {
			i++;
		}
	}
	free(sc.pe.v);
	if (sc.oom)
		sp->oom = true;
}

/* ---- shared with the keyword pass -------------------------------------------------------- */

double rb_scrub_entropy(const unsigned char *s, size_t n)
{
	if (n == 0)
		return 0;
	unsigned cnt[256] = {0};
	for (size_t i = 0; i < n; i++)
		cnt[s[i]]++;
	double h = 0;
	for (unsigned c = 0; c < 256; c++) {
		if (cnt[c]) {
			double p = (double)cnt[c] / (double)n;
			h -= p * log2(p);
		}
	}
	return h;
}

bool rb_scrub_placeholder(const unsigned char *v, size_t n)
{
	/* matched case-insensitively anywhere in the value */
	static const char *const words[] = {
	    "example",   "xxxx",  "your_",    "your-",   "yourkey",  "yourtoken",  "placeholder", "changeme",
	    "change_me", "dummy", "redacted", "notreal", "not_real", "notasecret", "replace_me",  "insert_",
	    "lorem",     "...",   "${",       "{{",      "<",        ">",
	};
	/* the words (bits of words[]) that start with a byte: one table load per byte of the value */
	static const uint32_t first[256] = {
	    ['e'] = 0x1U,     ['x'] = 0x2U,     ['y'] = 0x3cU,    ['p'] = 0x40U,     ['c'] = 0x180U,
	    ['d'] = 0x200U,   ['r'] = 0x4400U,  ['n'] = 0x3800U,  ['i'] = 0x8000U,   ['l'] = 0x10000U,
	    ['.'] = 0x20000U, ['$'] = 0x40000U, ['{'] = 0x80000U, ['<'] = 0x100000U, ['>'] = 0x200000U};
	_Static_assert(sizeof words / sizeof words[0] <= 32, "one bit per word");
	if (n == 0)
		return true;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (cls[v[i]] & C_UP) ? v[i] + 32 : v[i];
		for (uint32_t m = first[c]; m; m &= m - 1) {
			const char *w = words[__builtin_ctz(m)];
			if (w[1] && (i + 1 >= n || (v[i + 1] | 0x20) != (w[1] | 0x20)))
				continue; /* the second byte first: most candidates end there */
			size_t wl = strlen(w);
			if (wl <= n - i && strncasecmp((const char *)v + i, w, wl) == 0)
				return true;
		}
	}
	size_t longest = 1, cur = 1, up = 1, up_max = 1;
	uint64_t seen[4] = {0};
	size_t distinct = 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t bit = 1ULL << (v[i] & 63);
		if (!(seen[v[i] >> 6] & bit))
			seen[v[i] >> 6] |= bit, distinct++;
		if (i == 0)
			continue;
		cur = v[i] == v[i - 1] ? cur + 1 : 1;
		up = v[i] == v[i - 1] + 1 ? up + 1 : 1;
		if (cur > longest)
			longest = cur;
		if (up > up_max)
			up_max = up;
	}
	size_t run_min = n / 4 > 5 ? n / 4 : 5;
	if (longest >= run_min || (longest == n && n >= 3))
		return true;
	if (n >= 16 && distinct <= 4)
		return true;
	return up_max >= 8; /* 01234567, abcdefgh */
}
