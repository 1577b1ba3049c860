//! Keys that belong to a community: runs asked in a guild that set its own
//! key call the provider with that key; other guilds, DMs and the API use
//! the operator's; a removed key fails the guild's runs unless fallback is
//! on. The key is stored only sealed and shown nowhere.

use std::collections::BTreeMap;
use std::time::Duration;

use hearth_core::{DeliveryMode, Inbound, RunStatus};
use hearth_runtime::testing::{TestRuntime, thread, user};
use hearth_runtime::{Runtime, WaitOutcome};
use hearth_store::secrets::{SecretString, generate_key_base64};
use hearth_testkit::FakeOpenAi;

const G1: &str = "discord:guild:1";
const G2: &str = "discord:guild:2";
const OPERATOR: &str = "sk-operator-key-0000";
const KEY_ONE: &str = "sk-guild-one-key-1111";
const KEY_TWO: &str = "sk-guild-two-key-2222";

async fn start(fake: &FakeOpenAi, llm_extra: &str) -> TestRuntime {
    let toml = format!(
        "[llm]\ndefault_model = \"fake/m\"\n{llm_extra}\n[llm.providers.fake]\n\
         type = \"openai_compat\"\napi_key_env = \"OPERATOR_KEY\"\nbase_url = \"{}\"\nmodels = [\"m\"]\n",
        fake.base_url()
    );
    let env: BTreeMap<String, String> = [
        ("OPERATOR_KEY".to_owned(), OPERATOR.to_owned()),
        (
            "HEARTH_SECRET_KEY".to_owned(),
            generate_key_base64().unwrap(),
        ),
    ]
    .into();
    TestRuntime::start_with(&toml, |b| b.env(env)).await
}

/// Asks `text` in `scope` (a guild) or in a DM (`None`) and waits for the end.
async fn ask(
    rt: &Runtime,
    thread_key: &str,
    scope: Option<&str>,
    text: &str,
) -> hearth_core::RunEnvelope {
    let run = rt
        .ingest(Inbound {
            source: "discord".into(),
            thread_key: thread(thread_key),
            user_key: user("discord:user:5"),
            text: text.into(),
            delivery_mode: DeliveryMode::FollowUp,
            idempotency_key: None,
            scope: scope.map(str::to_owned),
            roles: Vec::new(),
        })
        .await
        .unwrap();
    match rt.wait(&run.run_id, Duration::from_secs(30)).await.unwrap() {
        WaitOutcome::Finished(env) => env,
        WaitOutcome::Pending(env) => panic!("not finished: {env:?}"),
    }
}

/// The `authorization` header of the provider's newest request.
fn last_key(fake: &FakeOpenAi) -> String {
    let headers = fake.request_headers().pop().unwrap();
    headers
        .into_iter()
        .filter(|(k, _)| k == "authorization")
        .map(|(_, v)| v)
        .collect::<Vec<_>>()
        .join(" | ")
}

#[tokio::test]
async fn each_guild_calls_with_its_own_key_and_dms_and_other_guilds_with_the_operators() {
    let fake = FakeOpenAi::start().await;
    let t = start(&fake, "").await;
    let rt = &t.runtime;
    rt.set_scope_credential(G1, "fake", SecretString::new(KEY_ONE.into()), "operator")
        .await
        .unwrap();
    rt.set_scope_credential(
        G2,
        "fake",
        SecretString::new(KEY_TWO.into()),
        "discord:user:9",
    )
    .await
    .unwrap();

    let one = ask(rt, "discord:channel:11", Some(G1), "hi from one").await;
    assert_eq!(one.status, RunStatus::Succeeded, "{one:?}");
    assert_eq!(last_key(&fake), format!("Bearer {KEY_ONE}"));
    ask(rt, "discord:channel:22", Some(G2), "hi from two").await;
    assert_eq!(last_key(&fake), format!("Bearer {KEY_TWO}"));
    ask(rt, "discord:dm:5", None, "hi in a DM").await;
    assert_eq!(
        last_key(&fake),
        format!("Bearer {OPERATOR}"),
        "a DM used a guild's key"
    );
    ask(
        rt,
        "discord:channel:33",
        Some("discord:guild:3"),
        "hi from three",
    )
    .await;
    assert_eq!(
        last_key(&fake),
        format!("Bearer {OPERATOR}"),
        "another guild used a key"
    );
    ask(
        rt,
        "api:default",
        Some("slack:team:T1"),
        "hi from a workspace",
    )
    .await;
    assert_eq!(last_key(&fake), format!("Bearer {OPERATOR}"));

    // Each community's usage today, all together, its own only.
    assert_eq!(rt.scope_usage_today(G1).await.unwrap().calls, 1);
    assert_eq!(rt.scope_usage_today(G2).await.unwrap().calls, 1);
    assert_eq!(
        rt.scope_usage_today("discord:guild:4").await.unwrap().calls,
        0
    );
    // Listed without values; sealed in the store, never in clear.
    let listed = rt.scope_credentials(G1).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].provider, "fake");
    let db = std::fs::read(t.home.path().join("hearth.db")).unwrap();
    let wal = std::fs::read(t.home.path().join("hearth.db-wal")).unwrap_or_default();
    for key in [KEY_ONE, KEY_TWO] {
        for bytes in [&db, &wal] {
            assert!(
                !bytes.windows(key.len()).any(|w| w == key.as_bytes()),
                "a key is in the store in clear"
            );
        }
    }
    // Nor in the run's trace.
    let steps = t.store.steps(&one.run_id).await.unwrap();
    assert!(!format!("{steps:?}").contains(KEY_ONE));
    // Audited: who set which provider's key where.
    let audit = t.store.list_audit(100).await.unwrap();
    assert!(
        audit.iter().any(|e| e.action == "credential.set"
            && e.actor == "discord:user:9"
            && e.scope.as_deref() == Some(G2)),
        "{audit:?}"
    );
    t.runtime.shutdown(Duration::from_millis(200)).await;
}

