//! `EchoProvider`: a deterministic provider without network, for tests and demos.

use futures_util::stream;
use hearth_core::{ChatRequest, FinishReason, Role, StreamEvent, Usage};

use crate::{EventStream, LlmError, Provider};

/// Answers `echo: <text of the last user message>`, streamed in at least two
/// text deltas, then untracked usage and `Finish(Stop)`.
#[derive(Debug, Clone, Copy, Default)]
pub struct EchoProvider;

impl EchoProvider {
    /// A new echo provider.
    pub fn new() -> Self {
        Self
    }
}

#[async_trait::async_trait]
impl Provider for EchoProvider {
    async fn stream(&self, request: &ChatRequest) -> Result<EventStream, LlmError> {
        let text = request
            .messages
            .iter()
            .rev()
            .find(|m| m.role == Role::User)
            .map(|m| m.joined_text())
            .unwrap_or_default();
        // Splitting at a char boundary in the middle exercises callers'
        // delta joining without depending on the text's content.
        let mut mid = text.len() / 2;
        while !text.is_char_boundary(mid) {
            mid -= 1;
        }
        let (a, b) = text.split_at(mid);
        let events = vec![
            Ok(StreamEvent::TextDelta(format!("echo: {a}"))),
            Ok(StreamEvent::TextDelta(b.to_owned())),
            Ok(StreamEvent::Usage(Usage::default())),
            Ok(StreamEvent::Finish(FinishReason::Stop)),
        ];
        Ok(Box::pin(stream::iter(events)))
    }
}

#[cfg(test)]
mod tests {
    use futures_util::StreamExt;
    use hearth_core::{Message, ThinkingLevel};

    use super::*;
    use crate::Accumulator;

    #[tokio::test]
    async fn echoes_the_last_user_message() {
        let req = ChatRequest {
            model: "echo".into(),
            system: "sys".into(),
            messages: vec![
                Message::text(Role::User, "first"),
                Message::text(Role::Assistant, "answer"),
                Message::text(Role::User, "héllo wörld"),
            ],
            tools: Default::default(),
            thinking: ThinkingLevel::Off,
            max_output_tokens: None,
        };
        let events: Vec<_> = EchoProvider::new()
            .stream(&req)
            .await
            .unwrap()
            .collect()
            .await;
        let deltas = events
            .iter()
            .filter(|e| matches!(e, Ok(StreamEvent::TextDelta(_))))
            .count();
        assert!(deltas >= 2);
        assert_eq!(
            events.last().unwrap().as_ref().unwrap(),
            &StreamEvent::Finish(FinishReason::Stop)
        );
        let mut acc = Accumulator::new();
        for e in &events {
            acc.push(e.as_ref().unwrap());
        }
        let turn = acc.finish("echo").unwrap();
        assert_eq!(turn.text(), "echo: héllo wörld");
        assert!(turn.usage.is_untracked());
        assert_eq!(turn.finish_reason, Some(FinishReason::Stop));
    }
}
