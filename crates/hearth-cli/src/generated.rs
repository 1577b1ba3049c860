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

/// Prints the man page (roff) on stdout: the top command with every
/// subcommand's usage and options.
pub fn man() -> Result<(), Exit> {
    let cmd = Cli::command();
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd.clone())
        .render(&mut out)
        .map_err(|e| anyhow::anyhow!("cannot render the man page: {e}"))?;
    // The subcommands' sections leave out the global options (the page's
    // OPTIONS has them once); building gives each its full name
    // (`hearth message`).
    let mut cmd = cmd.mut_args(|a| if a.is_global_set() { a.hide(true) } else { a });
    cmd.build();
    for sub in cmd.get_subcommands().filter(|c| !c.is_hide_set()) {
        let name = format!("hearth {}", sub.get_name());
        let page = clap_mangen::Man::new(sub.clone());
        let mut section = Vec::new();
        page.render_description_section(&mut section)
            .and_then(|()| page.render_synopsis_section(&mut section))
            .and_then(|()| page.render_options_section(&mut section))
            .and_then(|()| page.render_subcommands_section(&mut section))
            .map_err(|e| anyhow::anyhow!("cannot render the man page of {name}: {e}"))?;
        let text = String::from_utf8_lossy(&section)
            .replace(".SH ", ".SS ")
            .replace(".SS DESCRIPTION", &format!(".SS \"{name}\""));
        out.extend_from_slice(format!(".SH \"{}\"\n", name.to_uppercase()).as_bytes());
        out.extend_from_slice(text.as_bytes());
    }
    write_out(&out)
}

fn write_out(bytes: &[u8]) -> Result<(), Exit> {
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(bytes)
        .and_then(|()| stdout.flush())
        .map_err(|e| anyhow::anyhow!("cannot write to stdout: {e}").into())
}
