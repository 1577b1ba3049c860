//! A run's end on PostgreSQL gives back the run as it stored it, so the
//! replica that ended it answers a `wait` without reading it again: the
//! record must be the one a later read finds, on the end of one statement
//! and on the transaction an end with follow-ups takes.

use hearth_core::{Message, Role, RunStatus};
use hearth_store::conformance::fixtures::{finish, new_run};
use hearth_store::postgres::testing::{TEST_URL_VAR, fresh_database_url};
use hearth_store::prelude::*;
use hearth_store::{Finished, PostgresStore};

#[tokio::test]
async fn a_run_end_gives_back_the_run_as_a_later_read_finds_it() {
    let Some(url) = fresh_database_url().await else {
        return;
    };
    let store = PostgresStore::connect(&url, TEST_URL_VAR, 2).await.unwrap();
    for (id, follow_up) in [("run_one_statement", false), ("run_with_follow_up", true)] {
        store
            .create_claimed_run(new_run(id, id, None), "node-a", 99, "p/m", Some("ask"))
            .await
            .unwrap();
        let mut end = finish(
            id,
            vec![
                Message::text(Role::User, "hi"),
                Message::text(Role::Assistant, "answer"),
            ],
        );
        end.model = Some("p/other".into());
        if follow_up {
            // One statement cannot take a follow-up's thread lock: this end
            // takes the transaction of one statement per write.
            end.follow_ups = vec![new_run("run_after", id, None)];
        }
        let Finished {
            ended,
            next_queued,
            run,
        } = store.finish_run_returning(end.clone()).await.unwrap();
        assert!(ended, "{id}");
        assert_eq!(next_queued.is_some(), !follow_up, "{id}");
        let stored = store.get_run(id).await.unwrap().unwrap();
        assert_eq!(run.as_ref(), Some(&stored), "{id}");
        assert_eq!(stored.status, RunStatus::Succeeded);
        assert_eq!(stored.model.as_deref(), Some("p/other"));
        assert_eq!(stored.lease_owner, None);
        // An end of a run that ended already writes and gives back nothing.
        assert_eq!(
            store.finish_run_returning(end).await.unwrap(),
            Finished {
                ended: false,
                next_queued: None,
                run: None
            },
            "{id}"
        );
    }
}
