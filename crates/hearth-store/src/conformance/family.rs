//! Sub-agents: a run records the run whose `delegate` call started it, and
//! a parent lists its children by that column, whatever their keys.

use crate::records::{CreateRunOutcome, NewRun};
use crate::runs::RunStore;

use super::fixtures::{new_run, strings};

/// A child of `parent` on `thread`, with the given idempotency key.
fn child(id: &str, thread: &str, parent: &str, key: Option<&str>) -> NewRun {
    NewRun {
        source: "delegate".to_owned(),
        parent_run_id: Some(parent.to_owned()),
        ..new_run(id, thread, key)
    }
}

/// `child_runs` lists exactly the runs stored with the parent's id, oldest
/// first, also when stored claimed, also when their key does not name the
/// parent; `get_run` and `list_runs` return the column.
pub async fn children_are_listed_by_their_parent_run_id<S: RunStore>(store: S) {
    super::fixtures::created(&store, "run_p", "t:1").await;
    super::fixtures::created(&store, "run_q", "t:2").await;
    let first = child(
        "run_c1",
        "t:1/sub/1.1",
        "run_p",
        Some("delegate:run_p:call_1"),
    );
    assert!(matches!(
        store.create_run(first).await.unwrap(),
        CreateRunOutcome::Created(r) if r.parent_run_id.as_deref() == Some("run_p")
    ));
    // A key of any shape: the column, not the key, names the parent.
    let second = child("run_c2", "t:1/sub/1.2", "run_p", Some("other-shape"));
    store
        .create_claimed_run(second, "node-a", i64::MAX, "fake/m", None)
        .await
        .unwrap();
    store
        .create_run(child("run_c3", "t:2/sub/2.1", "run_q", None))
        .await
        .unwrap();
    let ids = |runs: Vec<crate::records::RunRecord>| {
        runs.into_iter().map(|r| r.run_id).collect::<Vec<_>>()
    };
    assert_eq!(
        ids(store.child_runs("run_p").await.unwrap()),
        ["run_c1", "run_c2"]
    );
    assert_eq!(ids(store.child_runs("run_q").await.unwrap()), ["run_c3"]);
    assert!(store.child_runs("run_c1").await.unwrap().is_empty());
    assert!(store.child_runs("run_unknown").await.unwrap().is_empty());
    let got = store.get_run("run_c2").await.unwrap().unwrap();
    assert_eq!(got.parent_run_id.as_deref(), Some("run_p"));
    let parent = store.get_run("run_p").await.unwrap().unwrap();
    assert_eq!(parent.parent_run_id, None);
    // The run with its children, as its envelope reads them.
    let (run, children) = store.run_with_children("run_p").await.unwrap().unwrap();
    assert_eq!(
        (run.run_id.as_str(), ids(children)),
        ("run_p", strings(&["run_c1", "run_c2"]))
    );
    let (run, children) = store.run_with_children("run_c1").await.unwrap().unwrap();
    assert_eq!((run.run_id.as_str(), children.len()), ("run_c1", 0));
    assert!(
        store
            .run_with_children("run_unknown")
            .await
            .unwrap()
            .is_none()
    );
}
