//! `hearth skills keygen|sign|verify`: the key tools, on local files and the
//! local config (`list`, `show`, `check` and `reload` ask the running server:
//! `crate::client::skills`).

use std::path::Path;

use anyhow::Context;
use hearth_config::Config;
use hearth_skills::{PrivateKey, SkillsOptions, Trust, manifest};
use serde_json::json;

use crate::Exit;
use crate::cli::{Global, SkillsCommand};
use crate::output::print_json;

/// The load options for `config`, as `serve` loads the skills.
fn options(config: &Config, home: &Path) -> Result<SkillsOptions, Exit> {
    hearth_runtime::builder::skills::options(config, home).map_err(crate::serve::build_exit)
}

/// Runs `hearth skills ...`.
pub async fn run(g: &Global, command: SkillsCommand) -> Result<(), Exit> {
    let home = crate::serve::home_dir(g)?;
    let loaded = || options(&crate::serve::load_config(g, &home)?, &home);
    match command {
        SkillsCommand::Keygen { out } => keygen(&out.unwrap_or_else(|| home.join("keys"))),
        SkillsCommand::Sign { dir, key } => {
            let text = std::fs::read_to_string(&key)
                .with_context(|| format!("reading the key {}", key.display()))?;
            let key = PrivateKey::parse(&text).map_err(anyhow::Error::new)?;
            let key_id = manifest::sign(&dir, &key).map_err(anyhow::Error::new)?;
            println!("signed {} with key {key_id}", dir.display());
            Ok(())
        }
        SkillsCommand::Verify { dir } => verify(g, &dir, &loaded()?.trust),
        SkillsCommand::List
        | SkillsCommand::Show { .. }
        | SkillsCommand::Check
        | SkillsCommand::Reload => Err(anyhow::anyhow!(
            "internal: a server skills command reached the local key tools; please report this"
        )
        .into()),
    }
}

fn keygen(out: &Path) -> Result<(), Exit> {
    let key = PrivateKey::generate().map_err(anyhow::Error::new)?;
    // Only the owner may list the keys, as with the home itself.
    let mut dir = std::fs::DirBuilder::new();
    dir.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut dir, 0o700);
    dir.create(out)
        .with_context(|| format!("creating {}", out.display()))?;
    let path = out.join(format!("{}.key", key.key_id()));
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
    let mut file = opts
        .open(&path)
        .with_context(|| format!("writing {}", path.display()))?;
    std::io::Write::write_all(&mut file, key.to_file_text().as_bytes())
        .with_context(|| format!("writing {}", path.display()))?;
    eprintln!(
        "private key written to {} (keep it secret); add the public key below to \
         [skills] trusted_keys where the skills it signs should load:",
        path.display()
    );
    println!("{}", key.public());
    Ok(())
}

fn verify(g: &Global, dir: &Path, trust: &Trust) -> Result<(), Exit> {
    match manifest::verify(dir, trust) {
        Ok(v) => {
            if g.json {
                print_json(
                    &json!({"ok": true, "name": v.manifest.name, "version": v.manifest.version,
                    "signed": v.signed, "key_id": v.manifest.key_id}),
                );
            } else if v.signed {
                println!(
                    "ok: {} {} signed by trusted key {}",
                    v.manifest.name,
                    v.manifest.version,
                    v.manifest.key_id.as_deref().unwrap_or("")
                );
            } else {
                println!(
                    "ok: {} {} unsigned, allowed by [skills] allowed_unsigned_dirs",
                    v.manifest.name, v.manifest.version
                );
            }
            Ok(())
        }
        Err(e) => {
            if g.json {
                print_json(&json!({"ok": false, "reason": e.to_string()}));
            }
            Err(Exit::from(anyhow::anyhow!("refused: {e}")))
        }
    }
}
