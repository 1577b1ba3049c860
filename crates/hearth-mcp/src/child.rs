//! A stdio server's process: started in a process group of its own, its
//! stderr read to the end, and closed by the MCP stdio shutdown sequence
//! (stdin closed, a bounded wait, SIGTERM to the group, a bounded wait,
//! SIGKILL) so that neither it nor a process it started outlives hearth.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncRead};
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};
use tokio::time::Instant;

use crate::error::{McpError, Result};

/// How long a server has to exit once its stdin is closed.
pub const STDIN_GRACE: Duration = Duration::from_secs(2);
/// How long its process group has to exit after SIGTERM, before SIGKILL.
pub const TERM_GRACE: Duration = Duration::from_secs(2);
/// Bytes of one stderr line kept: a longer line is cut, and the rest of it
/// read and dropped.
const LINE_CAP: usize = 4096;
/// Characters of the last stderr line kept for error messages.
const LAST_LINE_CHARS: usize = 300;
/// How often an emptying process group is looked at (its members other than
/// the child have no handle to await).
const GROUP_POLL: Duration = Duration::from_millis(20);

/// A started server process and its pipes.
pub(crate) struct Spawned {
    pub(crate) child: Child,
    pub(crate) stdin: ChildStdin,
    pub(crate) stdout: ChildStdout,
    pub(crate) stderr: ChildStderr,
}

