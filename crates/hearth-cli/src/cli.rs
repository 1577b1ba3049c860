//! Command-line arguments and dispatch.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::Exit;

/// hearth: a self-hosted AI agent gateway.
#[derive(Debug, Parser)]
#[command(
    name = "hearth",
    version,
    about,
    after_help = "Exit codes: 0 done; 1 the request or the run failed; 2 bad usage or \
                  configuration (a request the server refused as invalid included); 3 a \
                  --wait ended while the run goes on (follow it with `hearth run wait \
                  <run_id>`); 4 the run stopped to ask for a confirmation (answer with \
                  `hearth confirm <token>` or `hearth deny <token>`); 130 interrupted \
                  (Ctrl+C) while waiting, the run going on unless --cancel-on-interrupt."
)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

/// Options every command takes.
#[derive(Debug, Args)]
pub struct Global {
    /// hearth's home directory (config, prompts, database).
    #[arg(long, env = "HEARTH_HOME", global = true)]
    pub home: Option<PathBuf>,
    /// The config file (default: <home>/hearth.toml).
    #[arg(long, env = "HEARTH_CONFIG", global = true)]
    pub config: Option<PathBuf>,
    /// The server's URL, for client commands (default: the address the
    /// home's config binds, else http://127.0.0.1:7777).
    #[arg(long, env = "HEARTH_URL", global = true)]
    pub url: Option<String>,
    /// API token, for client commands.
    #[arg(long, env = "HEARTH_TOKEN", global = true, hide_env_values = true)]
    pub token: Option<String>,
    /// Print JSON instead of text for people.
    #[arg(long, global = true)]
    pub json: bool,
    /// Log format of `serve` (default: from config, else human).
    #[arg(long, value_enum, global = true)]
    pub log_format: Option<LogFormatArg>,
}

/// `--log-format`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum LogFormatArg {
    /// Human-readable lines.
    Human,
    /// JSON lines.
    Json,
}

