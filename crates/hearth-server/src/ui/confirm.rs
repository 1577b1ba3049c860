//! `/ui/confirmations`: every pending question, and Approve / Deny.
//!
//! An answer goes through the same rules as `POST
//! /v1/confirmations/{token}`: single use, expiring, and refused for
//! whoever may not answer. An operator token answers for the user who
//! asked, as the API lets its holder name that user. The question is found
//! by its run, not its token (the store keeps only the token's hash), so
//! one asked before a restart is answered here as well.

use axum::Extension;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect};
use hearth_core::RunStatus;
use hearth_core::records::RunFilter;
use maud::html;

use super::layout::{self, PageResult, csrf_field, empty, fail, page, time_str};
use super::session::{Viewer, encode, form_field};
use crate::AppState;
use crate::extract::ApiPath;

/// The confirmations shown at once.
const PAGE: u32 = 100;

/// `?part=live`: only the queue, for the live redraw.
#[derive(Debug, Default, serde::Deserialize)]
pub struct Part {
    part: Option<String>,
}

/// The queue of pending confirmations; new ones appear live.
pub async fn list(
    State(st): State<AppState>,
    Extension(viewer): Extension<Viewer>,
    axum::extract::Query(part): axum::extract::Query<Part>,
) -> PageResult {
    let filter = RunFilter {
        thread_key: None,
        status: Some(RunStatus::AwaitingConfirmation),
        limit: PAGE,
        // A member sees the questions of their own runs only.
        user_key: viewer.member().map(str::to_owned),
        ..Default::default()
    };
    let runs = st.runtime.list_runs(&filter).await.map_err(fail)?;
    let queue = html! {
        @if runs.is_empty() {
            (empty("Nothing is waiting for a confirmation."))
        } @else {
            ul.cards #confirmations {
                @for r in &runs {
                    @if let Some(c) = &r.confirmation {
                        li.card #{ "confirm-" (r.run_id) } {
                            p { strong { (c.tool) } " asked by " (r.user_key) " on " a href={ "/ui/threads/" (encode(&r.thread_key)) } { (r.thread_key) } }
                            p.summary { (c.summary) }
                            p.meta { "Run " a.mono href={ "/ui/runs/" (encode(&r.run_id)) } { (r.run_id) } " · expires " (time_str(&c.expires_at)) }
                            form.inline method="post" action={ "/ui/confirmations/" (encode(&r.run_id)) } {
                                (csrf_field(&viewer))
                                button type="submit" name="approve" value="true" { "Approve" }
                                " "
                                button.danger type="submit" name="approve" value="false" { "Deny" }
                            }
                        }
                    }
                }
            }
        }
    };
    if part.part.as_deref() == Some("live") {
        return Ok(layout::Fragment(queue).into_response());
    }
    let body = html! { div #live data-src="/ui/confirmations?part=live" { (queue) } };
    Ok(page(
        &viewer,
        "/ui/confirmations",
        "Confirmations",
        Some("confirmations"),
        body,
    )
    .into_response())
}

/// Approves or denies the question the run waits on.
pub async fn answer(
    State(st): State<AppState>,
    Extension(viewer): Extension<Viewer>,
    ApiPath(run_id): ApiPath<String>,
    body: Bytes,
) -> PageResult {
    let approve = match form_field(&body, "approve").as_deref() {
        Some("true") => true,
        Some("false") => false,
        _ => {
            return Err(layout::status_page(
                StatusCode::BAD_REQUEST,
                "Refused",
                "Choose Approve or Deny.",
            ));
        }
    };
    let run = st.runtime.get_run(&run_id).await.map_err(fail)?;
    if !viewer.may_see(&run.user_key) {
        return Err(super::session::forbidden_run());
    }
    // By the run, not the token: the store keeps only the token's hash, so
    // a question asked before a restart is answered here too.
    match st
        .runtime
        .resolve_confirmation_of_run(&run_id, &run.user_key, approve)
        .await
    {
        Ok(_) => {}
        Err(hearth_runtime::RuntimeError::ConfirmationNotFound) => {
            return Err(layout::status_page(
                StatusCode::NOT_FOUND,
                "Not found",
                "This run is not waiting for a confirmation any more (answered, expired, or its run ended).",
            ));
        }
        Err(e) => return Err(fail(e)),
    }
    tracing::info!(run_id = %run_id, approve, "a confirmation was answered on the dashboard");
    Ok(Redirect::to("/ui/confirmations").into_response())
}
