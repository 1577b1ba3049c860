//! The loaded skills: one [`Catalog`] per load, swapped whole on reload, and
//! the system prompt's skill list, built once per load.

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use crate::discover::{Found, Refusal, Root, Source, discover};
use crate::frontmatter::{self, Frontmatter, Problem};
use crate::manifest::{self, Trust};
use crate::read::{self, MAX_SKILL_MD_BYTES, ReadError};
use crate::signing::TrustedKey;
use crate::{Result, SKILL_MD};

/// Facts about this machine that decide eligibility, given by the caller
/// (this crate reads no environment).
#[derive(Debug, Clone, Default)]
pub struct Host {
    /// OpenClaw's name of the OS: `darwin`, `linux`, `win32`, ...
    pub os: String,
    /// The folders of `PATH`.
    pub path: Vec<PathBuf>,
    /// Names of the environment variables that are set (non-empty).
    pub env: HashSet<String>,
}

impl Host {
    /// OpenClaw's name for a Rust `std::env::consts::OS` value.
    pub fn os_name(rust_os: &str) -> String {
        match rust_os {
            "macos" => "darwin".into(),
            "windows" => "win32".into(),
            other => other.into(),
        }
    }

    fn has_bin(&self, bin: &str) -> bool {
        !bin.contains('/')
            && self.path.iter().any(|dir| {
                let p = dir.join(bin);
                #[cfg(unix)]
                {
                    use std::os::unix::fs::PermissionsExt;
                    std::fs::metadata(&p)
                        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
                }
                #[cfg(not(unix))]
                p.is_file()
            })
    }
}

/// What a load needs.
#[derive(Debug, Clone, Default)]
pub struct SkillsOptions {
    /// Roots, highest precedence first.
    pub roots: Vec<Root>,
    /// Keys, folders and settings executable skills are checked against.
    pub trust: Trust,
    /// Characters of the system prompt the skill list may take.
    pub prompt_budget_chars: usize,
    /// This machine.
    pub host: Host,
}

impl SkillsOptions {
    /// Parses `[skills] trusted_keys` (`ed25519:<base64>`).
    pub fn trusted_keys(keys: &[String]) -> Result<Vec<TrustedKey>> {
        keys.iter().map(|k| TrustedKey::parse(k)).collect()
    }
}

/// An executable skill that passed verification, for the MCP client to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecutableSkill {
    /// The skill's name; its tools are `<name>__<tool>`.
    pub name: String,
    /// Its folder (real path).
    pub dir: PathBuf,
    /// The program to run, absolute.
    pub entry: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
    /// The environment variable names it may receive (nothing else).
    pub env: Vec<String>,
    /// Its `[skills.config.<name>]` settings.
    pub config: BTreeMap<String, String>,
    /// Signed by a trusted key (false: a dev-mode unsigned skill).
    pub signed: bool,
    /// Every file but the manifest as verified (relative path -> SHA-256
    /// hex); a new version's files differ, so a reload restarts it.
    pub files: BTreeMap<String, String>,
    /// SHA-256 hex of the manifest as verified (a new signature changes it).
    pub manifest_sha256: String,
}

impl ExecutableSkill {
    /// The skill `v` describes, with its `[skills.config.<name>]` settings.
    pub fn new(v: manifest::Verified, config: BTreeMap<String, String>) -> Self {
        Self {
            entry: v.dir.join(&v.manifest.entry),
            name: v.manifest.name,
            args: v.manifest.args,
            env: v.manifest.env,
            config,
            signed: v.signed,
            dir: v.dir,
            files: v.files,
            manifest_sha256: v.manifest_sha256,
        }
    }

    /// Checks that the folder is still what was verified, before its
    /// program is started (see [`manifest::check_unchanged`]).
    pub fn check_unchanged(&self) -> Result<()> {
        manifest::check_unchanged(&self.dir, &self.files, &self.manifest_sha256)
    }
}

/// One skill as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    /// Name (the folder's name when the frontmatter has none).
    pub name: String,
    pub description: String,
    /// Its folder (real path).
    pub dir: PathBuf,
    /// `SKILL.md`, or the manifest for a skill without one.
    pub path: PathBuf,
    /// Where it was found.
    pub source: Source,
    /// Offered (false: invalid, unmet needs or refused; `reason` says why).
    pub eligible: bool,
    /// Why it is not eligible.
    pub reason: Option<String>,
    /// `null` for SKILL.md skills; true or false for executable ones.
    pub signed: Option<bool>,
    /// Malformed fields; any makes the skill invalid.
    pub problems: Vec<Problem>,
    /// The frontmatter read (defaults when there is no SKILL.md).
    pub frontmatter: Frontmatter,
    /// Set when its manifest verified.
    pub executable: Option<ExecutableSkill>,
}