/// What to do.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the gateway.
    Serve {
        /// Listen address (overrides [server] bind).
        #[arg(long, env = "HEARTH_BIND")]
        bind: Option<String>,
    },
    /// Send a message. In a terminal the answer is streamed as it is
    /// written (and the command waits for it); elsewhere, or with
    /// --no-stream, `--wait` prints the final text and no `--wait` prints
    /// the run id and status. Ctrl+C while waiting prints the run id and
    /// how to follow or cancel it.
    Message {
        /// The text; `-`, or none with stdin not a terminal, reads it from
        /// stdin (no length limit but the server's).
        text: Option<String>,
        /// Print the final text only, never the answer as it is written.
        #[arg(long, conflicts_with = "stream")]
        no_stream: bool,
        /// Stream the answer even when stdout is not a terminal.
        #[arg(long)]
        stream: bool,
        /// On Ctrl+C while waiting, cancel the run instead of leaving it
        /// going.
        #[arg(long)]
        cancel_on_interrupt: bool,
        /// The thread (default cli:local).
        #[arg(long, default_value = "cli:local")]
        thread: String,
        /// Who sends it.
        #[arg(long, default_value = "cli:user:local")]
        user: String,
        /// Wait for the answer and print it (exit 3 if the run is still going
        /// when the wait ends, 4 if it stopped to ask for a confirmation).
        #[arg(long)]
        wait: bool,
        /// Longest wait in seconds (at most 600 with --wait or streaming).
        #[arg(long, default_value_t = 600)]
        timeout: u64,
        /// Idempotency key: sending again with the same key returns the same run.
        #[arg(long)]
        idempotency_key: Option<String>,
    },
    /// A full-screen chat in the terminal with a running hearth (see
    /// `/help` inside): the answer streamed, tool calls as cards, inline
    /// confirmations, the model, thinking and permission mode at a key.
    Chat {
        /// The thread (default cli:local, the one `hearth message` uses).
        #[arg(long, default_value = "cli:local")]
        thread: String,
        /// Start `hearth serve` in the background when no server answers.
        #[arg(long)]
        spawn: bool,
    },
    /// Look at runs.
    Run {
        #[command(subcommand)]
        command: RunCommand,
    },
    /// List runs, newest first.
    Runs {
        #[command(subcommand)]
        command: RunsCommand,
    },
    /// Threads: list them, show one's settings, read its history.
    Threads {
        #[command(subcommand)]
        command: ThreadsCommand,
    },
    /// Which user the CLI acts as, which capabilities it holds and why.
    Whoami {
        /// The user to look at (the CLI's own by default).
        #[arg(long, default_value = "cli:user:local")]
        user: String,
        /// `global` or a channel's space.
        #[arg(long, default_value = "global")]
        scope: String,
    },
    /// Print a shell completion script on stdout, e.g.
    /// `hearth completions bash > ~/.local/share/bash-completion/completions/hearth`.
    Completions {
        /// The shell.
        shell: ShellArg,
    },
    /// Print hearth's man page (roff) on stdout, e.g. `hearth man | man -l -`.
    Man,
    /// Models: list, get or set.
    Model {
        #[command(subcommand)]
        command: ModelCommand,
    },
    /// Thinking level: get or set.
    Thinking {
        #[command(subcommand)]
        command: ThinkingCommand,
    },
    /// A thread's permission mode: which allowed actions run without asking
    /// (deny, plan, ask, accept_edits, auto, bypass).
    Mode {
        #[command(subcommand)]
        command: ModeCommand,
    },
    /// Incognito mode of a thread: while on, nothing it says is written to disk.
    Incognito {
        /// `on`, `off`, or `status`.
        #[arg(value_parser = ["on", "off", "status"])]
        state: String,
        /// The thread.
        #[arg(long, default_value = "cli:local")]
        thread: String,
    },
    /// Approve the action a run waits for (the token from `confirmation.required`).
    Confirm {
        /// The confirmation token. (Not named `token`: that is the global API
        /// token option, and clap would merge the two.)
        #[arg(value_name = "TOKEN")]
        confirmation: String,
        /// Who answers: the user who asked, or a holder of confirmations.resolve_any.
        #[arg(long, default_value = "cli:user:local")]
        user: String,
        /// Wait for the run to go on and print its answer.
        #[arg(long)]
        wait: bool,
    },
    /// Refuse the action a run waits for.
    Deny {
        /// The confirmation token.
        #[arg(value_name = "TOKEN")]
        confirmation: String,
        /// Who answers.
        #[arg(long, default_value = "cli:user:local")]
        user: String,
        /// Wait for the run to go on and print its answer.
        #[arg(long)]
        wait: bool,
    },
    /// Start a fresh session on a thread (cancels its run, clears its history).
    New {
        /// The thread.
        #[arg(long, default_value = "cli:local")]
        thread: String,
    },
    /// Is the server up and ready?
    Health,
    /// The store and the replicas sharing it (PostgreSQL), or this one process (SQLite).
    Cluster,
    /// Model calls, tokens and estimated cost.
    Usage {
        /// From: an age such as 7d, 24h, 30m, `today`, or an RFC 3339 time.
        #[arg(long, default_value = "7d")]
        since: String,
        /// Until (exclusive), same forms.
        #[arg(long)]
        until: Option<String>,
        /// Group by provider, model or day.
        #[arg(long = "by", default_value = "provider")]
        by: String,
    },
    /// Rate a run's answer: the model router learns from it.
    Feedback {
        /// The run.
        run_id: String,
        /// `up` or `down`.
        #[arg(value_parser = ["up", "down"])]
        rating: String,
        /// Who rates.
        #[arg(long)]
        user: Option<String>,
    },
    /// The model router: its strategy and what it has learnt per model and task.
    Router,
    /// Budget pools: limit, use, calls in flight and when each resets.
    Budget,
    /// The running server's configuration: show it, or reload it.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
    /// Permissions: grant, revoke, list and check capabilities.
    Permissions {
        #[command(subcommand)]
        command: PermissionsCommand,
    },
    /// Other bots of a Discord server, by their app manifests: import,
    /// approve, enable in a server, disable, list (admin).
    Apps {
        #[command(subcommand)]
        command: AppsCommand,
    },
    /// Keys that belong to a community (a Discord guild, a Slack workspace,
    /// a Telegram group): its runs call the provider with its own key.
    Credentials {
        #[command(subcommand)]
        command: CredentialsCommand,
    },
    /// The audit log, newest first.
    Audit {
        /// At most this many events (1-1000).
        #[arg(long, default_value_t = 100)]
        limit: u32,
    },
    /// API tokens (works on the local home, server running or not).
    Token {
        #[command(subcommand)]
        command: TokenCommand,
    },
    /// Sealed secrets such as provider API keys (works on the local home;
    /// sealing needs the master key in HEARTH_SECRET_KEY).
    Secrets {
        #[command(subcommand)]
        command: SecretsCommand,
    },
    /// What is remembered about a user: export it or erase it; embed every
    /// memory again after a change of model (works on the local home, server
    /// running or not).
    Memory {
        #[command(subcommand)]
        command: MemoryCommand,
    },
    /// The store: copy this home's SQLite database into PostgreSQL.
    Store {
        #[command(subcommand)]
        command: StoreCommand,
    },
    /// SKILL.md skills and signed executable skills.
    Skills {
        #[command(subcommand)]
        command: SkillsCommand,
    },
    /// The chat channels (Telegram, Discord, Slack, SMS) and their state.
    Channels,
    /// Writes a first hearth.toml (provider, model, optionally a chat
    /// channel), runs doctor on it and prints the next command; asks when
    /// stdin is a terminal, takes flags otherwise. Exits with doctor's status.
    Init(crate::init::InitArgs),
    /// Checks everything `serve` checks before it starts, in its words, then
    /// each provider's key and models, each channel's tokens, MCP servers,
    /// skills and jobs. Exit 0 all ok, 1 warnings only, 2 something `serve`
    /// would refuse; --json prints {"checks":[{"name","status","message","fix"}]}.
    Doctor,
    /// Pairing requests from people who want to talk to the assistant.
    Pair {
        #[command(subcommand)]
        command: PairCommand,
    },
    /// Scheduled jobs: list, add, remove, run now.
    Jobs {
        #[command(subcommand)]
        command: JobsCommand,
    },
    /// Replies queued for the chat channels.
    Outbox {
        #[command(subcommand)]
        command: OutboxCommand,
    },
    /// Run hearth as a systemd service: install, uninstall, status.
    Service {
        #[command(subcommand)]
        command: crate::service::ServiceCommand,
    },
    /// MCP: hearth as an MCP server for other clients.
    Mcp {
        #[command(subcommand)]
        command: McpCommand,
    },
}

