//! Drawing the screen: the conversation (newest at the bottom, only what
//! fits is laid out, so a long history costs nothing to show), a waiting
//! confirmation, the prompt, and the status line.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Wrap};
use unicode_width::UnicodeWidthStr;

use super::app::{App, Entry, PickerKind, ToolStatus, usage_text};
use super::markdown;

/// Most rows the prompt grows to.
const MAX_INPUT_ROWS: u16 = 8;

/// Draws `app` on `f`.
pub(super) fn draw(f: &mut Frame<'_>, app: &mut App) {
    let area = f.area();
    let width = area.width.max(1);
    let input_lines = input_lines(&app.input, width.saturating_sub(2));
    let input_rows = (input_lines.len() as u16).clamp(1, MAX_INPUT_ROWS) + 2;
    let confirm_rows = if app.confirm.is_some() { 4 } else { 0 };
    let [chat, confirm, input, status] = Layout::vertical([
        Constraint::Min(1),
        Constraint::Length(confirm_rows),
        Constraint::Length(input_rows),
        Constraint::Length(1),
    ])
    .areas(area);
    app.page = usize::from(chat.height);
    conversation(f, app, chat);
    if let Some(p) = &app.confirm {
        let text = vec![
            Line::from(vec![
                Span::styled("confirm ", Style::default().add_modifier(Modifier::BOLD)),
                Span::raw(format!("{}: {}", p.tool, p.summary)),
            ]),
            Line::from(Span::styled(
                "y approve · n deny · a approve and accept_edits from now on",
                Style::default().fg(Color::Yellow),
            )),
        ];
        let block = Block::default()
            .borders(Borders::ALL)
            .border_style(Style::default().fg(Color::Yellow));
        f.render_widget(
            Paragraph::new(text).block(block).wrap(Wrap { trim: false }),
            confirm,
        );
    }
    prompt(f, app, input, &input_lines);
    f.render_widget(Paragraph::new(status_line(app)), status);
    if let Some(p) = &app.picker {
        picker(f, p, chat);
    }
}

/// The prompt: its text wrapped to the width, the cursor on its place.
fn prompt(f: &mut Frame<'_>, app: &App, area: Rect, lines: &[String]) {
    let hint = match (&app.run, app.input.is_empty()) {
        (Some(_), true) => "type to steer the answer · Esc cancels it",
        (Some(_), false) => "Enter steers the answer",
        (None, _) => "message · Enter sends · /help",
    };
    let title = format!(" {} · {hint} ", app.thread);
    let block = Block::default().borders(Borders::ALL).title(title);
    let rows = usize::from(area.height.saturating_sub(2)).max(1);
    // The cursor's row and column in the wrapped text.
    let (crow, ccol) = cursor_at(&app.input[..app.cursor], area.width.saturating_sub(2));
    let skip = (crow + 1).saturating_sub(rows);
    let shown: Vec<Line<'_>> = lines
        .iter()
        .skip(skip)
        .take(rows)
        .map(|l| Line::raw(l.clone()))
        .collect();
    f.render_widget(Paragraph::new(shown).block(block), area);
    if app.picker.is_none() {
        let x = area.x + 1 + u16::try_from(ccol).unwrap_or(0);
        let y = area.y + 1 + u16::try_from(crow - skip).unwrap_or(0);
        f.set_cursor_position((x.min(area.right().saturating_sub(2)), y));
    }
}

/// `input` wrapped at `width` columns (hard, by characters: the prompt
/// shows what will be sent, spaces included).
fn input_lines(input: &str, width: u16) -> Vec<String> {
    let width = usize::from(width.max(1));
    input
        .split('\n')
        .flat_map(|l| markdown::cut(l, width))
        .collect()
}

/// Row and column after `before` wrapped as [`input_lines`] wraps.
fn cursor_at(before: &str, width: u16) -> (usize, usize) {
    let lines = input_lines(before, width);
    let row = lines.len().saturating_sub(1);
    let col = lines.last().map_or(0, |l| l.width());
    // A full line puts the cursor at the start of the next one.
    if col >= usize::from(width.max(1)) {
        (row + 1, 0)
    } else {
        (row, col)
    }
}

/// The conversation, newest at the bottom, `app.scroll` lines up.
fn conversation(f: &mut Frame<'_>, app: &mut App, area: Rect) {
    let height = usize::from(area.height);
    let want = height + app.scroll;
    let mut lines: Vec<Line<'static>> = Vec::new();
    // Laid out from the newest back until the screen (and the scroll) is
    // full: older entries cost nothing.
    for entry in app.entries.iter().rev() {
        let mut block = entry_lines(entry, area.width, app.show_thinking);
        block.push(Line::raw(""));
        block.append(&mut lines);
        lines = block;
        if lines.len() >= want {
            break;
        }
    }
    // Scrolled past the top of what is loaded: stop at its top.
    let max_scroll = lines.len().saturating_sub(height);
    app.scroll = app.scroll.min(max_scroll);
    let end = lines.len() - app.scroll;
    let start = end.saturating_sub(height);
    let shown: Vec<Line<'static>> = lines.drain(start..end).collect();
    f.render_widget(Paragraph::new(shown), area);
}

