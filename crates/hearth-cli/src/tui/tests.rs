//! The TUI without a terminal or a server: keys and network events drive
//! [`App`], and ratatui's `TestBackend` shows what the screen holds.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use hearth_core::RunEventKind;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use serde_json::json;

use super::app::{Action, App, Entry};
use super::net::{Net, ThreadInfo};
use super::view;

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

fn ctrl(c: char) -> KeyEvent {
    KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL)
}

fn typed(app: &mut App, text: &str) -> Vec<Action> {
    text.chars()
        .flat_map(|c| app.key(key(KeyCode::Char(c))))
        .collect()
}

fn app() -> App {
    let mut app = App::new("cli:local");
    app.net(Net::Thread(ThreadInfo {
        model: "fake/fake-model".into(),
        thinking: "off".into(),
        mode: "ask".into(),
        mode_expires_at: None,
        incognito: false,
    }));
    app.net(Net::Connection(true));
    app.net(Net::Usage {
        tokens: [("fake/fake-model".to_owned(), 1234)].into(),
        rates: [("fake/fake-model".to_owned(), 0.0021 / 1234.0)].into(),
        replace: true,
    });
    app
}

/// The screen as text, one string a row, trailing spaces cut.
fn screen(app: &mut App, width: u16, height: u16) -> Vec<String> {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
    terminal.draw(|f| view::draw(f, app)).unwrap();
    let buf = terminal.backend().buffer().clone();
    (0..height)
        .map(|y| {
            (0..width)
                .map(|x| buf[(x, y)].symbol().to_owned())
                .collect::<String>()
                .trim_end()
                .to_owned()
        })
        .collect()
}

/// A run accepted and following: what Enter then the server's answer do.
fn running(app: &mut App, run_id: &str) {
    let sent = typed(app, "hello");
    assert!(sent.is_empty());
    assert_eq!(app.key(key(KeyCode::Enter)), [Action::Send("hello".into())]);
    let follow = app.net(Net::Accepted {
        run_id: run_id.into(),
        steered: false,
    });
    assert_eq!(follow, [Action::Follow(run_id.into())]);
}

fn event(app: &mut App, run_id: &str, kind: RunEventKind, data: serde_json::Value) {
    app.net(Net::Event {
        run_id: run_id.into(),
        kind,
        data,
    });
}

#[test]
fn the_status_line_names_model_thinking_mode_incognito_usage_and_connection() {
    let mut app = app();
    let rows = screen(&mut app, 110, 8);
    assert_eq!(
        rows[7],
        "mode ask │ fake/fake-model │ thinking off │ incognito off │ 1.2k tok ≈$0.0021 today │ ● connected"
    );
    app.info.mode = "accept_edits".into();
    app.net(Net::Connection(false));
    let rows = screen(&mut app, 110, 8);
    assert!(rows[7].starts_with("mode accept_edits │"), "{}", rows[7]);
    assert!(rows[7].ends_with("○ reconnecting"), "{}", rows[7]);
}

#[test]
fn a_streamed_answer_a_tool_card_and_a_confirmation_are_shown() {
    let mut app = app();
    running(&mut app, "run_1");
    event(
        &mut app,
        "run_1",
        RunEventKind::ThinkingDelta,
        json!({"text": "let me see what to do"}),
    );
    event(
        &mut app,
        "run_1",
        RunEventKind::TextDelta,
        json!({"text": "Here is **the** plan:\n- one"}),
    );
    event(
        &mut app,
        "run_1",
        RunEventKind::ToolStarted,
        json!({"call_id": "c1", "name": "memory_search"}),
    );
    event(
        &mut app,
        "run_1",
        RunEventKind::ToolFinished,
        json!({"call_id": "c1", "name": "memory_search", "ok": true}),
    );
    event(
        &mut app,
        "run_1",
        RunEventKind::ConfirmationRequired,
        json!({"token": "tok", "tool": "memory_forget", "summary": "forget memory 7"}),
    );
    let rows = screen(&mut app, 120, 20);
    let text = rows.join("\n");
    assert_eq!(rows[0], "> hello");
    assert_eq!(rows[2], "▸ thinking (6 words; Ctrl+E shows it)");
    assert_eq!(rows[3], "  Here is the plan:");
    assert_eq!(rows[4], "  • one");
    assert!(rows[6].starts_with("  ┃ ✓ memory_search  done "), "{text}");
    assert!(
        text.contains("confirm memory_forget: forget memory 7"),
        "{text}"
    );
    assert!(
        text.contains("y approve · n deny · a approve and accept_edits"),
        "{text}"
    );
    assert!(
        text.contains("cli:local · type to steer the answer · Esc cancels it"),
        "{text}"
    );
    assert!(rows[19].contains("answering 0s"), "{}", rows[19]);
    // Thinking shown on Ctrl+E.
    app.key(ctrl('e'));
    let rows = screen(&mut app, 120, 20);
    assert_eq!(rows[2], "┆ let me see what to do");
}