/// `hearth mcp ...`
#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// Serve MCP on stdin/stdout for clients that start servers as child
    /// processes (Claude Code, Codex, editors), bridged to the running
    /// hearth's `/mcp` at --url with --token.
    Serve,
    /// The MCP servers the running hearth started: transport, state, tool
    /// count and last error (`--json` for the API's answer).
    List,
    /// Calls one tool of a server the running hearth started, as a run with
    /// no model: the same rules as a model's call (capabilities; a
    /// write-class tool asks for confirmation, here on the terminal; the
    /// audit log). Without a terminal, a call that asks prints its token
    /// and exits 3 (answer with `hearth confirm`), unless --yes.
    Call {
        /// The server, as in `[mcp.servers.<name>]`.
        server: String,
        /// The server's own name for the tool (not `<server>__<tool>`).
        tool: String,
        /// The arguments, a JSON object.
        #[arg(default_value = "{}")]
        args: String,
        /// Approve the call's confirmation without asking.
        #[arg(long)]
        yes: bool,
        /// Call as this user (their capabilities apply) instead of as the
        /// operator, who holds every capability.
        #[arg(long)]
        user: Option<String>,
    },
    /// Connects to a streamable HTTP MCP server itself (no hearth needed),
    /// lists its tools and calls those named by --call.
    Probe {
        /// The server's MCP endpoint, e.g. http://127.0.0.1:3000/mcp.
        url: String,
        /// A tool to call after listing (repeatable).
        #[arg(long)]
        call: Vec<String>,
        /// Also call every listed tool, with a plain value for each required
        /// argument (what the conformance suite's client scenarios ask).
        #[arg(long)]
        call_all: bool,
        /// Arguments for each --call, a JSON object.
        #[arg(long, default_value = "{}")]
        args: String,
    },
}

