//! `hearth completions <shell>` and `hearth man`: made from the clap
//! definitions at run time, so they never drift from the commands.

use std::io::Write;

use clap::CommandFactory;
use clap_complete::Shell;

use crate::Exit;
use crate::cli::{Cli, ShellArg};

/// Prints the completion script for `shell` on stdout.
pub fn completions(shell: ShellArg) -> Result<(), Exit> {
    let shell = match shell {
        ShellArg::Bash => Shell::Bash,
        ShellArg::Zsh => Shell::Zsh,
        ShellArg::Fish => Shell::Fish,
        ShellArg::Powershell => Shell::PowerShell,
    };
    let mut cmd = Cli::command();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, "hearth", &mut out);
    write_out(&out)
}

/// Prints the man page (roff) on stdout: one page for the whole tool, each
/// command a section (as `git`'s pages list theirs), with its usage, its
/// options and its own subcommands, rather than one file per command.
pub fn man() -> Result<(), Exit> {
    let cmd = Cli::command();
    let top = clap_mangen::Man::new(cmd.clone());
    let mut out = Vec::new();
    let failed = |e: std::io::Error| anyhow::anyhow!("cannot render the man page: {e}");
    top.render_title(&mut out).map_err(failed)?;
    top.render_name_section(&mut out).map_err(failed)?;
    top.render_synopsis_section(&mut out).map_err(failed)?;
    top.render_description_section(&mut out).map_err(failed)?;
    top.render_options_section(&mut out).map_err(failed)?;
    // The commands' sections leave out the global options (OPTIONS above
    // has them once); building gives each its full name (`hearth message`).
    let mut built = cmd.mut_args(|a| if a.is_global_set() { a.hide(true) } else { a });
    built.build();
    for sub in built.get_subcommands().filter(|c| !c.is_hide_set()) {
        let name = format!("hearth {}", sub.get_name());
        let page = clap_mangen::Man::new(sub.clone());
        let mut section = Vec::new();
        page.render_description_section(&mut section)
            .and_then(|()| page.render_synopsis_section(&mut section))
            .and_then(|()| page.render_options_section(&mut section))
            .map_err(failed)?;
        let text = String::from_utf8_lossy(&section)
            .replace(".SH ", ".SS ")
            .replace(".SS DESCRIPTION", &format!(".SS \"{name}\""));
        out.extend_from_slice(format!(".SH \"{}\"\n", name.to_uppercase()).as_bytes());
        out.extend_from_slice(text.as_bytes());
        nested(&mut out, sub);
    }
    // The after-help is the exit codes: under the heading man pages use.
    let mut extra = Vec::new();
    top.render_extra_section(&mut extra).map_err(failed)?;
    out.extend_from_slice(
        String::from_utf8_lossy(&extra)
            .replace(".SH EXTRA", ".SH \"EXIT STATUS\"")
            .as_bytes(),
    );
    top.render_version_section(&mut out).map_err(failed)?;
    write_out(&out)
}

/// A command's own subcommands (`hearth run get <RUN_ID>`), each with its
/// usage and what it does.
fn nested(out: &mut Vec<u8>, cmd: &clap::Command) {
    let subs: Vec<&clap::Command> = cmd
        .get_subcommands()
        .filter(|c| !c.is_hide_set() && c.get_name() != "help")
        .collect();
    if subs.is_empty() {
        return;
    }
    out.extend_from_slice(b".SS SUBCOMMANDS\n");
    for sub in subs {
        let usage = sub.clone().render_usage().to_string();
        let usage = usage.trim_start_matches("Usage: ").trim();
        let about = sub.get_about().map(|a| a.to_string()).unwrap_or_default();
        out.extend_from_slice(
            format!(".TP\n\\fB{}\\fR\n{}\n", roff_text(usage), roff_text(&about)).as_bytes(),
        );
    }
}

/// Text made safe for a roff line: backslashes and hyphens escaped, and no
/// line starting with a control character.
fn roff_text(s: &str) -> String {
    let escaped = s.replace('\\', "\\\\").replace('-', "\\-");
    if escaped.starts_with(['.', '\'']) {
        format!("\\&{escaped}")
    } else {
        escaped
    }
}

fn write_out(bytes: &[u8]) -> Result<(), Exit> {
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(bytes)
        .and_then(|()| stdout.flush())
        .map_err(|e| anyhow::anyhow!("cannot write to stdout: {e}").into())
}