impl Skill {
    /// Whether the model is told about it and `skill_read` serves it.
    pub fn offered(&self) -> bool {
        self.eligible && !self.frontmatter.disable_model_invocation && self.has_md()
    }

    /// Whether it ships instructions (a SKILL.md).
    pub fn has_md(&self) -> bool {
        self.path.file_name().is_some_and(|n| n == SKILL_MD)
    }

    /// The SKILL.md body, read now (through the contained, capped reader:
    /// a SKILL.md swapped for a link leading out of the folder after the
    /// load is refused), with `{baseDir}` replaced by its folder.
    pub fn body(&self) -> std::result::Result<String, ReadError> {
        let text = read::read_text(&self.dir, SKILL_MD, MAX_SKILL_MD_BYTES)?;
        Ok(frontmatter::body(&text)
            .trim_start_matches(['\r', '\n'])
            .replace("{baseDir}", &self.dir.to_string_lossy()))
    }
}

/// Every skill of one load.
#[derive(Debug, Default)]
pub struct Catalog {
    /// By precedence (a name appears once: the highest root wins).
    pub skills: Vec<Skill>,
    /// Paths refused while searching.
    pub refused: Vec<Refusal>,
    /// The system prompt's skill list ("" when nothing is offered).
    pub prompt: Arc<str>,
}

impl Catalog {
    /// Discovers, parses and checks every skill under `options.roots`.
    pub fn load(options: &SkillsOptions) -> Self {
        let (found, refused) = discover(&options.roots);
        let mut skills: Vec<Skill> = Vec::with_capacity(found.len());
        let mut names = HashSet::new();
        for f in found {
            let skill = load_one(&f, options);
            // A name found again lower down is shadowed, as PATH does.
            if names.insert(skill.name.clone()) {
                skills.push(skill);
            }
        }
        let prompt = prompt_section(&skills, options.prompt_budget_chars).into();
        Self {
            skills,
            refused,
            prompt,
        }
    }

    /// A skill by name.
    pub fn get(&self, name: &str) -> Option<&Skill> {
        self.skills.iter().find(|s| s.name == name)
    }

    /// The executable skills that verified, for the MCP client.
    pub fn executables(&self) -> impl Iterator<Item = &ExecutableSkill> {
        self.skills.iter().filter_map(|s| s.executable.as_ref())
    }
}

fn load_one(f: &Found, options: &SkillsOptions) -> Skill {
    let folder = f
        .dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let md = f.dir.join(SKILL_MD);
    let (fm, mut problems) = if md.exists() {
        match read::read_text(&f.dir, SKILL_MD, MAX_SKILL_MD_BYTES) {
            Ok(text) => frontmatter::parse(&text),
            Err(ReadError::TooLarge { cap, .. }) => (
                Frontmatter::default(),
                vec![Problem::new(
                    SKILL_MD,
                    format!("is larger than {} KiB", cap / 1024),
                )],
            ),
            Err(e) => (
                Frontmatter::default(),
                vec![Problem::new(SKILL_MD, format!("cannot be read: {e}"))],
            ),
        }
    } else {
        (Frontmatter::default(), Vec::new())
    };
    let mut skill = Skill {
        name: if fm.name.is_empty() {
            folder
        } else {
            fm.name.clone()
        },
        description: fm.description.clone(),
        dir: f.dir.clone(),
        path: if md.exists() {
            md
        } else {
            f.dir.join(manifest::MANIFEST)
        },
        source: f.source,
        eligible: true,
        reason: None,
        signed: None,
        problems: Vec::new(),
        frontmatter: fm,
        executable: None,
    };
    if f.manifest {
        if !skill.has_md() {
            // Without a SKILL.md, name and description come from the manifest.
            problems.clear();
        }
        match manifest::verify(&f.dir, &options.trust) {
            Ok(v) => {
                skill.name = v.manifest.name.clone();
                if skill.description.is_empty() {
                    skill.description = v.manifest.description.clone();
                }
                skill.signed = Some(v.signed);
                let config = options
                    .trust
                    .config
                    .get(&skill.name)
                    .cloned()
                    .unwrap_or_default();
                skill.executable = Some(ExecutableSkill::new(v, config));
            }
            Err(e) => {
                skill.signed = Some(false);
                skill.eligible = false;
                skill.reason = Some(format!("refused: {e}"));
            }
        }
    }
    if let Some(p) = problems.first() {
        skill.eligible = false;
        skill.reason = Some(format!("invalid {}: {}", p.field, p.message));
    } else if skill.eligible
        && let Some(why) = unmet(&skill.frontmatter, &options.host)
    {
        skill.eligible = false;
        skill.reason = Some(why);
    }
    skill.problems = problems;
    skill
}

