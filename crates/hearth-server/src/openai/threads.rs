//! Which hearth thread an OpenAI request runs on.
//!
//! A thread is where a run's confirmations wait and where `confirm <token>`
//! must arrive to answer them, and a user's new message on it denies what
//! they left unanswered. So each conversation of a client needs a thread of
//! its own, kept across its requests, and a client's background prompts
//! (titles, tags, follow-up suggestions) must run apart from the chat:
//!
//! - `X-Hearth-Thread: <key>`: that thread, with its stored history (a
//!   background prompt never goes there).
//! - a `user`: `openai:<user>`, one thread for all of that user's requests.
//! - no `user`: `openai:anonymous:<conversation>`, where the conversation is
//!   Open WebUI's chat id (`X-OpenWebUI-Chat-Id`, sent when it forwards user
//!   information) or else the first user message, which every later request
//!   of a conversation repeats. System messages are left out: clients
//!   rewrite them per request (dates, retrieved memories).
//! - a background prompt: the thread above with `:tasks` appended, so it
//!   neither waits behind the chat's run nor lands in its history.
//!
//! The conversation's part is a hash prefix (16 hex digits, 64 bits), so a
//! key stays short and holds no message text.

use sha2::{Digest, Sha256};

use super::dto::Conversation;

/// The thread of one request, and whether the request's own messages are
/// its history (else the thread's stored history is).
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Placement {
    pub thread_key: String,
    /// The request's messages are the run's history.
    pub supplied: bool,
}

/// What a request says about where it belongs.
pub(super) struct Request<'a> {
    /// The request's `user`, trimmed, if not empty.
    pub user: Option<&'a str>,
    /// `X-Hearth-Thread`.
    pub named: Option<&'a str>,
    /// `X-OpenWebUI-Chat-Id`.
    pub chat_id: Option<&'a str>,
}

/// Where `conversation`, sent as `req` says, runs.
pub(super) fn place(req: &Request<'_>, conversation: &Conversation) -> Placement {
    let background = conversation.is_background();
    if let Some(named) = req.named
        && !background
    {
        return Placement {
            thread_key: named.to_owned(),
            supplied: false,
        };
    }
    let mut thread_key = match req.user {
        Some(user) => format!("openai:{user}"),
        None => format!("openai:anonymous:{}", conversation_id(req, conversation)),
    };
    if background {
        thread_key.push_str(":tasks");
    }
    Placement {
        thread_key,
        supplied: true,
    }
}

/// Whether `thread_key` is the thread of an anonymous conversation (where
/// a `confirm <token>` may be routed by its token).
pub(super) fn is_anonymous_conversation(thread_key: &str) -> bool {
    thread_key
        .strip_prefix("openai:anonymous:")
        .is_some_and(|rest| !rest.ends_with(":tasks"))
}

/// The conversation's part of an anonymous thread key.
fn conversation_id(req: &Request<'_>, conversation: &Conversation) -> String {
    let mut h = Sha256::new();
    match req.chat_id {
        Some(chat) => {
            h.update(b"chat\0");
            h.update(chat.as_bytes());
        }
        None => {
            h.update(b"opening\0");
            h.update(conversation.opening.as_bytes());
        }
    }
    let digest = h.finalize();
    digest[..8].iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use hearth_core::{Message, Role};

    use super::*;

    fn conv(opening: &str, text: &str) -> Conversation {
        Conversation {
            history: vec![Message::text(Role::User, opening)],
            text: text.to_owned(),
            opening: opening.to_owned(),
            no_user_turn: false,
        }
    }

    const ANONYMOUS: Request<'static> = Request {
        user: None,
        named: None,
        chat_id: None,
    };

    #[test]
    fn anonymous_conversations_get_a_thread_each_kept_across_requests() {
        let a1 = place(&ANONYMOUS, &conv("forget the cat", "forget the cat"));
        let a2 = place(&ANONYMOUS, &conv("forget the cat", "confirm abc"));
        let b = place(&ANONYMOUS, &conv("what is the weather?", "and tomorrow?"));
        assert_eq!(a1, a2);
        assert_ne!(a1.thread_key, b.thread_key);
        assert!(a1.supplied);
        assert!(a1.thread_key.starts_with("openai:anonymous:"), "{a1:?}");
        assert_eq!(a1.thread_key.len(), "openai:anonymous:".len() + 16);
        assert!(is_anonymous_conversation(&a1.thread_key));
    }

    #[test]
    fn a_chat_id_names_the_conversation() {
        let chat = |id| Request {
            chat_id: Some(id),
            ..ANONYMOUS
        };
        let a = place(&chat("c-1"), &conv("hi", "hi"));
        // Another first message in the same chat: the same thread.
        assert_eq!(a, place(&chat("c-1"), &conv("hello", "more")));
        // Another chat opening the same way: another thread.
        assert_ne!(a, place(&chat("c-2"), &conv("hi", "hi")));
        assert_ne!(a, place(&ANONYMOUS, &conv("hi", "hi")));
    }

    #[test]
    fn background_prompts_run_beside_their_chat() {
        let mut task = conv("hi", "### Task:\nGenerate a title");
        let chat = Request {
            chat_id: Some("c-1"),
            ..ANONYMOUS
        };
        let turn = place(&chat, &conv("hi", "hi"));
        let bg = place(&chat, &task);
        assert_eq!(bg.thread_key, format!("{}:tasks", turn.thread_key));
        assert!(!is_anonymous_conversation(&bg.thread_key));
        let alice = Request {
            user: Some("alice"),
            ..ANONYMOUS
        };
        assert_eq!(place(&alice, &task).thread_key, "openai:alice:tasks");
        assert_eq!(place(&alice, &conv("hi", "hi")).thread_key, "openai:alice");
        // Never on a named thread.
        let named = Request {
            named: Some("api:ada"),
            ..alice
        };
        assert_eq!(place(&named, &task).thread_key, "openai:alice:tasks");
        assert_eq!(
            place(&named, &conv("hi", "hi")),
            Placement {
                thread_key: "api:ada".into(),
                supplied: false
            }
        );
        task.text = "Suggest a title".into();
        task.no_user_turn = true;
        assert_eq!(place(&alice, &task).thread_key, "openai:alice:tasks");
    }
}
