use std::collections::BTreeMap;

use super::*;

fn pool(name: &str, kind: PoolKind, limit: f64, scope: Scope, models: &[&str]) -> PoolSpec {
    PoolSpec {
        name: name.into(),
        kind,
        limit,
        window: Window::Day,
        scope,
        models: models.iter().map(|m| (*m).to_owned()).collect(),
    }
}

fn budget(pools: Vec<PoolSpec>) -> Arc<Budget> {
    let mut prices = BTreeMap::new();
    prices.insert(
        "cheap".to_owned(),
        Price {
            input: 1.0,
            output: 2.0,
            cached: None,
            cache_write: None,
            reasoning_apart: false,
        },
    );
    let free = FreeModels {
        providers: ["local".to_owned()].into(),
        models: ["gratis".to_owned()].into(),
    };
    Arc::new(Budget::new(pools, PriceTable::new(prices), free, 1000))
}

const ALICE: Payer<'static> = Payer {
    user_key: "api:user:alice",
    thread_key: "api:a",
};
const BOB: Payer<'static> = Payer {
    user_key: "api:user:bob",
    thread_key: "api:b",
};

fn est(input: u64) -> Estimate {
    Estimate {
        input_tokens: input,
        output_tokens: 1000,
    }
}

fn tokens(input: u64, output: u64) -> Tokens {
    Tokens {
        input,
        output,
        ..Tokens::default()
    }
}

#[test]
fn reserve_holds_and_settle_counts_the_real_use() {
    let b = budget(vec![pool(
        "t",
        PoolKind::Tokens,
        5000.0,
        Scope::Global,
        &["*"],
    )]);
    let r = b.reserve_here("x/cheap", ALICE, est(1000)).unwrap();
    let s = &b.status()[0];
    assert_eq!((s.used, s.reserved), (0.0, 2000.0));
    r.settle_here(Some(tokens(900, 100)));
    let s = &b.status()[0];
    assert_eq!((s.used, s.reserved), (1000.0, 0.0));
}

#[test]
fn refuses_when_used_plus_reserved_plus_estimate_passes_the_limit() {
    let b = budget(vec![pool(
        "t",
        PoolKind::Tokens,
        5000.0,
        Scope::Global,
        &["*"],
    )]);
    let first = b.reserve_here("x/cheap", ALICE, est(1000)).unwrap();
    let second = b.reserve_here("x/cheap", ALICE, est(1000)).unwrap();
    let err = b.reserve_here("x/cheap", ALICE, est(1000)).err().unwrap();
    assert_eq!(
        (err.used, err.reserved, err.estimate, err.limit),
        (0.0, 4000.0, 2000.0, 5000.0)
    );
    let text = err.to_string();
    for part in [
        "\"t\"",
        "0 tokens used of 5000 tokens",
        "4000 tokens held",
        "resets at",
    ] {
        assert!(text.contains(part), "{part}: {text}");
    }
    drop(first);
    assert_eq!(
        b.status()[0].reserved,
        2000.0,
        "a dropped reservation gives up its hold (and is charged instead)"
    );
    let third = b.reserve_here("x/cheap", ALICE, est(1000)).unwrap();
    second.settle_here(None);
    third.settle_here(None);
    assert_eq!(b.status()[0].reserved, 0.0, "nothing leaks");
}

