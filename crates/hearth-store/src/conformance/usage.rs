//! Model-call usage ([`UsageStore`], with runs from [`RunStore`]).

use serde_json::json;

use super::fixtures::{created, step};
use crate::records::{StepKind, StepRecord, StepStatus, UsageGroup, UsageQuery};
use crate::runs::RunStore;
use crate::usage::UsageStore;

fn llm(
    run_id: &str,
    idx: u32,
    name: &str,
    status: StepStatus,
    tokens: Option<serde_json::Value>,
) -> StepRecord {
    StepRecord {
        run_id: run_id.into(),
        index: idx,
        kind: StepKind::Llm,
        name: name.into(),
        status,
        started_at: 1_700_000_000_000 + i64::from(idx),
        finished_at: Some(1_700_000_000_250 + i64::from(idx)),
        tokens,
        payload: json!({ "error": { "kind": "rate_limited" } }),
    }
}

fn tokens(i: u64, o: u64, c: u64) -> Option<serde_json::Value> {
    Some(json!({ "input_tokens": i, "output_tokens": o, "cached_tokens": c }))
}

fn all(group_by: UsageGroup) -> UsageQuery {
    UsageQuery {
        since: None,
        until: None,
        group_by,
    }
}

/// Finished model-call steps are counted once each, grouped by provider,
/// model or day; tool steps are not model calls.
pub async fn model_calls_are_grouped_for_usage<S: UsageStore + RunStore>(store: S) {
    created(&store, "run_u", "t:u").await;
    store
        .put_step(llm("run_u", 0, "a/m1", StepStatus::Failed, None))
        .await
        .unwrap();
    store
        .put_step(llm(
            "run_u",
            1,
            "a/m1",
            StepStatus::Succeeded,
            tokens(100, 10, 40),
        ))
        .await
        .unwrap();
    store
        .put_step(llm(
            "run_u",
            2,
            "b/m2",
            StepStatus::Succeeded,
            tokens(5, 1, 0),
        ))
        .await
        .unwrap();
    // Re-journaling the same step does not count it twice; a tool step is no model call.
    store
        .put_step(llm(
            "run_u",
            2,
            "b/m2",
            StepStatus::Succeeded,
            tokens(5, 1, 0),
        ))
        .await
        .unwrap();
    let mut tool = step("run_u", 3, StepStatus::Succeeded);
    tool.kind = StepKind::Tool;
    store.put_step(tool).await.unwrap();

    let rows = store.usage(&all(UsageGroup::Provider)).await.unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(
        (
            rows[0].key.as_str(),
            rows[0].calls,
            rows[0].input_tokens,
            rows[0].output_tokens,
            rows[0].cached_tokens,
            rows[0].untracked_calls
        ),
        ("a", 2, 100, 10, 40, 1)
    );
    assert_eq!(
        (rows[1].key.as_str(), rows[1].calls, rows[1].input_tokens),
        ("b", 1, 5)
    );
    let by_model = store.usage(&all(UsageGroup::Model)).await.unwrap();
    assert_eq!(
        by_model.iter().map(|r| r.key.as_str()).collect::<Vec<_>>(),
        ["a/m1", "b/m2"]
    );
    let by_day = store.usage(&all(UsageGroup::Day)).await.unwrap();
    assert_eq!(by_day.len(), 1);
    assert_eq!(by_day[0].key, "2023-11-14");
    assert_eq!(by_day[0].calls, 3);
    let later = UsageQuery {
        since: Some(1_800_000_000_000),
        until: None,
        group_by: UsageGroup::Day,
    };
    assert!(store.usage(&later).await.unwrap().is_empty());
}

