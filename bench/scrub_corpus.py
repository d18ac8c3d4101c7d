#!/usr/bin/env python3
"""Recall/precision corpus for the scrubber (make bench-scrub): synthetic secrets of each
documented format with random bodies, bare and in several contexts, plus negatives
(placeholders, hashes, UUIDs, public keys, ordinary base64 and code). Writes JSON lines
{"family", "text", "secret"} (secret empty for negatives) to OUT. Usage: scrub_corpus.py OUT [SEED]"""
import base64
import json
import random
import string
import sys

A = string.ascii_letters + string.digits
U = A + "_-"
H = "0123456789abcdef"
UP = string.ascii_uppercase + string.digits
LO = string.ascii_lowercase + string.digits
D = string.digits
L = string.ascii_letters
B = A + "+/"
BECH = "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L"


def r(cs, n):
    return "".join(random.choice(cs) for _ in range(n))


def rn(cs, lo, hi):
    return r(cs, random.randint(lo, hi))


def jwt_part(obj):
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")


def around(before, secret, after):
    """A secret shown inside the text it belongs to: only the secret must go."""
    return (before + secret + after, secret)


# family -> a function making one secret (or its text and the secret in it) (formats as the vendors document them)
FAMILIES = {
    "aws-access-key-id": lambda: random.choice(["AKIA", "ASIA"]) + r(UP, 16),
    "aws-session-token": lambda: random.choice(["IQoJb3JpZ2luX2Vj", "FwoGZXIvYXdzE"]) + rn(B, 200, 700),
    "aws-appsync-key": lambda: "da2-" + r(LO, 26),
    "github-token": lambda: random.choice(["ghp_", "gho_", "ghu_", "ghs_", "ghr_"]) + rn(A, 36, 60),
    "github-fine-grained-pat": lambda: "github_pat_" + r(A, 22) + "_" + r(A, 59),
    "gitlab-token": lambda: random.choice(["glpat-", "gldt-", "glrt-", "glptt-", "glft-"]) + rn(U, 20, 40),
    "slack-token": lambda: random.choice(["xoxb-", "xoxp-"]) + r(D, 11) + "-" + r(D, 12) + "-" + r(A, 24),
    "slack-webhook": lambda: "https://hooks.slack.com/services/T" + r(UP, 8) + "/B" + r(UP, 10) + "/" + r(A, 24),
    "stripe-key": lambda: random.choice(["sk_live_", "rk_live_", "sk_test_"]) + rn(A, 24, 99),
    "gcp-api-key": lambda: "AIza" + r(U, 35),
    "google-oauth-token": lambda: "ya29." + rn(U, 80, 200),
    "google-refresh-token": lambda: "1//0" + rn(U, 40, 100),
    "jwt": lambda: jwt_part({"alg": "HS256", "typ": "JWT"}) + "." + jwt_part({"sub": r(A, 10), "iat": random.randint(1e9, 2e9)})
    + random.choice(["", "." + r(U, 43)]),
    "anthropic-api-key": lambda: "sk-ant-api03-" + r(U, 93) + "AA",
    "openai-api-key": lambda: random.choice(["sk-proj-", "sk-svcacct-", "sk-"]) + r(U, 40) + "T3BlbkFJ" + r(U, 40),
    "npm-token": lambda: "npm_" + r(A, 36),
    "pypi-token": lambda: random.choice(["pypi-AgEIcHlwaS5vcmc", "pypi-AgENdGVzdC5weXBpLm9yZw"]) + rn(U, 100, 200),
    "huggingface-token": lambda: random.choice(["hf_", "api_org_"]) + r(L, 34),
    "azure-storage-key": lambda: r(B, 76) + "+ASt" + r(B, 5) + random.choice("AQgw") + "==",
    "azure-connection-string": lambda: around("DefaultEndpointsProtocol=https;AccountName=" + r(LO, 10) + ";AccountKey=", r(B, 86) + "==", ";EndpointSuffix=core.windows.net"),
    "azure-sas": lambda: around("https://" + r(LO, 8) + ".blob.core.windows.net/c?sv=2022-11-02&sp=r&sig=", r(A, 40) + "%3D", ""),
    "azure-devops-pat": lambda: r(A, 52) + "JQQJ99" + r(A, 18) + "AZDO" + r(A, 4),
    "azure-client-secret": lambda: r(A, 3) + r(D, 1) + "Q~" + r(U + ".~", 34),
    "sendgrid-api-key": lambda: "SG." + r(U, 22) + "." + r(U, 43),
    "twilio-api-key": lambda: "SK" + r(H, 32),
    "telegram-bot-token": lambda: r(D, random.randint(8, 10)) + ":AA" + r(U, 33),
    "discord-bot-token": lambda: random.choice("MNO") + random.choice("DTjz") + r(U, 22) + "." + r(U, 6) + "." + rn(U, 27, 38),
    "discord-webhook": lambda: "https://discord.com/api/webhooks/" + r(D, 18) + "/" + r(U, 68),
    "teams-webhook": lambda: "https://" + r(LO, 6) + ".webhook.office.com/webhookb2/" + r(H, 8) + "-" + r(H, 4) + "@" + r(H, 8) + "/IncomingWebhook/" + r(H, 32) + "/" + r(H, 8),
    "mailgun-api-key": lambda: "key-" + r(H, 32),
    "mailchimp-api-key": lambda: r(H, 32) + "-us" + str(random.randint(1, 21)),
    "vault-token": lambda: random.choice(["hvs." + r(U, 90), "hvb." + r(U, 140), "s." + r(A, 24)]),
    "terraform-cloud-token": lambda: r(A, 14) + ".atlasv1." + r(U, 67),
    "newrelic-key": lambda: random.choice(["NRAK-" + r(UP, 27), "NRJS-" + r(H, 19), r(H, 36) + "NRAL"]),
    "atlassian-api-token": lambda: "ATATT3xFfGF0" + r(U, 180) + "=" + r(H, 8).upper(),
    "bitbucket-app-password": lambda: "ATBB" + r(A, 32),
    "langsmith-api-key": lambda: random.choice(["lsv2_pt_", "lsv2_sk_"]) + r(H, 32) + "_" + r(H, 10),
    "1password-service-token": lambda: "ops_eyJ" + rn(B, 600, 900),
    "doppler-token": lambda: random.choice(["dp.pt.", "dp.st.", "dp.sa."]) + r(A, 43),
    "digitalocean-token": lambda: random.choice(["dop_v1_", "doo_v1_"]) + r(H, 64),
    "shopify-token": lambda: random.choice(["shpat_", "shpss_", "shpca_"]) + r(H, 32),
    "databricks-token": lambda: "dapi" + r(H, 32),
    "notion-token": lambda: random.choice(["secret_" + r(A, 43), "ntn_" + r(D, 11) + r(A, 35)]),
    "linear-api-key": lambda: "lin_api_" + r(A, 40),
    "age-secret-key": lambda: "AGE-SECRET-KEY-1" + r(BECH, 58),
    "mapbox-secret-token": lambda: "sk.eyJ1Ijoi" + r(A, 20) + "." + r(U, 22),
    "dynatrace-token": lambda: "dt0c01." + r(UP, 24) + "." + r(UP, 64),
    "postman-api-key": lambda: "PMAK-" + r(H, 24) + "-" + r(H, 34),
    "grafana-token": lambda: random.choice(["glc_" + r(B, 60), "glsa_" + r(A, 32) + "_" + r(H, 8)]),
    "square-token": lambda: random.choice(["sq0atp-" + r(U, 22), "EAAA" + r(U, 60)]),
    "private-key": lambda: "-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(r(B, 64) for _ in range(8)) + "\n-----END RSA PRIVATE KEY-----",
    "database-url": lambda: around(random.choice(["postgres", "postgresql", "mysql", "mongodb+srv", "redis", "amqps", "ftp"])
                                   + "://" + r(LO, 6) + ":", rn(A + "~.", 12, 24), "@" + r(LO, 8) + ".internal:5432/app"),
    # formats cross-checked against gitleaks' and trufflehog's rule sets (docs/scrub.md, "Coverage")
    "aws-access-key-id-a3t": lambda: "A3T" + r(UP, 17),
    "gitlab-routable-token": lambda: random.choice(["glpat-", "glrt-t1_"]) + r(U, 36) + "." + r(LO, 2) + random.choice(["", "."]) + r(LO, 9 if random.random() < 0.5 else 7),
    "gitlab-session-cookie": lambda: around("Cookie: _gitlab_session=", r(LO, 32), "; path=/"),
    "stripe-client-secret": lambda: "pi_" + r(A, 24) + "_secret_" + r(A, 25),
    "recharge-api-key": lambda: random.choice(["sk_", "sk_test_"]) + random.choice(["1x1", "2x2", "3x3", "10x3"]) + "_" + r(H, 64),
    "photoroom-api-key": lambda: "sk_pr_" + r(LO, 8) + "_" + r(H, 40),
    "tickettailor-api-key": lambda: "sk_" + r(D, 4) + "_" + r(D, 6) + "_" + r(H, 32),
    "elevenlabs-api-key": lambda: "sk_" + r(H, 48),
    "jwt-pretty": lambda: random.choice(["ewogICJhbGciOiAiSFMyNTYiCn0", "ewoidHlwIjoiSldUIn0"]) + "." + random.choice(["eyJ", "ewo"]) + r(U, 40) + "." + r(U, 43),
    "jwt-base64": lambda: base64.b64encode((jwt_part({"alg": "RS256", "typ": "JWT"}) + "." + jwt_part({"sub": r(A, 12)}) + "." + r(U, 43)).encode()).decode(),
    "openrouter-api-key": lambda: "sk-or-v1-" + r(H, 64),
    "azure-entra-refresh-token": lambda: random.choice("01") + ".A" + r(U, 60) + random.choice(["", "." + r(D, 1)]) + ".Ag" + r(U, 300) + random.choice(["", ".A" + r(U, 220)]),
    "newrelic-license-eu": lambda: random.choice(["eu01xx" + r(H, 26) + "FFFFNRAL", "AA" + r(H, 40) + "-NRMA", "NRBR-" + r(H, 19)]),
    "atlassian-ctt": lambda: "ATCTT3xFfG" + r(U, 180) + "=" + r(H, 8).upper(),
    "square-secret": lambda: "sq0csp-" + r(U, random.randint(40, 50)),
    "flyio-macaroon": lambda: random.choice(["fm1a_", "fm1r_"]) + r(B, random.randint(120, 300)),
    "flutterwave-encryption-key": lambda: "FLWSECK_TEST" + random.choice(["", "-"]) + r(H, 12),
    "intra42-user-secret": lambda: random.choice(["u-s4t2ud-", "u-s4t2af-"]) + r(H, 64),
    "tailscale-key": lambda: "tskey-" + random.choice(["oauth", "webhook", "scim"]) + "-k" + r(A, 10) + "-" + r(A, 30),
    "sonarcloud-token": lambda: "sqco_" + r(A, 59),
    "adobe-client-secret": lambda: "p8e-" + r(LO, 32),
    "authress-key": lambda: random.choice(["sc_", "ext_", "authress_"]) + r(LO, 12) + "." + r(LO, 5) + ".acc_" + r(LO + "-", 20) + "." + r(U, 60),
    "twitter-bearer-token": lambda: "A" * 22 + r(A, 12) + "%3D" + r(A, 70),
    "yandex-iam-token": lambda: "t1." + r(A, 40) + "." + r(U, 86),
    "facebook-app-token": lambda: r(D, random.choice([15, 16])) + random.choice(["|", "%7C"]) + r(H, 32),
    "adafruit-io-key": lambda: "aio_" + r(A, 28),
    "apify-token": lambda: "apify_api_" + r(A, 36),
    "bitbucket-access-token": lambda: "BBDC-" + r(A + "+/@_", 44),
    "bannerbear-api-key": lambda: random.choice(["bb_pr_", "bb_ma_"]) + r(H, 30),
    "cloudflare-api-token": lambda: random.choice(["cfut_", "cfat_", "cfk_"]) + r(A, 40) + r(H, 8),
    "deno-deploy-token": lambda: random.choice(["ddp_", "ddw_"]) + r(A, 36),
    "endorlabs-key": lambda: "endr+" + r(A + "-", 16),
    "figma-token-v3": lambda: "figp_" + r(U, random.randint(40, 54)),
    "finage-api-key": lambda: "API_KEY" + r(UP, 32),
    "fleetbase-key": lambda: "flb_live_" + r(A, 20),
    "flexport-key": lambda: "shltm_" + r(U, 40),
    "fullstory-api-key": lambda: "na1." + r(B, 100),
    "gemini-exchange-key": lambda: random.choice(["master-", "account-"]) + r("ABCDEFGH", 1) + r("abcdefgh", 1) + r("0123456789", 1) + r(A, 17),
    "hubspot-pat": lambda: random.choice(["pat-na1-", "pat-eu1-"]) + "%s-%s-%s-%s-%s" % (r(H, 8), r(H, 4), r(H, 4), r(H, 4), r(H, 12)),
    "klaviyo-api-key": lambda: "pk_" + r(H, 34),
    "clickup-token": lambda: "pk_" + r(D, 8) + "_" + r(UP, 32),
    "lob-api-key": lambda: random.choice(["live_", "test_"]) + r(H, 35),
    "gocardless-token": lambda: "live_" + r("ABCDEFGH", 1) + r("abcdefgh", 1) + r("0123456789", 1) + r(U, 37),
    "locationiq-token": lambda: "pk." + r(H, 32),
    "nightfall-api-key": lambda: "NF-" + r(A, 32),
    "nvidia-api-key": lambda: "nvapi-" + r(U, 64),
    "pagarme-api-key": lambda: "ak_live_" + r(A, 30),
    "pinecone-api-key": lambda: "pcsk_" + r(A, 6) + "_" + r(A, 63),
    "posthog-personal-key": lambda: "phx_" + r(A, random.randint(43, 48)),
    "pubnub-key": lambda: random.choice(["pub-c-", "sub-c-"]) + "%s-%s-%s-%s-%s" % (r(H, 8), r(H, 4), r(H, 4), r(H, 4), r(H, 12)),
    "ramp-client-secret": lambda: "ramp_sec_" + r(A, 48),
    "robinhood-crypto-key": lambda: "rh-api-%s-%s-%s-%s-%s" % (r(H, 8), r(H, 4), r(H, 4), r(H, 4), r(H, 12)),
    "rootly-api-key": lambda: "rootly_" + r(H, 64),
    "saladcloud-api-key": lambda: "salad_cloud_" + r(A, 5) + "_" + r(A, 40),
    "sourcegraph-cody-token": lambda: "slk_" + r(H, 64),
    "spectralops-token": lambda: "spu-" + r(LO, 32),
    "pganalyze-key": lambda: "pgar_" + r(A, 27),
    "tines-webhook": lambda: around("https://" + r(LO, 8), ".tines.com/webhook/" + r(LO, 32) + "/" + r(LO, 32), ""),
    "trufflehog-enterprise-key": lambda: random.choice(["thog-key-" + r(H, 16), "thog-secret-" + r(H, 32)]),
    "ubidots-token": lambda: "BBFF-" + r(A, 30),
    "voiceflow-api-key": lambda: random.choice(["VF.DM.", "VF.WS.", "VF."]) + r(H, 24) + "." + r(A, 16),
    "zoho-token": lambda: "1000." + r(H, 32) + "." + r(H, 32),
    "teamwork-token": lambda: "tkn.v1_" + r(A, 71) + "=",
    "sqlserver-password": lambda: around("Server=tcp:" + r(LO, 8) + ".database.windows.net,1433;Database=app;User ID=app;Password=",
                                         r(A, 12) + "!", ";Encrypt=True;"),
}

