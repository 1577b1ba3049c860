//! The TUI's state and what keys and the network do to it: pure, so tests
//! drive it without a terminal or a server. What must go to the server
//! comes back as [`Action`]s for the caller to carry out.

use std::time::{Duration, Instant};

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers, MouseEvent, MouseEventKind};
use hearth_core::RunEventKind;
use hearth_server::dto::HistoryMessage;
use serde_json::Value;

use super::net::{Net, ThreadInfo};

/// The modes Shift+Tab cycles through, in order. `bypass` is left out: it
/// is asked for by name (`/mode bypass`), never reached by a stray key.
pub(super) const CYCLE: [&str; 5] = ["deny", "plan", "ask", "accept_edits", "auto"];

/// The thinking levels.
const LEVELS: [&str; 4] = ["off", "low", "medium", "high"];

/// Lines one wheel step scrolls.
const WHEEL_LINES: usize = 3;

/// What `/help` says.
pub(super) const HELP: &str = "Enter sends · Alt+Enter (or Shift+Enter, Ctrl+J) a new line · \
typing while an answer is written steers it · Esc cancels it · Shift+Tab cycles the permission \
mode · Ctrl+O model · Ctrl+T thinking · Ctrl+N new session · Ctrl+I (Tab) incognito · Ctrl+E \
shows thinking · PageUp/PageDown or the wheel scroll · Ctrl+C or Ctrl+D on an empty prompt quits.\n\
Commands: /model [id], /mode [deny|plan|ask|accept_edits|auto|bypass], /thinking [level], /new, \
/incognito [on|off], /usage, /trace (the last run's steps), /run-plan [mode] (approve the last \
answer as the plan: switch to the mode, default ask, and send it back), /help, /quit.\n\
A confirmation is answered with y (approve), n (deny) or a (approve, and accept_edits from now on).";

/// One thing in the conversation.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Entry {
    /// What the user sent (`steered` into a running answer).
    User { text: String, steered: bool },
    /// An answer, as it streams; its thinking is kept apart.
    Answer {
        text: String,
        thinking: String,
        done: bool,
    },
    /// A tool call as a card.
    Tool {
        call_id: String,
        name: String,
        status: ToolStatus,
        started: Instant,
        took: Option<Duration>,
    },
    /// Words from hearth itself (a command's answer, a notice).
    Note(String),
    /// Something failed.
    Error(String),
}

/// Where a tool call stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ToolStatus {
    Running,
    Done,
    Failed,
}

/// A confirmation waiting for `y`, `n` or `a`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Pending {
    pub(super) token: String,
    pub(super) tool: String,
    pub(super) summary: String,
}

/// A choice shown over the conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Picker {
    pub(super) kind: PickerKind,
    pub(super) choices: Vec<String>,
    pub(super) selected: usize,
}

/// What a picker chooses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum PickerKind {
    Model,
    Thinking,
}

/// The run being answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Active {
    pub(super) run_id: String,
    pub(super) started: Instant,
    /// Its answer's entry.
    answer: usize,
}

/// What the caller carries out against the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Action {
    Send(String),
    Steer(String),
    Follow(String),
    Cancel(String),
    Confirm {
        token: String,
        approve: bool,
        accept_edits: bool,
    },
    SetMode(String),
    /// Switch to `mode`, then send the approved plan.
    RunPlan {
        mode: String,
        text: String,
    },
    SetModel(String),
    SetThinking(String),
    Incognito(bool),
    NewSession,
    Trace(String),
    /// Today's usage of the thread again (`None`), or one run's to add.
    Usage(Option<String>),
    LoadOlder(String),
    RefreshThread,
}

