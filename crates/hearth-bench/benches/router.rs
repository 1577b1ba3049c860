//! The router's work per run: classify the text and choose an arm.
//!
//! What is timed is `Router::route`, the call the runtime makes for every
//! routed run: the keyword classifier over the message, the candidate filter
//! (capabilities, locality, context, budget pools) and, for `learn`, one Beta
//! draw per candidate with cost and scarcity. Eight arms with counts from
//! earlier runs; messages of the usual lengths and a 20 KB paste. Target
//! (issue 10): under 50 µs per run. Run with
//! `cargo bench -p hearth-bench --bench router`.

#![expect(
    clippy::unwrap_used,
    reason = "a benchmark unwraps what it set up; a failure there is a broken benchmark"
)]

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use hearth_agent::router::{
    Arm, ArmPrice, Estimate, NoPools, Pools, RouteRequest, Router, RouterSettings, Strategy,
    TaskClass,
};

/// Pools with something to say: every arm draws from one pool, half full.
struct HalfFull;

impl Pools for HalfFull {
    fn affordable(&self, _: &str, _: &str, _: &str, _: &Estimate) -> bool {
        true
    }

    fn scarcity(&self, _: &str, _: &str, _: &str) -> f64 {
        0.5
    }
}

fn router(strategy: Strategy, pools: Arc<dyn Pools>) -> Router {
    let arms = (0..8)
        .map(|i| Arm {
            model: format!("provider{}/model-{i}", i % 3),
            tools: i % 4 != 3,
            thinking: i % 2 == 0,
            local: i == 0,
            context_window: Some(128_000),
            price: (i != 5).then_some(ArmPrice {
                input: 0.5 * f64::from(i + 1),
                output: 2.0 * f64::from(i + 1),
            }),
            tasks: if i == 7 {
                vec![TaskClass::Code]
            } else {
                Vec::new()
            },
            prefer_local: i == 0,
            quality: [Some(0.7); 7],
        })
        .collect();
    let r = Router::new(
        RouterSettings {
            strategy,
            seed: Some(1),
            cost_weight: 0.1,
            scarcity_weight: 0.5,
        },
        arms,
        pools,
    );
    for i in 0..8 {
        for t in TaskClass::ALL {
            r.observe(
                &format!("provider{}/model-{i}", i % 3),
                t.as_str(),
                40 + i,
                10,
                50,
            );
        }
    }
    r
}

fn bench(c: &mut Criterion) {
    let paste = "The committee met on Tuesday and went through the budget. ".repeat(350);
    let texts = [
        ("chat", "hi there, how are you doing today"),
        (
            "code",
            "Can you write a Python function that parses this log line and returns the timestamp?",
        ),
        ("paste_20kb", paste.as_str()),
    ];
    let mut group = c.benchmark_group("route");
    for (strategy, name) in [(Strategy::Learn, "learn"), (Strategy::Cheapest, "cheapest")] {
        let r = router(strategy, Arc::new(HalfFull));
        for (label, text) in &texts {
            let req = RouteRequest {
                text,
                user: "telegram:user:1",
                thread: "telegram:chat:1",
                needs_tools: true,
                needs_thinking: false,
                local_only: false,
                estimate: Estimate {
                    input_tokens: text.len() as u64 / 4 + 1,
                    output_tokens: 4096,
                },
            };
            group.bench_function(format!("{name}/{label}"), |b| {
                b.iter(|| black_box(r.route(black_box(&req)).unwrap()))
            });
        }
    }
    group.bench_function("classify_only/code", |b| {
        b.iter(|| black_box(hearth_agent::router::classify(black_box(texts[1].1))))
    });
    // No pools at all (the default before budgets): the common case.
    let r = router(Strategy::Learn, Arc::new(NoPools));
    let req = RouteRequest {
        text: texts[0].1,
        user: "u",
        thread: "t",
        needs_tools: true,
        needs_thinking: false,
        local_only: false,
        estimate: Estimate {
            input_tokens: 10,
            output_tokens: 4096,
        },
    };
    group.bench_function("learn_no_pools/chat", |b| {
        b.iter(|| black_box(r.route(black_box(&req)).unwrap()))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