def uuid():
    return "%s-%s-%s-%s-%s" % (r(H, 8), r(H, 4), r(H, 4), r(H, 4), r(H, 12))


def yaml_block():
    lines = [r(B, 60) for _ in range(random.randint(2, 4))]
    return "\n  ".join(lines)


# secrets in a context of their own (text, secret): the shapes only the keyword and
# command-line rules see
OWN = {
    "yaml-block": lambda s: ("%s: |\n  %s\nnext_key: 1" % (random.choice(["password", "private_token", "client_secret"]), s), s),
    "xml-cdata": lambda s: ("<%s><![CDATA[%s]]></%s>" % (k := random.choice(["password", "apiToken", "secret"]), s, k), s),
    "curl-user": lambda s: (random.choice(["curl -u deploy:%s https://api.example.net/v1",
                                           "curl -s --user 'ci:%s' https://api.example.net",
                                           "curl --proxy-user=bob:%s -x proxy:3128 https://x.example.net"]) % s, s),
    "long-keyword-value": lambda s: (random.choice(["API_TOKEN=%s", '{"secret": "%s"}']) % s, s),
    "curl-auth-header": lambda s: (random.choice(['curl -H "Authorization: Bearer %s" https://api.example.net',
                                                  "curl --header 'X-Api-Key: %s' https://api.example.net"]) % s, s),
    "nuget-config": lambda s: ('<add key="ClearTextPassword" value="%s" />' % s, s),
    "docker-auths": lambda s: ('{"auths": {"https://index.docker.io/v1/": {"auth": "%s"}}}' % s, s),
    "azure-app-config": lambda s: ("Endpoint=https://%s.azconfig.io;Id=%s;Secret=%s" % (r(LO, 8), r(A, 12), s), s),
    "azure-redis": lambda s: ("%s.redis.cache.windows.net:6380,password=%s,ssl=True,abortConnect=False" % (r(LO, 8), s), s),
    "jdbc-password": lambda s: (random.choice(["jdbc:sqlserver://db:1433;databaseName=app;user=sa;password=%s;",
                                               "jdbc:postgresql://db:5432/app?user=app&password=%s&ssl=true",
                                               "jdbc:mysql://app:%s@db:3306/app"]) % s, s),
    "uuid-credential": lambda s: (random.choice(["HEROKU_API_KEY=%s", "//registry.npmjs.org/:_authToken=%s"]) % s, s),
}
OWN_SECRET = {
    "yaml-block": yaml_block,
    "xml-cdata": lambda: r(A, 24),
    "curl-user": lambda: r(A, 18),
    "long-keyword-value": lambda: r(A, random.randint(4200, 9000)),
    "uuid-credential": uuid,
    "curl-auth-header": lambda: r(A, 40),
    "nuget-config": lambda: r(A, 20),
    "docker-auths": lambda: base64.b64encode((r(LO, 8) + ":" + r(A, 20)).encode()).decode(),
    "azure-app-config": lambda: r(B, 44),
    "azure-redis": lambda: r(B, 43) + "=",
    "jdbc-password": lambda: r(A, 18),
}

