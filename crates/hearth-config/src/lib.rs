//! hearth-config: the typed `hearth.toml`, its layering and the home directory.
//!
//! Layering: built-in defaults, then the file, then `HEARTH_<SECTION>__<KEY>`
//! environment overrides, merged on a `toml::Table` before one strict
//! deserialisation (`deny_unknown_fields`). Errors name the file or variable,
//! the key path and what is wrong. Nothing else in hearth reads the environment
//! for configuration.

pub mod agent;
pub mod alerts;
pub mod apps;
pub mod budget;
pub mod channels;
pub mod check;
pub mod error;
pub mod home;
pub mod layer;
pub mod llm;
pub mod mcp;
pub mod memory;
pub mod model;
pub mod permissions;
pub mod router;
pub mod server;
pub mod skills;
pub mod tools;

pub use agent::*;
pub use alerts::{ALERT_EVENTS, AlertRule, AlertTarget, AlertsConfig, WebhookUrl};
pub use budget::{BudgetConfig, PoolConfig, PoolKind, PoolScope, PoolWindow};
pub use channels::{
    ChannelsConfig, DiscordConfig, MAX_SMS_SEGMENTS, SlackConfig, SlackMode, SmsConfig,
    SmsProvider, TelegramConfig, TelegramMode, is_e164,
};
pub use check::CAPABILITY_KEYS;
pub use error::ConfigError;
pub use home::{HomeReport, prepare_home};
pub use layer::{load, load_str};
pub use llm::*;
pub use mcp::{McpConfig, McpServerConfig};
pub use memory::MemoryConfig;
pub use model::*;
pub use permissions::*;
pub use router::{ArmConfig, Quality, RouterConfig, RouterStrategy, TASK_CLASSES};
pub use server::*;
pub use skills::{ExecutableSkillConfig, SkillsConfig};
pub use tools::*;
