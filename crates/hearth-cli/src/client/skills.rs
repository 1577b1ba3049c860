//! `hearth skills list|show|check|reload`: the skills the running server
//! loaded (`GET /v1/skills`, `POST /v1/skills/reload`). The key tools
//! (`keygen`, `sign`, `verify`) work on local files (`crate::skills`).

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::Api;
use crate::Exit;
use crate::cli::SkillsCommand;
use crate::output::{print_json, table};

/// One skill of `GET /v1/skills` (the server's type is serialise-only).
#[derive(Debug, Serialize, Deserialize)]
struct SkillInfo {
    name: String,
    description: String,
    path: String,
    source: String,
    eligible: bool,
    reason: Option<String>,
    signed: Option<bool>,
    /// Absent from an older server: no problem known.
    #[serde(default)]
    problems: Vec<String>,
}

#[derive(Debug, Serialize, Deserialize)]
struct SkillList {
    skills: Vec<SkillInfo>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Reloaded {
    skills: usize,
}

/// Runs the server's side of `hearth skills ...`.
pub(super) async fn skills(api: &Api, command: SkillsCommand, json_out: bool) -> Result<(), Exit> {
    match command {
        SkillsCommand::List => list(&api.get("/v1/skills").await?, json_out),
        SkillsCommand::Show { name } => show(&api.get("/v1/skills").await?, &name, json_out),
        SkillsCommand::Check => check(&api.get("/v1/skills").await?, json_out),
        SkillsCommand::Reload => {
            let r: Reloaded = api.post("/v1/skills/reload", &json!({})).await?;
            if json_out {
                print_json(&r);
            } else {
                println!("skills reloaded: {} listed", r.skills);
            }
            Ok(())
        }
        SkillsCommand::Keygen { .. }
        | SkillsCommand::Sign { .. }
        | SkillsCommand::Verify { .. } => Err(anyhow::anyhow!(
            "internal: a local skills command reached the HTTP client; please report this"
        )
        .into()),
    }
}

fn list(l: &SkillList, json_out: bool) -> Result<(), Exit> {
    if json_out {
        print_json(l);
        return Ok(());
    }
    if l.skills.is_empty() {
        println!("no skills found (`hearth skills reload` after adding one)");
        return Ok(());
    }
    let rows: Vec<Vec<String>> = l
        .skills
        .iter()
        .map(|s| {
            vec![
                s.name.clone(),
                if s.eligible { "yes" } else { "no" }.to_owned(),
                s.source.clone(),
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
    Ok(())
}

fn show(l: &SkillList, name: &str, json_out: bool) -> Result<(), Exit> {
    let Some(s) = l.skills.iter().find(|s| s.name == name) else {
        return Err(anyhow::anyhow!(
            "the server has no skill named {name:?}; `hearth skills list` shows them \
             (`hearth skills reload` after adding one)"
        )
        .into());
    };
    if json_out {
        print_json(s);
        return Ok(());
    }
    println!("name:        {}", s.name);
    println!("description: {}", s.description);
    println!("path:        {}", s.path);
    println!("source:      {}", s.source);
    match &s.reason {
        None => println!("eligible:    yes"),
        Some(r) => println!("eligible:    no ({r})"),
    }
    if let Some(signed) = s.signed {
        println!("signed:      {}", if signed { "yes" } else { "no" });
    }
    for p in &s.problems {
        println!("problem:     {p}");
    }
    Ok(())
}

/// One line per problem, naming the skill and the field; exit 1 when a
/// skill is invalid (a refused executable skill included), not when it only
/// lacks something on the server's machine.
fn check(l: &SkillList, json_out: bool) -> Result<(), Exit> {
    let mut lines = Vec::new();
    for s in &l.skills {
        for p in &s.problems {
            lines.push(format!("{}: {p}", s.name));
        }
        if s.problems.is_empty()
            && s.signed == Some(false)
            && let Some(reason) = s.reason.as_deref().filter(|_| !s.eligible)
        {
            lines.push(format!("{}: hearth-skill.json: {reason}", s.name));
        }
    }
    let invalid = !lines.is_empty();
    if json_out {
        print_json(&json!({"ok": !invalid, "skills": l.skills.len(), "problems": lines}));
    } else {
        for line in &lines {
            println!("{line}");
        }
        for s in l
            .skills
            .iter()
            .filter(|s| !s.eligible && s.problems.is_empty() && s.signed.is_none())
        {
            println!(
                "{}: not eligible on the server: {}",
                s.name,
                s.reason.as_deref().unwrap_or("")
            );
        }
    }
    if invalid {
        return Err(anyhow::anyhow!(
            "{} problem(s) in {} skill(s) checked",
            lines.len(),
            l.skills.len()
        )
        .into());
    }
    if !json_out {
        println!("{} skill(s) checked, no problem", l.skills.len());
    }
    Ok(())
}