fn entry_lines(entry: &Entry, width: u16, show_thinking: bool) -> Vec<Line<'static>> {
    let dim = Style::default().fg(Color::DarkGray);
    match entry {
        Entry::User { text, steered } => {
            let mark = if *steered { "» " } else { "> " };
            markdown::render(
                text,
                width,
                Span::styled(
                    mark,
                    Style::default()
                        .fg(Color::Green)
                        .add_modifier(Modifier::BOLD),
                ),
                Style::default().fg(Color::Green),
            )
        }
        Entry::Answer {
            text,
            thinking,
            done,
        } => {
            let mut out = Vec::new();
            if !thinking.is_empty() {
                if show_thinking {
                    out.extend(markdown::render(
                        thinking,
                        width,
                        Span::styled("┆ ", dim),
                        dim,
                    ));
                } else {
                    let words = thinking.split_whitespace().count();
                    out.push(Line::styled(
                        format!("▸ thinking ({words} words; Ctrl+E shows it)"),
                        dim,
                    ));
                }
            }
            if !text.is_empty() || !done {
                let body = if text.is_empty() {
                    "…"
                } else {
                    text.as_str()
                };
                out.extend(markdown::render(
                    body,
                    width,
                    Span::raw("  "),
                    Style::default(),
                ));
            }
            out
        }
        Entry::Tool {
            name,
            status,
            started,
            took,
            ..
        } => {
            let (mark, word, color) = match status {
                ToolStatus::Running => ("◌", "running", Color::Yellow),
                ToolStatus::Done => ("✓", "done", Color::Green),
                ToolStatus::Failed => ("✗", "failed", Color::Red),
            };
            let secs = took.unwrap_or_else(|| started.elapsed()).as_secs_f64();
            vec![Line::from(vec![
                Span::styled("  ┃ ", Style::default().fg(color)),
                Span::styled(
                    format!("{mark} {name}"),
                    Style::default().add_modifier(Modifier::BOLD),
                ),
                Span::styled(format!("  {word} {secs:.1}s"), Style::default().fg(color)),
            ])]
        }
        Entry::Note(text) => markdown::render(text, width, Span::styled("· ", dim), dim),
        Entry::Error(text) => markdown::render(
            text,
            width,
            Span::styled("! ", Style::default().fg(Color::Red)),
            Style::default().fg(Color::Red),
        ),
    }
}

/// The permission mode (its name exactly), model, thinking, incognito, the
/// thread's tokens and cost today, the connection, and a running answer.
pub(super) fn status_line(app: &App) -> Line<'static> {
    let sep = Span::styled(" │ ", Style::default().fg(Color::DarkGray));
    let mode_color = match app.info.mode.as_str() {
        "bypass" => Color::Red,
        "auto" | "accept_edits" => Color::Yellow,
        _ => Color::Cyan,
    };
    let conn = match app.connected {
        Some(true) => Span::styled("● connected", Style::default().fg(Color::Green)),
        Some(false) => Span::styled("○ reconnecting", Style::default().fg(Color::Red)),
        None => Span::styled("○ connecting", Style::default().fg(Color::DarkGray)),
    };
    // The mode first: on a narrow terminal it is the last to be cut.
    let mut spans = vec![
        Span::styled(
            format!("mode {}", app.info.mode),
            Style::default().fg(mode_color),
        ),
        sep.clone(),
        Span::raw(app.info.model.clone()),
        sep.clone(),
        Span::raw(format!("thinking {}", app.info.thinking)),
        sep.clone(),
        Span::raw(format!(
            "incognito {}",
            if app.info.incognito { "on" } else { "off" }
        )),
        sep.clone(),
        Span::raw(format!("{} today", usage_text(app.tokens, app.cost_usd))),
        sep.clone(),
        conn,
    ];
    if let Some(run) = &app.run {
        spans.push(sep);
        spans.push(Span::styled(
            format!("answering {}s", run.started.elapsed().as_secs()),
            Style::default().fg(Color::Yellow),
        ));
    }
    Line::from(spans)
}

fn picker(f: &mut Frame<'_>, p: &super::app::Picker, area: Rect) {
    let title = match p.kind {
        PickerKind::Model => " model · ↑↓ Enter · Esc ",
        PickerKind::Thinking => " thinking · ↑↓ Enter · Esc ",
    };
    let rows = (p.choices.len() as u16 + 2).min(area.height);
    let width = (p.choices.iter().map(|c| c.width()).max().unwrap_or(0) as u16 + 6)
        .max(title.width() as u16 + 2)
        .min(area.width);
    let rect = Rect {
        x: area.x + (area.width - width) / 2,
        y: area.y + (area.height - rows) / 2,
        width,
        height: rows,
    };
    let lines: Vec<Line<'_>> = p
        .choices
        .iter()
        .enumerate()
        .map(|(i, c)| {
            if i == p.selected {
                Line::styled(
                    format!("▶ {c}"),
                    Style::default().add_modifier(Modifier::REVERSED),
                )
            } else {
                Line::raw(format!("  {c}"))
            }
        })
        .collect();
    let skip = (p.selected + 1).saturating_sub(usize::from(rows.saturating_sub(2)));
    f.render_widget(Clear, rect);
    f.render_widget(
        Paragraph::new(lines.into_iter().skip(skip).collect::<Vec<_>>())
            .block(Block::default().borders(Borders::ALL).title(title)),
        rect,
    );
}