/// The TUI's state.
pub(super) struct App {
    pub(super) thread: String,
    pub(super) entries: Vec<Entry>,
    pub(super) input: String,
    /// Byte offset of the cursor in `input`.
    pub(super) cursor: usize,
    pub(super) info: ThreadInfo,
    pub(super) models: Vec<String>,
    /// Today's tokens of the thread by model.
    usage: std::collections::BTreeMap<String, u64>,
    pub(super) tokens: u64,
    pub(super) cost_usd: Option<f64>,
    /// `None` until known.
    pub(super) connected: Option<bool>,
    pub(super) run: Option<Active>,
    pub(super) last_run: Option<String>,
    pub(super) confirm: Option<Pending>,
    pub(super) picker: Option<Picker>,
    /// Lines scrolled up from the newest.
    pub(super) scroll: usize,
    /// Rows the conversation had on the last frame (a page).
    pub(super) page: usize,
    pub(super) show_thinking: bool,
    /// The cursor of the next older page of history, while there is one.
    pub(super) older: Option<String>,
    loading_older: bool,
    pub(super) quit: bool,
}

impl App {
    pub(super) fn new(thread: &str) -> Self {
        Self {
            thread: thread.to_owned(),
            entries: Vec::new(),
            input: String::new(),
            cursor: 0,
            info: ThreadInfo::default(),
            models: Vec::new(),
            usage: Default::default(),
            tokens: 0,
            cost_usd: None,
            connected: None,
            run: None,
            last_run: None,
            confirm: None,
            picker: None,
            scroll: 0,
            page: 10,
            show_thinking: false,
            older: None,
            loading_older: false,
            quit: false,
        }
    }

    /// A key pressed.
    pub(super) fn key(&mut self, k: KeyEvent) -> Vec<Action> {
        if k.kind == KeyEventKind::Release {
            return Vec::new();
        }
        if self.picker.is_some() {
            return self.picker_key(k);
        }
        let ctrl = k.modifiers.contains(KeyModifiers::CONTROL);
        let alt = k.modifiers.contains(KeyModifiers::ALT);
        let shift = k.modifiers.contains(KeyModifiers::SHIFT);
        match k.code {
            KeyCode::Char('c' | 'd') if ctrl && self.input.is_empty() => {
                self.quit = true;
                Vec::new()
            }
            KeyCode::Char('c') if ctrl => {
                self.input.clear();
                self.cursor = 0;
                Vec::new()
            }
            KeyCode::Char('d') if ctrl => {
                self.delete_forward();
                Vec::new()
            }
            KeyCode::Esc => match self.run.as_ref().map(|r| r.run_id.clone()) {
                Some(run_id) => {
                    self.note("Cancelling…");
                    vec![Action::Cancel(run_id)]
                }
                None => Vec::new(),
            },
            KeyCode::BackTab => self.cycle_mode(),
            KeyCode::Char('o') if ctrl => {
                self.open_picker(PickerKind::Model);
                Vec::new()
            }
            KeyCode::Char('t') if ctrl => {
                self.open_picker(PickerKind::Thinking);
                Vec::new()
            }
            KeyCode::Char('n') if ctrl => self.new_session(),
            // Without the terminal's enhanced keys Ctrl+I arrives as Tab.
            KeyCode::Char('i') if ctrl => self.toggle_incognito(),
            KeyCode::Tab => self.toggle_incognito(),
            KeyCode::Char('e') if ctrl => {
                self.show_thinking = !self.show_thinking;
                Vec::new()
            }
            KeyCode::Char('j') if ctrl => {
                self.insert("\n");
                Vec::new()
            }
            KeyCode::Enter if alt || shift => {
                self.insert("\n");
                Vec::new()
            }
            KeyCode::Enter => self.submit(),
            KeyCode::PageUp => self.scroll_up(self.page.max(1)),
            KeyCode::PageDown => {
                self.scroll = self.scroll.saturating_sub(self.page.max(1));
                Vec::new()
            }
            KeyCode::Char(c @ ('y' | 'n' | 'a')) if self.input.is_empty() && !ctrl && !alt => {
                match self.confirm.take() {
                    Some(p) => {
                        let word = match c {
                            'y' => "Approved",
                            'n' => "Denied",
                            _ => "Approved; accept_edits from now on",
                        };
                        self.note(&format!("{word}: {}", p.summary));
                        vec![Action::Confirm {
                            token: p.token,
                            approve: c != 'n',
                            accept_edits: c == 'a',
                        }]
                    }
                    None => {
                        self.insert(&c.to_string());
                        Vec::new()
                    }
                }
            }
            KeyCode::Char(c) if !ctrl => {
                self.insert(&c.to_string());
                Vec::new()
            }
            KeyCode::Backspace => {
                if let Some((i, _)) = self.input[..self.cursor].char_indices().next_back() {
                    self.input.remove(i);
                    self.cursor = i;
                }
                Vec::new()
            }
            KeyCode::Delete => {
                self.delete_forward();
                Vec::new()
            }
            KeyCode::Left => {
                if let Some((i, _)) = self.input[..self.cursor].char_indices().next_back() {
                    self.cursor = i;
                }
                Vec::new()
            }
            KeyCode::Right => {
                if let Some(c) = self.input[self.cursor..].chars().next() {
                    self.cursor += c.len_utf8();
                }
                Vec::new()
            }
            KeyCode::Home => {
                self.cursor = 0;
                Vec::new()
            }
            KeyCode::End => {
                self.cursor = self.input.len();
                Vec::new()
            }
            KeyCode::Up => self.scroll_up(1),
            KeyCode::Down => {
                self.scroll = self.scroll.saturating_sub(1);
                Vec::new()
            }
            _ => Vec::new(),
        }
    }

