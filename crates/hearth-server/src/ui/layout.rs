//! The page shell every dashboard page shares, its error pages, and small
//! formatting helpers.

use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use maud::{DOCTYPE, Markup, PreEscaped, html};

use super::session::{CSRF_FIELD, Viewer};
use crate::ApiError;

/// The pages in the navigation: path and label.
const NAV: [(&str, &str); 14] = [
    ("/ui", "Overview"),
    ("/ui/runs", "Runs"),
    ("/ui/confirmations", "Confirmations"),
    ("/ui/threads", "Threads"),
    ("/ui/usage", "Usage"),
    ("/ui/budget", "Budget"),
    ("/ui/router", "Router"),
    ("/ui/jobs", "Jobs"),
    ("/ui/channels", "Channels"),
    ("/ui/mcp", "MCP"),
    ("/ui/skills", "Skills"),
    ("/ui/memory", "Memory"),
    ("/ui/settings", "Settings"),
    ("/ui/logout", "Log out"),
];

/// The sections a member (a token bound to a user) sees.
const MEMBER_NAV: [&str; 4] = ["/ui/runs", "/ui/confirmations", "/ui/threads", "/ui/logout"];

/// A whole page: `title`, the nav with `here` marked, and `body`. `live`
/// names what the page's script follows (`overview`, `runs`, `run:<id>`)
/// over the one event stream; `None` opens no stream.
pub fn page(
    viewer: &Viewer,
    here: &str,
    title: &str,
    live: Option<&str>,
    body: Markup,
) -> Html<String> {
    // A member's pages are not live: the event stream tells of every run.
    let live = live.filter(|_| viewer.member().is_none());
    let member = viewer.member().is_some();
    Html(
        html! {
            (DOCTYPE)
            html lang="en" {
                head {
                    meta charset="utf-8";
                    meta name="viewport" content="width=device-width, initial-scale=1";
                    meta name="csrf" content=(viewer.csrf);
                    title { (title) " · hearth" }
                    link rel="stylesheet" href="/ui/assets/app.css";
                    link rel="icon" href="/ui/assets/icon.svg" type="image/svg+xml";
                    script src="/ui/assets/app.js" defer {}
                }
                body data-live=[live] {
                    a.skip href="#main" { "Skip to content" }
                    header {
                        nav aria-label="Sections" {
                            @for (path, label) in NAV {
                                @if (path == "/ui/logout" && viewer.session.is_none())
                                    || (member && !MEMBER_NAV.contains(&path)) {
                                } @else if path == here {
                                    a href=(path) aria-current="page" { (label) }
                                } @else {
                                    a href=(path) { (label) }
                                }
                            }
                        }
                    }
                    main #main {
                        h1 { (title) }
                        (body)
                    }
                }
            }
        }
        .into_string(),
    )
}

/// A bare page for errors and the login, without the nav.
pub fn bare(title: &str, body: Markup) -> Html<String> {
    Html(
        html! {
            (DOCTYPE)
            html lang="en" {
                head {
                    meta charset="utf-8";
                    meta name="viewport" content="width=device-width, initial-scale=1";
                    title { (title) " · hearth" }
                    link rel="stylesheet" href="/ui/assets/app.css";
                    link rel="icon" href="/ui/assets/icon.svg" type="image/svg+xml";
                }
                body {
                    main #main .narrow {
                        h1 { (title) }
                        (body)
                        p { a href="/ui" { "Back to the overview" } }
                    }
                }
            }
        }
        .into_string(),
    )
}

/// An error page with `status`.
pub fn status_page(status: StatusCode, title: &str, message: &str) -> Response {
    (
        status,
        bare(title, html! { p.error role="alert" { (message) } }),
    )
        .into_response()
}

/// The page for an error of the runtime or of a request, with its status.
pub fn error_page(e: &ApiError) -> Response {
    let (status, _) = e.status_code();
    let title = match status {
        StatusCode::NOT_FOUND => "Not found",
        StatusCode::FORBIDDEN => "Forbidden",
        StatusCode::UNAUTHORIZED => "Not logged in",
        s if s.is_client_error() => "Refused",
        _ => "Something failed",
    };
    status_page(status, title, &e.to_string())
}

/// A page's result: its HTML, or an error page.
pub type PageResult = Result<Response, Response>;

/// Turns an API error into its page.
pub fn fail(e: impl Into<ApiError>) -> Response {
    error_page(&e.into())
}

/// A form that posts to `action` with the CSRF token and one button.
pub fn button_form(viewer: &Viewer, action: &str, label: &str, class: &str) -> Markup {
    html! {
        form.inline method="post" action=(action) {
            input type="hidden" name=(CSRF_FIELD) value=(viewer.csrf);
            button type="submit" class=(class) { (label) }
        }
    }
}

/// A hidden CSRF field for a form.
pub fn csrf_field(viewer: &Viewer) -> Markup {
    html! { input type="hidden" name=(CSRF_FIELD) value=(viewer.csrf); }
}

/// A time in unix ms as `YYYY-MM-DD HH:MM:SS` UTC, wrapped in `<time>`.
pub fn time(ms: i64) -> Markup {
    let full = hearth_core::rfc3339(ms);
    let short = full.get(..19).unwrap_or(&full).replace('T', " ");
    html! { time datetime=(full) { (short) } }
}

/// An RFC 3339 time as the API gives it, shortened.
pub fn time_str(s: &str) -> Markup {
    let short = s.get(..19).unwrap_or(s).replace('T', " ");
    html! { time datetime=(s) { (short) } }
}

/// Dollars with enough digits for small sums.
pub fn usd(x: f64) -> String {
    if x == 0.0 {
        "$0".into()
    } else if x.abs() < 0.01 {
        format!("${x:.5}")
    } else {
        format!("${x:.2}")
    }
}

/// A status as a badge.
pub fn badge(status: &str) -> Markup {
    html! { span class={ "badge s-" (status) } { (status) } }
}

/// A note that the page has nothing to show.
pub fn empty(what: &str) -> Markup {
    html! { p.empty { (what) } }
}

/// Inserts a raw, already-escaped fragment.
pub fn raw(s: String) -> Markup {
    PreEscaped(s)
}

/// A piece of a page, without the shell (for live redraws).
pub struct Fragment(pub Markup);

impl IntoResponse for Fragment {
    fn into_response(self) -> Response {
        Html(self.0.into_string()).into_response()
    }
}
