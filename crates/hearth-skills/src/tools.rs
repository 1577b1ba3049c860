//! `skill_read` and `skill_file`: the model loads a skill's instructions, and
//! files of its folder, only when it needs them (progressive disclosure).
//! Both read the current catalog, so a reload is seen at the next call.

use std::path::Path;
use std::sync::Arc;

use hearth_core::ToolSpec;
use hearth_tools::{Tool, ToolClass, ToolContext, ToolError};
use serde_json::{Value, json};

use crate::catalog::{Skill, Skills};

/// The capability both tools need (the `member` preset has it).
pub const CAPABILITY: &str = "skills.read";

/// Most bytes `skill_file` returns.
pub const MAX_FILE_BYTES: u64 = 256 * 1024;

/// Both tools over `skills`.
pub fn tools(skills: Arc<Skills>) -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(SkillRead::new(skills.clone())),
        Arc::new(SkillFile::new(skills)),
    ]
}

fn arg<'a>(args: &'a Value, key: &str) -> Result<&'a str, ToolError> {
    args.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| ToolError(format!("`{key}` must be text")))
}

/// The offered skill `name`, or an error the model can act on.
fn offered(skills: &Skills, name: &str) -> Result<Skill, ToolError> {
    let catalog = skills.catalog();
    match catalog.get(name) {
        Some(s) if s.offered() => Ok(s.clone()),
        Some(s) => Err(ToolError(format!(
            "skill {name} is not available: {}",
            s.reason
                .as_deref()
                .unwrap_or("it is not offered to the model")
        ))),
        None => Err(ToolError(format!("no skill named {name:?}"))),
    }
}

/// `skill_read {name}`: a skill's instructions.
pub struct SkillRead {
    spec: ToolSpec,
    skills: Arc<Skills>,
}

impl SkillRead {
    /// The tool over `skills`.
    pub fn new(skills: Arc<Skills>) -> Self {
        Self {
            spec: ToolSpec {
                name: "skill_read".into(),
                description: "Read a skill's instructions (its SKILL.md) by name, before doing \
                              the task it describes."
                    .into(),
                parameters: json!({
                    "type": "object",
                    "properties": {"name": {"type": "string", "description": "The skill's name"}},
                    "required": ["name"],
                    "additionalProperties": false
                }),
            },
            skills,
        }
    }
}

#[async_trait::async_trait]
impl Tool for SkillRead {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn class(&self) -> ToolClass {
        ToolClass::Read
    }

    fn capability(&self) -> Option<&'static str> {
        Some(CAPABILITY)
    }

    async fn call(&self, _ctx: &ToolContext, args: Value) -> Result<Value, ToolError> {
        let skill = offered(&self.skills, arg(&args, "name")?)?;
        let body = skill
            .body()
            .map_err(|e| ToolError(format!("cannot read skill {}: {e}", skill.name)))?;
        Ok(json!({
            "name": skill.name,
            "description": skill.description,
            "base_dir": skill.dir.to_string_lossy(),
            "instructions": body,
        }))
    }
}

/// `skill_file {skill, path}`: a file inside a skill's folder.
pub struct SkillFile {
    spec: ToolSpec,
    skills: Arc<Skills>,
}

impl SkillFile {
    /// The tool over `skills`.
    pub fn new(skills: Arc<Skills>) -> Self {
        Self {
            spec: ToolSpec {
                name: "skill_file".into(),
                description: "Read a text file of a skill's folder (a reference, template or \
                              script its instructions mention), by a path relative to the folder."
                    .into(),
                parameters: json!({
                    "type": "object",
                    "properties": {
                        "skill": {"type": "string", "description": "The skill's name"},
                        "path": {"type": "string", "description": "Relative to the skill's folder, e.g. references/api.md"}
                    },
                    "required": ["skill", "path"],
                    "additionalProperties": false
                }),
            },
            skills,
        }
    }
}