/// `hearth completions <shell>`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ShellArg {
    /// Bash.
    Bash,
    /// Zsh.
    Zsh,
    /// Fish.
    Fish,
    /// PowerShell.
    Powershell,
}

/// `hearth runs ...`
#[derive(Debug, Subcommand)]
pub enum RunsCommand {
    /// Runs, newest first: id, status, thread, when.
    List {
        /// Only runs in this status (queued, running, awaiting_confirmation,
        /// succeeded, failed, cancelled).
        #[arg(long)]
        status: Option<String>,
        /// Only runs of this thread.
        #[arg(long)]
        thread: Option<String>,
        /// Only runs created since: an age such as 7d, 24h, 30m, or an
        /// RFC 3339 time.
        #[arg(long)]
        since: Option<String>,
        /// At most this many (1-1000).
        #[arg(long, default_value_t = 50)]
        limit: u32,
    },
}

/// `hearth threads ...`
#[derive(Debug, Subcommand)]
pub enum ThreadsCommand {
    /// Threads with runs, the most recently active first.
    List {
        /// At most this many (1-1000).
        #[arg(long, default_value_t = 50)]
        limit: u32,
    },
    /// One thread's settings: model, thinking, incognito, message count.
    Show {
        /// The thread's key (e.g. cli:local, telegram:chat:42).
        key: String,
    },
    /// A thread's stored messages, oldest first.
    History {
        /// The thread's key.
        key: String,
        /// At most this many messages, the newest ones (1-1000).
        #[arg(long, default_value_t = 50)]
        limit: u32,
    },
}

/// `hearth pair ...`
#[derive(Debug, Subcommand)]
pub enum PairCommand {
    /// Pending requests.
    List,
    /// Let the user in (they are told).
    Approve {
        /// The pairing code they were given.
        code: String,
    },
    /// Refuse the request.
    Deny {
        /// The pairing code.
        code: String,
    },
}

/// `hearth outbox ...`
#[derive(Debug, Subcommand)]
pub enum OutboxCommand {
    /// Queued replies, newest first (ids and states, never text).
    List {
        /// `pending`, `failed` or `sent`.
        #[arg(long)]
        status: Option<String>,
        /// At most this many (1-1000).
        #[arg(long, default_value_t = 100)]
        limit: u32,
    },
    /// Queue a failed reply again.
    Retry {
        /// The item's id.
        id: i64,
    },
}

/// `hearth config ...`
#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Print the configuration in force and when it was loaded (secrets
    /// shown as <set> or <unset>, never their values).
    Show,
    /// Read hearth.toml and the environment again (as SIGHUP does); print
    /// what changed and what needs a restart. An invalid file changes nothing.
    Reload,
}

/// `hearth run ...`
#[derive(Debug, Subcommand)]
pub enum RunCommand {
    /// One run's envelope.
    Get {
        /// Run id.
        run_id: String,
    },
    /// Wait until a run finishes and print its answer.
    Wait {
        /// Run id.
        run_id: String,
    },
    /// Cancel a run.
    Cancel {
        /// Run id.
        run_id: String,
    },
}