/// Starts `command` with exactly `env`, piped stdio, in a new process group.
pub(crate) fn spawn(
    command: &str,
    args: &[String],
    env: &BTreeMap<String, String>,
    cwd: Option<&PathBuf>,
) -> Result<Spawned> {
    let mut cmd = Command::new(command);
    cmd.args(args)
        .env_clear()
        .envs(env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // The last resort, for a supervisor torn down without closing (a
        // runtime dropped mid-way); the close sequence is the normal path.
        .kill_on_drop(true);
    // Its own group: SIGTERM and SIGKILL then reach what it starts (npx
    // starts node), and a Ctrl-C in hearth's terminal does not reach it
    // before hearth has closed it.
    #[cfg(unix)]
    cmd.process_group(0);
    if let Some(dir) = cwd {
        cmd.current_dir(dir);
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| McpError::Start(format!("cannot run {command:?}: {e}")))?;
    let pipes = (child.stdin.take(), child.stdout.take(), child.stderr.take());
    let (Some(stdin), Some(stdout), Some(stderr)) = pipes else {
        return Err(McpError::Start(format!(
            "{command:?} started without its stdio pipes"
        )));
    };
    Ok(Spawned {
        child,
        stdin,
        stdout,
        stderr,
    })
}

/// Logs a server's stderr line by line until it ends, keeping the last
/// non-blank line (it usually says why a server would not start). Bytes
/// that are not UTF-8 are replaced, and a line past [`LINE_CAP`] is cut:
/// the reader never stops before the end, since a server writing to a
/// stderr nobody reads would die of SIGPIPE.
pub(crate) async fn log_stderr(
    server: String,
    stderr: impl AsyncRead + Unpin,
    last: Arc<Mutex<String>>,
) {
    let mut reader = tokio::io::BufReader::new(stderr);
    let mut line: Vec<u8> = Vec::new();
    let emit = |line: &[u8]| {
        let text = String::from_utf8_lossy(line);
        tracing::debug!(server = %server, line = %text, "MCP server stderr");
        if !text.trim().is_empty()
            && let Ok(mut l) = last.lock()
        {
            let end = text
                .char_indices()
                .nth(LAST_LINE_CHARS)
                .map_or(text.len(), |(i, _)| i);
            *l = text[..end].to_owned();
        }
    };
    loop {
        let (used, complete) = match reader.fill_buf().await {
            Ok([]) => break,
            Ok(buf) => {
                let (chunk, complete) = match buf.iter().position(|&b| b == b'\n') {
                    Some(i) => (&buf[..i], true),
                    None => (buf, false),
                };
                let room = LINE_CAP.saturating_sub(line.len());
                line.extend_from_slice(&chunk[..chunk.len().min(room)]);
                (chunk.len() + usize::from(complete), complete)
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                tracing::warn!(server = %server, error = %e, "cannot read the MCP server's stderr any more");
                break;
            }
        };
        reader.consume(used);
        if complete {
            emit(&line);
            line.clear();
        }
    }
    if !line.is_empty() {
        emit(&line);
    }
}

/// Closes `child` once its stdin is closed: waits [`STDIN_GRACE`] for it to
/// exit, then sends SIGTERM to its process group (also when the child exited
/// but left processes of its own) and waits [`TERM_GRACE`], then SIGKILL.
/// Returns once the child is reaped (or SIGKILL was sent and it still had
/// not gone within another [`TERM_GRACE`]).
pub(crate) async fn close(server: &str, child: &mut Child) {
    let Some(pid) = child.id() else {
        return;
    };
    let exited = tokio::time::timeout(STDIN_GRACE, child.wait())
        .await
        .is_ok();
    #[cfg(unix)]
    {
        let Ok(group) = i32::try_from(pid) else {
            return;
        };
        if exited && !group::alive(group) {
            return;
        }
        tracing::info!(server = %server, pid, "MCP server still running after its stdin closed; sending SIGTERM to its process group");
        group::signal(group, group::Signal::Term);
        if wait_group(child, group, TERM_GRACE).await {
            return;
        }
        tracing::warn!(server = %server, pid, "MCP server still running after SIGTERM; sending SIGKILL");
        group::signal(group, group::Signal::Kill);
        let _ = wait_group(child, group, TERM_GRACE).await;
    }
    #[cfg(not(unix))]
    {
        let _ = (server, pid);
        if !exited {
            let _ = child.kill().await;
        }
    }
}

/// Waits up to `within` for the child to exit and its group to empty.
#[cfg(unix)]
async fn wait_group(child: &mut Child, group: i32, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    if tokio::time::timeout_at(deadline, child.wait())
        .await
        .is_err()
    {
        return false;
    }
    while group::alive(group) {
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(GROUP_POLL).await;
    }
    true
}

/// Signals to a process group, the one unsafe call of this crate.
#[cfg(unix)]
mod group {
    /// The signals the close sequence sends.
    #[derive(Clone, Copy)]
    pub(super) enum Signal {
        Term,
        Kill,
    }

    /// Sends `signal` to every process of `group`; false when none is left.
    pub(super) fn signal(group: i32, signal: Signal) -> bool {
        let sig = match signal {
            Signal::Term => libc::SIGTERM,
            Signal::Kill => libc::SIGKILL,
        };
        kill(-group, sig)
    }

    /// True while some process of `group` exists (signal 0 checks, sends
    /// nothing). The child must be reaped first: a zombie still counts.
    pub(super) fn alive(group: i32) -> bool {
        kill(-group, 0)
    }

    #[expect(
        unsafe_code,
        reason = "kill(2) has no safe std wrapper for a process group"
    )]
    fn kill(target: i32, sig: i32) -> bool {
        // SAFETY: kill(2) takes two integers and touches no memory of ours;
        // `target` is the negated id of a group this process created (the
        // child's, as its leader), so it cannot name hearth's own group or,
        // with 0 or -1, every process.
        target < -1 && unsafe { libc::kill(target, sig) } == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn last_of(input: &[u8]) -> String {
        let last = Arc::new(Mutex::new(String::new()));
        log_stderr("t".into(), input, last.clone()).await;
        last.lock().map(|l| l.clone()).unwrap_or_default()
    }

    #[tokio::test]
    async fn stderr_is_read_to_the_end_through_bad_bytes_and_long_lines() {
        let mut input = b"first\n\xff\xfe not utf-8\n".to_vec();
        input.extend(std::iter::repeat_n(b'x', 100_000));
        input.extend_from_slice(b"\nlast line\n\n");
        assert_eq!(last_of(&input).await, "last line");
        assert_eq!(last_of(b"only \xff\n").await, "only \u{fffd}");
        // A last line without a newline, and one past the caps.
        assert_eq!(last_of(b"a\nno newline").await, "no newline");
        let long = "é".repeat(10_000);
        assert_eq!(last_of(long.as_bytes()).await, "é".repeat(LAST_LINE_CHARS));
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn closing_ends_a_child_that_ignores_stdin_eof_and_its_group() {
        // A shell that ignores its stdin and starts a sleeper of its own.
        let script = "sleep 600 & echo $! > \"$1\"; while :; do sleep 1; done".to_owned();
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let pid_file = dir.path().join("grandchild");
        let env = BTreeMap::from([("PATH".to_owned(), "/usr/bin:/bin".to_owned())]);
        let args = vec![
            "-c".to_owned(),
            script,
            "sh".to_owned(),
            pid_file.display().to_string(),
        ];
        let Spawned {
            mut child, stdin, ..
        } = spawn("/bin/sh", &args, &env, None).unwrap_or_else(|e| panic!("{e}"));
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let grandchild = loop {
            if let Some(pid) = std::fs::read_to_string(&pid_file)
                .ok()
                .and_then(|p| p.trim().parse::<i32>().ok())
            {
                break pid;
            }
            assert!(std::time::Instant::now() < deadline, "no grandchild");
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        let group = child.id().and_then(|p| i32::try_from(p).ok()).unwrap_or(0);
        drop(stdin);
        close("t", &mut child).await;
        assert!(child.try_wait().ok().flatten().is_some(), "not reaped");
        assert!(!group::alive(group), "the group still has {grandchild}");
    }
}