#[test]
fn y_n_and_a_answer_a_confirmation_and_a_also_switches_to_accept_edits() {
    for (c, approve, accept_edits) in [('y', true, false), ('n', false, false), ('a', true, true)] {
        let mut app = app();
        running(&mut app, "run_1");
        event(
            &mut app,
            "run_1",
            RunEventKind::ConfirmationRequired,
            json!({"token": "tok", "tool": "t", "summary": "s"}),
        );
        assert_eq!(
            app.key(key(KeyCode::Char(c))),
            [Action::Confirm {
                token: "tok".into(),
                approve,
                accept_edits
            }]
        );
        assert!(app.confirm.is_none());
        // With nothing pending the letters are typed.
        assert!(app.key(key(KeyCode::Char(c))).is_empty());
        assert_eq!(app.input, c.to_string());
    }
}

#[test]
fn enter_sends_typing_during_a_run_steers_and_esc_cancels() {
    let mut app = app();
    running(&mut app, "run_1");
    typed(&mut app, "also this");
    assert_eq!(
        app.key(key(KeyCode::Enter)),
        [Action::Steer("also this".into())]
    );
    assert!(matches!(
        app.entries.last(),
        Some(Entry::User { steered: true, .. })
    ));
    // The server says it went into the running answer: no new run.
    assert!(
        app.net(Net::Accepted {
            run_id: "run_1".into(),
            steered: true
        })
        .is_empty()
    );
    assert_eq!(app.key(key(KeyCode::Esc)), [Action::Cancel("run_1".into())]);
    event(&mut app, "run_1", RunEventKind::Cancelled, json!({}));
    let actions = app.net(Net::Ended {
        run_id: "run_1".into(),
        envelope: None,
    });
    assert_eq!(actions, [Action::Usage(Some("run_1".into()))]);
    assert!(app.run.is_none());
    assert!(app.key(key(KeyCode::Esc)).is_empty(), "nothing to cancel");
    // Alt+Enter and Ctrl+J are new lines, not sends.
    typed(&mut app, "a");
    app.key(KeyEvent::new(KeyCode::Enter, KeyModifiers::ALT));
    app.key(ctrl('j'));
    typed(&mut app, "b");
    assert_eq!(app.input, "a\n\nb");
    assert_eq!(
        app.key(key(KeyCode::Enter)),
        [Action::Send("a\n\nb".into())]
    );
}

