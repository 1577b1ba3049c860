//! The scanner's test data: a corpus of every supported format in context,
//! and ordinary texts that must come through untouched.
//!
//! All fake secrets are generated at test time from a seeded generator and
//! split prefixes, so no secret-shaped literal sits in the repository.

pub(crate) const UPPER: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZ";
pub(crate) const LOWER: &str = "abcdefghijklmnopqrstuvwxyz";
pub(crate) const DIGITS: &str = "0123456789";
pub(crate) const HEX: &str = "0123456789abcdef";

/// Deterministic xorshift generator (no `rand` dependency).
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// `len` characters from `alphabet`, starting with `must` (which
    /// guarantees the character classes a format needs).
    pub(crate) fn string(&mut self, alphabet: &str, len: usize, must: &str) -> String {
        let a = alphabet.as_bytes();
        let mut s = String::from(must);
        while s.len() < len {
            s.push(char::from(a[self.below(a.len())]));
        }
        s
    }
}

pub(crate) fn alnum() -> String {
    format!("{UPPER}{LOWER}{DIGITS}")
}

pub(crate) fn b64url() -> String {
    format!("{UPPER}{LOWER}{DIGITS}-_")
}

pub(crate) fn b64() -> String {
    format!("{UPPER}{LOWER}{DIGITS}+/")
}

/// One corpus case: text around a secret, and which part is redacted.
pub(crate) struct Case {
    pub(crate) kind: &'static str,
    pub(crate) before: String,
    pub(crate) secret: String,
    pub(crate) after: String,
}

pub(crate) fn case(kind: &'static str, before: &str, secret: String, after: &str) -> Case {
    Case {
        kind,
        before: before.to_owned(),
        secret,
        after: after.to_owned(),
    }
}