/// `hearth model ...`
#[derive(Debug, Subcommand)]
pub enum ModelCommand {
    /// Known models.
    List,
    /// The thread's model.
    Get {
        /// The thread.
        #[arg(long, default_value = "cli:local")]
        thread: String,
    },
    /// The thread's model, its capabilities, and today's tokens and cost.
    Status {
        /// The thread.
        #[arg(long, default_value = "cli:local")]
        thread: String,
    },
    /// Set the thread's model.
    Set {
        /// `<provider>/<model>`.
        model: String,
        /// The thread.
        #[arg(long, default_value = "cli:local")]
        thread: String,
    },
}

/// `hearth mode ...`
#[derive(Debug, Subcommand)]
pub enum ModeCommand {
    /// The thread's permission mode in force, and when it lapses.
    Show {
        /// The thread.
        #[arg(long, default_value = "cli:local")]
        thread: String,
    },
    /// Set it: deny (no tools), plan (read tools; answers with a plan), ask
    /// (every write asks), accept_edits (file edits run), auto (writes run,
    /// but [permissions] always_ask), bypass (nothing asks; lapses to ask).
    Set {
        /// The mode.
        #[arg(value_parser = ["deny", "plan", "ask", "accept_edits", "auto", "bypass"])]
        mode: String,
        /// The thread.
        #[arg(long, default_value = "cli:local")]
        thread: String,
        /// Seconds until it lapses (bypass lapses after [permissions]
        /// bypass_minutes at the latest).
        #[arg(long, value_name = "SECS")]
        expires_in: Option<u64>,
        /// Then send the thread's last answer (the plan a plan-mode run gave)
        /// back as the next message, and wait for it to be carried out.
        #[arg(long)]
        run_plan: bool,
    },
}

/// `hearth thinking ...`
#[derive(Debug, Subcommand)]
pub enum ThinkingCommand {
    /// The thread's thinking level.
    Get {
        /// The thread.
        #[arg(long, default_value = "cli:local")]
        thread: String,
    },
    /// Set it: off, low, medium or high.
    Set {
        /// The level.
        level: String,
        /// The thread.
        #[arg(long, default_value = "cli:local")]
        thread: String,
    },
}

/// `hearth jobs ...`
#[derive(Debug, Subcommand)]
pub enum JobsCommand {
    /// Every job, oldest first.
    List,
    /// Add a job: it posts TEXT to the thread on SCHEDULE.
    Add {
        /// A name for people.
        #[arg(long)]
        name: String,
        /// Cron (5 or 6 fields, e.g. "0 9 * * MON-FRI"), "every 15m", or an RFC 3339 instant.
        #[arg(long)]
        schedule: String,
        /// IANA time zone the cron expression is read in (default UTC).
        #[arg(long)]
        timezone: Option<String>,
        /// The thread it posts to (e.g. telegram:chat:42).
        #[arg(long)]
        thread: String,
        /// The user it speaks as (default api:user:anonymous).
        #[arg(long)]
        user: Option<String>,
        /// After downtime: latest (default), all or none.
        #[arg(long)]
        catch_up: Option<String>,
        /// The message each firing sends.
        text: String,
    },
    /// Remove a job (its runs stay).
    Rm {
        /// The job's id.
        id: String,
    },
    /// Fire a job now, outside its schedule.
    Run {
        /// The job's id.
        id: String,
    },
}

