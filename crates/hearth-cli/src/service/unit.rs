//! The systemd unit `hearth service install` writes.

use std::path::Path;

/// Which service manager the unit is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The user's own manager (`systemctl --user`), the default.
    User,
    /// The system manager (`/etc/systemd/system`), as root.
    System,
}

/// What the unit runs and as whom.
#[derive(Debug)]
pub struct UnitSpec<'a> {
    /// The `hearth` binary, absolute.
    pub binary: &'a Path,
    /// The hearth home, absolute.
    pub home: &'a Path,
    /// `--config`, absolute, when not `<home>/hearth.toml`.
    pub config: Option<&'a Path>,
    /// User and group ids a system unit runs as (the home's owner).
    pub run_as: Option<(u32, u32)>,
    /// User or system manager.
    pub scope: Scope,
}

/// A path as one word of a unit file: `%` escaped (systemd expands
/// specifiers), `$` too in a command line (`exec`: it expands variables
/// there), quoted when it holds spaces.
fn word(path: &Path, exec: bool) -> Result<String, String> {
    let s = path
        .to_str()
        .ok_or_else(|| format!("{} is not valid UTF-8", path.display()))?;
    if s.chars().any(char::is_control) {
        return Err(format!("{s:?} holds a control character"));
    }
    let mut escaped = s.replace('%', "%%");
    if exec {
        escaped = escaped.replace('$', "$$");
    }
    if escaped.contains([' ', '\t', '"', '\'', '\\']) {
        Ok(format!(
            "\"{}\"",
            escaped.replace('\\', "\\\\").replace('"', "\\\"")
        ))
    } else {
        Ok(escaped)
    }
}

/// A path as the rest of a line (`EnvironmentFile=` takes the line whole):
/// only specifiers are expanded there.
fn line_path(path: &Path) -> Result<String, String> {
    let s = path
        .to_str()
        .ok_or_else(|| format!("{} is not valid UTF-8", path.display()))?;
    if s.chars().any(char::is_control) {
        return Err(format!("{s:?} holds a control character"));
    }
    Ok(s.replace('%', "%%"))
}

/// The unit's text. Errors name a path the unit file cannot hold.
pub fn render(spec: &UnitSpec<'_>) -> Result<String, String> {
    let binary = word(spec.binary, true)?;
    let home = word(spec.home, true)?;
    let rw_home = word(spec.home, false)?;
    let env_file = line_path(&spec.home.join("hearth.env"))?;
    let mut exec = format!("{binary} serve --home {home}");
    if let Some(c) = spec.config {
        exec.push_str(&format!(" --config {}", word(c, true)?));
    }
    let run_as = match spec.run_as {
        Some((uid, gid)) => format!("User={uid}\nGroup={gid}\n"),
        None => String::new(),
    };
    let wanted_by = match spec.scope {
        Scope::User => "default.target",
        Scope::System => "multi-user.target",
    };
    Ok(format!(
        "\
# Written by `hearth service install`; `hearth service uninstall` removes it.
# Provider keys and channel tokens go in {env_file} (KEY=value lines,
# chmod 600); the unit never holds their values.
[Unit]
Description=hearth, a self-hosted AI agent gateway
After=network-online.target
Wants=network-online.target

[Service]
# hearth sends READY=1 once GET /readyz would answer 200, and WATCHDOG=1 at
# half of WatchdogSec.
Type=notify
{run_as}ExecStart={exec}
EnvironmentFile=-{env_file}
Restart=on-failure
RestartSec=5s
WatchdogSec=60s
# Runs in flight get [server] shutdown_grace_secs after SIGTERM.
TimeoutStopSec=90s
UMask=0077
# Hardening: no privilege gain, the whole file system read-only except the
# home, a private /tmp.
NoNewPrivileges=yes
ProtectSystem=strict
ReadWritePaths={rw_home}
PrivateTmp=yes

[Install]
WantedBy={wanted_by}
"
    ))
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    fn spec<'a>(binary: &'a Path, home: &'a Path, scope: Scope) -> UnitSpec<'a> {
        UnitSpec {
            binary,
            home,
            config: None,
            run_as: None,
            scope,
        }
    }

    #[test]
    fn user_unit_is_hardened_and_notifies() {
        let bin = PathBuf::from("/usr/local/bin/hearth");
        let home = PathBuf::from("/home/ada/.hearth");
        let unit = render(&spec(&bin, &home, Scope::User)).unwrap();
        for line in [
            "Type=notify",
            "ExecStart=/usr/local/bin/hearth serve --home /home/ada/.hearth",
            "EnvironmentFile=-/home/ada/.hearth/hearth.env",
            "Restart=on-failure",
            "WatchdogSec=60s",
            "NoNewPrivileges=yes",
            "ProtectSystem=strict",
            "ReadWritePaths=/home/ada/.hearth",
            "PrivateTmp=yes",
            "WantedBy=default.target",
        ] {
            assert!(unit.lines().any(|l| l == line), "no {line:?} in:\n{unit}");
        }
        assert!(!unit.contains("User="), "{unit}");
    }

    #[test]
    fn system_unit_runs_as_the_home_owner() {
        let bin = PathBuf::from("/usr/local/bin/hearth");
        let home = PathBuf::from("/srv/hearth");
        let config = PathBuf::from("/etc/hearth/hearth.toml");
        let unit = render(&UnitSpec {
            config: Some(&config),
            run_as: Some((1000, 1001)),
            ..spec(&bin, &home, Scope::System)
        })
        .unwrap();
        assert!(unit.contains("\nUser=1000\nGroup=1001\n"), "{unit}");
        assert!(
            unit.contains(
                "ExecStart=/usr/local/bin/hearth serve --home /srv/hearth \
                 --config /etc/hearth/hearth.toml\n"
            ),
            "{unit}"
        );
        assert!(unit.contains("WantedBy=multi-user.target"), "{unit}");
    }

    #[test]
    fn paths_are_escaped_for_systemd() {
        let bin = PathBuf::from("/opt/my tools/hearth");
        let home = PathBuf::from("/srv/100%/$HOME");
        let unit = render(&spec(&bin, &home, Scope::User)).unwrap();
        assert!(
            unit.contains("ExecStart=\"/opt/my tools/hearth\" serve --home /srv/100%%/$$HOME\n"),
            "{unit}"
        );
        assert!(
            unit.contains("EnvironmentFile=-/srv/100%%/$HOME/hearth.env\n"),
            "{unit}"
        );
        assert!(unit.contains("ReadWritePaths=/srv/100%%/$HOME\n"), "{unit}");
        let bad = PathBuf::from("/srv/a\nb");
        assert!(render(&spec(&bin, &bad, Scope::User)).is_err());
    }
}