/// Usage of runs kept elsewhere (incognito) counts, without a thread;
/// started steps and tool steps are skipped.
pub async fn anonymous_model_calls_count_without_a_run<S: UsageStore + RunStore>(store: S) {
    let mut tool = step("run_elsewhere", 2, StepStatus::Succeeded);
    tool.kind = StepKind::Tool;
    store
        .record_anonymous_usage(vec![
            llm(
                "run_elsewhere",
                0,
                "a/m1",
                StepStatus::Succeeded,
                tokens(7, 3, 0),
            ),
            llm("run_elsewhere", 1, "a/m1", StepStatus::Started, None),
            tool,
        ])
        .await
        .unwrap();
    let rows = store.usage(&all(UsageGroup::Model)).await.unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(
        (
            rows[0].key.as_str(),
            rows[0].calls,
            rows[0].input_tokens,
            rows[0].output_tokens
        ),
        ("a/m1", 1, 7, 3)
    );
}

/// Budgets rebuild their use from each call since a time: with its thread
/// and user, reported tokens (0 when none), oldest first.
pub async fn calls_since_lists_each_call_with_its_thread_and_user<S: UsageStore + RunStore>(
    store: S,
) {
    created(&store, "run_c", "t:c").await;
    store
        .put_step(llm(
            "run_c",
            1,
            "a/m1",
            StepStatus::Succeeded,
            tokens(100, 10, 40),
        ))
        .await
        .unwrap();
    store
        .put_step(llm("run_c", 0, "a/m1", StepStatus::Failed, None))
        .await
        .unwrap();
    let calls = store.calls_since(1_700_000_000_000).await.unwrap();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert_eq!(calls[0].at, 1_700_000_000_000, "oldest first");
    assert_eq!(calls[0].input_tokens, 0, "a failed call reported nothing");
    let c = &calls[1];
    assert_eq!(
        (
            c.model.as_str(),
            c.thread_key.as_deref(),
            c.input_tokens,
            c.output_tokens,
            c.cached_tokens
        ),
        ("a/m1", Some("t:c"), 100, 10, 40)
    );
    assert!(c.user_key.is_some(), "the run's user");
    assert_eq!(store.calls_since(1_700_000_000_001).await.unwrap().len(), 1);
}

/// The model calls journaled by a run's end count once each, with the
/// run's thread: two of one model on one day, one of them journaled during
/// the run already (not counted again), a call still started (not counted),
/// a tool step (no model call); an end that is refused counts nothing.
pub async fn a_runs_end_counts_each_of_its_model_calls_once<S: UsageStore + RunStore>(store: S) {
    created(&store, "run_e", "t:e").await;
    let failed = llm("run_e", 0, "a/m1", StepStatus::Failed, None);
    store.put_step(failed.clone()).await.unwrap();
    let mut end = super::fixtures::finish("run_e", Vec::new());
    let mut tool = step("run_e", 3, StepStatus::Succeeded);
    tool.kind = StepKind::Tool;
    end.steps = vec![
        failed,
        llm(
            "run_e",
            1,
            "a/m1",
            StepStatus::Succeeded,
            tokens(100, 10, 40),
        ),
        llm("run_e", 2, "b/m2", StepStatus::Started, None),
        tool,
    ];
    assert!(store.finish_run(end.clone()).await.unwrap());
    assert!(!store.finish_run(end).await.unwrap(), "ended already");
    let rows = store.usage(&all(UsageGroup::Model)).await.unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(
        (
            rows[0].key.as_str(),
            rows[0].calls,
            rows[0].untracked_calls,
            rows[0].input_tokens,
            rows[0].output_tokens,
            rows[0].cached_tokens
        ),
        ("a/m1", 2, 1, 100, 10, 40)
    );
    let calls = store.calls_since(0).await.unwrap();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert!(
        calls
            .iter()
            .all(|c| c.thread_key.as_deref() == Some("t:e") && c.user_key.is_some()),
        "{calls:?}"
    );
    assert_eq!(store.steps("run_e").await.unwrap().len(), 4);
}

