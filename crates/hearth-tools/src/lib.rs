//! hearth-tools: what the model can call.
//!
//! The `Tool` trait, the `ToolRegistry` every surface shares, and the built-in
//! tools. The registry contains failures: a tool that errors, panics or hangs
//! yields a JSON `{"error": ...}` result for the model, never a failed run.

pub mod builtin;
pub mod memory;
pub mod profiles;
pub mod registry;
pub mod schema;
pub mod untrusted;
pub mod web;

pub use profiles::{ToolProfile, ToolProfiles, channel_of};
pub use registry::{
    Tool, ToolClass, ToolContext, ToolError, ToolOutput, ToolRegistry, ToolSource, ToolWait,
};
