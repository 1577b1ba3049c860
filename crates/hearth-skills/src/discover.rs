//! Finding skill folders: a folder holding `SKILL.md` or `hearth-skill.json`,
//! up to [`MAX_DEPTH`] levels below a root, whose real path stays inside
//! the root's real path (a symlink leading out is refused, not followed).

use std::path::{Path, PathBuf};

use crate::{MANIFEST, SKILL_MD};

/// How many folder levels below a root a skill may be.
pub const MAX_DEPTH: usize = 6;

/// Where a root comes from, highest precedence first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Source {
    /// `<workspace>/skills`.
    Workspace,
    /// `<workspace>/.agents/skills`.
    WorkspaceAgents,
    /// `~/.agents/skills`.
    UserAgents,
    /// `$HEARTH_HOME/skills`.
    Home,
    /// `[skills] extra_dirs`.
    Extra,
}

impl Source {
    /// Wire name, the `source` of `GET /v1/skills`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Workspace => "workspace",
            Self::WorkspaceAgents => "workspace_agents",
            Self::UserAgents => "user_agents",
            Self::Home => "home",
            Self::Extra => "extra",
        }
    }
}

/// A folder searched for skills.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Root {
    /// The folder (it need not exist).
    pub path: PathBuf,
    /// What it is.
    pub source: Source,
}

impl Root {
    /// The standard roots, highest precedence first: the workspace's
    /// `skills` and `.agents/skills`, the user's `~/.agents/skills`, the
    /// hearth home's `skills`, then `extra` in order.
    pub fn standard(
        workspace: Option<&Path>,
        user_home: Option<&Path>,
        hearth_home: &Path,
        extra: &[PathBuf],
    ) -> Vec<Root> {
        let mut roots = Vec::new();
        let mut add = |path: PathBuf, source| roots.push(Root { path, source });
        if let Some(w) = workspace {
            add(w.join("skills"), Source::Workspace);
            add(w.join(".agents/skills"), Source::WorkspaceAgents);
        }
        if let Some(h) = user_home {
            add(h.join(".agents/skills"), Source::UserAgents);
        }
        add(hearth_home.join("skills"), Source::Home);
        for e in extra {
            add(e.clone(), Source::Extra);
        }
        roots
    }
}

/// A skill folder found under a root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// The folder's real path.
    pub dir: PathBuf,
    /// The root's source.
    pub source: Source,
    /// Has a `hearth-skill.json`.
    pub manifest: bool,
}

/// A path refused while searching, and why (for `hearth skills check`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The path as found.
    pub path: PathBuf,
    /// Why it was not used.
    pub reason: String,
}

/// Every skill folder under `roots`, in root order, then path order.
pub fn discover(roots: &[Root]) -> (Vec<Found>, Vec<Refusal>) {
    let mut found = Vec::new();
    let mut refused = Vec::new();
    for root in roots {
        // A root that is itself a link (a dotfiles checkout) is fine: the
        // boundary is its real path.
        let Ok(real_root) = std::fs::canonicalize(&root.path) else {
            continue;
        };
        if !real_root.is_dir() {
            continue;
        }
        let mut w = Walk {
            root: &real_root,
            source: root.source,
            found: &mut found,
            refused: &mut refused,
        };
        w.dir(&real_root, 0);
    }
    (found, refused)
}

struct Walk<'a> {
    root: &'a Path,
    source: Source,
    found: &'a mut Vec<Found>,
    refused: &'a mut Vec<Refusal>,
}

