//! `POST /channels/sms/twilio`: Twilio posts each incoming text here,
//! form-encoded and signed. A post whose signature does not match the
//! configured `public_url` and auth token gets 403 and does nothing.
//! Otherwise it is answered at once with an empty TwiML response (the
//! answer goes out later through the outbox), once what it asks is stored:
//! a run (one per `MessageSid`, however often Twilio posts it), a keyword
//! recorded, a confirmation answered.

use std::sync::Arc;

use bytes::Bytes;
use hearth_core::{DeliveryMode, Inbound, ThreadKey, UserKey};
use hearth_runtime::surfaces::Webhook;
use hearth_runtime::{Answerer, Runtime, RuntimeError};
use http::StatusCode;

use super::{Sms, signature, state, thread_key, user_key};
use crate::channel::Live;
use crate::error::ChannelError;
use crate::kit::settle;

/// The webhook's path.
pub const PATH: &str = "/channels/sms/twilio";

/// The empty TwiML answer: Twilio sends nothing back by itself.
const TWIML: &str = r#"<?xml version="1.0" encoding="UTF-8"?><Response></Response>"#;

/// What `HELP` answers.
pub(super) const HELP: &str = "This number answers with an AI assistant (hearth). Text a question to get an answer. Reply STOP to stop all messages, START to resume. Approve or deny an action with YES <code> or NO <code>.";

/// The carriers' opt-out words (Twilio's standard set).
const STOP_WORDS: [&str; 8] = [
    "STOP",
    "STOPALL",
    "UNSUBSCRIBE",
    "CANCEL",
    "END",
    "QUIT",
    "REVOKE",
    "OPTOUT",
];
/// The opt-in words.
const START_WORDS: [&str; 3] = ["START", "UNSTOP", "YES"];
/// The help words.
const HELP_WORDS: [&str; 2] = ["HELP", "INFO"];

/// Twilio's push endpoint.
pub(super) struct TwilioWebhook(pub(super) Arc<Sms>);

#[async_trait::async_trait]
impl Webhook for TwilioWebhook {
    fn path(&self) -> &'static str {
        PATH
    }

    async fn handle(
        &self,
        runtime: &Runtime,
        request: http::Request<Bytes>,
    ) -> http::Response<Bytes> {
        let sms = Live::new(self.0.clone(), runtime.clone());
        let (parts, body) = request.into_parts();
        let status = receive(&sms, &parts.headers, &body).await;
        let mut resp = if status == StatusCode::OK {
            let mut r = http::Response::new(Bytes::from_static(TWIML.as_bytes()));
            r.headers_mut().insert(
                http::header::CONTENT_TYPE,
                http::HeaderValue::from_static("text/xml"),
            );
            r
        } else {
            http::Response::new(Bytes::new())
        };
        *resp.status_mut() = status;
        resp
    }
}

/// One parsed incoming text.
struct Text<'a> {
    sid: &'a str,
    from: &'a str,
    body: &'a str,
}

fn param<'a>(params: &'a [(String, String)], name: &str) -> Option<&'a str> {
    params
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

