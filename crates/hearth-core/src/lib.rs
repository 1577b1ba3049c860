//! hearth-core: the domain types every other crate shares.
//!
//! Pure data: ids, messages and their content, the events a provider streams,
//! usage, run status and envelopes, run events and the `Inbound` every surface
//! produces, and the records that cross the store's boundary and the runtime's
//! API (`records`: runs and steps, grants, audit events, jobs, the outbox,
//! pairings, history pages) together with the one interface the engine, the
//! runtime and the channels share, `ReplyRouter`. No I/O lives here; if two
//! crates need a type, it belongs here.

pub mod apps;
pub mod channels;
pub mod error_text;
pub mod ids;
pub mod inbound;
pub mod job_key;
pub mod keys;
pub mod message;
pub mod mode;
pub mod records;
pub mod run;
pub mod stream;
pub mod time;

pub use channels::{AllowedEntry, CHANNEL_NAMES, ChannelInfo, ChannelState, Removed};
pub use error_text::error_text;
pub use ids::{ModelRef, ModelRefError, new_run_id};
pub use inbound::{DeliveryMode, Inbound};
pub use job_key::{JOB_SOURCE, job_firing_key, parse_job_firing_key};
pub use keys::{KeyError, MAX_KEY_LEN, ThreadKey, UserKey, check_key};
pub use message::{ChatRequest, Content, Message, Role, ThinkingLevel, ToolSpec};
pub use mode::PermissionMode;
pub use run::{
    ChildRun, Confirmation, DELEGATE_SOURCE, RunEnvelope, RunError, RunEvent, RunEventKind,
    RunOutput, RunStatus, delegate_key,
};
pub use stream::{FinishReason, StreamEvent, Usage};
pub use time::{Timestamp, now_ms, rfc3339};
