//! hearth-mcp: the MCP client.
//!
//! Starts the servers of `[mcp.servers.*]` with hearth, keeps them running,
//! closes them when it stops (a child in its own process group: stdin
//! closed, SIGTERM, SIGKILL), and offers their tools to the model as
//! `<server>__<tool>` through the tool registry (the manager is a
//! `ToolSource`; a tool is write-class unless the operator says otherwise). rmcp is used only in `client`,
//! behind our own [`McpClient`] trait; the rest speaks the MCP wire shapes in
//! JSON. Verified executable skills run the same way ([`skills`]), their
//! tools named `<skill>__<tool>`. This crate never decides permissions or
//! confirmations: its tools declare a class and the capability
//! `mcp.<server>` (`skills.use` for a skill's), and the engine decides.

mod child;
pub mod client;
pub mod error;
pub mod manager;
pub mod names;
pub mod render;
pub mod skills;
mod source;
pub mod tool;

pub use client::{Connection, McpClient, Target, connect};
pub use error::{McpError, Result};
pub use manager::{McpManager, ServerState, ServerStatus};
pub use skills::{SkillServer, SkillsSynced};
pub use tool::McpTool;
