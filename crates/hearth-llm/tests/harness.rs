//! What the adapter tests share: a request, reading a whole stream while
//! checking its shape (one `Finish`, last; an error only last), accumulating
//! a turn, and checking that an error shows neither the key nor the prompt.

use futures_util::StreamExt;
use hearth_core::{ChatRequest, Message, Role, StreamEvent, ThinkingLevel, ToolSpec};
use hearth_llm::{Accumulator, AssistantTurn, LlmError, Provider};
use serde_json::json;

/// The system prompt every test request carries; no error may quote it.
pub const SYSTEM: &str = "be brief";

/// A one-message request for `model`.
pub fn request_for(model: &str, text: &str) -> ChatRequest {
    ChatRequest {
        model: model.into(),
        system: SYSTEM.into(),
        messages: vec![Message::text(Role::User, text)],
        tools: Default::default(),
        thinking: ThinkingLevel::Off,
        max_output_tokens: None,
    }
}

/// A tool taking one string argument, `path`.
pub fn tool(name: &str) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        description: format!("The {name} tool"),
        parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
    }
}

/// All items of one call; checks that an error comes only last, and that a
/// stream without error has exactly one `Finish`, as its last event.
pub async fn events(
    p: &(impl Provider + ?Sized),
    req: &ChatRequest,
) -> Result<Vec<StreamEvent>, LlmError> {
    let items: Vec<_> = p.stream(req).await?.collect().await;
    let mut out = Vec::new();
    let n = items.len();
    for (i, item) in items.into_iter().enumerate() {
        match item {
            Ok(ev) => {
                if matches!(ev, StreamEvent::Finish(_)) {
                    assert_eq!(i + 1, n, "Finish must be the last event");
                }
                out.push(ev);
            }
            Err(e) => {
                assert_eq!(i + 1, n, "an error must be the last item");
                return Err(e);
            }
        }
    }
    let finishes = out
        .iter()
        .filter(|e| matches!(e, StreamEvent::Finish(_)))
        .count();
    assert_eq!(finishes, 1, "{out:?}");
    Ok(out)
}

/// The events before the error that must end the stream, and that error.
pub async fn error_after(
    p: &(impl Provider + ?Sized),
    req: &ChatRequest,
) -> (Vec<StreamEvent>, LlmError) {
    let mut items: Vec<_> = p.stream(req).await.unwrap().collect().await;
    let err = items.pop().unwrap().unwrap_err();
    let evs = items.into_iter().map(Result::unwrap).collect();
    (evs, err)
}

/// The error of a call, whether it came before the stream or as its last item.
pub async fn call_error(p: &(impl Provider + ?Sized), req: &ChatRequest) -> LlmError {
    match p.stream(req).await {
        Err(e) => e,
        Ok(stream) => {
            let mut items: Vec<_> = stream.collect().await;
            items.pop().unwrap().unwrap_err()
        }
    }
}

/// The turn `evs` make, for provider `name`.
pub fn accumulate(evs: &[StreamEvent], name: &str) -> AssistantTurn {
    let mut acc = Accumulator::new();
    evs.iter().for_each(|e| acc.push(e));
    acc.finish(name).unwrap()
}

/// One whole call, accumulated for provider `name`.
pub async fn turn_as(
    p: &(impl Provider + ?Sized),
    req: &ChatRequest,
    name: &str,
) -> Result<AssistantTurn, LlmError> {
    let mut acc = Accumulator::new();
    for ev in events(p, req).await? {
        acc.push(&ev);
    }
    acc.finish(name)
}

/// Fails when the error, shown or debugged, holds `key` or the system prompt.
pub fn assert_no_secret(err: &LlmError, key: &str) {
    let shown = format!("{err} {err:?}");
    assert!(!shown.contains(key), "{shown}");
    assert!(!shown.contains(SYSTEM), "{shown}");
}

/// The value of header `name` (lowercase) among recorded headers.
pub fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// The text of the text deltas among `evs`.
pub fn text_of(evs: &[StreamEvent]) -> String {
    evs.iter()
        .filter_map(|e| match e {
            StreamEvent::TextDelta(t) => Some(t.as_str()),
            _ => None,
        })
        .collect()
}
