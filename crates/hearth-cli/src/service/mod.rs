//! `hearth service install|uninstall|status`: hearth as a systemd service,
//! and the readiness notifications `serve` sends under `Type=notify`.

pub mod notify;
mod unit;

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, anyhow};
use clap::{Args, Subcommand};

use crate::Exit;
use crate::cli::Global;
use unit::{Scope, UnitSpec};

/// The unit's name, in both managers.
const UNIT: &str = "hearth.service";

/// `hearth service ...`
#[derive(Debug, Subcommand)]
pub enum ServiceCommand {
    /// Install hearth as a systemd service (a hardened unit, Type=notify).
    ///
    /// Writes a unit that runs `hearth serve` on this home (restarted on
    /// failure), then runs `systemctl daemon-reload` and `enable`. Provider keys and channel tokens go in <home>/hearth.env
    /// (KEY=value lines), which the unit reads; the unit holds no key.
    Install {
        #[command(flatten)]
        scope: ScopeArg,
        /// Print the unit that would be written, and write nothing.
        #[arg(long)]
        print: bool,
    },
    /// Disable and stop the service, and remove its unit.
    Uninstall {
        #[command(flatten)]
        scope: ScopeArg,
    },
    /// `systemctl status hearth.service`.
    Status {
        #[command(flatten)]
        scope: ScopeArg,
    },
}

/// `--user` (the default) or `--system`.
#[derive(Debug, Args)]
#[group(multiple = false)]
pub struct ScopeArg {
    /// The user's own service manager: ~/.config/systemd/user (the default).
    #[arg(long)]
    user: bool,
    /// The system's service manager: /etc/systemd/system (as root); the unit
    /// runs as the owner of the home.
    #[arg(long)]
    system: bool,
}

impl ScopeArg {
    fn scope(&self) -> Option<Scope> {
        match (self.user, self.system) {
            (_, true) => Some(Scope::System),
            (true, _) => Some(Scope::User),
            _ => None,
        }
    }
}

/// Runs a `hearth service` command.
pub async fn run(g: &Global, command: ServiceCommand) -> Result<(), Exit> {
    match command {
        ServiceCommand::Install { scope, print } => {
            install(g, scope.scope().unwrap_or(Scope::User), print)
        }
        ServiceCommand::Uninstall { scope } => uninstall(scope.scope().unwrap_or(Scope::User)),
        ServiceCommand::Status { scope } => status(scope.scope()),
    }
}

/// Where the unit file of `scope` lives.
fn unit_path(scope: Scope) -> Result<PathBuf, Exit> {
    match scope {
        Scope::System => Ok(PathBuf::from("/etc/systemd/system").join(UNIT)),
        Scope::User => {
            let config = match std::env::var_os("XDG_CONFIG_HOME") {
                Some(x) if !x.is_empty() => PathBuf::from(x),
                _ => match std::env::var_os("HOME") {
                    Some(h) if !h.is_empty() => PathBuf::from(h).join(".config"),
                    _ => {
                        return Err(Exit::config(anyhow!(
                            "cannot find the user's unit folder: HOME is not set \
                             (or use --system)"
                        )));
                    }
                },
            };
            Ok(config.join("systemd/user").join(UNIT))
        }
    }
}

/// `systemctl [--user] <args>` as a command.
fn systemctl(scope: Scope, args: &[&str]) -> Command {
    let mut cmd = Command::new("systemctl");
    if scope == Scope::User {
        cmd.arg("--user");
    }
    cmd.args(args);
    cmd
}

/// How a user runs `args` by hand.
fn by_hand(scope: Scope, args: &str) -> String {
    match scope {
        Scope::User => format!("systemctl --user {args}"),
        Scope::System => format!("systemctl {args}"),
    }
}