    /// Pasted text goes into the prompt as it is, new lines included.
    pub(super) fn paste(&mut self, text: &str) {
        self.insert(&text.replace("\r\n", "\n").replace('\r', "\n"));
    }

    pub(super) fn mouse(&mut self, m: MouseEvent) -> Vec<Action> {
        match m.kind {
            MouseEventKind::ScrollUp => self.scroll_up(WHEEL_LINES),
            MouseEventKind::ScrollDown => {
                self.scroll = self.scroll.saturating_sub(WHEEL_LINES);
                Vec::new()
            }
            _ => Vec::new(),
        }
    }

    fn insert(&mut self, s: &str) {
        self.input.insert_str(self.cursor, s);
        self.cursor += s.len();
    }

    fn delete_forward(&mut self) {
        if self.cursor < self.input.len() {
            self.input.remove(self.cursor);
        }
    }

    fn scroll_up(&mut self, by: usize) -> Vec<Action> {
        self.scroll += by;
        // Near the top of what is loaded: the next older page.
        match (&self.older, self.loading_older) {
            (Some(before), false) if self.scroll + self.page * 2 >= self.loaded_lines_hint() => {
                self.loading_older = true;
                vec![Action::LoadOlder(before.clone())]
            }
            _ => Vec::new(),
        }
    }

    /// A rough count of the lines loaded (two per entry), enough to ask for
    /// older history before the top is reached.
    fn loaded_lines_hint(&self) -> usize {
        self.entries.len() * 2
    }

    fn note(&mut self, text: &str) {
        self.entries.push(Entry::Note(text.to_owned()));
    }

    fn cycle_mode(&mut self) -> Vec<Action> {
        let at = CYCLE.iter().position(|m| *m == self.info.mode);
        // From bypass (or an unknown mode) back to ask.
        let next = match at {
            Some(i) => CYCLE[(i + 1) % CYCLE.len()],
            None => "ask",
        };
        // Shown at once; the server's answer confirms it (or a failure
        // brings the thread's real mode back).
        self.info.mode = next.to_owned();
        self.info.mode_expires_at = None;
        vec![Action::SetMode(next.to_owned())]
    }

    fn toggle_incognito(&mut self) -> Vec<Action> {
        vec![Action::Incognito(!self.info.incognito)]
    }

    fn new_session(&mut self) -> Vec<Action> {
        self.confirm = None;
        vec![Action::NewSession]
    }