#[test]
fn concurrent_reservations_never_overshoot() {
    let b = budget(vec![pool(
        "r",
        PoolKind::Requests,
        10.0,
        Scope::Global,
        &["*"],
    )]);
    let granted: usize = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|_| {
                s.spawn(|| {
                    let mut n = 0;
                    for _ in 0..10 {
                        if let Ok(r) = b.reserve_here("x/cheap", ALICE, est(1)) {
                            n += 1;
                            r.settle_here(None);
                        }
                    }
                    n
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    assert_eq!(granted, 10);
    assert_eq!(b.status()[0].used, 10.0);
}

#[test]
fn cost_uses_the_price_and_unknown_models_cost_the_most_expensive() {
    let b = budget(vec![pool(
        "usd",
        PoolKind::CostUsd,
        1.0,
        Scope::Global,
        &["*"],
    )]);
    let r = b.reserve_here("x/cheap", ALICE, est(1000)).unwrap();
    let held = b.status()[0].reserved;
    assert!(
        (held - (1000.0 * 1.0 + 1000.0 * 2.0) / 1e6).abs() < 1e-12,
        "{held}"
    );
    r.settle_here(Some(tokens(1000, 500)));
    let used = b.status()[0].used;
    assert!((used - 0.002).abs() < 1e-12, "{used}");
    // Unknown: at the top built-in prices (3 input, 15 output per million).
    let r = b.reserve_here("x/mystery", ALICE, est(1000)).unwrap();
    let held = b.status()[0].reserved;
    assert!(
        (held - (1000.0 * 3.0 + 1000.0 * 15.0) / 1e6).abs() < 1e-12,
        "{held}"
    );
    drop(r);
}

#[test]
fn free_models_never_draw_from_cost_pools() {
    let b = budget(vec![
        pool("usd", PoolKind::CostUsd, 1e-9, Scope::Global, &["*"]),
        pool("calls", PoolKind::Requests, 5.0, Scope::Global, &["*"]),
    ]);
    b.reserve_here("local/llama3.2", ALICE, est(1000))
        .unwrap()
        .settle_here(Some(tokens(10, 10)));
    b.reserve_here("ollama/gratis", ALICE, est(1000))
        .unwrap()
        .settle_here(None);
    assert!(
        b.reserve_here("x/cheap", ALICE, est(1000)).is_err(),
        "a priced model is limited"
    );
    let s = b.status();
    assert_eq!(
        (s[0].used, s[1].used),
        (0.0, 2.0),
        "free calls still count as requests"
    );
}

#[test]
fn globs_choose_the_models_a_pool_limits() {
    let b = budget(vec![pool(
        "oa",
        PoolKind::Requests,
        1.0,
        Scope::Global,
        &["openai/*", "claude/*-4?"],
    )]);
    b.reserve_here("openai/gpt-5", ALICE, est(1))
        .unwrap()
        .settle_here(None);
    assert!(b.reserve_here("openai/gpt-5-mini", ALICE, est(1)).is_err());
    assert!(b.reserve_here("claude/sonnet-45", ALICE, est(1)).is_err());
    assert!(
        b.reserve_here("claude/sonnet-4", ALICE, est(1)).is_ok(),
        "? is one character"
    );
    assert!(
        b.reserve_here("local/openai/x", ALICE, est(1)).is_ok(),
        "globs match the whole reference"
    );
    assert_eq!(b.scarcity("openai/gpt-5", ALICE), 1.0);
    assert_eq!(b.scarcity("local/x", ALICE), 0.0);
}

#[test]
fn scoped_pools_keep_each_subject_apart() {
    let b = budget(vec![pool(
        "per_user",
        PoolKind::Requests,
        1.0,
        Scope::User,
        &["*"],
    )]);
    assert_eq!(b.status()[0].subject, None, "an unused pool still shows");
    b.reserve_here("x/cheap", ALICE, est(1))
        .unwrap()
        .settle_here(None);
    let err = b.reserve_here("x/cheap", ALICE, est(1)).err().unwrap();
    assert_eq!(err.subject.as_deref(), Some("api:user:alice"));
    assert!(err.to_string().contains("(for api:user:alice)"), "{err}");
    assert!(b.affordable("x/cheap", BOB, est(1)).is_ok());
    b.reserve_here("x/cheap", BOB, est(1))
        .unwrap()
        .settle_here(None);
    let subjects: Vec<_> = b.status().into_iter().map(|s| s.subject).collect();
    assert_eq!(
        subjects,
        [
            Some("api:user:alice".to_owned()),
            Some("api:user:bob".to_owned())
        ]
    );
    assert_eq!(b.scarcity("x/cheap", ALICE), 1.0);
}

#[test]
fn restore_counts_stored_calls_in_their_windows() {
    let mut p = pool("t", PoolKind::Tokens, 1e6, Scope::Thread, &["*"]);
    p.window = Window::Rolling24h;
    let b = budget(vec![
        p,
        pool("g", PoolKind::Requests, 100.0, Scope::Global, &["*"]),
    ]);
    let now = now_ms();
    let call = |at: Timestamp, thread: Option<&str>| PastCall {
        at,
        model: "x/cheap".into(),
        thread_key: thread.map(str::to_owned),
        user_key: None,
        tokens: tokens(100, 20),
    };
    b.restore([
        call(now - 1000, Some("api:a")),
        call(now - 25 * 3_600_000, Some("api:a")),
        call(now - 2000, None),
    ]);
    let s = b.status();
    let t = s.iter().find(|s| s.name == "t").unwrap();
    assert_eq!(
        (t.subject.as_deref(), t.used),
        (Some("api:a"), 120.0),
        "older than 24 h is gone"
    );
    let g = s.iter().find(|s| s.name == "g").unwrap();
    assert!(
        g.used >= 2.0,
        "incognito calls count in global pools: {g:?}"
    );
    assert_eq!(b.restore_since(now), Some(now - 86_400_000));
}

#[test]
fn crossing_80_and_100_percent_is_published_once() {
    let b = budget(vec![pool(
        "r",
        PoolKind::Requests,
        5.0,
        Scope::Global,
        &["*"],
    )]);
    let mut rx = b.subscribe();
    for _ in 0..5 {
        b.reserve_here("x/cheap", ALICE, est(1))
            .unwrap()
            .settle_here(None);
    }
    let first = rx.try_recv().unwrap();
    assert_eq!(
        (first.pool.as_str(), first.percent, first.used),
        ("r", 80, 4.0)
    );
    assert_eq!(rx.try_recv().unwrap().percent, 100);
    assert!(rx.try_recv().is_err(), "once per window");
}

#[test]
fn the_estimate_counts_the_text_and_the_answer() {
    let b = budget(Vec::new());
    let request = ChatRequest {
        model: "m".into(),
        system: "x".repeat(400),
        messages: vec![hearth_core::Message::text(
            hearth_core::Role::User,
            "y".repeat(384),
        )],
        tools: Default::default(),
        thinking: hearth_core::ThinkingLevel::Off,
        max_output_tokens: None,
    };
    assert_eq!(
        b.estimate(&request, 0),
        Estimate {
            input_tokens: 200,
            output_tokens: 1000
        }
    );
}

#[test]
fn a_dropped_reservation_is_charged_not_released() {
    // A call cut off mid-stream (the run was cancelled) was sent: the
    // provider bills it, so the pools count it.
    let b = budget(vec![
        pool("calls", PoolKind::Requests, 2.0, Scope::User, &["*"]),
        pool("tok", PoolKind::Tokens, 1e6, Scope::Global, &["*"]),
        pool("usd", PoolKind::CostUsd, 1.0, Scope::Global, &["*"]),
    ]);
    for _ in 0..2 {
        let r = b.reserve_here("x/cheap", ALICE, est(1000)).unwrap();
        drop(r);
    }
    let s = b.status();
    assert_eq!((s[0].used, s[0].reserved), (2.0, 0.0), "{s:?}");
    assert_eq!(
        (s[1].used, s[1].reserved),
        (2000.0, 0.0),
        "the prompt estimate of each call: {s:?}"
    );
    assert!((s[2].used - 2.0 * 1000.0 / 1e6).abs() < 1e-12, "{s:?}");
    let refused = b.reserve_here("x/cheap", ALICE, est(1000)).err().unwrap();
    assert_eq!(refused.pool, "calls");
}

#[test]
fn a_call_with_no_reported_usage_is_charged_its_estimate() {
    // A failed attempt, or a stream that ended without a usage chunk.
    let b = budget(vec![pool(
        "tok",
        PoolKind::Tokens,
        1e6,
        Scope::Global,
        &["*"],
    )]);
    b.reserve_here("x/cheap", ALICE, est(1000))
        .unwrap()
        .settle_here(None);
    assert_eq!(b.status()[0].used, 1000.0);
}

#[test]
fn a_call_cut_off_mid_stream_is_charged_what_streamed() {
    let b = budget(vec![pool(
        "tok",
        PoolKind::Tokens,
        1e6,
        Scope::Global,
        &["*"],
    )]);
    let r = b.reserve_here("x/cheap", ALICE, est(1000)).unwrap();
    r.streamed(300);
    r.streamed(100);
    assert_eq!(r.unreported(), tokens(1000, 100));
    drop(r);
    assert_eq!(b.status()[0].used, 1100.0);
    // Reported usage wins over the estimate.
    let r = b.reserve_here("x/cheap", ALICE, est(1000)).unwrap();
    r.streamed(4000);
    r.settle_here(Some(tokens(10, 5)));
    assert_eq!(b.status()[0].used, 1115.0);
}
