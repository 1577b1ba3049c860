//! The model router in the real binary: route steps in traces, ratings over
//! HTTP and the CLI, posteriors that survive SIGKILL.

use hearth_testkit::FakeOpenAi;
use serde_json::{Value, json};

use crate::harness::{Hearth, command, fake_config};

fn config(base_url: &str) -> String {
    format!(
        "{}\n[router]\nstrategy = \"learn\"\nseed = 3\n\
         [[router.arms]]\nmodel = \"fake/fake-model\"\n\
         [[router.arms]]\nmodel = \"fake/other-model\"\ntasks = [\"writing\", \"chat\"]\n",
        fake_config(base_url)
    )
}

/// The (alpha, beta, runs) of `model` on `task` in `GET /v1/router`.
pub(crate) fn posterior(router: &Value, model: &str, task: &str) -> (f64, f64, u64) {
    let arm = router["arms"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["model"] == model && a["task"] == task)
        .unwrap_or_else(|| panic!("no {model} {task} in {router}"));
    (
        arm["alpha"].as_f64().unwrap(),
        arm["beta"].as_f64().unwrap(),
        arm["runs"].as_u64().unwrap(),
    )
}

async fn feedback(h: &Hearth, run_id: &str, body: Value) -> (u16, Value) {
    h.send(
        reqwest::Method::POST,
        &format!("/v1/runs/{run_id}/feedback"),
        body,
    )
    .await
}

#[tokio::test]
async fn routed_runs_show_their_route_and_ratings_teach_the_router() {
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start(dir.path(), Some(&config(&fake.base_url()))).await;

    let run = h.ask("api:r", "write a poem about the sea").await;
    assert_eq!(run["status"], "succeeded", "{run}");
    let run_id = run["run_id"].as_str().unwrap();
    let model = run["model"].as_str().unwrap().to_owned();

    let (s, trace) = h.get(&format!("/v1/runs/{run_id}/trace")).await;
    assert_eq!(s, 200, "{trace}");
    let route = &trace["steps"][0];
    assert_eq!(route["kind"], "route", "{trace}");
    assert_eq!(route["detail"]["task"], "writing");
    assert_eq!(route["detail"]["chosen"], model.as_str());
    assert_eq!(route["detail"]["candidates"].as_array().unwrap().len(), 2);
    assert!(route["detail"]["reason"].is_string());
    assert_eq!(trace["steps"][1]["kind"], "llm");
    assert_eq!(trace["steps"][1]["detail"], Value::Null);

    let (s, router) = h.get("/v1/router").await;
    assert_eq!(s, 200, "{router}");
    assert_eq!(router["strategy"], "learn");
    let (alpha, beta, runs) = posterior(&router, &model, "writing");
    assert_eq!((alpha, beta, runs), (2.0, 1.0, 1), "one routed success");

    let (s, v) = feedback(
        &h,
        run_id,
        json!({ "rating": "up", "user_key": "api:user:a" }),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(
        v,
        json!({ "run_id": run_id, "rating": "up", "counted": true })
    );
    let (_, router) = h.get("/v1/router").await;
    assert_eq!(posterior(&router, &model, "writing"), (3.0, 1.0, 1));

    // The CLI replaces the rating.
    let said = crate::harness::succeeds(
        command(dir.path())
            .env("HEARTH_URL", &h.url)
            .args(["feedback", run_id, "down"]),
    )
    .await;
    assert!(said.contains("rated"), "{said}");
    let (_, router) = h.get("/v1/router").await;
    let after = posterior(&router, &model, "writing");
    assert_eq!(after, (2.0, 2.0, 1));

    let (s, v) = feedback(&h, "run_missing", json!({ "rating": "up" })).await;
    assert_eq!((s, v["error"]["code"].as_str()), (404, Some("not_found")));
    let (s, v) = feedback(&h, run_id, json!({ "rating": "meh" })).await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (400, Some("invalid_request"))
    );
    let (s, _) = feedback(&h, run_id, json!({ "rating": "up", "stars": 5 })).await;
    assert_eq!(s, 400);

    // What was learnt is committed: a killed server comes back with it.
    h.kill().await;
    let h = Hearth::start(dir.path(), None).await;
    let (_, again) = h.get("/v1/router").await;
    assert_eq!(posterior(&again, &model, "writing"), after);
    assert_eq!(again, router);
}

#[tokio::test]
async fn the_default_fixed_strategy_does_not_route() {
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start(dir.path(), Some(&fake_config(&fake.base_url()))).await;
    let run = h.ask("api:f", "write a poem").await;
    let run_id = run["run_id"].as_str().unwrap();
    assert_eq!(run["model"], "fake/fake-model");
    let (_, trace) = h.get(&format!("/v1/runs/{run_id}/trace")).await;
    assert_eq!(trace["steps"][0]["kind"], "llm", "{trace}");
    let (_, router) = h.get("/v1/router").await;
    assert_eq!(router["strategy"], "fixed");
    let (s, v) = feedback(&h, run_id, json!({ "rating": "up" })).await;
    assert_eq!((s, &v["counted"]), (200, &json!(false)), "{v}");
}
