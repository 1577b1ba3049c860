//! hearth-testkit: scriptable fake provider servers for tests and benchmarks.
//!
//! `FakeOpenAi` is an OpenAI-compatible Chat Completions server on
//! 127.0.0.1. Queue `Reply`s to script answers, errors, cut or hanging
//! streams; with an empty queue it echoes the last user message at zero
//! latency, which makes it the fixture for load benchmarks too.
//! `ResetServer` starts an answer and then resets the TCP connection.
//!
//! Every fake fails closed: a request that breaks the platform's rules gets
//! the platform's own error (an HTTP 400 or 401, Slack's `ok: false`,
//! JSON-RPC -32700/-32600 from `fake-mcp`), never the scripted answer, and
//! is recorded; a fake dropped with violations the test never read (through
//! its `violations()` or `rejections()`) fails the test.
//! [`tools`] finds the outside tools some end-to-end tests need, and says
//! whether this is a CI run.

pub mod fake_anthropic;
pub mod fake_discord;
pub mod fake_embeddings;
pub mod fake_gemini;
pub mod fake_mcp;
mod fake_openai;
pub mod fake_responses;
pub mod fake_slack;
pub mod fake_telegram;
pub mod fake_twilio;
mod reply;
mod reset;
mod server;
pub mod tools;

pub use fake_openai::{FAKE_MODELS, FakeOpenAi};
pub use reply::{FakeUsage, Gate, Reply, ToolCallSpec};
pub use reset::ResetServer;