    fn open_picker(&mut self, kind: PickerKind) {
        let (choices, current) = match kind {
            PickerKind::Model => (self.models.clone(), self.info.model.clone()),
            PickerKind::Thinking => (
                LEVELS.map(String::from).to_vec(),
                self.info.thinking.clone(),
            ),
        };
        if choices.is_empty() {
            self.note("No models are known yet.");
            return;
        }
        let selected = choices.iter().position(|c| *c == current).unwrap_or(0);
        self.picker = Some(Picker {
            kind,
            choices,
            selected,
        });
    }

    fn picker_key(&mut self, k: KeyEvent) -> Vec<Action> {
        let Some(p) = self.picker.as_mut() else {
            return Vec::new();
        };
        match k.code {
            KeyCode::Esc => self.picker = None,
            KeyCode::Up => p.selected = p.selected.saturating_sub(1),
            KeyCode::Down => p.selected = (p.selected + 1).min(p.choices.len().saturating_sub(1)),
            KeyCode::Enter => {
                let choice = p.choices.get(p.selected).cloned().unwrap_or_default();
                let kind = p.kind;
                self.picker = None;
                return vec![match kind {
                    PickerKind::Model => Action::SetModel(choice),
                    PickerKind::Thinking => Action::SetThinking(choice),
                }];
            }
            KeyCode::Char('c') if k.modifiers.contains(KeyModifiers::CONTROL) => {
                self.picker = None;
            }
            _ => {}
        }
        Vec::new()
    }