async fn receive(sms: &Live<Sms>, headers: &http::HeaderMap, body: &[u8]) -> StatusCode {
    let Ok(params) = serde_urlencoded::from_bytes::<Vec<(String, String)>>(body) else {
        tracing::warn!(channel = "sms", "refused a post that is not form-encoded");
        return StatusCode::BAD_REQUEST;
    };
    let given = headers
        .get(signature::HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let (Ok(api), Some(url)) = (&sms.kit.api, sms.config.public_url.as_deref()) else {
        tracing::warn!(
            channel = "sms",
            "refused a post: no auth token or public_url to check its signature with"
        );
        return StatusCode::FORBIDDEN;
    };
    if !signature::verify(api.auth_token(), url, &params, given) {
        tracing::warn!(
            channel = "sms",
            "refused a post whose X-Twilio-Signature does not match (check public_url is exactly the URL Twilio calls, and the auth token)"
        );
        return StatusCode::FORBIDDEN;
    }
    if param(&params, "AccountSid") != Some(sms.config.account_sid.as_str()) {
        tracing::warn!(channel = "sms", "refused a post for another Twilio account");
        return StatusCode::FORBIDDEN;
    }
    let (Some(sid), Some(from)) = (param(&params, "MessageSid"), param(&params, "From")) else {
        // A status callback or another kind of post: nothing to answer.
        return StatusCode::OK;
    };
    if !hearth_runtime::config::is_e164(from) {
        // Short codes and alphanumeric senders cannot be answered.
        tracing::info!(
            channel = "sms",
            "ignored a text from a sender that is not a phone number"
        );
        return StatusCode::OK;
    }
    let text = Text {
        sid,
        from,
        body: param(&params, "Body").unwrap_or_default(),
    };
    match settle("sms", handle(sms, &text).await) {
        Ok(()) => {
            sms.kit.health.event();
            StatusCode::OK
        }
        Err(e) => {
            tracing::warn!(channel = "sms", error = %e, "could not take an incoming text");
            sms.kit.health.failed(format!("taking a text: {e}"));
            StatusCode::SERVICE_UNAVAILABLE
        }
    }
}

/// `YES <code>` or `NO <code>`: (approve, code).
fn confirmation_reply(body: &str) -> Option<(bool, String)> {
    let mut words = body.split_whitespace();
    let verb = words.next()?.to_ascii_uppercase();
    let code = words.next()?.to_ascii_uppercase();
    if words.next().is_some() || code.len() != state::CODE_LEN {
        return None;
    }
    match verb.as_str() {
        "YES" | "Y" => Some((true, code)),
        "NO" | "N" => Some((false, code)),
        _ => None,
    }
}

async fn handle(sms: &Live<Sms>, t: &Text<'_>) -> Result<(), ChannelError> {
    if t.body.trim().is_empty() {
        // A picture without words: nothing to ask the model.
        return Ok(());
    }
    let word = t.body.trim().to_ascii_uppercase();
    let store = sms.kit.store.as_ref();
    if STOP_WORDS.contains(&word.as_str()) {
        // Twilio (as carriers require) confirms the opt-out itself; hearth
        // records it and sends nothing more until START.
        state::set_opted_out(store, t.from, true).await?;
        tracing::info!(
            channel = "sms",
            "a number texted STOP: no replies until it texts START"
        );
        return Ok(());
    }
    if START_WORDS.contains(&word.as_str()) {
        state::set_opted_out(store, t.from, false).await?;
        tracing::info!(channel = "sms", "a number texted START: replies resume");
        return Ok(());
    }
    if state::opted_out(store, t.from).await? {
        // Nothing may be sent back, so nothing is asked of the model.
        tracing::info!(
            channel = "sms",
            "ignored a text from a number that texted STOP"
        );
        return Ok(());
    }
    if HELP_WORDS.contains(&word.as_str()) {
        if sms.kit.first_sight(&format!("help:{}", t.sid)).await? {
            sms.notify(t.from, super::webhook::HELP).await?;
        }
        return Ok(());
    }
    let user = user_key(t.from);
    if !sms.kit.admit_private(&user, t.from, t.from).await? {
        return Ok(());
    }
    if let Some((approve, code)) = confirmation_reply(t.body) {
        return answer(sms, t, &user, approve, &code).await;
    }
    let inbound = Inbound {
        source: "sms".into(),
        thread_key: ThreadKey::new(thread_key(t.from))?,
        user_key: UserKey::new(user)?,
        text: t.body.to_owned(),
        delivery_mode: DeliveryMode::FollowUp,
        // Twilio may post the same text again: one run.
        idempotency_key: Some(format!("sms:{}", t.sid)),
        scope: None,
        roles: Vec::new(),
    };
    sms.kit.ingest(&sms.runtime, inbound, t.from, None).await?;
    Ok(())
}

/// Answers the confirmation whose code `number` texted, and says how.
async fn answer(
    sms: &Live<Sms>,
    t: &Text<'_>,
    user: &str,
    approve: bool,
    code: &str,
) -> Result<(), ChannelError> {
    let store = sms.kit.store.as_ref();
    if !sms.kit.first_sight(&format!("answer:{}", t.sid)).await? {
        return Ok(());
    }
    let Some(token) = state::code_token(store, t.from, code).await? else {
        return sms
            .notify(
                t.from,
                format!("No question with code {code} is waiting for you."),
            )
            .await;
    };
    let said = match sms
        .runtime
        .resolve_confirmation_by(&token, Answerer::user(user), approve)
        .await
    {
        Ok(_) => {
            state::forget_code(store, t.from, code).await?;
            if approve { "Approved." } else { "Denied." }
        }
        Err(RuntimeError::ConfirmationNotFound) => {
            state::forget_code(store, t.from, code).await?;
            "That question is no longer waiting (answered, expired, or its run ended)."
        }
        Err(RuntimeError::Forbidden(_)) => "Only the person who was asked can answer this.",
        Err(e) => return Err(e.into()),
    };
    sms.notify(t.from, said).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn confirmation_replies_are_a_verb_and_a_code() {
        assert_eq!(
            confirmation_reply("YES abcde"),
            Some((true, "ABCDE".into()))
        );
        assert_eq!(
            confirmation_reply(" no  K7PQR "),
            Some((false, "K7PQR".into()))
        );
        assert_eq!(confirmation_reply("yes"), None);
        assert_eq!(confirmation_reply("yes please do"), None);
        assert_eq!(confirmation_reply("YES abc"), None);
        assert_eq!(confirmation_reply("maybe ABCDE"), None);
    }
}