#[test]
fn shift_tab_cycles_the_mode_and_leaves_bypass_out() {
    let mut app = app();
    let mut seen = Vec::new();
    for _ in 0..5 {
        match app.key(key(KeyCode::BackTab)).as_slice() {
            [Action::SetMode(m)] => seen.push(m.clone()),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(seen, ["accept_edits", "auto", "deny", "plan", "ask"]);
    app.info.mode = "bypass".into();
    assert_eq!(
        app.key(key(KeyCode::BackTab)),
        [Action::SetMode("ask".into())]
    );
    // The status line shows it at once.
    let rows = screen(&mut app, 110, 6);
    assert!(rows[5].starts_with("mode ask │"), "{}", rows[5]);
}

#[test]
fn ctrl_c_or_ctrl_d_quit_only_at_an_empty_prompt() {
    let mut app = app();
    typed(&mut app, "draft");
    app.key(ctrl('c'));
    assert!(!app.quit);
    assert_eq!(app.input, "");
    app.key(ctrl('d'));
    assert!(app.quit);
    let mut app = self::app();
    app.key(ctrl('c'));
    assert!(app.quit);
}

#[test]
fn commands_and_pickers() {
    let mut app = app();
    app.net(Net::Models(vec!["fake/a".into(), "fake/fake-model".into()]));
    assert!(app.key(ctrl('o')).is_empty());
    let rows = screen(&mut app, 60, 12).join("\n");
    assert!(rows.contains("▶ fake/fake-model"), "{rows}");
    app.key(key(KeyCode::Up));
    assert_eq!(
        app.key(key(KeyCode::Enter)),
        [Action::SetModel("fake/a".into())]
    );
    app.key(ctrl('t'));
    app.key(key(KeyCode::Down));
    assert_eq!(
        app.key(key(KeyCode::Enter)),
        [Action::SetThinking("low".into())]
    );
    assert_eq!(app.key(ctrl('n')), [Action::NewSession]);
    assert_eq!(app.key(key(KeyCode::Tab)), [Action::Incognito(true)]);
    typed(&mut app, "/mode plan");
    assert_eq!(
        app.key(key(KeyCode::Enter)),
        [Action::SetMode("plan".into())]
    );
    typed(&mut app, "/help");
    app.key(key(KeyCode::Enter));
    assert!(matches!(app.entries.last(), Some(Entry::Note(t)) if t.contains("/trace")));
    typed(&mut app, "/bogus");
    app.key(key(KeyCode::Enter));
    assert!(matches!(app.entries.last(), Some(Entry::Error(t)) if t.contains("/bogus")));
    typed(&mut app, "/trace");
    app.key(key(KeyCode::Enter));
    assert!(matches!(app.entries.last(), Some(Entry::Note(t)) if t.contains("No run yet")));
}

#[test]
fn a_long_history_shows_its_end_scrolls_and_asks_for_older_pages() {
    let mut app = app();
    let messages = (0..10_000)
        .rev()
        .map(|i| hearth_server::dto::HistoryMessage {
            id: i.to_string(),
            role: if i % 2 == 0 { "user" } else { "assistant" }.into(),
            text: Some(format!("message {i}")),
            run_id: None,
            created_at: "2026-11-27T00:00:00Z".into(),
            compacted: false,
        })
        .collect();
    app.net(Net::History {
        messages,
        next_before: Some("0".into()),
        older: false,
    });
    let started = std::time::Instant::now();
    let rows = screen(&mut app, 60, 12);
    assert!(rows.iter().any(|r| r.contains("message 9999")), "{rows:?}");
    app.key(key(KeyCode::PageUp));
    let rows = screen(&mut app, 60, 12);
    assert!(!rows.iter().any(|r| r.contains("message 9999")), "{rows:?}");
    // Only what is shown is laid out: a frame of 10,000 messages is quick.
    assert!(
        started.elapsed() < std::time::Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    // Far up, the next older page is asked for, once.
    let asked: Vec<Action> = (0..4000)
        .flat_map(|_| app.key(key(KeyCode::PageUp)))
        .collect();
    assert_eq!(asked, [Action::LoadOlder("0".into())]);
    app.net(Net::History {
        messages: vec![],
        next_before: None,
        older: true,
    });
    let rows = screen(&mut app, 60, 12);
    assert_eq!(rows[0], "> message 0", "the top of the history: {rows:?}");
}

#[test]
fn the_final_answer_replaces_a_stream_a_reconnect_cut_short() {
    let mut app = app();
    running(&mut app, "run_1");
    event(
        &mut app,
        "run_1",
        RunEventKind::TextDelta,
        json!({"text": "Hel"}),
    );
    let env: hearth_core::RunEnvelope = serde_json::from_value(json!({
        "run_id": "run_1", "thread_key": "cli:local", "user_key": "cli:user:local",
        "status": "succeeded", "output": {"text": "Hello there"}, "error": null,
        "confirmation": null, "model": "fake/fake-model", "source": "cli",
        "created_at": "2026-11-27T00:00:00Z", "updated_at": "2026-11-27T00:00:01Z"
    }))
    .unwrap();
    app.net(Net::Ended {
        run_id: "run_1".into(),
        envelope: Some(Box::new(env)),
    });
    let rows = screen(&mut app, 40, 8);
    assert_eq!(rows[2], "  Hello there");
}

#[test]
fn run_plan_switches_the_mode_and_sends_the_last_answer_back() {
    let mut app = app();
    typed(&mut app, "/run-plan");
    app.key(key(KeyCode::Enter));
    assert!(matches!(app.entries.last(), Some(Entry::Note(t)) if t.contains("No plan")));
    running(&mut app, "run_1");
    event(
        &mut app,
        "run_1",
        RunEventKind::TextDelta,
        json!({"text": "1. look\n2. fix"}),
    );
    app.net(Net::Ended {
        run_id: "run_1".into(),
        envelope: None,
    });
    typed(&mut app, "/run-plan auto");
    match app.key(key(KeyCode::Enter)).as_slice() {
        [Action::RunPlan { mode, text }] => {
            assert_eq!(mode, "auto");
            assert!(
                text.starts_with("The plan is approved") && text.ends_with("1. look\n2. fix"),
                "{text}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(app.info.mode, "auto");
}

#[test]
fn a_finished_run_adds_its_tokens_to_the_days() {
    let mut app = app();
    app.net(Net::Usage {
        tokens: [("fake/other".to_owned(), 766)].into(),
        rates: [("fake/fake-model".to_owned(), 0.0021 / 1234.0)].into(),
        replace: false,
    });
    assert_eq!(app.tokens, 2000);
    // The model without a price adds tokens, not cost.
    assert!((app.cost_usd.unwrap() - 0.0021).abs() < 1e-9);
    let rows = screen(&mut app, 110, 4);
    assert!(
        rows[3].contains("│ 2.0k tok ≈$0.0021 today │"),
        "{}",
        rows[3]
    );
}
