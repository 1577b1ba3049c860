//! `hearth skills ...`: keys, signing and verification, and the skills a
//! server would load.
//!
//! `list`, `show` and `check` read the folders themselves, with the same
//! loader and options as the server (the runtime's builder), so they work
//! without a running hearth.

use std::path::Path;

use anyhow::Context;
use hearth_config::Config;
use hearth_skills::{Catalog, PrivateKey, Skill, SkillsOptions, Trust, manifest};
use serde_json::json;

use crate::Exit;
use crate::cli::{Global, SkillsCommand};
use crate::output::{print_json, table};

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
        SkillsCommand::List => {
            list(g, &Catalog::load(&loaded()?));
            Ok(())
        }
        SkillsCommand::Show { name } => show(g, &Catalog::load(&loaded()?), &name),
        SkillsCommand::Check => check(g, &Catalog::load(&loaded()?)),
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

fn view(s: &Skill) -> serde_json::Value {
    json!({"name": s.name, "description": s.description, "path": s.path.display().to_string(),
        "source": s.source.as_str(), "eligible": s.eligible, "reason": s.reason, "signed": s.signed})
}

fn list(g: &Global, c: &Catalog) {
    if g.json {
        print_json(&json!({"skills": c.skills.iter().map(view).collect::<Vec<_>>()}));
        return;
    }
    if c.skills.is_empty() {
        println!("no skills found");
        return;
    }
    let rows: Vec<Vec<String>> = c
        .skills
        .iter()
        .map(|s| {
            vec![
                s.name.clone(),
                if s.eligible {
                    "yes".into()
                } else {
                    "no".into()
                },
                s.source.as_str().into(),
                s.reason.clone().unwrap_or_else(|| s.description.clone()),
            ]
        })
        .collect();
    println!(
        "{}",
        table(
            &["NAME", "ELIGIBLE", "SOURCE", "DESCRIPTION / REASON"],
            &[],
            &rows
        )
    );
}

fn show(g: &Global, c: &Catalog, name: &str) -> Result<(), Exit> {
    let Some(s) = c.get(name) else {
        return Err(Exit::from(anyhow::anyhow!(
            "no skill named {name:?}; `hearth skills list` shows them"
        )));
    };
    let body = if s.has_md() { s.body().ok() } else { None };
    if g.json {
        let mut v = view(s);
        v["instructions"] = json!(body);
        print_json(&v);
        return Ok(());
    }
    println!("name:        {}", s.name);
    println!("description: {}", s.description);
    println!("path:        {}", s.path.display());
    println!("source:      {}", s.source.as_str());
    match &s.reason {
        None => println!("eligible:    yes"),
        Some(r) => println!("eligible:    no ({r})"),
    }
    if let Some(signed) = s.signed {
        println!("signed:      {}", if signed { "yes" } else { "no" });
    }
    if let Some(body) = body {
        println!("\n{body}");
    }
    Ok(())
}

/// One line per problem, naming the skill and the field; exit 1 when any
/// skill is invalid (not when it only lacks something on this machine).
fn check(g: &Global, c: &Catalog) -> Result<(), Exit> {
    let mut lines = Vec::new();
    for r in &c.refused {
        lines.push(format!("{}: {}", r.path.display(), r.reason));
    }
    for s in &c.skills {
        for p in &s.problems {
            lines.push(format!("{}: {}: {}", s.name, p.field, p.message));
        }
        if s.problems.is_empty()
            && s.signed == Some(false)
            && let Some(reason) = s.reason.as_deref().filter(|_| !s.eligible)
        {
            lines.push(format!("{}: hearth-skill.json: {reason}", s.name));
        }
    }
    let invalid = !lines.is_empty();
    if g.json {
        print_json(&json!({"ok": !invalid, "skills": c.skills.len(), "problems": lines}));
    } else {
        for l in &lines {
            println!("{l}");
        }
        for s in c
            .skills
            .iter()
            .filter(|s| !s.eligible && s.problems.is_empty() && s.signed.is_none())
        {
            println!(
                "{}: not eligible here: {}",
                s.name,
                s.reason.as_deref().unwrap_or("")
            );
        }
    }
    if invalid {
        return Err(Exit::from(anyhow::anyhow!(
            "{} problem(s) in {} skill(s) checked",
            lines.len(),
            c.skills.len()
        )));
    }
    if !g.json {
        println!("{} skill(s) checked, no problem", c.skills.len());
    }
    Ok(())
}
