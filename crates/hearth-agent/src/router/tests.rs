use std::collections::HashSet;
use std::sync::Mutex;

use super::*;

fn arm(model: &str) -> Arm {
    Arm {
        model: model.to_owned(),
        tools: true,
        thinking: true,
        local: false,
        context_window: None,
        price: Some(ArmPrice {
            input: 1.0,
            output: 1.0,
        }),
        tasks: Vec::new(),
        prefer_local: false,
        quality: [None; 7],
    }
}

fn settings(strategy: Strategy) -> RouterSettings {
    RouterSettings {
        strategy,
        seed: Some(7),
        cost_weight: 0.1,
        scarcity_weight: 0.5,
    }
}

fn request(text: &str) -> RouteRequest<'_> {
    RouteRequest {
        text,
        user: "u",
        thread: "t",
        needs_tools: false,
        needs_thinking: false,
        local_only: false,
        estimate: Estimate {
            input_tokens: 100,
            output_tokens: 1000,
        },
    }
}

/// Pools where some models are exhausted (scarcity 1) and the rest have
/// plenty left.
#[derive(Default)]
struct TestPools(Mutex<HashSet<String>>);

impl TestPools {
    fn exhaust(&self, model: &str) {
        self.0.lock().unwrap().insert(model.to_owned());
    }
}

impl Pools for TestPools {
    fn affordable(&self, model: &str, _: &str, _: &str, _: &Estimate) -> bool {
        !self.0.lock().unwrap().contains(model)
    }

    fn scarcity(&self, model: &str, _: &str, _: &str) -> f64 {
        if self.0.lock().unwrap().contains(model) {
            1.0
        } else {
            0.0
        }
    }
}

#[test]
fn learn_finds_the_arm_that_succeeds() {
    let router = Router::new(
        settings(Strategy::Learn),
        vec![arm("p/flaky"), arm("p/good")],
        Arc::new(NoPools),
    );
    // The world's own draws, apart from the router's.
    let mut world = Rng::seeded(99);
    let mut good_in_last_50 = 0;
    for round in 0..200 {
        let d = router.route(&request("hello")).unwrap();
        let chosen = d.chosen().to_owned();
        let ok = chosen == "p/good" || world.beta(1.0, 1.0) < 0.2;
        router.observe(&chosen, d.task.as_str(), i64::from(ok), i64::from(!ok), 1);
        if round >= 150 && chosen == "p/good" {
            good_in_last_50 += 1;
        }
    }
    assert!(good_in_last_50 >= 45, "good arm {good_in_last_50} of 50");
    let post = router.posteriors();
    let flaky = post
        .iter()
        .find(|p| p.model == "p/flaky" && p.task == TaskClass::Chat)
        .unwrap();
    assert!(flaky.beta > flaky.alpha, "{flaky:?}");
}

#[test]
fn the_same_seed_makes_the_same_choices() {
    let run = || {
        let router = Router::new(
            settings(Strategy::Learn),
            vec![arm("p/a"), arm("p/b"), arm("p/c")],
            Arc::new(NoPools),
        );
        (0..20)
            .map(|_| router.route(&request("hi")).unwrap().chosen().to_owned())
            .collect::<Vec<_>>()
    };
    let first = run();
    assert_eq!(first, run());
    assert!(
        first.iter().collect::<HashSet<_>>().len() > 1,
        "flat priors explore: {first:?}"
    );
}

#[test]
fn an_exhausted_pool_removes_its_arms_at_once() {
    let pools = Arc::new(TestPools::default());
    let router = Router::new(
        settings(Strategy::Learn),
        vec![arm("p/a"), arm("p/b")],
        pools.clone(),
    );
    // p/a has the better record, so it would win nearly every time.
    router.observe("p/a", "chat", 50, 0, 50);
    router.observe("p/b", "chat", 0, 50, 50);
    assert_eq!(router.route(&request("hi")).unwrap().chosen(), "p/a");
    pools.exhaust("p/a");
    for _ in 0..20 {
        let d = router.route(&request("hi")).unwrap();
        assert_eq!(d.chosen(), "p/b");
        assert_eq!(d.candidates.len(), 1);
        assert!(d.reason.contains("p/a (over budget)"), "{}", d.reason);
    }
    pools.exhaust("p/b");
    let err = router.route(&request("hi")).unwrap_err();
    assert!(matches!(err, RouteError::OverBudget { .. }), "{err:?}");
    assert!(
        err.to_string()
            .contains("p/a (over budget), p/b (over budget)"),
        "{err}"
    );
}

#[test]
fn scarcity_makes_an_arm_dearer() {
    struct Scarce;
    impl Pools for Scarce {
        fn affordable(&self, _: &str, _: &str, _: &str, _: &Estimate) -> bool {
            true
        }
        fn scarcity(&self, model: &str, _: &str, _: &str) -> f64 {
            if model == "p/a" { 0.95 } else { 0.0 }
        }
    }
    let router = Router::new(
        settings(Strategy::Learn),
        vec![arm("p/a"), arm("p/b")],
        Arc::new(Scarce),
    );
    router.observe("p/a", "chat", 30, 10, 40);
    router.observe("p/b", "chat", 25, 15, 40);
    let b_wins = (0..100)
        .filter(|_| router.route(&request("hi")).unwrap().chosen() == "p/b")
        .count();
    assert!(
        b_wins > 90,
        "the scarce arm still won {} of 100",
        100 - b_wins
    );
}

