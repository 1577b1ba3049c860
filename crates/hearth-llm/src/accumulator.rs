//! `Accumulator`: folds a stream of `StreamEvent`s into one assistant turn.

use std::collections::BTreeMap;

use hearth_core::{Content, FinishReason, Message, Role, StreamEvent, Usage};

use crate::error::{ErrorKind, LlmError};

/// A whole assistant answer, as collected from its stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssistantTurn {
    /// Role `Assistant`; content in order: thinking (when any), text (when
    /// non-empty), then one tool call per index, ascending.
    pub message: Message,
    /// Usage as last reported, field by field; all `None` if never reported.
    pub usage: Usage,
    /// Why the model stopped, when the stream said so.
    pub finish_reason: Option<FinishReason>,
}

impl AssistantTurn {
    /// The tool calls of the answer as `(id, name, arguments)`, in index order.
    pub fn tool_calls(&self) -> impl Iterator<Item = (&str, &str, &str)> {
        self.message.content.iter().filter_map(|c| match c {
            Content::ToolCall {
                id,
                name,
                arguments,
            } => Some((id.as_str(), name.as_str(), arguments.as_str())),
            _ => None,
        })
    }

    /// The answer's text (empty when it only called tools).
    pub fn text(&self) -> &str {
        self.message
            .content
            .iter()
            .find_map(|c| match c {
                Content::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .unwrap_or("")
    }
}

#[derive(Debug, Default)]
struct PartialCall {
    id: Option<String>,
    name: Option<String>,
    arguments: String,
}

/// Collects `StreamEvent`s; `finish` turns them into an `AssistantTurn`.
#[derive(Debug, Default)]
pub struct Accumulator {
    text: String,
    thinking: String,
    signature: Option<String>,
    saw_thinking: bool,
    calls: BTreeMap<u32, PartialCall>,
    usage: Usage,
    finish_reason: Option<FinishReason>,
}

impl Accumulator {
    /// An empty accumulator.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one event. Text and reasoning append to one buffer each, so a long
    /// answer costs amortised growth, not an allocation per delta.
    pub fn push(&mut self, event: &StreamEvent) {
        match event {
            StreamEvent::TextDelta(t) => self.text.push_str(t),
            StreamEvent::ThinkingDelta { text, signature } => {
                self.saw_thinking = true;
                self.thinking.push_str(text);
                if let Some(sig) = signature {
                    self.signature = Some(sig.clone());
                }
            }
            StreamEvent::ToolCallDelta {
                index,
                id,
                name,
                arguments,
            } => {
                let call = self.calls.entry(*index).or_default();
                if let Some(id) = id {
                    call.id = Some(id.clone());
                }
                if let Some(name) = name {
                    call.name = Some(name.clone());
                }
                call.arguments.push_str(arguments);
            }
            StreamEvent::Usage(u) => {
                let merge = |old: &mut Option<u64>, new: Option<u64>| {
                    if new.is_some() {
                        *old = new;
                    }
                };
                merge(&mut self.usage.input_tokens, u.input_tokens);
                merge(&mut self.usage.output_tokens, u.output_tokens);
                merge(&mut self.usage.cached_tokens, u.cached_tokens);
                merge(&mut self.usage.reasoning_tokens, u.reasoning_tokens);
                merge(&mut self.usage.cache_write_tokens, u.cache_write_tokens);
            }
            StreamEvent::Finish(reason) => self.finish_reason = Some(reason.clone()),
        }
    }

    /// The finished turn. A tool call that never got a name is a
    /// `MalformedResponse` error of `provider`: there is nothing to run.
    pub fn finish(self, provider: &str) -> Result<AssistantTurn, LlmError> {
        let mut content = Vec::with_capacity(2 + self.calls.len());
        if self.saw_thinking && (!self.thinking.is_empty() || self.signature.is_some()) {
            content.push(Content::Thinking {
                text: self.thinking,
                signature: self.signature,
                provider: Some(provider.to_owned()),
            });
        }
        if !self.text.is_empty() {
            content.push(Content::Text { text: self.text });
        }
        for (index, call) in self.calls {
            let Some(name) = call.name.filter(|n| !n.is_empty()) else {
                return Err(LlmError::new(
                    provider,
                    ErrorKind::MalformedResponse,
                    format!("tool call at index {index} has no name"),
                ));
            };
            let id = match call.id {
                Some(id) if !id.is_empty() => id,
                _ => format!("call_{index}"),
            };
            let arguments = if call.arguments.trim().is_empty() {
                String::from("{}")
            } else {
                call.arguments
            };
            content.push(Content::ToolCall {
                id,
                name,
                arguments,
            });
        }
        Ok(AssistantTurn {
            message: Message {
                role: Role::Assistant,
                content,
            },
            usage: self.usage,
            finish_reason: self.finish_reason,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(index: u32, id: Option<&str>, name: Option<&str>, args: &str) -> StreamEvent {
        StreamEvent::ToolCallDelta {
            index,
            id: id.map(Into::into),
            name: name.map(Into::into),
            arguments: args.into(),
        }
    }

    #[test]
    fn orders_thinking_text_then_calls_by_index() {
        let mut acc = Accumulator::new();
        for ev in [
            call(1, Some("b"), Some("second"), "{\"x\""),
            StreamEvent::TextDelta("hel".into()),
            StreamEvent::ThinkingDelta {
                text: "hmm".into(),
                signature: None,
            },
            call(0, Some("a"), Some("first"), ""),
            StreamEvent::TextDelta("lo".into()),
            call(1, None, None, ":1}"),
            StreamEvent::ThinkingDelta {
                text: String::new(),
                signature: Some("sig".into()),
            },
            StreamEvent::Finish(FinishReason::ToolCalls),
        ] {
            acc.push(&ev);
        }
        let turn = acc.finish("p").unwrap();
        assert_eq!(turn.message.role, Role::Assistant);
        assert_eq!(
            turn.message.content,
            vec![
                Content::Thinking {
                    text: "hmm".into(),
                    signature: Some("sig".into()),
                    provider: Some("p".into()),
                },
                Content::Text {
                    text: "hello".into()
                },
                Content::ToolCall {
                    id: "a".into(),
                    name: "first".into(),
                    arguments: "{}".into()
                },
                Content::ToolCall {
                    id: "b".into(),
                    name: "second".into(),
                    arguments: "{\"x\":1}".into()
                },
            ]
        );
        let calls: Vec<_> = turn.tool_calls().collect();
        assert_eq!(
            calls,
            vec![("a", "first", "{}"), ("b", "second", "{\"x\":1}")]
        );
        assert_eq!(turn.text(), "hello");
        assert_eq!(turn.finish_reason, Some(FinishReason::ToolCalls));
        assert!(turn.usage.is_untracked());
    }

    #[test]
    fn missing_id_gets_index_name_missing_is_malformed() {
        let mut acc = Accumulator::new();
        acc.push(&call(3, None, Some("t"), "{}"));
        let turn = acc.finish("p").unwrap();
        assert_eq!(turn.tool_calls().next(), Some(("call_3", "t", "{}")));

        let mut acc = Accumulator::new();
        acc.push(&call(0, Some("x"), None, "{}"));
        let err = acc.finish("prov").unwrap_err();
        assert_eq!(err.kind, ErrorKind::MalformedResponse);
        assert_eq!(err.provider, "prov");
    }

    #[test]
    fn usage_last_value_wins_per_field() {
        let mut acc = Accumulator::new();
        acc.push(&StreamEvent::Usage(Usage {
            input_tokens: Some(1),
            output_tokens: Some(2),
            ..Usage::default()
        }));
        acc.push(&StreamEvent::Usage(Usage {
            output_tokens: Some(5),
            cached_tokens: Some(3),
            ..Usage::default()
        }));
        let turn = acc.finish("p").unwrap();
        assert_eq!(
            turn.usage,
            Usage {
                input_tokens: Some(1),
                output_tokens: Some(5),
                cached_tokens: Some(3),
                reasoning_tokens: None,
                cache_write_tokens: None,
            }
        );
        assert!(turn.message.content.is_empty());
        assert_eq!(turn.finish_reason, None);
    }
}
