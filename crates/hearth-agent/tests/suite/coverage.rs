//! The secret scanner measured against a maintained public rule set:
//! gitleaks' default configuration (`config/gitleaks.toml`, 222 rules at
//! commit b58d3f1 of 2026-07-22).
//!
//! This is our own table, not theirs: for each of their rule ids, a sample
//! of the format written as it usually appears, generated here, and either
//! the scanner must redact it (covered) or the entry says why not. Covered
//! counts two ways: "bare" formats are found wherever the token stands;
//! "named" ones (formats without a distinctive prefix) are found when
//! assigned to a credential-like name (`<SERVICE>_API_KEY=...`).
//!
//! The figure in BENCHMARKS.md comes from:
//! `cargo test -p hearth-agent --test all coverage -- --nocapture`

use hearth_agent::firewall::SecretScanner;

use super::corpus::{Rng, ordinary_texts};

/// Character sets of generated parts.
const AN: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
const LO: &str = "abcdefghijklmnopqrstuvwxyz0123456789";
const HX: &str = "0123456789abcdef";
const UP: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
const B: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
const S: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const D: &str = "0123456789";
const LET: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// A piece of a sample.
#[derive(Clone, Copy)]
enum P {
    /// Literal text.
    L(&'static str),
    /// `n` random characters of a set: secret, must not survive.
    G(&'static str, usize),
    /// `n` random characters that are not secret (a user name): kept.
    K(&'static str, usize),
    /// A random UUID: secret.
    Uuid,
}
use P::{G, K, L, Uuid};

/// How a sample is written.
#[derive(Clone, Copy)]
enum How {
    /// Bare in a sentence.
    Bare,
    /// Assigned to this name, `NAME=value`.
    Named(&'static str),
    /// Between these two texts.
    Around(&'static str, &'static str),
}
use How::{Around, Bare, Named};

enum Rule {
    Yes(How, &'static [P]),
    No(&'static str),
}
use Rule::{No, Yes};

const ID: &str = "an id, not a secret: not redacted";
const SHORT: &str = "under 20 characters and no prefix: below the entropy rule's floor";

/// Every rule id of the rule set, in its order: one line each, as a table.
#[rustfmt::skip]
const RULES: &[(&str, Rule)] = &[
    ("1password-secret-key", Yes(Bare, &[L("A3-"), G(UP, 6), L("-"), G(UP, 11), L("-"), G(UP, 5), L("-"), G(UP, 5), L("-"), G(UP, 5)])),
    ("1password-service-account-token", Yes(Bare, &[L("ops_eyJ"), G(S, 260)])),
    ("adafruit-api-key", Yes(Named("ADAFRUIT_IO_KEY"), &[G(LO, 32)])),
    ("adobe-client-id", No(ID)),
    ("adobe-client-secret", Yes(Bare, &[L("p8e-"), G(AN, 32)])),
    ("age-secret-key", Yes(Bare, &[L("AGE-SECRET-KEY-1"), G(UP, 58)])),
    ("airtable-api-key", No(SHORT)),
    ("airtable-personnal-access-token", Yes(Bare, &[L("pat"), G(AN, 14), L("."), G(HX, 64)])),
    ("algolia-api-key", Yes(Named("ALGOLIA_API_KEY"), &[G(LO, 32)])),
    ("alibaba-access-key-id", Yes(Bare, &[L("LTAI"), G(AN, 20)])),
    ("alibaba-secret-key", Yes(Named("ALIBABA_SECRET_KEY"), &[G(LO, 30)])),
    ("anthropic-admin-api-key", Yes(Bare, &[L("sk-ant-admin01-"), G(B, 93), L("AA")])),
    ("anthropic-api-key", Yes(Bare, &[L("sk-ant-api03-"), G(B, 93), L("AA")])),
    ("artifactory-api-key", Yes(Bare, &[L("AKCp"), G(AN, 69)])),
    ("artifactory-reference-token", Yes(Bare, &[L("cmVmd"), G(AN, 59)])),
    ("asana-client-id", No(ID)),
    ("asana-client-secret", Yes(Named("ASANA_CLIENT_SECRET"), &[G(LO, 32)])),
    ("atlassian-api-token", Yes(Bare, &[L("ATATT3"), G(B, 186)])),
    ("authress-service-client-access-key", Yes(Named("AUTHRESS_ACCESS_KEY"), &[L("sc_"), G(LO, 12), L("."), G(LO, 5), L(".acc_"), G(LO, 20), L("."), G(B, 60)])),
    ("aws-access-token", Yes(Bare, &[L("AKIA"), G(UP, 16)])),
    ("aws-amazon-bedrock-api-key-long-lived", Yes(Bare, &[L("ABSK"), G(S, 120)])),
    ("aws-amazon-bedrock-api-key-short-lived", Yes(Bare, &[L("bedrock-api-key-YmVkcm9jay5hbWF6b25hd3MuY29t"), G(S, 100)])),
    ("azure-ad-client-secret", Yes(Bare, &[G(AN, 3), G(D, 1), L("Q~"), G(AN, 32)])),
    ("beamer-api-token", Yes(Bare, &[L("b_"), G(AN, 44)])),
    ("bitbucket-client-id", No(ID)),
    ("bitbucket-client-secret", Yes(Named("BITBUCKET_CLIENT_SECRET"), &[G(B, 64)])),
    ("bittrex-access-key", Yes(Named("BITTREX_ACCESS_KEY"), &[G(LO, 32)])),
    ("bittrex-secret-key", Yes(Named("BITTREX_SECRET_KEY"), &[G(LO, 32)])),
    ("cisco-meraki-api-key", Yes(Named("MERAKI_API_KEY"), &[G(HX, 40)])),
    ("clickhouse-cloud-api-secret-key", Yes(Bare, &[L("4b1d"), G(AN, 38)])),
    ("clojars-api-token", Yes(Bare, &[L("CLOJARS_"), G(LO, 60)])),
    ("cloudflare-api-key", Yes(Named("CLOUDFLARE_API_TOKEN"), &[G(B, 40)])),
    ("cloudflare-global-api-key", Yes(Named("CLOUDFLARE_GLOBAL_API_KEY"), &[G(HX, 37)])),
    ("cloudflare-origin-ca-key", Yes(Bare, &[L("v1.0-"), G(HX, 24), L("-"), G(HX, 146)])),
    ("codecov-access-token", Yes(Named("CODECOV_TOKEN"), &[G(LO, 32)])),
    ("cohere-api-token", Yes(Named("CO_API_KEY"), &[G(AN, 40)])),
    ("coinbase-access-token", Yes(Named("COINBASE_ACCESS_TOKEN"), &[G(B, 64)])),
    ("confluent-access-token", No(SHORT)),
    ("confluent-secret-key", Yes(Named("CONFLUENT_SECRET_KEY"), &[G(LO, 64)])),
    ("contentful-delivery-api-token", Yes(Named("CONTENTFUL_DELIVERY_API_TOKEN"), &[G(B, 43)])),
    ("curl-auth-header", Yes(Around("curl -H \"Authorization: Bearer ", "\" https://api.example.com"), &[G(AN, 40)])),
    ("curl-auth-user", No("`curl -u user:password`: the command-line form is not recognised")),
    ("databricks-api-token", Yes(Bare, &[L("dapi"), G(HX, 32)])),
    ("datadog-access-token", Yes(Named("DATADOG_ACCESS_TOKEN"), &[G(LO, 40)])),
    ("defined-networking-api-token", Yes(Bare, &[L("dnkey-"), G(B, 26), L("-"), G(B, 52)])),
    ("digitalocean-access-token", Yes(Bare, &[L("doo_v1_"), G(HX, 64)])),
    ("digitalocean-pat", Yes(Bare, &[L("dop_v1_"), G(HX, 64)])),
    ("digitalocean-refresh-token", Yes(Bare, &[L("dor_v1_"), G(HX, 64)])),
    ("discord-api-token", Yes(Named("DISCORD_API_TOKEN"), &[G(HX, 64)])),
    ("discord-client-id", No(ID)),
    ("discord-client-secret", Yes(Named("DISCORD_CLIENT_SECRET"), &[G(B, 32)])),
    ("doppler-api-token", Yes(Bare, &[L("dp.pt."), G(AN, 43)])),
    ("droneci-access-token", Yes(Named("DRONECI_ACCESS_TOKEN"), &[G(LO, 32)])),
    ("dropbox-api-token", No(SHORT)),
    ("dropbox-long-lived-api-token", Yes(Named("DROPBOX_API_TOKEN"), &[G(LO, 11), L("AAAAAAAAAA"), G(B, 43)])),
    ("dropbox-short-lived-api-token", Yes(Bare, &[L("sl."), G(B, 135)])),
    ("duffel-api-token", Yes(Bare, &[L("duffel_test_"), G(B, 43)])),
    ("dynatrace-api-token", Yes(Bare, &[L("dt0c01."), G(AN, 24), L("."), G(AN, 64)])),
    ("easypost-api-token", Yes(Bare, &[L("EZAK"), G(AN, 54)])),
    ("easypost-test-api-token", Yes(Bare, &[L("EZTK"), G(AN, 54)])),
    ("etsy-access-token", Yes(Named("ETSY_ACCESS_TOKEN"), &[G(LO, 24)])),
    ("facebook-access-token", No("`<app id>|<secret>` app tokens: no prefix, and `|` ends a value")),
    ("facebook-page-access-token", Yes(Bare, &[L("EAAM"), G(AN, 120)])),
    ("facebook-secret", Yes(Named("FACEBOOK_APP_SECRET"), &[G(HX, 32)])),
    ("fastly-api-token", Yes(Named("FASTLY_API_TOKEN"), &[G(B, 32)])),
    ("finicity-api-token", Yes(Named("FINICITY_API_TOKEN"), &[G(HX, 32)])),
    ("finicity-client-secret", Yes(Named("FINICITY_CLIENT_SECRET"), &[G(LO, 20)])),
    ("finnhub-access-token", Yes(Named("FINNHUB_ACCESS_TOKEN"), &[G(LO, 20)])),
    ("flickr-access-token", Yes(Named("FLICKR_ACCESS_TOKEN"), &[G(LO, 32)])),
    ("flutterwave-encryption-key", Yes(Bare, &[L("FLWSECK_TEST-"), G(HX, 12)])),
    ("flutterwave-public-key", Yes(Bare, &[L("FLWPUBK_TEST-"), G(HX, 32), L("-X")])),
    ("flutterwave-secret-key", Yes(Bare, &[L("FLWSECK_TEST-"), G(HX, 32), L("-X")])),
    ("flyio-access-token", Yes(Bare, &[L("fo1_"), G(B, 43)])),
    ("frameio-api-token", Yes(Bare, &[L("fio-u-"), G(B, 64)])),
    ("freemius-secret-key", Yes(Around("'secret_key' => '", "',"), &[L("sk_"), G(AN, 29)])),
    ("freshbooks-access-token", Yes(Named("FRESHBOOKS_ACCESS_TOKEN"), &[G(LO, 64)])),
    ("gcp-api-key", Yes(Bare, &[L("AIza"), G(B, 35)])),
    ("generic-api-key", Yes(Named("API_KEY"), &[G(AN, 32)])),
    ("github-app-token", Yes(Bare, &[L("ghu_"), G(AN, 36)])),
    ("github-fine-grained-pat", Yes(Bare, &[L("github_pat_"), G(AN, 22), L("_"), G(AN, 59)])),
    ("github-oauth", Yes(Bare, &[L("gho_"), G(AN, 36)])),
    ("github-pat", Yes(Bare, &[L("ghp_"), G(AN, 36)])),
    ("github-refresh-token", Yes(Bare, &[L("ghr_"), G(AN, 36)])),
    ("gitlab-cicd-job-token", Yes(Bare, &[L("glcbt-"), G(AN, 3), L("_"), G(B, 20)])),
    ("gitlab-deploy-token", Yes(Bare, &[L("gldt-"), G(B, 20)])),
    ("gitlab-feature-flag-client-token", Yes(Bare, &[L("glffct-"), G(B, 20)])),
    ("gitlab-feed-token", Yes(Bare, &[L("glft-"), G(B, 20)])),
    ("gitlab-incoming-mail-token", Yes(Bare, &[L("glimt-"), G(B, 25)])),
    ("gitlab-kubernetes-agent-token", Yes(Bare, &[L("glagent-"), G(B, 50)])),
    ("gitlab-oauth-app-secret", Yes(Bare, &[L("gloas-"), G(B, 64)])),
    ("gitlab-pat", Yes(Bare, &[L("glpat-"), G(B, 20)])),
    ("gitlab-pat-routable", Yes(Bare, &[L("glpat-"), G(B, 40), L("."), G(LO, 9)])),
    ("gitlab-ptt", Yes(Bare, &[L("glptt-"), G(HX, 40)])),
    ("gitlab-rrt", Yes(Bare, &[L("GR1348941"), G(B, 20)])),
    ("gitlab-runner-authentication-token", Yes(Bare, &[L("glrt-"), G(B, 20)])),
    ("gitlab-runner-authentication-token-routable", Yes(Bare, &[L("glrt-t1_"), G(B, 30), L("."), G(LO, 9)])),
    ("gitlab-scim-token", Yes(Bare, &[L("glsoat-"), G(B, 20)])),
    ("gitlab-session-cookie", Yes(Around("Cookie: ", "; path=/"), &[L("_gitlab_session="), G(LO, 32)])),
    ("gitter-access-token", Yes(Named("GITTER_TOKEN"), &[G(B, 40)])),
    ("gocardless-api-token", Yes(Bare, &[L("live_"), G(B, 40)])),
    ("grafana-api-key", Yes(Bare, &[L("eyJrIjoi"), G(AN, 80)])),
    ("grafana-cloud-api-token", Yes(Bare, &[L("glc_"), G(S, 40)])),
    ("grafana-service-account-token", Yes(Bare, &[L("glsa_"), G(AN, 32), L("_"), G(HX, 8)])),
    ("harness-api-key", Yes(Bare, &[L("pat."), G(B, 22), L("."), G(AN, 24), L("."), G(AN, 20)])),
    ("hashicorp-tf-api-token", Yes(Bare, &[G(LO, 14), L(".atlasv1."), G(B, 65)])),
    ("hashicorp-tf-password", Yes(Around("administrator_login_password = \"", "\""), &[G(LO, 16)])),
    ("heroku-api-key", Yes(Named("HEROKU_API_KEY"), &[Uuid])),
    ("heroku-api-key-v2", Yes(Bare, &[L("HRKU-AA"), G(B, 58)])),
    ("hubspot-api-key", Yes(Named("HUBSPOT_API_KEY"), &[Uuid])),
    ("huggingface-access-token", Yes(Bare, &[L("hf_"), G(LET, 34)])),
    ("huggingface-organization-api-token", Yes(Bare, &[L("api_org_"), G(LET, 34)])),
    ("infracost-api-token", Yes(Bare, &[L("ico-"), G(AN, 32)])),
    ("intercom-api-key", Yes(Named("INTERCOM_API_KEY"), &[G(B, 60)])),
    ("intra42-client-secret", Yes(Bare, &[L("s-s4t2ud-"), G(HX, 64)])),
    ("jfrog-api-key", Yes(Named("JFROG_API_KEY"), &[G(LO, 73)])),
    ("jfrog-identity-token", Yes(Named("ARTIFACTORY_IDENTITY_TOKEN"), &[G(LO, 64)])),
    ("jwt", Yes(Bare, &[L("eyJ"), G(AN, 30), L(".eyJ"), G(AN, 40), L("."), G(B, 43)])),
    ("jwt-base64", Yes(Bare, &[L("ZXlK"), G(S, 120)])),
    ("kraken-access-token", Yes(Named("KRAKEN_API_KEY"), &[G(S, 88)])),
    ("kubernetes-secret-yaml", No("base64 values under `data:` in a Secret manifest: found only under credential-like key names")),
    ("kucoin-access-token", Yes(Named("KUCOIN_ACCESS_TOKEN"), &[G(HX, 24)])),
    ("kucoin-secret-key", Yes(Named("KUCOIN_SECRET_KEY"), &[Uuid])),
    ("launchdarkly-access-token", Yes(Named("LAUNCHDARKLY_ACCESS_TOKEN"), &[G(B, 40)])),
    ("linear-api-key", Yes(Bare, &[L("lin_api_"), G(AN, 40)])),
    ("linear-client-secret", Yes(Named("LINEAR_CLIENT_SECRET"), &[G(HX, 32)])),
    ("linkedin-client-id", No(ID)),
    ("linkedin-client-secret", Yes(Named("LINKEDIN_CLIENT_SECRET"), &[G(LO, 16)])),
    ("lob-api-key", Yes(Bare, &[L("live_"), G(HX, 35)])),
    ("lob-pub-api-key", Yes(Bare, &[L("test_pub_"), G(HX, 31)])),
    ("looker-client-id", No(ID)),
    ("looker-client-secret", Yes(Named("LOOKER_CLIENT_SECRET"), &[G(LO, 24)])),
    ("mailchimp-api-key", Yes(Named("MAILCHIMP_API_KEY"), &[G(HX, 32), L("-us12")])),
    ("mailgun-private-api-token", Yes(Bare, &[L("key-"), G(HX, 32)])),
    ("mailgun-pub-key", Yes(Bare, &[L("pubkey-"), G(HX, 32)])),
    ("mailgun-signing-key", Yes(Named("MAILGUN_SIGNING_KEY"), &[G(HX, 32), L("-"), G(HX, 8), L("-"), G(HX, 8)])),
    ("mapbox-api-token", Yes(Bare, &[L("pk."), G(AN, 60), L("."), G(AN, 22)])),
    ("mattermost-access-token", Yes(Named("MATTERMOST_ACCESS_TOKEN"), &[G(LO, 26)])),
    ("maxmind-license-key", Yes(Named("MAXMIND_LICENSE_KEY"), &[G(AN, 6), L("_"), G(AN, 29), L("_mmk")])),
    ("messagebird-api-token", Yes(Named("MESSAGEBIRD_API_TOKEN"), &[G(LO, 25)])),
    ("messagebird-client-id", No(ID)),
    ("microsoft-teams-webhook", Yes(Around("POST https://acme.", " with a card"), &[L("webhook.office.com/webhookb2/"), Uuid, L("@"), Uuid, L("/IncomingWebhook/"), G(LO, 32), L("/"), Uuid])),
    ("netlify-access-token", Yes(Named("NETLIFY_AUTH_TOKEN"), &[G(B, 43)])),
    ("new-relic-browser-api-token", Yes(Bare, &[L("NRJS-"), G(HX, 19)])),
    ("new-relic-insert-key", Yes(Bare, &[L("NRII-"), G(LO, 32)])),
    ("new-relic-user-api-id", No(ID)),
    ("new-relic-user-api-key", Yes(Bare, &[L("NRAK-"), G(UP, 27)])),
    ("notion-api-token", Yes(Bare, &[L("ntn_"), G(D, 11), G(AN, 35)])),
    ("npm-access-token", Yes(Bare, &[L("npm_"), G(AN, 36)])),
    ("nuget-config-password", No("XML `<add key=\"Password\" value=\"...\"/>`: the name and value are separate attributes")),
    ("nytimes-access-token", Yes(Named("NYTIMES_API_KEY"), &[G(B, 32)])),
    ("octopus-deploy-api-key", Yes(Bare, &[L("API-"), G(UP, 26)])),
    ("okta-access-token", Yes(Named("OKTA_API_TOKEN"), &[L("00"), G(B, 40)])),
    ("openai-api-key", Yes(Bare, &[L("sk-proj-"), G(B, 74), L("T3BlbkFJ"), G(B, 74)])),
    ("openshift-user-token", Yes(Bare, &[L("sha256~"), G(B, 43)])),
    ("perplexity-api-key", Yes(Bare, &[L("pplx-"), G(AN, 48)])),
    ("pkcs12-file", No("a file-name rule (.p12/.pfx files): there is no text to scan")),
    ("plaid-api-token", Yes(Named("PLAID_ACCESS_TOKEN"), &[L("access-production-"), Uuid])),
    ("plaid-client-id", No(ID)),
    ("plaid-secret-key", Yes(Named("PLAID_SECRET"), &[G(LO, 30)])),
    ("planetscale-api-token", Yes(Bare, &[L("pscale_tkn_"), G(B, 43)])),
    ("planetscale-oauth-token", Yes(Bare, &[L("pscale_oauth_"), G(B, 43)])),
    ("planetscale-password", Yes(Bare, &[L("pscale_pw_"), G(B, 43)])),
    ("postman-api-token", Yes(Bare, &[L("PMAK-"), G(HX, 24), L("-"), G(HX, 34)])),
    ("prefect-api-token", Yes(Bare, &[L("pnu_"), G(AN, 36)])),
    ("private-key", Yes(Bare, &[L("-----BEGIN "), L("PRIVATE KEY-----\n"), G(S, 64), L("\n-----END PRIVATE KEY-----")])),
    ("privateai-api-token", Yes(Named("PRIVATEAI_API_KEY"), &[G(LO, 32)])),
    ("pulumi-api-token", Yes(Bare, &[L("pul-"), G(HX, 40)])),
    ("pypi-upload-token", Yes(Bare, &[L("pypi-AgEIcHlwaS5vcmc"), G(B, 60)])),
    ("rapidapi-access-token", Yes(Named("RAPIDAPI_KEY"), &[G(B, 50)])),
    ("readme-api-token", Yes(Bare, &[L("rdme_"), G(LO, 70)])),
    ("rubygems-api-token", Yes(Bare, &[L("rubygems_"), G(HX, 48)])),
    ("scalingo-api-token", Yes(Bare, &[L("tk-us-"), G(B, 48)])),
    ("sendbird-access-id", No(ID)),
    ("sendbird-access-token", Yes(Named("SENDBIRD_ACCESS_TOKEN"), &[G(HX, 40)])),
    ("sendgrid-api-token", Yes(Bare, &[L("SG."), G(B, 22), L("."), G(B, 43)])),
    ("sendinblue-api-token", Yes(Bare, &[L("xkeysib-"), G(HX, 64), L("-"), G(AN, 16)])),
    ("sentry-access-token", Yes(Named("SENTRY_AUTH_TOKEN"), &[G(HX, 64)])),
    ("sentry-org-token", Yes(Bare, &[L("sntrys_eyJpYXQiO"), G(S, 40), L("LCJyZWdpb25fdXJs"), G(S, 40), L("_"), G(S, 43)])),
    ("sentry-user-token", Yes(Bare, &[L("sntryu_"), G(HX, 64)])),
    ("settlemint-application-access-token", Yes(Bare, &[L("sm_aat_"), G(AN, 16)])),
    ("settlemint-personal-access-token", Yes(Bare, &[L("sm_pat_"), G(AN, 16)])),
    ("settlemint-service-access-token", Yes(Bare, &[L("sm_sat_"), G(AN, 16)])),
    ("shippo-api-token", Yes(Bare, &[L("shippo_live_"), G(HX, 40)])),
    ("shopify-access-token", Yes(Bare, &[L("shpat_"), G(HX, 32)])),
    ("shopify-custom-access-token", Yes(Bare, &[L("shpca_"), G(HX, 32)])),
    ("shopify-private-app-access-token", Yes(Bare, &[L("shppa_"), G(HX, 32)])),
    ("shopify-shared-secret", Yes(Bare, &[L("shpss_"), G(HX, 32)])),
    ("sidekiq-secret", No("a Bundler credential variable (`BUNDLE_GEMS__CONTRIBSYS__COM`): the name is not credential-like")),
    ("sidekiq-sensitive-url", Yes(Around("source \"https://", "@gems.contribsys.com/\""), &[K(HX, 8), L(":"), G(HX, 8)])),
    ("slack-app-token", Yes(Bare, &[L("xapp-1-A"), G(UP, 10), L("-"), G(D, 13), L("-"), G(HX, 64)])),
    ("slack-bot-token", Yes(Bare, &[L("xoxb-"), G(D, 12), L("-"), G(D, 13), L("-"), G(AN, 24)])),
    ("slack-config-access-token", Yes(Bare, &[L("xoxe.xoxp-1-"), G(UP, 164)])),
    ("slack-config-refresh-token", Yes(Bare, &[L("xoxe-1-"), G(UP, 146)])),
    ("slack-legacy-bot-token", Yes(Bare, &[L("xoxb-"), G(D, 10), L("-"), G(AN, 24)])),
    ("slack-legacy-token", Yes(Bare, &[L("xoxs-"), G(D, 10), L("-"), G(D, 10), L("-"), G(D, 12), L("-"), G(HX, 64)])),
    ("slack-legacy-workspace-token", Yes(Bare, &[L("xoxa-2-"), G(AN, 40)])),
    ("slack-user-token", Yes(Bare, &[L("xoxp-"), G(D, 11), L("-"), G(D, 11), L("-"), G(D, 12), L("-"), G(AN, 32)])),
    ("slack-webhook-url", Yes(Around("POST https://", " ok"), &[L("hooks.slack.com/services/"), G(UP, 9), L("/"), G(UP, 11), L("/"), G(AN, 24)])),
    ("snyk-api-token", Yes(Named("SNYK_TOKEN"), &[Uuid])),
    ("sonar-api-token", Yes(Named("SONAR_TOKEN"), &[L("squ_"), G(HX, 40)])),
    ("sourcegraph-access-token", Yes(Bare, &[L("sgp_"), G(HX, 16), L("_"), G(HX, 40)])),
    ("square-access-token", Yes(Bare, &[L("EAAA"), G(B, 60)])),
    ("squarespace-access-token", Yes(Named("SQUARESPACE_API_KEY"), &[Uuid])),
    ("stripe-access-token", Yes(Bare, &[L("sk_live_"), G(AN, 24)])),
    ("sumologic-access-id", No(ID)),
    ("sumologic-access-token", Yes(Named("SUMO_ACCESS_KEY"), &[G(LO, 64)])),
    ("telegram-bot-api-token", Yes(Bare, &[G(D, 10), L(":AA"), G(B, 33)])),
    ("travisci-access-token", Yes(Named("TRAVIS_API_TOKEN"), &[G(LO, 22)])),
    ("twilio-api-key", Yes(Bare, &[L("SK"), G(HX, 32)])),
    ("twitch-api-token", Yes(Named("TWITCH_API_TOKEN"), &[G(LO, 30)])),
    ("twitter-access-secret", Yes(Named("TWITTER_ACCESS_SECRET"), &[G(LO, 45)])),
    ("twitter-access-token", Yes(Named("TWITTER_ACCESS_TOKEN"), &[G(D, 18), L("-"), G(AN, 30)])),
    ("twitter-api-key", Yes(Named("TWITTER_API_KEY"), &[G(LO, 25)])),
    ("twitter-api-secret", Yes(Named("TWITTER_API_SECRET"), &[G(LO, 50)])),
    ("twitter-bearer-token", Yes(Bare, &[L("AAAAAAAAAAAAAAAAAAAAAA"), G(AN, 90)])),
    ("typeform-api-token", Yes(Bare, &[L("tfp_"), G(B, 59)])),
    ("vault-batch-token", Yes(Bare, &[L("hvb."), G(B, 140)])),
    ("vault-service-token", Yes(Bare, &[L("hvs."), G(B, 95)])),
    ("yandex-access-token", Yes(Named("YANDEX_ACCESS_TOKEN"), &[L("t1."), G(B, 40), L("."), G(B, 86)])),
    ("yandex-api-key", Yes(Bare, &[L("AQVN"), G(B, 36)])),
    ("yandex-aws-access-token", Yes(Bare, &[L("YC"), G(B, 38)])),
    ("zendesk-secret-key", Yes(Named("ZENDESK_SECRET_KEY"), &[G(LO, 40)])),
];

/// Random characters of `set`, led by one of each of its upper, lower and
/// digit classes (real tokens of such a set have all three).
fn random(r: &mut Rng, set: &str, n: usize) -> String {
    let mut must = String::new();
    for class in [
        |c: &char| c.is_ascii_lowercase(),
        |c: &char| c.is_ascii_uppercase(),
        |c: &char| c.is_ascii_digit(),
    ] {
        if must.len() < n
            && let Some(c) = set.chars().find(class)
        {
            must.push(c);
        }
    }
    r.string(set, n, &must)
}

/// The sample's text and the secret parts that must not survive.
fn sample(r: &mut Rng, how: How, parts: &[P]) -> (String, Vec<String>) {
    let mut token = String::new();
    let mut secret = Vec::new();
    for &p in parts {
        match p {
            L(s) => token.push_str(s),
            G(set, n) => {
                let g = random(r, set, n);
                token.push_str(&g);
                secret.push(g);
            }
            K(set, n) => token.push_str(&random(r, set, n)),
            Uuid => {
                let g = [8, 4, 4, 4, 12].map(|n| random(r, HX, n)).join("-");
                token.push_str(&g);
                secret.push(g);
            }
        }
    }
    let text = match how {
        Bare => format!("found {token} in the logs, rotate it"),
        Named(name) => format!("{name}={token}\nDEBUG=false"),
        Around(before, after) => format!("{before}{token}{after}"),
    };
    (text, secret)
}

#[test]
fn coverage_of_the_gitleaks_rule_set() {
    let s = SecretScanner::new();
    let mut r = Rng(0x5eed_c0de);
    let mut ids: Vec<&str> = RULES.iter().map(|(id, _)| *id).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(
        ids.len(),
        222,
        "one entry per rule id of the measured rule set"
    );

    let (mut bare, mut named) = (0, 0);
    let mut missed = Vec::new();
    let mut not_covered = Vec::new();
    for (id, rule) in RULES {
        match rule {
            No(why) => not_covered.push(format!("{id}: {why}")),
            Yes(how, parts) => {
                let (text, secret) = sample(&mut r, *how, parts);
                let out = s.redact(&text);
                // Short generated pieces (a 1-digit part) can occur anywhere.
                let leaked = secret
                    .iter()
                    .any(|g| g.len() >= 6 && out.text.contains(g.as_str()));
                if out.is_clean() || leaked {
                    missed.push(format!("{id}: {text:?} -> {:?}", out.text));
                } else if matches!(how, Named(_)) {
                    named += 1;
                } else {
                    bare += 1;
                }
            }
        }
    }
    assert!(
        missed.is_empty(),
        "claimed but not redacted:\n{}",
        missed.join("\n")
    );

    let texts = ordinary_texts();
    let false_positives = texts.iter().filter(|t| !s.redact(t).is_clean()).count();
    println!(
        "secret scanner coverage: {} of {} gitleaks rules ({bare} bare, {named} under a \
         credential-like name); false positives: {false_positives} of {} ordinary texts",
        bare + named,
        RULES.len(),
        texts.len()
    );
    println!("not covered:\n  {}", not_covered.join("\n  "));
    assert_eq!(false_positives, 0);
}