# contexts a secret appears in; {s} is the secret
CONTEXTS = [
    "{s}",
    "export APP_CREDENTIAL='{s}'",
    '{{"config": {{"value": "{s}"}}}}',
    "the deploy used {s} yesterday",
    "  token: {s}",
]

# a secret embedded in a URL: a query value, a path segment, and a path segment after a word
# (Telegram's documented https://api.telegram.org/bot<token>/METHOD); written after every
# other record, with "url": true, so the records above stay those of the same seed
URL_CONTEXTS = [
    "https://api.example.com/v1/send?access_token={s}&lang=en",
    "GET /hooks/{s}/status HTTP/1.1",
    "curl -s https://api.example.com/bot{s}/sendMessage",
]

# keyword-anchored values without a format (the keyword rule)
KEYWORD_CONTEXTS = [
    "DB_PASSWORD={v}",
    'api_key = "{v}"',
    "  client_secret: {v}",
    '{{"name": "API_TOKEN", "value": "{v}"}}',
    "<password>{v}</password>",
    "SECRET_KEY ?= {v}",
]

NEGATIVES = [
    lambda: "ghp_" + "x" * 36,
    lambda: "AKIA" + "X" * 16,
    lambda: "AKIAIOSFODNN7EXAMPLE",
    lambda: "API_KEY=your-api-key-here",
    lambda: "token: <token>",
    lambda: "TOKEN=${GITHUB_TOKEN}",
    lambda: 'password: "{{ .Values.password }}"',
    lambda: "SECRET=changeme",
    lambda: "password=" + random.choice("ax*") * 20,
    lambda: "request_id=%s-%s-%s-%s-%s" % (r(H, 8), r(H, 4), r(H, 4), r(H, 4), r(H, 12)),
    lambda: 'trace_id: "%s-%s-%s-%s-%s"' % (r(H, 8), r(H, 4), r(H, 4), r(H, 4), r(H, 12)),
    lambda: "curl -u $USER:$API_PASSWORD https://api.example.net/v1",
    lambda: "docker run -u 1000:1000 -v /data:/data image",
    lambda: "<description><![CDATA[%s]]></description>" % r(A, 24),
    lambda: "description: |\n  %s\n  %s" % (r(A, 30), r(A, 30)),
    lambda: "sha256:" + r(H, 64),
    lambda: "commit " + r(H, 40),
    lambda: "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQ" + r(B, 200) + " user@host",
    lambda: "-----BEGIN PUBLIC KEY-----\n" + r(B, 64) + "\n-----END PUBLIC KEY-----",
    lambda: base64.b64encode(" ".join(random.choice(["the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog"]) for _ in range(12)).encode()).decode(),
    lambda: "DATABASE_URL=postgres://user:password@localhost:5432/db",
    lambda: "token = self.token_value",
    lambda: "secret = settings.SECRET_KEY",
    lambda: "password = get_password()",
    lambda: "https://example.com/path?page=2&sort=asc",
    lambda: "token_count = %d" % random.randint(1, 99999),
    lambda: "A3T" + r(UP, 16),
    lambda: "pi_" + r(A, 24) + "_secret_" + r(A, 24),
    lambda: "sk_" + r(H, 47),
    lambda: "sk-or-v1-" + r(H, 63),
    lambda: "p8e-" + r(LO, 31),
    lambda: "A" * 22 + r(A, 40),
    lambda: "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
    lambda: "t1." + r(A, 40) + "." + r(U, 60),
    lambda: r(D, 12) + "|" + r(H, 32),
    lambda: "| 123456789012345 | " + r(H, 32) + " |",
    lambda: "aio_" + r(LO, 28),
    lambda: "cfut_" + r(A, 40),
    lambda: "API_KEY" + r(UP, 31),
    lambda: "test_" + r(H, 34),
    lambda: "live_" + r(LO, 40),
    lambda: "pk." + r(A, 32),
    lambda: "pk.eyJ1IjoiZXhhbXBsZSIsImEiOiJjbGV4YW1wbGUifQ." + r(A, 22),
    lambda: "nvapi-" + r(U, 63),
    lambda: "pcsk_" + r(A, 6) + "_" + r(A, 62),
    lambda: "pub-c-" + r(H, 8) + "-" + r(H, 4) + "-" + r(H, 4),
    lambda: "1000." + r(H, 32) + "." + r(H, 31),
    lambda: "VF." + r(H, 23) + "." + r(A, 16),
    lambda: "master-" + r(LO, 20),
    lambda: "version 1.A" + r(U, 40) + ".Ag" + r(U, 100),
    lambda: "glpat-" + r(U, 19),
    lambda: "fm1a_" + r(B, 60),
    lambda: "bb_pr_" + r(H, 29),
    lambda: "phx_" + r(A, 40),
    lambda: "ZXlKaGJHY2lPaU" + r(B, 20),
    lambda: "tkn.v1_" + r(A, 70) + "=",
    lambda: "_gitlab_session=" + r(LO, 31),
    lambda: "sq0csp-" + r(U, 39),
    lambda: "rh-api-" + r(H, 8) + "-" + r(H, 4),
    lambda: "sc_" + r(LO, 12) + "." + r(LO, 5) + ".acc_" + r(LO, 20),
    lambda: "sk_" + random.choice(["1x1", "2x2"]) + "_" + r(H, 63),
    lambda: "sk_pr_" + r(LO, 8) + "_" + r(H, 39),
    lambda: "sk_" + r(D, 4) + "_" + r(D, 6) + "_" + r(H, 31),
    lambda: "ewogICJhbGciOiAiSFMyNTYiCn0." + r(U, 40),
    lambda: "FLWSECK_TEST" + r(H, 11),
    lambda: "u-s4t2ud-" + r(H, 63),
    lambda: "tskey-oauth-" + r(A, 10),
    lambda: "sqco_" + r(A, 58),
    lambda: "apify_api_" + r(A, 35),
    lambda: "BBDC-" + r(A, 39),
    lambda: "ddp_" + r(A, 35),
    lambda: "endr+" + r(A, 15),
    lambda: "figp_" + r(U, 39),
    lambda: "flb_live_" + r(A, 19),
    lambda: "shltm_" + r(U, 39),
    lambda: "na1." + r(B, 99),
    lambda: "pat-na1-" + r(H, 8) + "-" + r(H, 4) + "-" + r(H, 4),
    lambda: "pk_" + r(H, 33),
    lambda: "pk_" + r(D, 8) + "_" + r(UP, 31),
    lambda: "NF-" + r(A, 31),
    lambda: "ak_live_" + r(A, 29),
    lambda: "ramp_sec_" + r(A, 47),
    lambda: "rootly_" + r(H, 63),
    lambda: "salad_cloud_" + r(A, 5),
    lambda: "slk_" + r(H, 63),
    lambda: "spu-" + r(LO, 31),
    lambda: "pgar_" + r(A, 26),
    lambda: "https://" + r(LO, 8) + ".tines.com/webhook/" + r(LO, 31),
    lambda: "thog-key-" + r(H, 15),
    lambda: "BBFF-" + r(A, 29),
    lambda: "eu01xx" + r(H, 25) + "FFFFNRAL",
    lambda: "AA" + r(H, 39) + "-NRMA",
    lambda: "ATCTT3xFfG" + r(U, 100),
    lambda: "cfk_" + r(A, 47),
    lambda: "adobe p8e-" + r(LO, 16),
    lambda: "gocardless live_" + r(LO + "_", 40),
    lambda: "glrt-" + r(U, 19),
]

