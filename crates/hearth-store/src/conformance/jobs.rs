//! Scheduled jobs ([`JobStore`]).

use crate::jobs::{CatchUp, JobFiring, JobRecord, JobStore, NextFiring};

fn job(id: &str, created_at: i64) -> JobRecord {
    JobRecord {
        id: id.into(),
        name: format!("name of {id}"),
        schedule: "*/5 * * * *".into(),
        timezone: "Europe/Paris".into(),
        thread_key: "telegram:chat:42".into(),
        user_key: "telegram:user:7".into(),
        text: "the daily digest".into(),
        catch_up: CatchUp::All,
        next_run_at: Some(created_at + 300_000),
        last_run_at: None,
        last_run_id: None,
        enabled: true,
        created_at,
    }
}

pub async fn jobs_round_trip_and_list_in_creation_order<S: JobStore>(store: S) {
    let b = job("job_b", 2000);
    let a = JobRecord {
        catch_up: CatchUp::None,
        ..job("job_a", 1000)
    };
    store.create_job(b.clone()).await.unwrap();
    store.create_job(a.clone()).await.unwrap();
    assert_eq!(store.get_job("job_b").await.unwrap(), Some(b.clone()));
    assert_eq!(store.get_job("job_missing").await.unwrap(), None);
    assert_eq!(store.list_jobs().await.unwrap(), vec![a, b.clone()]);
    assert!(
        store.create_job(b).await.is_err(),
        "a second job with the same id must be refused"
    );
}

/// A job whose text holds a NUL is stored: as given, or with U+FFFD for it
/// where the store cannot hold one (PostgreSQL's `text`, which refused it).
pub async fn a_job_whose_text_holds_a_nul_is_stored<S: JobStore>(store: S) {
    let given = JobRecord {
        text: "digest \0".into(),
        ..job("job_nul", 1000)
    };
    store.create_job(given).await.unwrap();
    let stored = store.get_job("job_nul").await.unwrap().unwrap();
    assert!(
        ["digest \0", "digest \u{FFFD}"].contains(&stored.text.as_str()),
        "{stored:?}"
    );
}

pub async fn firings_move_the_job_forward_only<S: JobStore>(store: S) {
    store.create_job(job("job_1", 1000)).await.unwrap();
    let fired = JobFiring {
        job_id: "job_1".into(),
        fired: Some((301_000, "run_2".into())),
        next: Some(NextFiring {
            next_run_at: Some(601_000),
            enabled: true,
        }),
    };
    assert!(store.record_job_firing(fired).await.unwrap());
    // A catch-up firing of an older instant, recorded late, does not move
    // the last run back.
    let older = JobFiring {
        job_id: "job_1".into(),
        fired: Some((1_000, "run_1".into())),
        next: Some(NextFiring {
            next_run_at: None,
            enabled: false,
        }),
    };
    assert!(store.record_job_firing(older).await.unwrap());
    let stored = store.get_job("job_1").await.unwrap().unwrap();
    assert_eq!(stored.last_run_at, Some(301_000));
    assert_eq!(stored.last_run_id.as_deref(), Some("run_2"));
    assert_eq!(stored.next_run_at, None);
    assert!(!stored.enabled);

    // A firing by hand records its run and leaves the schedule alone.
    let by_hand = JobFiring {
        job_id: "job_1".into(),
        fired: Some((400_000, "run_3".into())),
        next: None,
    };
    assert!(store.record_job_firing(by_hand).await.unwrap());
    let stored = store.get_job("job_1").await.unwrap().unwrap();
    assert_eq!(stored.last_run_id.as_deref(), Some("run_3"));
    assert_eq!((stored.next_run_at, stored.enabled), (None, false));

    for next in [
        None,
        Some(NextFiring {
            next_run_at: None,
            enabled: false,
        }),
    ] {
        let gone = JobFiring {
            job_id: "job_missing".into(),
            fired: None,
            next,
        };
        assert!(!store.record_job_firing(gone).await.unwrap());
    }
}

pub async fn delete_returns_the_job_once<S: JobStore>(store: S) {
    let j = job("job_1", 1000);
    store.create_job(j.clone()).await.unwrap();
    assert_eq!(store.delete_job("job_1").await.unwrap(), Some(j));
    assert_eq!(store.delete_job("job_1").await.unwrap(), None);
    assert_eq!(store.get_job("job_1").await.unwrap(), None);
    assert!(store.list_jobs().await.unwrap().is_empty());
}

/// Firings of one job recorded on several replicas at once (the ticker on
/// one, a firing by hand on another) leave the latest instant's run as the
/// last run, whatever order they land in.
pub async fn concurrent_firings_leave_the_latest_run<S: JobStore>(store: S) {
    store.create_job(job("job_1", 1000)).await.unwrap();
    let store = std::sync::Arc::new(store);
    let mut tasks = tokio::task::JoinSet::new();
    // Instants out of order, so that late older ones race newer ones.
    for i in [7_i64, 3, 15, 0, 11, 4, 9, 1, 14, 6, 2, 13, 8, 5, 12, 10] {
        let store = std::sync::Arc::clone(&store);
        tasks.spawn(async move {
            store
                .record_job_firing(JobFiring {
                    job_id: "job_1".into(),
                    fired: Some((1_000 + i, format!("run_{i}"))),
                    next: None,
                })
                .await
                .unwrap()
        });
    }
    while let Some(done) = tasks.join_next().await {
        assert!(done.unwrap());
    }
    let stored = store.get_job("job_1").await.unwrap().unwrap();
    assert_eq!(stored.last_run_at, Some(1_015));
    assert_eq!(stored.last_run_id.as_deref(), Some("run_15"));
    // A firing by hand left the schedule as it was.
    assert_eq!(stored.next_run_at, Some(301_000));
    assert!(stored.enabled);
}