#[test]
fn capabilities_locality_and_context_filter_candidates() {
    let mut no_tools = arm("p/plain");
    no_tools.tools = false;
    no_tools.thinking = false;
    let mut local = arm("local/m");
    local.local = true;
    local.context_window = Some(500);
    let router = Router::new(
        settings(Strategy::Cheapest),
        vec![no_tools, local, arm("p/full")],
        Arc::new(NoPools),
    );
    let mut req = request("hi");
    req.needs_tools = true;
    let d = router.route(&req).unwrap();
    let models: Vec<&str> = d.candidates.iter().map(|c| c.model.as_str()).collect();
    assert_eq!(models, ["p/full"], "{}", d.reason);
    assert!(d.reason.contains("p/plain (no tools)"), "{}", d.reason);
    assert!(
        d.reason.contains("local/m (context too small)"),
        "{}",
        d.reason
    );

    let mut req = request("hi");
    req.local_only = true;
    req.estimate.output_tokens = 100;
    assert_eq!(router.route(&req).unwrap().chosen(), "local/m");
    req.needs_thinking = true;
    req.estimate.output_tokens = 1000;
    let err = router.route(&req).unwrap_err();
    assert!(matches!(err, RouteError::NoArm { .. }), "{err:?}");
    assert!(err.to_string().contains("p/plain (no thinking)"), "{err}");
}

#[test]
fn cheapest_takes_the_lowest_estimate_and_unknown_prices_count_as_dearest() {
    let mut dear = arm("p/dear");
    dear.price = Some(ArmPrice {
        input: 10.0,
        output: 30.0,
    });
    let mut unknown = arm("p/unknown");
    unknown.price = None;
    let mut local = arm("local/m");
    local.local = true;
    local.price = None;
    let router = Router::new(
        settings(Strategy::Cheapest),
        vec![dear.clone(), unknown.clone(), arm("p/cheap")],
        Arc::new(NoPools),
    );
    let d = router.route(&request("hi")).unwrap();
    let order: Vec<&str> = d.candidates.iter().map(|c| c.model.as_str()).collect();
    assert_eq!(order, ["p/cheap", "p/dear", "p/unknown"]);
    assert!(d.candidates[0].score > d.candidates[1].score);
    assert_eq!(
        d.candidates[1].score, d.candidates[2].score,
        "unknown = dearest"
    );

    let router = Router::new(
        settings(Strategy::Cheapest),
        vec![dear, local],
        Arc::new(NoPools),
    );
    assert_eq!(router.route(&request("hi")).unwrap().chosen(), "local/m");
}

#[test]
fn task_lists_narrow_arms_and_a_class_nobody_lists_uses_all() {
    let mut coder = arm("p/coder");
    coder.tasks = vec![TaskClass::Code];
    let mut writer = arm("p/writer");
    writer.tasks = vec![TaskClass::Writing];
    let router = Router::new(
        settings(Strategy::Learn),
        vec![coder, writer],
        Arc::new(NoPools),
    );
    let d = router.route(&request("fix this python function")).unwrap();
    assert_eq!((d.task, d.chosen()), (TaskClass::Code, "p/coder"));
    let d = router.route(&request("write a poem")).unwrap();
    assert_eq!((d.task, d.chosen()), (TaskClass::Writing, "p/writer"));
    let d = router.route(&request("hello")).unwrap();
    assert_eq!(d.candidates.len(), 2);
    assert!(
        d.reason.contains("every arm was considered"),
        "{}",
        d.reason
    );
    let shown: Vec<(String, TaskClass)> = router
        .posteriors()
        .into_iter()
        .map(|p| (p.model, p.task))
        .collect();
    assert_eq!(
        shown,
        [
            ("p/coder".to_owned(), TaskClass::Code),
            ("p/writer".to_owned(), TaskClass::Writing)
        ]
    );
}

#[test]
fn quality_priors_and_observations_make_the_posterior() {
    let mut a = arm("p/a");
    a.quality[TaskClass::Code.index()] = Some(0.75);
    let router = Router::new(settings(Strategy::Learn), vec![a], Arc::new(NoPools));
    router.observe("p/a", "code", 2, 1, 3);
    router.observe("p/a", "code", -1, 1, 0);
    router.observe("p/unknown", "code", 5, 5, 5);
    router.observe("p/a", "poetry", 5, 5, 5);
    let code = router
        .posteriors()
        .into_iter()
        .find(|p| p.task == TaskClass::Code)
        .unwrap();
    assert_eq!(
        (code.alpha, code.beta, code.runs),
        (1.0 + 3.0 + 1.0, 1.0 + 1.0 + 2.0, 3)
    );
    let chat = router
        .posteriors()
        .into_iter()
        .find(|p| p.task == TaskClass::Chat)
        .unwrap();
    assert_eq!((chat.alpha, chat.beta, chat.runs), (1.0, 1.0, 0));
}

#[test]
fn the_detail_names_task_candidates_choice_and_reason() {
    let router = Router::new(
        settings(Strategy::Cheapest),
        vec![arm("p/a")],
        Arc::new(NoPools),
    );
    let d = router.route(&request("hello")).unwrap();
    let detail = d.detail();
    assert_eq!(detail["task"], "chat");
    assert_eq!(detail["chosen"], "p/a");
    assert_eq!(detail["candidates"][0]["model"], "p/a");
    assert!(detail["candidates"][0]["score"].is_number());
    assert_eq!(detail["reason"], "the only arm that can take this run");
    let none = Router::new(settings(Strategy::Learn), Vec::new(), Arc::new(NoPools));
    let err = none.route(&request("hello")).unwrap_err();
    assert!(err.to_string().contains("no arm is configured"), "{err}");
}