#[async_trait::async_trait]
impl Tool for SkillFile {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn class(&self) -> ToolClass {
        ToolClass::Read
    }

    fn capability(&self) -> Option<&'static str> {
        Some(CAPABILITY)
    }

    /// A skill's files are data it ships (references, templates, scripts,
    /// often from a third party): shown as untrusted content, unlike its
    /// SKILL.md, whose instructions the model is meant to follow.
    fn untrusted(&self) -> bool {
        true
    }

    async fn call(&self, _ctx: &ToolContext, args: Value) -> Result<Value, ToolError> {
        let skill = offered(&self.skills, arg(&args, "skill")?)?;
        let rel = arg(&args, "path")?;
        let text = read_inside(&skill.dir, rel)?;
        Ok(json!({ "skill": skill.name, "path": rel, "content": text }))
    }
}

/// The text of `rel` under `dir`, through the contained reader (refusing any
/// path whose real location is outside `dir`: `..`, absolute paths, symlinks
/// leading out), cut at [`MAX_FILE_BYTES`] with a notice.
pub fn read_inside(dir: &Path, rel: &str) -> Result<String, ToolError> {
    let (bytes, cut) =
        crate::read::read_capped(dir, rel, MAX_FILE_BYTES).map_err(|e| ToolError(e.to_string()))?;
    let mut text = match String::from_utf8(bytes) {
        Ok(t) => t,
        // A cut can split the last character; anything else is binary.
        Err(e) if cut && e.utf8_error().error_len().is_none() => {
            let valid = e.utf8_error().valid_up_to();
            let mut b = e.into_bytes();
            b.truncate(valid);
            String::from_utf8(b).unwrap_or_default()
        }
        Err(_) => return Err(ToolError(format!("{rel} is not a text file"))),
    };
    if cut {
        text.push_str("\n[cut: the file is larger than 256 KiB]");
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_inside_refuses_traversal_and_links_out() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("skill");
        std::fs::create_dir_all(dir.join("refs")).unwrap();
        std::fs::write(dir.join("refs/a.md"), "alpha").unwrap();
        std::fs::write(t.path().join("secret.txt"), "s3cret").unwrap();
        std::fs::write(dir.join("bin.dat"), [0xff, 0xfe, 0x00]).unwrap();
        let dir = std::fs::canonicalize(&dir).unwrap();
        assert_eq!(read_inside(&dir, "refs/a.md").unwrap(), "alpha");
        assert_eq!(read_inside(&dir, "./refs/a.md").unwrap(), "alpha");
        for bad in ["../secret.txt", "refs/../../secret.txt", "/etc/passwd", ""] {
            let e = read_inside(&dir, bad).unwrap_err().0;
            assert!(e.contains("relative to the skill's folder"), "{bad}: {e}");
        }
        assert!(
            read_inside(&dir, "nope.md")
                .unwrap_err()
                .0
                .contains("no file")
        );
        assert!(
            read_inside(&dir, "refs")
                .unwrap_err()
                .0
                .contains("not a file")
        );
        assert!(
            read_inside(&dir, "bin.dat")
                .unwrap_err()
                .0
                .contains("not a text file")
        );
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(t.path().join("secret.txt"), dir.join("link")).unwrap();
            let e = read_inside(&dir, "link").unwrap_err().0;
            assert!(e.contains("leads outside"), "{e}");
        }
    }

    #[test]
    fn large_files_are_cut_at_a_character_boundary() {
        let t = tempfile::tempdir().unwrap();
        let dir = std::fs::canonicalize(t.path()).unwrap();
        // 'é' is two bytes: the limit falls inside one.
        let big = format!("a{}", "é".repeat(MAX_FILE_BYTES as usize));
        std::fs::write(dir.join("big.txt"), &big).unwrap();
        let text = read_inside(&dir, "big.txt").unwrap();
        assert!(text.ends_with("[cut: the file is larger than 256 KiB]"));
        assert!(text.len() <= MAX_FILE_BYTES as usize + 60);
    }
}
