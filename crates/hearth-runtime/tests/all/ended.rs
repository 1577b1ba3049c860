//! A run this replica ended on PostgreSQL: its end's statement gave back
//! the run as stored, and a `wait` answers with it instead of reading the
//! run again (built with `--features postgres`; skipped without
//! `HEARTH_TEST_POSTGRES_URL`).

use std::time::Duration;

use hearth_runtime::WaitOutcome;
use hearth_store::postgres::testing::{fresh_database_url, set_accepting};
use hearth_testkit::{FakeOpenAi, Reply};

use crate::budget_shared::{replica, run};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_on_a_run_ended_here_reads_nothing_and_answers_what_is_stored() {
    let Some(url) = fresh_database_url().await else {
        return;
    };
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::text("the answer"));
    let (rt, _home) = replica(&url, &fake, "").await;
    let ended = run(&rt, "t:ended").await;
    // With the database unreachable, only what the end gave back can answer.
    set_accepting(&url, false).await;
    let again = rt.wait(&ended.run_id, Duration::ZERO).await;
    set_accepting(&url, true).await;
    let again = match again {
        Ok(WaitOutcome::Finished(env)) => env,
        other => panic!("a wait on a run ended here read the database: {other:?}"),
    };
    let stored = rt.get_run(&ended.run_id).await.unwrap();
    let json = |env| serde_json::to_string(&env).unwrap();
    assert_eq!(json(again), json(stored.clone()));
    assert_eq!(json(ended), json(stored));
}
