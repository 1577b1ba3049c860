//! hearth-core: the domain types every other crate shares.
//!
//! Pure data: ids, messages and their content, the events a provider streams,
//! usage, run status and envelopes, run events and the `Inbound` every surface
//! produces. No I/O lives here; if two crates need a type, it belongs here.

pub mod ids;
pub mod inbound;
pub mod job_key;
pub mod message;
pub mod run;
pub mod stream;
pub mod time;

pub use ids::{ModelRef, ModelRefError, new_run_id};
pub use inbound::{DeliveryMode, Inbound};
pub use job_key::{JOB_SOURCE, job_firing_key, parse_job_firing_key};
pub use message::{ChatRequest, Content, Message, Role, ThinkingLevel, ToolSpec};
pub use run::{Confirmation, RunEnvelope, RunError, RunEvent, RunEventKind, RunOutput, RunStatus};
pub use stream::{FinishReason, StreamEvent, Usage};
pub use time::{Timestamp, now_ms, rfc3339};