/// Runs systemctl; `Ok(false)` when there is no systemctl on PATH.
fn run_systemctl(scope: Scope, args: &[&str]) -> Result<bool, Exit> {
    match systemctl(scope, args).output() {
        Ok(out) if out.status.success() => Ok(true),
        Ok(out) => Err(anyhow!(
            "`{}` failed ({}): {}",
            by_hand(scope, &args.join(" ")),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )
        .into()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(anyhow!("cannot run systemctl: {e}").into()),
    }
}

fn absolute(path: &Path) -> Result<PathBuf, Exit> {
    std::path::absolute(path)
        .with_context(|| format!("cannot make {} absolute", path.display()))
        .map_err(Exit::config)
}

fn install(g: &Global, scope: Scope, print: bool) -> Result<(), Exit> {
    let home = absolute(&crate::serve::home_dir(g)?)?;
    let config = g.config.as_deref().map(absolute).transpose()?;
    let binary = std::env::current_exe().context("cannot find the running hearth binary")?;
    let owner = std::fs::metadata(&home).ok().map(|m| {
        use std::os::unix::fs::MetadataExt;
        (m.uid(), m.gid())
    });
    if owner.is_none() && !print {
        // ProtectSystem=strict makes everything else read-only, so serve
        // could not create it, and ReadWritePaths= on a missing path fails
        // the unit's start.
        return Err(Exit::config(anyhow!(
            "the home {} does not exist: create it first as the user the service \
             runs as (`hearth serve --home {}` once, or `hearth init`), then install",
            home.display(),
            home.display()
        )));
    }
    let run_as = match scope {
        // A system unit runs as the home's owner, not as root.
        Scope::System => owner.filter(|(uid, _)| *uid != 0),
        Scope::User => None,
    };
    let text = unit::render(&UnitSpec {
        binary: &binary,
        home: &home,
        config: config.as_deref(),
        run_as,
        scope,
    })
    .map_err(|e| Exit::config(anyhow!("cannot write a unit for this path: {e}")))?;
    if print {
        print!("{text}");
        return Ok(());
    }
    if binary.components().any(|c| c.as_os_str() == "target") {
        eprintln!(
            "note: the unit runs {}, a cargo build folder; a rebuild or `cargo clean` \
             changes it. Install the binary somewhere stable first \
             (`cargo install --locked --path crates/hearth-cli`) and run that one's \
             `hearth service install`.",
            binary.display()
        );
    }
    let path = unit_path(scope)?;
    write_unit(&path, &text)?;
    println!("wrote {}", path.display());
    let env_file = home.join("hearth.env");
    println!(
        "keys: put provider keys and channel tokens in {} as KEY=value lines \
         (chmod 600); the unit reads it at each start",
        env_file.display()
    );
    let reloaded = run_systemctl(scope, &["daemon-reload"])?;
    if !reloaded {
        println!(
            "systemctl was not found; where systemd runs, start it with: {} && {}",
            by_hand(scope, "daemon-reload"),
            by_hand(scope, "enable --now hearth")
        );
        return Ok(());
    }
    run_systemctl(scope, &["enable", UNIT])?;
    println!(
        "enabled {UNIT}; start it: {}",
        by_hand(scope, "start hearth")
    );
    if scope == Scope::User {
        println!("to keep it running while you are logged out: loginctl enable-linger \"$USER\"");
    }
    Ok(())
}

/// Writes the unit through a temporary file and a rename, so systemd never
/// reads half a unit.
fn write_unit(path: &Path, text: &str) -> Result<(), Exit> {
    let dir = path
        .parent()
        .ok_or_else(|| anyhow!("{} has no folder", path.display()))?;
    std::fs::create_dir_all(dir).with_context(|| {
        format!(
            "cannot create {} (--system needs root: run it with sudo)",
            dir.display()
        )
    })?;
    let tmp = dir.join(format!(".{UNIT}.tmp"));
    std::fs::write(&tmp, text).with_context(|| {
        format!(
            "cannot write {} (--system needs root: run it with sudo)",
            tmp.display()
        )
    })?;
    std::fs::rename(&tmp, path)
        .with_context(|| format!("cannot move the unit to {}", path.display()))?;
    Ok(())
}

fn uninstall(scope: Scope) -> Result<(), Exit> {
    let path = unit_path(scope)?;
    if !path.exists() {
        println!("no hearth unit at {}; nothing to remove", path.display());
        return Ok(());
    }
    let has_systemctl = run_systemctl(scope, &["disable", "--now", UNIT])?;
    std::fs::remove_file(&path).with_context(|| {
        format!(
            "cannot remove {} (--system needs root: run it with sudo)",
            path.display()
        )
    })?;
    println!("removed {}", path.display());
    if has_systemctl {
        run_systemctl(scope, &["daemon-reload"])?;
        println!("stopped and disabled {UNIT}");
    }
    Ok(())
}

fn status(scope: Option<Scope>) -> Result<(), Exit> {
    // Without a flag: the unit that is installed, the user's first.
    let scope = match scope {
        Some(s) => s,
        None if unit_path(Scope::User).is_ok_and(|p| p.exists()) => Scope::User,
        None if unit_path(Scope::System).is_ok_and(|p| p.exists()) => Scope::System,
        None => Scope::User,
    };
    let status = match systemctl(scope, &["status", "--no-pager", UNIT]).status() {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(anyhow!(
                "systemctl was not found: `hearth service` needs systemd (elsewhere, \
                 `hearth health` asks the running server)"
            )
            .into());
        }
        Err(e) => return Err(anyhow!("cannot run systemctl: {e}").into()),
    };
    match status.code() {
        Some(0) => Ok(()),
        // systemctl's LSB codes: 3 not running, 4 no such unit.
        Some(4) => Err(anyhow!(
            "{UNIT} is not installed: run `hearth service install{}`",
            if scope == Scope::System {
                " --system"
            } else {
                ""
            }
        )
        .into()),
        Some(3) => Err(anyhow!("{UNIT} is installed but not running").into()),
        _ => Err(anyhow!(
            "`{}` failed ({status}): see its message above",
            by_hand(scope, "status hearth.service")
        )
        .into()),
    }
}