/// `hearth permissions ...`
#[derive(Debug, Subcommand)]
pub enum PermissionsCommand {
    /// Grant a capability (or `preset:<name>`) to a user or a role.
    Grant {
        /// A user key as hearth shows it (`cli:user:local`,
        /// `telegram:user:42`), `user:<user_key>`, or `role:<id>`.
        subject: String,
        /// A capability such as web.fetch, or preset:<name>.
        capability: String,
        /// `global` or a channel's space (discord:guild:<id>, ...).
        #[arg(long, default_value = "global")]
        scope: String,
    },
    /// Revoke a grant.
    Revoke {
        /// A user key, `user:<user_key>`, or `role:<id>`.
        subject: String,
        /// A capability such as web.fetch, or preset:<name>.
        capability: String,
        /// `global` or a channel's space.
        #[arg(long, default_value = "global")]
        scope: String,
    },
    /// The default preset and the grants in a scope.
    List {
        /// `global` or a channel's space.
        #[arg(long, default_value = "global")]
        scope: String,
    },
    /// Whether a user holds a capability, and why (exits 0 either way).
    Check {
        /// The user's key.
        user_key: String,
        /// A capability such as web.fetch.
        capability: String,
        /// `global` or a channel's space.
        #[arg(long, default_value = "global")]
        scope: String,
        /// Role ids the user holds there, comma-separated (a Discord
        /// member's roles): grants to `role:<id>` count.
        #[arg(long, default_value = "")]
        roles: String,
    },
}

/// `hearth token ...`
#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Create a token; its secret is printed once.
    Create {
        /// A label for it.
        #[arg(long, default_value = "default")]
        name: String,
        /// Bind it to this user (e.g. api:user:ann): it then acts as that
        /// user, on their own runs only, with no operator routes.
        #[arg(long)]
        user: Option<String>,
    },
    /// List tokens (never their secrets).
    List,
    /// Revoke a token by id.
    Revoke {
        /// Token id (tok_...).
        id: String,
    },
}

/// `hearth apps ...`
#[derive(Debug, Subcommand)]
pub enum AppsCommand {
    /// Import a manifest (a JSON file, or fetched by the server from an
    /// https address) as a pending version of its app.
    Import {
        /// The manifest file, or an https:// address to fetch it from
        /// (`--url` is the server's own address, so an address is given
        /// here).
        source: String,
    },
    /// Approve a version: it may then be enabled, and hearth may send its
    /// public commands (the consent is recorded).
    Approve {
        /// The app's name.
        app: String,
        /// The version.
        version: String,
    },
    /// Enable an approved version in a Discord server.
    Enable {
        /// The app's name.
        app: String,
        /// The version.
        version: String,
        /// The Discord server (guild) id.
        #[arg(long)]
        guild: String,
    },
    /// Disable an app in a Discord server.
    Disable {
        /// The app's name.
        app: String,
        /// The Discord server (guild) id.
        #[arg(long)]
        guild: String,
    },
    /// Apps, their versions, and the servers they are enabled in.
    List,
}

/// `hearth credentials ...`
#[derive(Debug, Subcommand)]
pub enum CredentialsCommand {
    /// Give a community its own key for a provider, read from stdin (never
    /// from arguments); it is sealed and never shown again.
    Set {
        /// discord:guild:<id>, slack:team:<id> or telegram:chat:<group id>.
        #[arg(long)]
        scope: String,
        /// A provider under [llm.providers].
        #[arg(long)]
        provider: String,
    },
    /// Remove a community's key (its runs then fail on that provider,
    /// unless [llm] community_fallback = true).
    Remove {
        /// The community's scope.
        #[arg(long)]
        scope: String,
        /// The provider.
        #[arg(long)]
        provider: String,
    },
    /// The providers a community has its own key for (never the keys).
    List {
        /// The community's scope.
        #[arg(long)]
        scope: String,
    },
}

/// `hearth secrets ...`
#[derive(Debug, Subcommand)]
pub enum SecretsCommand {
    /// Print a new random master key for HEARTH_SECRET_KEY.
    Keygen,
    /// Store a secret, reading its value from stdin (never from arguments).
    Set {
        /// The secret's name: 1-64 characters of A-Z a-z 0-9 _ . -
        name: String,
    },
    /// List stored secrets: names and dates, never values.
    List,
    /// Delete a secret.
    Delete {
        /// The secret's name.
        name: String,
    },
}

