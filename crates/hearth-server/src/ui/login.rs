//! `/ui/login` and `/ui/logout`: an API token in, a session cookie out.

use std::sync::Arc;

use axum::Extension;
use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::header::SET_COOKIE;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use maud::html;

use super::layout::{self, bare};
use super::session::{
    CSRF_FIELD, LOGIN_COOKIE, SESSION_COOKIE, Sessions, Viewer, cookie, form_field, random_id,
    safe_next,
};
use crate::AppState;

/// `?next=` of the login page.
#[derive(serde::Deserialize)]
pub struct Next {
    next: Option<String>,
}

fn login_page(status: StatusCode, next: &str, nonce: &str, error: Option<&str>) -> Response {
    let body = html! {
        @if let Some(e) = error {
            p.error role="alert" #login-error { (e) }
        }
        form method="post" action="/ui/login" {
            input type="hidden" name=(CSRF_FIELD) value=(nonce);
            input type="hidden" name="next" value=(next);
            label for="token" { "API token" }
            input #token type="password" name="token" autocomplete="current-password" required autofocus;
            p.hint { "Create one with " code { "hearth token create --name me" } "." }
            button type="submit" { "Log in" }
        }
    };
    // The login form's CSRF token rides in its own short-lived cookie
    // (a double submit): a page elsewhere cannot read or set it.
    let cookie =
        format!("{LOGIN_COOKIE}={nonce}; HttpOnly; SameSite=Strict; Path=/ui/login; Max-Age=3600");
    (
        status,
        [(SET_COOKIE, cookie)],
        bare("Log in to hearth", body),
    )
        .into_response()
}

/// The login form; an open loopback hearth, or a live session, goes on to `next`.
pub async fn form(
    State(st): State<AppState>,
    Extension(sessions): Extension<Arc<Sessions>>,
    headers: HeaderMap,
    Query(q): Query<Next>,
) -> Response {
    let next = safe_next(q.next.as_deref());
    match sessions.viewer(&st, &headers).await {
        Ok(Some(_)) => Redirect::to(&next).into_response(),
        Ok(None) => login_page(StatusCode::OK, &next, &random_id(), None),
        Err(e) => layout::error_page(&e),
    }
}

/// Checks the token and starts a session.
pub async fn submit(
    State(st): State<AppState>,
    Extension(sessions): Extension<Arc<Sessions>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let next = safe_next(form_field(&body, "next").as_deref());
    let sent = form_field(&body, CSRF_FIELD).unwrap_or_default();
    let expected = cookie(&headers, LOGIN_COOKIE).unwrap_or_default();
    if expected.is_empty() || sent != expected {
        return login_page(
            StatusCode::FORBIDDEN,
            &next,
            &random_id(),
            Some("The login form expired; enter the token again."),
        );
    }
    let token = form_field(&body, "token").unwrap_or_default();
    let token = token.trim();
    let name = if token.is_empty() {
        None
    } else {
        match st.runtime.api_token_name(token).await {
            Ok(n) => n,
            Err(e) => return layout::fail(e),
        }
    };
    let Some(name) = name else {
        metrics::counter!("hearth_auth_failures_total").increment(1);
        tracing::info!("a dashboard login was refused: not a valid API token");
        return login_page(
            StatusCode::UNAUTHORIZED,
            &next,
            &random_id(),
            Some("That is not a valid API token (or it was revoked)."),
        );
    };
    let created = match sessions.create(&st, crate::auth::hash_token(token)).await {
        Ok(c) => c,
        Err(e) => return layout::error_page(&e),
    };
    let Some(id) = created else {
        return layout::status_page(
            StatusCode::INTERNAL_SERVER_ERROR,
            "Cannot log in",
            "The system's random number generator failed; try again.",
        );
    };
    tracing::info!(token = %name, "dashboard login");
    let session = format!("{SESSION_COOKIE}={id}; HttpOnly; SameSite=Strict; Path=/");
    let clear = format!("{LOGIN_COOKIE}=; HttpOnly; SameSite=Strict; Path=/ui/login; Max-Age=0");
    let mut resp = Redirect::to(&next).into_response();
    for c in [session, clear] {
        if let Ok(v) = c.parse() {
            resp.headers_mut().append(SET_COOKIE, v);
        }
    }
    resp
}

/// A page with the one button that logs out (a GET never changes state).
pub async fn logout_form(Extension(viewer): Extension<Viewer>) -> Response {
    layout::page(
        &viewer,
        "/ui/logout",
        "Log out",
        None,
        html! {
            p { "End this dashboard session? The API token stays valid." }
            (layout::button_form(&viewer, "/ui/logout", "Log out", ""))
        },
    )
    .into_response()
}

/// Ends the session.
pub async fn logout(
    State(st): State<AppState>,
    Extension(sessions): Extension<Arc<Sessions>>,
    Extension(viewer): Extension<Viewer>,
) -> Response {
    if let Some(id) = &viewer.session
        && let Err(e) = sessions.remove(&st, id).await
    {
        return layout::error_page(&e);
    }
    let clear = format!("{SESSION_COOKIE}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0");
    let mut resp = Redirect::to("/ui/login").into_response();
    if let Ok(v) = clear.parse() {
        resp.headers_mut().append(SET_COOKIE, v);
    }
    resp
}