pub(crate) fn corpus() -> Vec<Case> {
    let mut r = Rng(0x9e37_79b9_7f4a_7c15);
    let an = alnum();
    let u = b64url();
    let ud = format!("{UPPER}{DIGITS}");
    vec![
        case(
            "aws_access_key",
            "export AWS_ACCESS_KEY_ID=",
            format!("{}{}", "AK", "IA") + &r.string(&ud, 16, "Z7"),
            "\nnext line",
        ),
        case(
            "aws_access_key",
            "temporary creds (",
            format!("{}{}", "AS", "IA") + &r.string(&ud, 16, "Q4"),
            ") expire soon",
        ),
        case(
            "aws_secret_key",
            "aws_secret_access_key = ",
            r.string(&b64(), 40, "wJ7/K"),
            "\nregion = eu-west-1",
        ),
        case(
            "gcp_api_key",
            "maps url ?key=",
            format!("{}{}", "AI", "za") + &r.string(&u, 35, "Sy"),
            "&callback=init",
        ),
        case(
            "github_token",
            "git remote uses ",
            format!("{}{}", "gh", "p_") + &r.string(&an, 36, "aZ9"),
            " for push",
        ),
        case(
            "github_token",
            "installation token: '",
            format!("{}{}", "gh", "s_") + &r.string(&an, 36, "Qx1"),
            "'",
        ),
        case(
            "github_pat",
            "GH_TOKEN=",
            format!("{}{}", "github_", "pat_")
                + &r.string(&an, 22, "11A")
                + "_"
                + &r.string(&an, 59, "b"),
            "",
        ),
        case(
            "gitlab_token",
            "CI_JOB_TOKEN is not it, but this is: ",
            format!("{}{}", "gl", "pat-") + &r.string(&u, 20, "x9"),
            ".",
        ),
        case(
            "slack_token",
            "SLACK_BOT_TOKEN: ",
            format!("{}{}", "xo", "xb-")
                + &r.string(DIGITS, 12, "")
                + "-"
                + &r.string(DIGITS, 13, "")
                + "-"
                + &r.string(&an, 24, ""),
            "\n",
        ),
        case(
            "slack_token",
            "user token ",
            format!("{}{}", "xo", "xp-") + &r.string(DIGITS, 11, "") + "-" + &r.string(&an, 30, ""),
            " leaked",
        ),
        case(
            "slack_app_token",
            "socket mode app token ",
            format!("{}{}", "xa", "pp-1-")
                + &r.string(&ud, 11, "A")
                + "-"
                + &r.string(DIGITS, 13, "")
                + "-"
                + &r.string(HEX, 64, ""),
            " ok",
        ),
        case(
            "slack_webhook",
            "POST https://hooks.slack.com/services/",
            r.string(&ud, 9, "T") + "/" + &r.string(&ud, 11, "B") + "/" + &r.string(&an, 24, ""),
            " with payload",
        ),
        case(
            "discord_bot_token",
            "DISCORD_TOKEN=\"",
            r.string(&u, 24, "MT") + "." + &r.string(&u, 6, "G") + "." + &r.string(&u, 38, ""),
            "\"",
        ),
        case(
            "discord_bot_token",
            "Authorization: Bot ",
            r.string(&u, 26, "MT") + "." + &r.string(&u, 6, "G") + "." + &r.string(&u, 38, ""),
            "\r\n",
        ),
        case(
            "discord_webhook",
            "webhook: https://discord.com/api/webhooks/",
            r.string(DIGITS, 19, "1") + "/" + &r.string(&u, 68, ""),
            " (alerts)",
        ),
        case(
            "telegram_bot_token",
            "curl https://api.telegram.org/bot",
            r.string(DIGITS, 10, "7") + ":" + &r.string(&u, 35, "AA"),
            "/getMe",
        ),
        case(
            "telegram_bot_token",
            "TELEGRAM_BOT_TOKEN ",
            r.string(DIGITS, 9, "6") + ":" + &r.string(&u, 35, "AAH"),
            "",
        ),
        case(
            "stripe_key",
            "stripe.api_key = '",
            format!("{}{}", "sk_", "live_") + &r.string(&an, 24, "51"),
            "'",
        ),
        case(
            "stripe_key",
            "restricted ",
            format!("{}{}", "rk_", "test_") + &r.string(&an, 24, "51"),
            " in tests",
        ),
        case(
            "openai_key",
            "OpenAI key ",
            format!("{}{}", "sk-", "proj-") + &r.string(&u, 48, "aB3"),
            " revoked",
        ),
        case(
            "openai_key",
            "legacy ",
            format!("{}{}", "sk", "-") + &r.string(&an, 48, "T3Bl"),
            ".",
        ),
        case(
            "anthropic_key",
            "x-api-key: ",
            format!("{}{}", "sk-ant-", "api03-") + &r.string(&u, 93, "Zz9") + "AA",
            "\n",
        ),
        case(
            "openrouter_key",
            "OPENROUTER_API_KEY=",
            format!("{}{}", "sk-or-", "v1-") + &r.string(HEX, 64, ""),
            "",
        ),
        case(
            "groq_key",
            "groq: ",
            format!("{}{}", "gs", "k_") + &r.string(&an, 52, ""),
            "",
        ),
        case(
            "google_oauth_token",
            "access token ",
            format!("{}{}", "ya", "29.") + &r.string(&u, 120, "a0A"),
            " expires in 3599s",
        ),
        case(
            "huggingface_token",
            "huggingface-cli login --token ",
            format!("{}{}", "hf", "_") + &r.string(&format!("{UPPER}{LOWER}"), 34, "aB"),
            "",
        ),
        case(
            "npm_token",
            "//registry.npmjs.org/:_authToken=",
            format!("{}{}", "np", "m_") + &r.string(&an, 36, ""),
            "\n",
        ),
        case(
            "pypi_token",
            "password = ",
            format!("{}{}", "pypi-", "AgEIcHlwaS5vcmc") + &r.string(&u, 80, ""),
            "\n",
        ),
        case(
            "sendgrid_key",
            "SENDGRID: ",
            format!("{}{}", "S", "G.") + &r.string(&u, 22, "") + "." + &r.string(&u, 43, ""),
            " end",
        ),
        case(
            "twilio_key",
            "twilio api key sid ",
            format!("{}{}", "S", "K") + &r.string(HEX, 32, ""),
            " and more",
        ),
        case(
            "stripe_webhook_secret",
            "signing secret ",
            format!("{}{}", "whs", "ec_") + &r.string(&an, 32, ""),
            " ",
        ),
        case(
            "shopify_token",
            "shop token ",
            format!("{}{}", "shp", "at_") + &r.string(HEX, 32, ""),
            " ",
        ),
        case(
            "digitalocean_token",
            "doctl auth init -t ",
            format!("{}{}", "dop_", "v1_") + &r.string(HEX, 64, ""),
            "",
        ),
        case(
            "age_secret_key",
            "# created: 2024-01-01\n",
            format!("{}{}", "AGE-SECRET-", "KEY-1") + &r.string(&ud, 58, ""),
            "\n",
        ),
        case(
            "private_key",
            "here is the key:\n",
            format!(
                "{}{}\n{}\n{}\n{}{}",
                "-----BEGIN ",
                "RSA PRIVATE KEY-----",
                r.string(&b64(), 64, "MIIE"),
                r.string(&b64(), 40, ""),
                "-----END ",
                "RSA PRIVATE KEY-----"
            ),
            "\nthanks",
        ),
        case(
            "private_key",
            "{\"private_key\": \"",
            format!(
                "{}{}\\n{}\\n{}{}\\n",
                "-----BEGIN ",
                "PRIVATE KEY-----",
                r.string(&b64(), 64, "MIIE"),
                "-----END ",
                "PRIVATE KEY-----"
            )
            .trim_end_matches("\\n")
            .to_owned(),
            "\\n\", \"client_email\": \"svc@example.iam.gserviceaccount.com\"}",
        ),
        case(
            "jwt",
            "id_token=",
            format!("{}{}", "eyJhbGciOiJIUzI1", "NiIsInR5cCI6IkpXVCJ9")
                + "."
                + &r.string(&u, 60, "eyJzdWIi")
                + "."
                + &r.string(&u, 43, ""),
            "&state=xyz",
        ),
        case(
            "jwt",
            "Authorization: Bearer ",
            format!("{}{}", "eyJhbGciOiJSUzI1", "NiJ9")
                + "."
                + &r.string(&u, 80, "eyJpc3Mi")
                + "."
                + &r.string(&u, 86, ""),
            "\r\nAccept: */*",
        ),
        case(
            "bearer_token",
            "curl -H 'Authorization: Bearer ",
            r.string(&u, 40, "a1B"),
            "' https://api.example.com",
        ),
        case(
            "basic_auth",
            "Authorization: Basic ",
            data_encoding_b64(b"admin:correct-horse-battery"),
            "\nHost: example.com",
        ),
        case(
            "connection_string",
            "DATABASE_URL=postgres://app_user:",
            r.string(&an, 24, "p4S"),
            "@db.internal:5432/app?sslmode=require",
        ),
        case(
            "connection_string",
            "mongo: mongodb+srv://admin:",
            "hunter2-".to_owned() + &r.string(&an, 10, ""),
            "@cluster0.abcde.mongodb.net/test",
        ),
        case(
            "connection_string",
            "cache at redis://default:",
            r.string(&an, 16, ""),
            "@redis.internal:6379/0",
        ),
        case(
            "connection_string",
            "jdbc-ish mysql://root:",
            "s3cr3t".to_owned(),
            "@localhost/shop",
        ),
        case(
            "connection_string",
            "broker amqp://guest:",
            r.string(&an, 12, "x"),
            "@rabbit:5672/vhost",
        ),
        case(
            "url_credentials",
            "git clone https://deploy:",
            r.string(&an, 20, "Aa1"),
            "@git.example.com/org/repo.git",
        ),
        case(
            "generic_secret",
            "{\"api_key\": \"",
            r.string(&an, 32, "Xy7"),
            "\", \"model\": \"gpt\"}",
        ),
        case(
            "generic_secret",
            "client_secret: ",
            r.string(&u, 40, "Q9z"),
            "\nclient_id: hearth",
        ),
        case(
            "generic_secret",
            "--auth-token=",
            r.string(HEX, 40, "a1"),
            " --verbose",
        ),
        case(
            "generic_secret",
            "const apiKey = \"",
            r.string(&an, 28, "mK2"),
            "\";",
        ),
        case(
            "generic_secret",
            "PASSWORD=",
            r.string(&an, 24, "Zq8"),
            "\n",
        ),
        // Issue 8 item 15: bare tokens in a sentence, and chosen passwords.
        case(
            "vault_token",
            "the Vault token ",
            format!("{}{}", "hv", "s.") + &r.string(&u, 91, "CAESIJ"),
            " expires tomorrow",
        ),
        case(
            "heroku_api_key",
            "heroku says ",
            format!("{}{}", "HRKU", "-AA") + &r.string(&u, 58, "x1Z"),
            " is your key",
        ),
        case(
            "discord_bot_token",
            "the bot token is ",
            discord_token(&mut r),
            ", do not share it",
        ),
        case(
            "databricks_token",
            "use ",
            format!("{}{}", "da", "pi") + &r.string(HEX, 32, "a1"),
            " for the workspace",
        ),
        case(
            "linear_api_key",
            "Linear key ",
            format!("{}{}", "lin_", "api_") + &r.string(&an, 40, "k2P"),
            ".",
        ),
        case(
            "sentry_token",
            "auth for sentry-cli: ",
            format!("{}{}", "sntr", "yu_") + &r.string(HEX, 64, "f0"),
            " (user token)",
        ),
        case(
            "grafana_token",
            "grafana service account ",
            format!("{}{}", "gl", "sa_") + &r.string(&an, 32, "Ab3") + "_" + &r.string(HEX, 8, ""),
            " works",
        ),
        case(
            "pulumi_token",
            "pulumi login with ",
            format!("{}{}", "pu", "l-") + &r.string(HEX, 40, "9c"),
            " now",
        ),
        case(
            "doppler_token",
            "doppler: ",
            format!("{}{}", "dp.", "pt.") + &r.string(&an, 43, "Qw4"),
            " is the personal token",
        ),
        case(
            "square_token",
            "Square access token ",
            format!("{}{}", "EA", "AA") + &r.string(&u, 60, "l2Xy"),
            " for production",
        ),
        case(
            "perplexity_key",
            "perplexity ",
            format!("{}{}", "pp", "lx-") + &r.string(&an, 48, "aB1"),
            " ok",
        ),
        case(
            "password",
            "DB_PASSWORD=",
            "Tr0ub4dor&3".to_owned(),
            "\nDB_HOST=db.internal",
        ),
        case(
            "password",
            "{\"smtp_pass\": \"",
            "hunter2-hunter2".to_owned(),
            "\"}",
        ),
        case(
            "generic_secret",
            "SECRET_KEY = '",
            "django-insecure-".to_owned()
                + &r.string(&format!("{LOWER}{DIGITS}!@#$%^&*(-_=+)"), 50, "k2#("),
            "'\nDEBUG = False",
        ),
        case("heroku_api_key", "HEROKU_API_KEY=", uuid(&mut r), "\n"),
    ]
}

