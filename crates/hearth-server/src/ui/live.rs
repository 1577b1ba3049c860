//! `/ui/events`: the one event stream an open page listens to. It tells
//! which runs changed (`run`, `{"run_id","status"}`) and which process-wide
//! notices fired (`notice`, `{"event"}`); the page then redraws the part it
//! shows. No run text goes through it. A page that fell behind is told to
//! redraw everything (`resync`).

use std::convert::Infallible;

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::Stream;
use serde_json::json;
use tokio::sync::broadcast::error::RecvError;

use crate::AppState;

/// The stream. It holds two broadcast receivers and nothing else, so an
/// open page costs a few hundred bytes while idle.
pub async fn events(
    State(st): State<AppState>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let runs = st.runtime.run_changes();
    let notices = st.runtime.notices();
    let stream = futures_util::stream::unfold(
        (runs, notices),
        |(mut runs, mut notices)| async move {
            let ev = tokio::select! {
                r = runs.recv() => match r {
                    Ok(c) => Event::default().event("run").data(
                        json!({"run_id": c.run_id, "status": c.status.as_str()}).to_string(),
                    ),
                    Err(RecvError::Lagged(_)) => Event::default().event("resync").data("{}"),
                    Err(RecvError::Closed) => return None,
                },
                n = notices.recv() => match n {
                    Ok(n) => Event::default().event("notice").data(json!({"event": n.event}).to_string()),
                    Err(RecvError::Lagged(_)) => Event::default().event("resync").data("{}"),
                    Err(RecvError::Closed) => return None,
                },
            };
            Some((Ok(ev), (runs, notices)))
        },
    );
    Sse::new(stream).keep_alive(KeepAlive::default())
}