# lookalikes in URLs: placeholders, paths and words that only resemble a token's prefix
URL_NEGATIVES = [
    lambda: "https://api.telegram.org/bot<token>/sendMessage",
    lambda: "https://api.telegram.org/bot${TELEGRAM_TOKEN}/getMe",
    lambda: "https://api.telegram.org/bot123456789:YOUR_BOT_TOKEN_HERE/getMe",
    lambda: "https://example.com/docs/bots/botfather%d.html" % random.randint(1, 999),
    lambda: "https://github.com/org/repo/commit/" + r(H, 40),
    lambda: "https://cdn.example.com/assets/app-%s.js?v=%s" % (r(H, 16), r(H, 8)),
    lambda: "https://example.com/api?token={{token}}&page=2",
    lambda: "https://example.com/u/mynpm_packages/skills/page%d" % random.randint(1, 99),
    lambda: "https://example.com/search?q=ghp_" + "x" * 36,
    lambda: "https://registry.example.com/v2/library/sha256:" + r(H, 64),
    lambda: "https://example.com/items/%s-%s-%s-%s-%s" % (r(H, 8), r(H, 4), r(H, 4), r(H, 4), r(H, 12)),
    lambda: "https://example.com/bot%d/status" % random.randint(10000000, 99999999),
]