/// A Discord bot token: base64 of an 18-digit user id, a timestamp part and
/// an HMAC part.
pub(crate) fn discord_token(r: &mut Rng) -> String {
    let id = r.string(DIGITS, 18, "1");
    data_encoding_b64(id.as_bytes())
        .trim_end_matches('=')
        .to_owned()
        + "."
        + &r.string(&b64url(), 6, "G")
        + "."
        + &r.string(&b64url(), 38, "")
}

pub(crate) fn uuid(r: &mut Rng) -> String {
    [8, 4, 4, 4, 12]
        .iter()
        .map(|&n| r.string(HEX, n, ""))
        .collect::<Vec<_>>()
        .join("-")
}

/// Standard base64 (test-local so the test needs no extra dependency).
pub(crate) fn data_encoding_b64(input: &[u8]) -> String {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in input.chunks(3) {
        let n =
            chunk.iter().fold(0u32, |acc, &b| (acc << 8) | u32::from(b)) << (8 * (3 - chunk.len()));
        for k in 0..4 {
            if k <= chunk.len() {
                out.push(char::from(A[((n >> (18 - 6 * k)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

pub(crate) fn ordinary_texts() -> Vec<String> {
    let mut r = Rng(7);
    let lower_word = r.string(LOWER, 30, "");
    vec![
        "The quick brown fox jumps over the lazy dog. Nothing secret here at all.".into(),
        "The bearer of this letter is a trusted friend; Bearer tokens are explained below.".into(),
        "Please read the key: it explains the symbols. The token: a small coin.".into(),
        "fn main() {\n    let key = map.get(&k)?;\n    let api_key = std::env::var(\"OPENAI_API_KEY\")?;\n    if token == expected_token { return Ok(()); }\n}".into(),
        "def get_token(self, key: str) -> str:\n    return self.tokens[key]".into(),
        "{\"id\": \"550e8400-e29b-41d4-a716-446655440000\", \"status\": \"ok\", \"count\": 12345678901234567890}".into(),
        "2024-05-01T12:00:00.123Z INFO request_id=7f9c2ba4-e88f-4c1b-9a5e-0d3c6b1a2f44 run=0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b status=200 took=12ms".into(),
        "commit 3f2a9c1e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a39\nAuthor: Jane Doe <jane@example.com>\nDate:   Mon May 6 10:00:00 2024 +0200\n\n    Fix the parser".into(),
        "Fixed in a3f5c2e9b1d4f6a8c0e2b4d6f8a0c2e4b6d8f0a2 and released as v1.2.3.".into(),
        "See https://docs.example.com/api/v1/users?id=42&sort=asc#section and http://localhost:8080/healthz".into(),
        "# Title\n\n- item one\n- [link](https://example.org/a/b?c=d)\n\n```rust\nlet x = 1;\n```\n\n> quote".into(),
        "Config lives at /home/user/.config/hearth/config.toml and keys in /etc/ssl/private/server.key".into(),
        "C:\\Users\\me\\AppData\\Local\\hearth\\secrets.json is the Windows path".into(),
        "pi = 3.14159265358979323846264338327950288419716939937510; e = 2.718281828459045".into(),
        "SGVsbG8gd29ybGQsIHRoaXMgaXMgYSB0ZXN0IG1lc3NhZ2UgZW5jb2RlZCBpbiBiYXNlNjQ=".into(),
        "key: app.kubernetes.io/name\nvalue: hearth\ntoken_limit: 4096\nmax_tokens: 1024".into(),
        "image: ghcr.io/example/hearth@sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08".into(),
        "The task-force-meeting-is-scheduled-for-tomorrow; we also ask-questions-freely.".into(),
        "Use sk-learn-style-pipelines-for-preprocessing-everything in the notebook.".into(),
        "postgres://localhost:5432/mydb and postgres://user@localhost/db and postgres://user:${DB_PASSWORD}@db/app and mysql://root:<password>@host/db".into(),
        "mongodb+srv://cluster0.example.mongodb.net/test?retryWrites=true&w=majority".into(),
        "Content-Type: application/json\nAccept: */*\nWWW-Authenticate: Basic realm=\"Access to the staging site\"\nX-Request-Id: 9a8b7c6d".into(),
        "Order #12345678: shipped at 12:34:56 on 2024-01-02.".into(),
        "JWT headers start with eyJ because base64 of {\" begins that way.".into(),
        "Contact support@example.com or visit https://example.com/help for help.".into(),
        "Listening on [::1]:8080 and 0.0.0.0:443; upstream 10.0.0.12:5432".into(),
        "Grüße aus Köln — naïve café résumé 東京 🎉 ключ: значение".into(),
        "AKIA is the prefix of AWS access key ids; ghp_ marks GitHub tokens; xoxb- is Slack.".into(),
        "{\"sort_key\": \"created_at\", \"api_key_hint\": \"use the env var\", \"page\": 2}".into(),
        "export PATH=\"$HOME/.cargo/bin:$PATH\"\nexport RUST_LOG=hearth=debug,info".into(),
        "| sha | message |\n|-----|---------|\n| 1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b | initial |".into(),
        "key_id: 550e8400-e29b-41d4-a716-446655440000\ntoken_count: 1234567890123456789012".into(),
        "{\"next_page_token\": \"CiAKGjBpNDd2Nmp2Zml2cXRwYjBpOXA0dzF4NBAB\", \"idempotency_key\": \"a8Fk29DmQx7LpZ3wR5tY\"}".into(),
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGb9ECWmEzf6FQbrBZ9w7lshQhqowtrbLDFw4rXAxZuE user@host".into(),
        "Paste the block starting with -----BEGIN PRIVATE KEY----- into the form.".into(),
        "thread_key: telegram:123456789\nmodel: anthropic/claude-sonnet".into(),
        format!("password: {lower_word}"),
        "a == b && c != d; x <= y; z >= w; p => q; m := 3; ns::key::Value".into(),
        "ratio 1234567890:987654321 and version 1.2.3-beta.4+build.5".into(),
        "Basic instructions: the auth step is simple, secrets are stored sealed.".into(),
        "<config><key>value</key><token>short</token></config>".into(),
        "a,b,c\n1,2,3\n4,5,6\n".into(),
        String::new(),
        // Near misses of the item-15 formats and the chosen-secret rule.
        "Our tEAAAm said yEAAAh; the EAAA grade is fine, and so is EAAAL.".into(),
        "Hang it on the pul-ley; pul-request is a typo, and pul-0123 is a part number.".into(),
        "Lorem dapibus ipsum, dapi dolor; the hvs. readings and dp.pt. notes are normal.".into(),
        "def login(user: str, password: str) -> bool:\n    return check(password=password, pass_hint=None)".into(),
        "db_password = os.environ[\"DB_PASSWORD\"]\npassword = getpass()\nSECRET_KEY = env('SECRET_KEY')".into(),
        "password: ${{ secrets.DB_PASSWORD }}\nsecret: !vault |\npass: true\npwd: /home/user/src".into(),
        "const password = req.body.password2; let secret = config.app.secret;".into(),
        "license_key: 550e8400-e29b-41d4-a716-446655440000\nrun_key=7f9c2ba4-e88f-4c1b-9a5e-0d3c6b1a2f44".into(),
        "Build MTIzNDU2Nzg5MGFiY2RlZmdo.GxYz12.abcdefghijklmnopqrstuvwxyz0123456789AB passed.".into(),
        "linear lin_api_docs and sntryu_ and glsa_ are just prefixes; pplx- too.".into(),
    ]
}