pub async fn a_call_outside_a_run_counts_in_usage_and_budgets<S: UsageStore + RunStore>(store: S) {
    let call = |id: &str, error: Option<&str>| crate::usage::ModelCall {
        call_id: id.to_owned(),
        at: 1_700_000_000_500,
        provider: "local".to_owned(),
        model: "embed".to_owned(),
        purpose: "embedding".to_owned(),
        user_key: Some("u".to_owned()),
        thread_key: None,
        input_tokens: error.is_none().then_some(7),
        latency_ms: 3,
        error_kind: error.map(str::to_owned),
    };
    store.record_model_call(call("emb_1", None)).await.unwrap();
    // Recorded again (a retry of the write): still one call.
    store.record_model_call(call("emb_1", None)).await.unwrap();
    store
        .record_model_call(call("emb_2", Some("timeout")))
        .await
        .unwrap();
    let calls = store.calls_since(1_700_000_000_000).await.unwrap();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert_eq!(calls[0].model, "local/embed");
    assert_eq!(calls[0].user_key.as_deref(), Some("u"));
    assert_eq!(calls[0].input_tokens + calls[1].input_tokens, 7);
    let rows = store
        .usage(&UsageQuery {
            since: None,
            until: None,
            group_by: UsageGroup::Model,
        })
        .await
        .unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!((rows[0].calls, rows[0].input_tokens), (2, 7));
}

/// Days are the UTC days of the call times as SQLite reads them: the time
/// truncated to whole seconds (towards zero, so the last second before the
/// epoch is still 1970-01-01), then the day of that second. `since` is
/// inclusive and `until` exclusive.
pub async fn usage_days_are_the_utc_days_of_each_call<S: UsageStore>(store: S) {
    let ats = [
        0,
        -1,
        -999,
        -1_000,
        86_399_999,
        86_400_000,
        -86_400_000,
        -86_400_001,
        -86_401_000,
    ];
    for (i, at) in ats.into_iter().enumerate() {
        let call = crate::usage::ModelCall {
            call_id: format!("call_{i}"),
            at,
            provider: "p".to_owned(),
            model: "m".to_owned(),
            purpose: "chat".to_owned(),
            user_key: None,
            thread_key: None,
            input_tokens: Some(1),
            latency_ms: 1,
            error_kind: None,
        };
        store.record_model_call(call).await.unwrap();
    }
    let days = |since: Option<i64>, until: Option<i64>| {
        let store = &store;
        async move {
            let query = UsageQuery {
                since,
                until,
                group_by: UsageGroup::Day,
            };
            let rows = store.usage(&query).await.unwrap();
            rows.into_iter()
                .map(|r| (r.key, r.calls))
                .collect::<Vec<_>>()
        }
    };
    let want = |pairs: &[(&str, u64)]| {
        pairs
            .iter()
            .map(|(k, n)| ((*k).to_owned(), *n))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        days(None, None).await,
        want(&[
            ("1969-12-30", 1),
            ("1969-12-31", 3),
            ("1970-01-01", 4),
            ("1970-01-02", 1)
        ])
    );
    assert_eq!(
        days(Some(0), None).await,
        want(&[("1970-01-01", 2), ("1970-01-02", 1)])
    );
    assert_eq!(
        days(Some(-86_400_000), Some(0)).await,
        want(&[("1969-12-31", 2), ("1970-01-01", 2)])
    );
}

