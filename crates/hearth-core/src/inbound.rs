//! `Inbound`: what every surface turns a received message into.

use serde::{Deserialize, Serialize};

use crate::keys::{ThreadKey, UserKey};

/// How a message relates to the thread's active run.
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryMode {
    /// Queue behind the thread's active run.
    #[default]
    FollowUp,
    /// Hand the message to the thread's active run before its next model call.
    Steer,
}

/// One message received by a surface, ready for `Runtime::ingest`. Its keys
/// were checked where the surface made them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inbound {
    /// The surface it came from (`api`, `cli`, `telegram`, ...).
    pub source: String,
    /// `<channel>:<kind>:<id>`: one conversation history per thread.
    pub thread_key: ThreadKey,
    /// `<channel>:user:<id>`.
    pub user_key: UserKey,
    /// The message text; never empty.
    pub text: String,
    /// Follow-up or steer.
    pub delivery_mode: DeliveryMode,
    /// A key that makes a retried delivery return the same run.
    pub idempotency_key: Option<String>,
    /// The space whose grants apply to the run (`discord:guild:<id>`,
    /// `slack:team:<id>`, `telegram:chat:<id>`); `None` for `global`, or, for
    /// a channel's thread, the scope its channel reports. Stored with the run,
    /// so a run recovered after a restart is checked where it was asked.
    pub scope: Option<String>,
    /// The sender's role ids on the platform (a Discord member's roles), so
    /// grants to `role:<id>` apply; stored with the run like `scope`.
    pub roles: Vec<String>,
}