#[tokio::test]
async fn a_removed_key_fails_the_guilds_runs_unless_fallback_is_on() {
    let fake = FakeOpenAi::start().await;
    let t = start(&fake, "").await;
    let rt = &t.runtime;
    rt.set_scope_credential(G1, "fake", SecretString::new(KEY_ONE.into()), "operator")
        .await
        .unwrap();
    assert!(
        rt.remove_scope_credential(G1, "fake", "operator")
            .await
            .unwrap()
    );
    assert!(
        !rt.remove_scope_credential(G1, "fake", "operator")
            .await
            .unwrap()
    );
    let failed = ask(rt, "discord:channel:11", Some(G1), "anyone there?").await;
    assert_eq!(failed.status, RunStatus::Failed);
    let error = failed.error.clone().unwrap();
    assert_eq!(error.code, "community_key_removed");
    assert!(
        error.message.contains("community_fallback"),
        "{}",
        error.message
    );
    assert_eq!(
        fake.request_count(),
        0,
        "no call was made with the operator's key"
    );
    // A guild that never had a key is not affected.
    ask(rt, "discord:channel:22", Some(G2), "hello").await;
    assert_eq!(last_key(&fake), format!("Bearer {OPERATOR}"));
    t.runtime.shutdown(Duration::from_millis(200)).await;

    let fake = FakeOpenAi::start().await;
    let t = start(&fake, "community_fallback = true").await;
    let rt = &t.runtime;
    rt.set_scope_credential(G1, "fake", SecretString::new(KEY_ONE.into()), "operator")
        .await
        .unwrap();
    rt.remove_scope_credential(G1, "fake", "operator")
        .await
        .unwrap();
    let ok = ask(rt, "discord:channel:11", Some(G1), "anyone there?").await;
    assert_eq!(ok.status, RunStatus::Succeeded, "{ok:?}");
    assert_eq!(last_key(&fake), format!("Bearer {OPERATOR}"));
    t.runtime.shutdown(Duration::from_millis(200)).await;
}

#[tokio::test]
async fn keys_are_refused_for_non_community_scopes_unknown_providers_and_bad_text() {
    let fake = FakeOpenAi::start().await;
    let t = start(&fake, "").await;
    let rt = &t.runtime;
    let key = || SecretString::new(KEY_ONE.into());
    for (scope, provider) in [
        ("global", "fake"),
        ("discord:guild:x", "fake"),
        (G1, "nope"),
        (G1, "echo"),
    ] {
        let e = rt
            .set_scope_credential(scope, provider, key(), "operator")
            .await
            .unwrap_err();
        assert!(!e.to_string().contains(KEY_ONE), "{e}");
    }
    for bad in ["", "has space", "line\nbreak"] {
        assert!(
            rt.set_scope_credential(G1, "fake", SecretString::new(bad.into()), "operator")
                .await
                .is_err()
        );
    }
    assert!(rt.scope_credentials(G1).await.unwrap().is_empty());
    t.runtime.shutdown(Duration::from_millis(200)).await;
}
