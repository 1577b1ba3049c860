//! hearth-config: the typed `hearth.toml`, its layering and the home directory.
//!
//! Layering: built-in defaults, then the file, then `HEARTH_<SECTION>__<KEY>`
//! environment overrides, merged on a `toml::Table` before one strict
//! deserialisation (`deny_unknown_fields`). Errors name the file or variable,
//! the key path and what is wrong. Nothing else in hearth reads the environment
//! for configuration.

pub mod alerts;
pub mod budget;
pub mod channels;
pub mod check;
pub mod error;
pub mod home;
pub mod layer;
pub mod mcp;
pub mod model;
pub mod router;
pub mod skills;

pub use alerts::{ALERT_EVENTS, AlertRule, AlertTarget, AlertsConfig, WebhookUrl};
pub use budget::{BudgetConfig, PoolConfig, PoolKind, PoolScope, PoolWindow};
pub use channels::{
    ChannelsConfig, DiscordConfig, SlackConfig, SlackMode, TelegramConfig, TelegramMode,
};
pub use check::CAPABILITY_KEYS;
pub use error::ConfigError;
pub use home::{HomeReport, prepare_home};
pub use layer::{load, load_str};
pub use mcp::{McpConfig, McpServerConfig};
pub use model::*;
pub use router::{ArmConfig, Quality, RouterConfig, RouterStrategy, TASK_CLASSES};
pub use skills::{ExecutableSkillConfig, SkillsConfig};