def main():
    out = sys.argv[1]
    random.seed(int(sys.argv[2]) if len(sys.argv) > 2 else 18)
    with open(out, "w") as f:
        for fam, gen in FAMILIES.items():
            for ctx in CONTEXTS:
                for _ in range(4):
                    s = gen()
                    shown, s = s if isinstance(s, tuple) else (s, s)
                    f.write(json.dumps({"family": fam, "text": ctx.format(s=shown) + "\n", "secret": s}) + "\n")
        for fam, shape in OWN.items():
            for _ in range(20):
                text, sec = shape(OWN_SECRET[fam]())
                f.write(json.dumps({"family": fam, "text": text + "\n", "secret": sec}) + "\n")
        for ctx in KEYWORD_CONTEXTS:
            for _ in range(20):
                v = r(A, random.randint(16, 40))
                f.write(json.dumps({"family": "keyword", "text": ctx.format(v=v) + "\n", "secret": v}) + "\n")
        for gen in NEGATIVES:
            for _ in range(10):
                f.write(json.dumps({"family": "negative", "text": gen() + "\n", "secret": ""}) + "\n")
        for fam, gen in FAMILIES.items():
            # a charset with '/' cannot tell its token from the path after it: query only
            slashy = any("/" in (x[0] if isinstance(x, tuple) else x) for x in (gen() for _ in range(20)))
            for ctx in URL_CONTEXTS[:1] if slashy else URL_CONTEXTS:
                for _ in range(2):
                    s = gen()
                    shown, s = s if isinstance(s, tuple) else (s, s)
                    # a PEM block is no URL's part
                    if "\n" in shown:
                        continue
                    f.write(json.dumps({"family": fam, "text": ctx.format(s=shown) + "\n", "secret": s, "url": True}) + "\n")
        for gen in URL_NEGATIVES:
            for _ in range(10):
                f.write(json.dumps({"family": "negative", "text": gen() + "\n", "secret": "", "url": True}) + "\n")


if __name__ == "__main__":
    main()