impl Walk<'_> {
    fn dir(&mut self, dir: &Path, depth: usize) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        let mut subdirs: Vec<PathBuf> = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            // Version control, dependencies and hidden folders hold no skills
            // and can be large.
            if name.starts_with('.') || name == "node_modules" {
                continue;
            }
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let path = entry.path();
            if kind.is_symlink() {
                match std::fs::canonicalize(&path) {
                    Ok(real) if real.starts_with(self.root) => {
                        if real.is_dir() {
                            subdirs.push(real);
                        }
                    }
                    Ok(_) => self.refused.push(Refusal {
                        path,
                        reason: format!(
                            "a symlink leading outside {}: not followed",
                            self.root.display()
                        ),
                    }),
                    Err(_) => {}
                }
            } else if kind.is_dir() {
                subdirs.push(path);
            }
        }
        subdirs.sort();
        for sub in subdirs {
            let skill_md = sub.join(SKILL_MD);
            let manifest = sub.join(MANIFEST);
            let has_md = skill_md.exists() || skill_md.is_symlink();
            let has_manifest = manifest.exists() || manifest.is_symlink();
            if has_md || has_manifest {
                if let Some(reason) = self.escapes(&[&skill_md, &manifest]) {
                    self.refused.push(Refusal { path: sub, reason });
                    continue;
                }
                self.found.push(Found {
                    dir: sub,
                    source: self.source,
                    manifest: has_manifest,
                });
            } else if depth + 1 < MAX_DEPTH {
                self.dir(&sub, depth + 1);
            }
        }
    }

    /// Why one of `files` (those that exist) must not be read: it is a
    /// link whose target is outside the root, or dangles.
    fn escapes(&self, files: &[&Path]) -> Option<String> {
        for f in files {
            if !f.is_symlink() {
                continue;
            }
            let name = f.file_name().map(|n| n.to_string_lossy().into_owned());
            let name = name.unwrap_or_default();
            match std::fs::canonicalize(f) {
                Ok(real) if real.starts_with(self.root) => {}
                Ok(_) => {
                    return Some(format!(
                        "{name} is a symlink leading outside {}",
                        self.root.display()
                    ));
                }
                Err(_) => return Some(format!("{name} is a dangling symlink")),
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skill(root: &Path, rel: &str) {
        let d = root.join(rel);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join(SKILL_MD), "---\nname: x\ndescription: y\n---\n").unwrap();
    }

    fn rels(found: &[Found], root: &Path) -> Vec<String> {
        let root = std::fs::canonicalize(root).unwrap();
        found
            .iter()
            .map(|f| f.dir.strip_prefix(&root).unwrap().display().to_string())
            .collect()
    }

    #[test]
    fn finds_skills_up_to_six_levels_and_skips_hidden_folders() {
        let t = tempfile::tempdir().unwrap();
        skill(t.path(), "a");
        skill(t.path(), "group/b");
        skill(t.path(), "1/2/3/4/5/six");
        skill(t.path(), "1/2/3/4/5/6/seven");
        skill(t.path(), ".git/hidden");
        skill(t.path(), "node_modules/dep");
        // A skill's own subfolders are not searched for more skills.
        skill(t.path(), "a/inner");
        let roots = [Root {
            path: t.path().into(),
            source: Source::Home,
        }];
        let (found, refused) = discover(&roots);
        assert_eq!(rels(&found, t.path()), ["1/2/3/4/5/six", "a", "group/b"]);
        assert!(refused.is_empty());
        assert!(
            found
                .iter()
                .all(|f| f.source == Source::Home && !f.manifest)
        );
    }

    #[cfg(unix)]
    #[test]
    fn symlinks_leading_out_of_the_root_are_refused() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("root");
        let outside = t.path().join("outside");
        skill(&outside, "evil");
        skill(&root, "good");
        std::os::unix::fs::symlink(outside.join("evil"), root.join("evil")).unwrap();
        std::os::unix::fs::symlink(root.join("good"), root.join("alias")).unwrap();
        std::fs::create_dir_all(root.join("md")).unwrap();
        std::os::unix::fs::symlink(outside.join("evil/SKILL.md"), root.join("md/SKILL.md"))
            .unwrap();
        let roots = [Root {
            path: root.clone(),
            source: Source::Workspace,
        }];
        let (found, refused) = discover(&roots);
        // The inside link resolves to the same real folder as `good`.
        assert_eq!(rels(&found, &root), ["good", "good"]);
        let reasons: Vec<String> = refused
            .iter()
            .map(|r| format!("{}: {}", r.path.file_name().unwrap().display(), r.reason))
            .collect();
        assert_eq!(reasons.len(), 2, "{reasons:?}");
        assert!(
            reasons[0].starts_with("evil: a symlink leading outside"),
            "{reasons:?}"
        );
        assert!(
            reasons[1].starts_with("md: SKILL.md is a symlink leading outside"),
            "{reasons:?}"
        );
    }

    #[test]
    fn standard_roots_in_precedence_order() {
        let roots = Root::standard(
            Some(Path::new("/w")),
            Some(Path::new("/u")),
            Path::new("/h"),
            &[PathBuf::from("/x")],
        );
        let got: Vec<(String, &str)> = roots
            .iter()
            .map(|r| (r.path.display().to_string(), r.source.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("/w/skills".into(), "workspace"),
                ("/w/.agents/skills".into(), "workspace_agents"),
                ("/u/.agents/skills".into(), "user_agents"),
                ("/h/skills".into(), "home"),
                ("/x".into(), "extra"),
            ]
        );
    }
}
