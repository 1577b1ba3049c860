//! One run at a time per thread, in arrival order; threads overlap.

use std::time::Duration;

use hearth_testkit::FakeOpenAi;
use serde_json::json;

use crate::harness::{Hearth, fake_config, user_texts};

#[tokio::test]
async fn messages_on_one_thread_finish_in_arrival_order() {
    let fake = FakeOpenAi::start().await;
    fake.set_default_delay(Duration::from_millis(20));
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start(dir.path(), Some(&fake_config(&fake.base_url()))).await;
    let mut tasks = Vec::new();
    for i in 0..10 {
        let http = h.http.clone();
        let url = h.at("/v1/messages");
        tasks.push(tokio::spawn(async move {
            let r = http
                .post(url)
                .json(&json!({ "text": format!("m{i}"), "thread_key": "api:order" }))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status().as_u16(), 202);
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    // Newest first; reversed, this is arrival (commit) order.
    let (_, runs) = h.get("/v1/runs?thread_key=api:order").await;
    let mut runs = runs["runs"].as_array().unwrap().clone();
    runs.reverse();
    assert_eq!(runs.len(), 10);
    let mut arrival = Vec::new();
    for r in &runs {
        let done = h.wait_run(r["run_id"].as_str().unwrap()).await;
        assert_eq!(done["status"], "succeeded");
        arrival.push(
            done["output"]["text"]
                .as_str()
                .unwrap()
                .trim_start_matches("echo: ")
                .to_owned(),
        );
    }
    // The provider saw them one at a time, in arrival order, each with the
    // whole history of the ones before: so none overlapped.
    let reqs = fake.requests();
    assert_eq!(reqs.len(), 10);
    for (i, req) in reqs.iter().enumerate() {
        assert_eq!(user_texts(req), arrival[..=i].to_vec(), "request {i}");
    }
}

#[tokio::test]
async fn messages_on_different_threads_overlap() {
    let fake = FakeOpenAi::start().await;
    // Serial handling would need 10 x 2 s before the tenth request arrives.
    fake.set_default_delay(Duration::from_secs(2));
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start(dir.path(), Some(&fake_config(&fake.base_url()))).await;
    let mut ids = Vec::new();
    for i in 0..10 {
        let (s, v) = h
            .post(json!({ "text": format!("t{i}"), "thread_key": format!("api:par{i}") }))
            .await;
        assert_eq!(s, 202);
        ids.push(v["run_id"].as_str().unwrap().to_owned());
    }
    tokio::time::timeout(Duration::from_secs(10), fake.wait_for_requests(10))
        .await
        .expect("all ten threads should be in flight at once");
    for id in ids {
        assert_eq!(h.wait_run(&id).await["status"], "succeeded");
    }
}