    /// Enter: a command, a steer into the running answer, or a new message.
    fn submit(&mut self) -> Vec<Action> {
        let text = std::mem::take(&mut self.input);
        self.cursor = 0;
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Vec::new();
        }
        self.scroll = 0;
        if trimmed.starts_with('/') {
            return self.command(trimmed);
        }
        let steered = self.run.is_some();
        self.entries.push(Entry::User {
            text: trimmed.to_owned(),
            steered,
        });
        vec![if steered {
            Action::Steer(trimmed.to_owned())
        } else {
            Action::Send(trimmed.to_owned())
        }]
    }

    fn command(&mut self, line: &str) -> Vec<Action> {
        let mut words = line.split_whitespace();
        let name = words.next().unwrap_or_default();
        let arg = words.next().map(str::to_owned);
        match (name, arg) {
            ("/help", _) => {
                self.note(HELP);
                Vec::new()
            }
            ("/quit" | "/exit", _) => {
                self.quit = true;
                Vec::new()
            }
            ("/model", Some(id)) => vec![Action::SetModel(id)],
            ("/model", None) => {
                self.open_picker(PickerKind::Model);
                Vec::new()
            }
            ("/thinking", Some(level)) => vec![Action::SetThinking(level)],
            ("/thinking", None) => {
                self.open_picker(PickerKind::Thinking);
                Vec::new()
            }
            ("/mode", Some(mode)) => vec![Action::SetMode(mode)],
            ("/mode", None) => {
                self.note(&format!(
                    "mode {}; one of deny, plan, ask, accept_edits, auto, bypass (/mode <name>, \
                     Shift+Tab cycles)",
                    self.info.mode
                ));
                Vec::new()
            }
            ("/run-plan", mode) => self.run_plan(mode.unwrap_or_else(|| "ask".to_owned())),
            ("/new", _) => self.new_session(),
            ("/incognito", Some(on)) => vec![Action::Incognito(on == "on")],
            ("/incognito", None) => self.toggle_incognito(),
            ("/usage", _) => {
                self.note(&format!(
                    "today on this thread: {}",
                    usage_text(self.tokens, self.cost_usd)
                ));
                vec![Action::Usage(None)]
            }
            ("/trace", _) => match self
                .last_run
                .clone()
                .or_else(|| self.run.as_ref().map(|r| r.run_id.clone()))
            {
                Some(run_id) => vec![Action::Trace(run_id)],
                None => {
                    self.note("No run yet on this screen.");
                    Vec::new()
                }
            },
            (other, _) => {
                self.entries.push(Entry::Error(format!(
                    "unknown command {other}; /help lists them"
                )));
                Vec::new()
            }
        }
    }

    /// Approves the last answer as a plan: the thread switches to `mode`
    /// and the plan goes back as the next message.
    fn run_plan(&mut self, mode: String) -> Vec<Action> {
        if self.run.is_some() {
            self.note("An answer is being written; run the plan once it is done.");
            return Vec::new();
        }
        let plan = self.entries.iter().rev().find_map(|e| match e {
            Entry::Answer {
                text, done: true, ..
            } if !text.trim().is_empty() => Some(text.clone()),
            _ => None,
        });
        let Some(plan) = plan else {
            self.note("No plan to run: ask for one in plan mode first (/mode plan).");
            return Vec::new();
        };
        let text = format!("{}{plan}", crate::client::modes::RUN_PLAN_PREFIX);
        self.entries.push(Entry::User {
            text: text.clone(),
            steered: false,
        });
        self.info.mode = mode.clone();
        vec![Action::RunPlan { mode, text }]
    }

    /// What the network said.
    pub(super) fn net(&mut self, n: Net) -> Vec<Action> {
        match n {
            Net::Thread(info) => self.info = info,
            Net::Models(m) => self.models = m,
            Net::History {
                messages,
                next_before,
                older,
            } => self.history(messages, next_before, older),
            Net::Usage {
                tokens,
                rates,
                replace,
            } => {
                if replace {
                    self.usage.clear();
                }
                for (model, n) in tokens {
                    *self.usage.entry(model).or_default() += n;
                }
                self.tokens = self.usage.values().sum();
                // Estimated at what each model cost per token today; none
                // when no model of the thread has a price.
                self.cost_usd = self
                    .usage
                    .iter()
                    .filter_map(|(m, n)| Some(rates.get(m)? * *n as f64))
                    .reduce(|a, b| a + b);
            }
            Net::Accepted { run_id, steered } => return self.accepted(run_id, steered),
            Net::Event { run_id, kind, data } => self.event(&run_id, kind, &data),
            Net::Ended { run_id, envelope } => return self.ended(&run_id, envelope),
            Net::Connection(up) => self.connected = Some(up),
            Net::Failed(why) => {
                self.entries.push(Entry::Error(why));
                // A mode or setting shown ahead of the server's answer is
                // put back as the server has it.
                return vec![Action::RefreshThread];
            }
            Net::Info(text) => self.note(&text),
            Net::Cleared => {
                self.entries.clear();
                self.scroll = 0;
                self.older = None;
                self.note("New session: the history of this thread was cleared.");
            }
        }
        Vec::new()
    }

    fn history(&mut self, messages: Vec<HistoryMessage>, next_before: Option<String>, older: bool) {
        let mut page: Vec<Entry> = messages
            .into_iter()
            .rev()
            .filter_map(|m| {
                let text = m.text?;
                match m.role.as_str() {
                    "user" => Some(Entry::User {
                        text,
                        steered: false,
                    }),
                    "assistant" => Some(Entry::Answer {
                        text,
                        thinking: String::new(),
                        done: true,
                    }),
                    _ => None,
                }
            })
            .collect();
        let added = page.len();
        page.append(&mut self.entries);
        self.entries = page;
        if let Some(run) = self.run.as_mut() {
            run.answer += added;
        }
        self.older = next_before;
        if older {
            self.loading_older = false;
        }
    }

    fn accepted(&mut self, run_id: String, steered: bool) -> Vec<Action> {
        if steered && self.run.as_ref().is_some_and(|r| r.run_id == run_id) {
            return Vec::new();
        }
        self.entries.push(Entry::Answer {
            text: String::new(),
            thinking: String::new(),
            done: false,
        });
        self.run = Some(Active {
            run_id: run_id.clone(),
            started: Instant::now(),
            answer: self.entries.len() - 1,
        });
        vec![Action::Follow(run_id)]
    }

    fn event(&mut self, run_id: &str, kind: RunEventKind, data: &Value) {
        let Some(run) = self.run.as_ref().filter(|r| r.run_id == run_id) else {
            return;
        };
        let answer = run.answer;
        let text = |k: &str| data[k].as_str().unwrap_or_default().to_owned();
        match kind {
            RunEventKind::TextDelta => {
                if let Some(Entry::Answer { text: t, .. }) = self.entries.get_mut(answer) {
                    t.push_str(&text("text"));
                }
            }
            RunEventKind::ThinkingDelta => {
                if let Some(Entry::Answer { thinking, .. }) = self.entries.get_mut(answer) {
                    thinking.push_str(&text("text"));
                }
            }
            RunEventKind::ToolStarted => {
                self.confirm = None;
                self.entries.push(Entry::Tool {
                    call_id: text("call_id"),
                    name: text("name"),
                    status: ToolStatus::Running,
                    started: Instant::now(),
                    took: None,
                });
            }
            RunEventKind::ToolFinished => {
                let call_id = text("call_id");
                let ok = data["ok"].as_bool().unwrap_or(false);
                let card = self.entries.iter_mut().rev().find(
                    |e| matches!(e, Entry::Tool { call_id: c, status: ToolStatus::Running, .. } if *c == call_id),
                );
                if let Some(Entry::Tool {
                    status,
                    started,
                    took,
                    ..
                }) = card
                {
                    *status = if ok {
                        ToolStatus::Done
                    } else {
                        ToolStatus::Failed
                    };
                    *took = Some(started.elapsed());
                }
            }
            RunEventKind::ConfirmationRequired => {
                // After a restart the token is not given again: the prompt
                // then cannot answer it, and says where to.
                match data["token"].as_str() {
                    Some(token) => {
                        self.confirm = Some(Pending {
                            token: token.to_owned(),
                            tool: text("tool"),
                            summary: text("summary"),
                        });
                    }
                    None => self.entries.push(Entry::Error(format!(
                        "{} waits for a confirmation given before a restart; answer it where \
                         it was asked",
                        text("tool")
                    ))),
                }
            }
            RunEventKind::Failed => {
                let e = &data["error"];
                self.entries.push(Entry::Error(format!(
                    "the run failed: {} ({})",
                    e["message"].as_str().unwrap_or("no reason given"),
                    e["code"].as_str().unwrap_or("?")
                )));
            }
            RunEventKind::Cancelled => self.note("Cancelled."),
            // A run that starts again (recovered after a restart) writes
            // its answer again from the start.
            RunEventKind::Started => {
                if let Some(Entry::Answer { text, thinking, .. }) = self.entries.get_mut(answer) {
                    text.clear();
                    thinking.clear();
                }
            }
            RunEventKind::Queued | RunEventKind::Succeeded => {}
        }
    }

    fn ended(
        &mut self,
        run_id: &str,
        envelope: Option<Box<hearth_core::RunEnvelope>>,
    ) -> Vec<Action> {
        let Some(run) = self.run.take_if(|r| r.run_id == run_id) else {
            return Vec::new();
        };
        self.confirm = None;
        // The stored answer is the whole of it, also when a reconnect
        // missed part of the stream.
        let final_text = envelope.and_then(|e| e.output.map(|o| o.text));
        if let Some(Entry::Answer { text, done, .. }) = self.entries.get_mut(run.answer) {
            if let Some(t) = final_text {
                *text = t;
            }
            *done = true;
        }
        if let Some(Entry::Answer { text, thinking, .. }) = self.entries.get(run.answer)
            && text.is_empty()
            && thinking.is_empty()
        {
            self.entries.remove(run.answer);
        }
        self.last_run = Some(run.run_id.clone());
        vec![Action::Usage(Some(run.run_id))]
    }
}

/// Today's tokens and estimated cost, as the status line shows them.
pub(super) fn usage_text(tokens: u64, cost: Option<f64>) -> String {
    let tokens = match tokens {
        t if t >= 1_000_000 => format!("{:.1}M", t as f64 / 1e6),
        t if t >= 1_000 => format!("{:.1}k", t as f64 / 1e3),
        t => t.to_string(),
    };
    match cost {
        Some(c) => format!("{tokens} tok ≈${c:.4}"),
        None => format!("{tokens} tok"),
    }
}