/// The daily rollup the usage queries read for whole days holds exactly
/// the sums of the stored calls, however they were recorded (a run's
/// steps, re-journaled ones, calls of runs kept elsewhere, calls outside
/// a run): every grouping over all time (whole days: the rollup alone)
/// and over a window with ragged edges (partly raw calls) equals the sums
/// of the calls themselves.
pub async fn the_daily_rollup_equals_the_sums_of_the_calls<S: UsageStore + RunStore>(store: S) {
    const DAY: i64 = 86_400_000;
    let base = 19_675 * DAY; // 2023-11-14T00:00Z
    // (at, provider/model, (input, output, cached)): None tokens are untracked.
    type Call<'a> = (i64, &'a str, Option<(u64, u64, u64)>);
    let calls: Vec<Call<'_>> = vec![
        (base + 1, "a/m1", Some((100, 10, 40))),
        (base + DAY / 2, "a/m1", Some((7, 3, 0))),
        (base + DAY / 2 + 1, "b/m2", None),
        (base + DAY + 5, "a/m1", Some((1, 1, 1))),
        (base + 2 * DAY - 1, "b/m2", Some((50, 5, 0))),
        (base + 2 * DAY, "a/m2", Some((9, 9, 9))),
        (base + 3 * DAY + 7, "a/m1", Some((2, 2, 0))),
    ];
    created(&store, "run_r", "t:r").await;
    for (i, (at, name, t)) in calls.iter().enumerate() {
        let idx = u32::try_from(i).unwrap();
        let mut s = llm(
            "run_r",
            idx,
            name,
            if t.is_some() {
                StepStatus::Succeeded
            } else {
                StepStatus::Failed
            },
            t.map(|(i, o, c)| tokens(i, o, c).unwrap()),
        );
        s.started_at = *at;
        // Odd calls belong to a run kept elsewhere; one is journaled twice.
        if i % 2 == 1 {
            s.run_id = "run_elsewhere".into();
            store.record_anonymous_usage(vec![s.clone()]).await.unwrap();
            store.record_anonymous_usage(vec![s]).await.unwrap();
        } else {
            store.put_step(s.clone()).await.unwrap();
            store.put_step(s).await.unwrap();
        }
    }
    let outside = crate::usage::ModelCall {
        call_id: "emb_r".to_owned(),
        at: base + DAY + 9,
        provider: "a".to_owned(),
        model: "m1".to_owned(),
        purpose: "embedding".to_owned(),
        user_key: None,
        thread_key: None,
        input_tokens: Some(11),
        latency_ms: 1,
        error_kind: None,
    };
    store.record_model_call(outside.clone()).await.unwrap();
    store.record_model_call(outside).await.unwrap();
    let mut every = calls.clone();
    every.push((base + DAY + 9, "a/m1", Some((11, 0, 0))));

    let day_key = |at: i64| crate::usage::utc_day(crate::usage::day_of(at));
    for (since, until) in [
        (None, None),
        (Some(base + DAY / 2), Some(base + 3 * DAY)),
        (Some(base + DAY), Some(base + 2 * DAY + 1)),
        (Some(base + 1), Some(base + DAY / 2 + 1)),
    ] {
        for group_by in [UsageGroup::Provider, UsageGroup::Model, UsageGroup::Day] {
            // (key, model) -> (calls, input, output, cached, untracked)
            let mut want = std::collections::BTreeMap::<(String, String), [u64; 5]>::new();
            for (at, name, t) in &every {
                if since.is_some_and(|s| *at < s) || until.is_some_and(|u| *at >= u) {
                    continue;
                }
                let key = match group_by {
                    UsageGroup::Provider => name.split('/').next().unwrap().to_owned(),
                    UsageGroup::Model => (*name).to_owned(),
                    UsageGroup::Day => day_key(*at),
                };
                let e = want.entry((key, (*name).to_owned())).or_default();
                let (i, o, c) = t.unwrap_or((0, 0, 0));
                e[0] += 1;
                e[1] += i;
                e[2] += o;
                e[3] += c;
                e[4] += u64::from(t.is_none());
            }
            let query = UsageQuery {
                since,
                until,
                group_by,
            };
            let rows = store.usage(&query).await.unwrap();
            let mut got = std::collections::BTreeMap::new();
            for r in &rows {
                for m in &r.by_model {
                    got.insert(
                        (r.key.clone(), m.model.clone()),
                        [
                            m.calls,
                            m.input_tokens,
                            m.output_tokens,
                            m.cached_tokens,
                            m.untracked_calls,
                        ],
                    );
                }
            }
            assert_eq!(got, want, "{since:?}..{until:?} by {group_by:?}");
        }
    }
}