/// `hearth skills ...`: `list`, `show`, `check` and `reload` ask the running
/// server (the skills it loaded); `keygen`, `sign` and `verify` are local key
/// tools.
#[derive(Debug, Subcommand)]
pub enum SkillsCommand {
    /// Every skill the server found, eligible or not (with the reason).
    List,
    /// One skill of the server: its fields.
    Show {
        /// The skill's name.
        name: String,
    },
    /// The skills the server refused or cannot use, one line each; exits 1
    /// when one is invalid (not when it only lacks a program or variable).
    Check,
    /// Makes the server read its skill folders again.
    Reload,
    /// Makes an ed25519 signing key: the private key goes to
    /// <DIR>/<key_id>.key (mode 0600), the public key is printed for
    /// [skills] trusted_keys.
    Keygen {
        /// Where to write the private key (default <home>/keys).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Signs the executable skill in <DIR>: fills files, key_id and
    /// signature of its hearth-skill.json.
    Sign {
        /// The skill's folder.
        dir: PathBuf,
        /// The private key file from `hearth skills keygen`.
        #[arg(long)]
        key: PathBuf,
    },
    /// Checks the executable skill in <DIR> as `serve` would load it
    /// (signature by a trusted key, hashes, files, version, config); exits 1
    /// with the reason when it would be refused.
    Verify {
        /// The skill's folder.
        dir: PathBuf,
    },
}

/// `hearth memory ...`
#[derive(Debug, Subcommand)]
pub enum MemoryCommand {
    /// Print every memory of a user as JSON.
    Export {
        /// The user's key.
        #[arg(long)]
        user: String,
    },
    /// Erase every memory of a user.
    Delete {
        /// The user's key.
        #[arg(long)]
        user: String,
        /// Do not ask for confirmation.
        #[arg(long)]
        yes: bool,
    },
    /// Embed every memory again with the model [memory] embeddings names
    /// (after changing it), with a progress line; memories already embedded
    /// by that model are kept.
    Reembed,
}

/// `hearth store ...`
#[derive(Debug, Subcommand)]
pub enum StoreCommand {
    /// Copy this home's SQLite database (the server stopped) into an empty
    /// PostgreSQL database whose URL is in HEARTH_DATABASE_URL (or the
    /// variable --url-env names), one line per table, then compare each
    /// table's row count and checksum. Exit 0 when all match, 2 when the
    /// target is not empty.
    CopyToPostgres {
        /// The environment variable that holds the URL (default: [store]
        /// url_env, HEARTH_DATABASE_URL).
        #[arg(long, value_name = "VAR")]
        url_env: Option<String>,
    },
}

/// Runs the command.
pub async fn dispatch(cli: Cli) -> Result<(), Exit> {
    let g = cli.global;
    match cli.command {
        Command::Serve { bind } => crate::serve::run(&g, bind).await,
        Command::Token { command } => crate::tokens::run(&g, command).await,
        Command::Secrets { command } => crate::secrets::run(&g, command).await,
        Command::Memory { command } => crate::memory::run(&g, command).await,
        Command::Store { command } => crate::store_cmd::run(&g, command).await,
        Command::Skills {
            command:
                command @ (SkillsCommand::Keygen { .. }
                | SkillsCommand::Sign { .. }
                | SkillsCommand::Verify { .. }),
        } => crate::skills::run(&g, command).await,
        Command::Completions { shell } => crate::generated::completions(shell),
        Command::Man => crate::generated::man(),
        Command::Doctor => crate::doctor::run(&g).await,
        Command::Service { command } => crate::service::run(&g, command).await,
        Command::Init(args) => crate::init::run(&g, args).await,
        Command::Mcp {
            command: McpCommand::Serve,
        } => crate::mcp_serve::run(&g).await,
        Command::Mcp { command } => crate::client::mcp::run(&g, command).await,
        Command::Chat { thread, spawn } => crate::tui::run(&g, &thread, spawn).await,
        other => crate::client::run(&g, other).await,
    }
}
