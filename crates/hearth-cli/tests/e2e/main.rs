//! End-to-end tests: the real `hearth` binary against the fake provider.

#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] fns unwrap what the test set up"
)]

mod harness;

mod alerts;
mod api;
mod apps;
mod bad_input;
mod budget;
mod chat;
mod cli;
mod cli_lists;
mod compaction;
mod confirmations;
mod credentials;
mod dashboard;
mod discord;
mod discord_keys;
mod discord_resume;
mod doctor;
mod doctor_database;
mod door;
mod durability;
mod home_lock;
mod http;
mod incognito;
mod init;
mod job_tools;
mod jobs;
mod log_levels;
mod mcp_client;
mod mcp_server;
mod memory;
mod memory_meaning;
mod memory_reembed;
mod metrics;
mod modes;
mod openai;
mod ordering;
mod outbox;
mod outcome_unknown;
mod permissions;
mod postgres;
mod postgres_channels;
mod postgres_tls;
mod presses;
mod providers;
mod reactions;
mod readme;
mod refused;
mod reload;
mod reload_channels;
mod router;
mod secrets;
mod service;
mod shared_threads;
mod skills;
mod slack;
mod sms;
mod store_copy;
mod subagents;
mod telegram;
mod tools;
mod tui;
mod usage;