/// What this machine lacks for the skill, if anything (`always` skips it).
fn unmet(fm: &Frontmatter, host: &Host) -> Option<String> {
    let oc = &fm.openclaw;
    if oc.always {
        return None;
    }
    if !oc.os.is_empty() && !oc.os.contains(&host.os) {
        return Some(format!(
            "needs os {} (this is {})",
            oc.os.join(" or "),
            host.os
        ));
    }
    if let Some(bin) = oc.bins.iter().find(|b| !host.has_bin(b)) {
        return Some(format!("needs the program {bin} on PATH"));
    }
    if !oc.any_bins.is_empty() && !oc.any_bins.iter().any(|b| host.has_bin(b)) {
        return Some(format!(
            "needs one of the programs {} on PATH",
            oc.any_bins.join(", ")
        ));
    }
    if let Some(var) = oc.env.iter().find(|v| !host.env.contains(*v)) {
        return Some(format!("needs the environment variable {var}"));
    }
    None
}

/// The skill list for the system prompt: name and description of each
/// offered skill while they fit in `budget` characters, then the others by
/// name only.
pub fn prompt_section(skills: &[Skill], budget: usize) -> String {
    let offered: Vec<&Skill> = skills.iter().filter(|s| s.offered()).collect();
    if offered.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "## Skills\nSkills are instructions for particular tasks. When a task matches a skill, \
         call skill_read with its name before acting, and skill_file for a file it mentions.\n",
    );
    let mut rest = Vec::new();
    for s in offered {
        let line = format!("- {}: {}\n", s.name, s.description.replace('\n', " "));
        if rest.is_empty() && out.len() + line.len() <= budget {
            out.push_str(&line);
        } else {
            rest.push(s.name.as_str());
        }
    }
    if !rest.is_empty() {
        out.push_str("More skills (read them for what they do): ");
        out.push_str(&rest.join(", "));
        out.push('\n');
    }
    out
}

/// Called with the new catalog after each reload.
type ReloadListener = Box<dyn Fn(&Catalog) + Send + Sync>;

/// The live skills: the options they were loaded with and the current
/// catalog, replaced whole by [`Skills::reload`].
pub struct Skills {
    /// Replaced by [`Skills::reload_with`] (a configuration reload).
    options: RwLock<SkillsOptions>,
    current: RwLock<Arc<Catalog>>,
    listeners: RwLock<Vec<ReloadListener>>,
}

impl std::fmt::Debug for Skills {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Skills")
            .field("options", &self.options)
            .field("current", &self.current)
            .finish_non_exhaustive()
    }
}

impl Skills {
    /// Loads the skills once.
    pub fn load(options: SkillsOptions) -> Self {
        let catalog = Catalog::load(&options);
        Self {
            options: RwLock::new(options),
            current: RwLock::new(Arc::new(catalog)),
            listeners: RwLock::default(),
        }
    }

    /// Calls `listener` with the new catalog after every reload, whoever
    /// asked for it (HTTP, SIGHUP): the MCP client follows the executable
    /// skills this way.
    pub fn on_reload(&self, listener: impl Fn(&Catalog) + Send + Sync + 'static) {
        self.listeners
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(Box::new(listener));
    }

    /// The current catalog.
    pub fn catalog(&self) -> Arc<Catalog> {
        self.current
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Reads every skill again with `options` from now on (a configuration
    /// reload that changed `[skills]`: folders, trusted keys, settings).
    pub fn reload_with(&self, options: SkillsOptions) -> Arc<Catalog> {
        *self
            .options
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = options;
        self.reload()
    }

    /// Reads every skill again (`POST /v1/skills/reload`, SIGHUP).
    pub fn reload(&self) -> Arc<Catalog> {
        let catalog = {
            let options = self
                .options
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            Arc::new(Catalog::load(&options))
        };
        *self
            .current
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = catalog.clone();
        for listener in self
            .listeners
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
        {
            listener(&catalog);
        }
        catalog
    }

    /// The system prompt's skill list.
    pub fn prompt(&self) -> Arc<str> {
        self.catalog().prompt.clone()
    }

    /// The roots searched.
    pub fn roots(&self) -> Vec<Root> {
        self.options
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .roots
            .clone()
    }
}

#[cfg(test)]
#[path = "catalog_tests.rs"]
mod tests;
