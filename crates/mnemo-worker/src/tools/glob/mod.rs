//! `glob`: lists the paths matching a relative glob pattern, newest first (spec §8.7).
//!
//! The walk reproduces the reference's `pathlib.Path.glob` (CPython 3.11): the pattern is taken
//! component by component; `**` stands for the search directory and every directory below it
//! (hidden ones included, symlinked ones not entered); a component with `*`, `?` or `[` is matched
//! against each directory entry (hidden ones included: `*` matches a leading dot), and a
//! component without them is looked up directly. A trailing `/` keeps only directories. Names are
//! matched with `globset`, after translating the `fnmatch` syntax the reference uses (no escapes,
//! no `{a,b}` alternation, `[!…]` negation).
//!
//! Directories are listed and descended with `ignore`'s walker, every filter off (hidden entries
//! and ignore files included alike), symlinks not followed below the walk's own root and entries
//! in name order: a wildcard component lists its directory with `max_depth(1)`, and `**` walks
//! the directories below with `filter_entry` pruning everything that is not one (a symlink to a
//! directory included). One walk of the whole pattern would not do: a component other than `**`
//! passes through symlinked directories (and a precise one is looked up without listing), and a
//! directory's own matches come before those of its subdirectories.
//!
//! The `fnmatch` → `globset` translation lives in `fnmatch.rs`.
//!
//! Deviations: directory entries are visited in name order (the reference sees them in the
//! order the filesystem lists them), which decides which 50,000 matches are collected on a huge
//! tree and the order of matches with equal modification times; errors while listing a directory
//! are skipped rather than reported.

mod fnmatch;

use std::cmp::Reverse;
use std::collections::HashSet;
use std::fs;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use globset::GlobMatcher;
use ignore::{DirEntry, WalkBuilder};
use serde_json::Value;

use super::paths::SearchInput;
use super::{ToolContext, ToolError, ToolOutput, parse_input};
use mnemo_sync::fs::host::canonicalize;

/// At most this many matches are collected (before the confinement filter).
const MAX_MATCHES: usize = 50_000;
/// At most this many paths are returned.
const RESULT_LIMIT: usize = 200;

pub(super) fn run(ctx: &ToolContext, input: Value) -> Result<ToolOutput, ToolError> {
    let input: SearchInput = parse_input("glob", input)?;
    let pattern = input.pattern.as_str();
    if pattern.starts_with('/') {
        return Err(ToolError::new(
            "glob: absolute pattern not permitted; pass a relative pattern (and optionally path)",
        ));
    }
    if pattern.split('/').any(|part| part == "..") {
        return Err(ToolError::new("glob: '..' is not permitted in the pattern"));
    }
    let root = input.root(ctx, "glob")?;
    let selector = Selector::parse(pattern).map_err(|e| ToolError(format!("glob: {e}")))?;

    let mut matches = Vec::new();
    if fs::metadata(&root).is_ok_and(|m| m.is_dir()) {
        let _ = selector.select(0, &root, &mut |path| {
            matches.push(path);
            if matches.len() >= MAX_MATCHES { ControlFlow::Break(()) } else { ControlFlow::Continue(()) }
        });
    }
    // A symlink passed through by a non-`**` component may lead outside the search root; such a
    // match (or one that cannot be resolved at all) is dropped.
    matches.retain(|m| canonicalize(m).is_ok_and(|c| c.starts_with(&root)));
    if matches.is_empty() {
        return Ok(ToolOutput::text("no matches"));
    }
    let mut dated: Vec<(SystemTime, PathBuf)> = matches.into_iter().map(|m| (mtime(&m), m)).collect();
    // Stable: equal times keep the walk order.
    dated.sort_by_key(|d| Reverse(d.0));
    let lines: Vec<String> = dated.iter().take(RESULT_LIMIT).map(|(_, p)| p.to_string_lossy().into_owned()).collect();
    Ok(ToolOutput::text(lines.join("\n")))
}

/// The modification time, following symlinks; the epoch when it cannot be read.
fn mtime(path: &Path) -> SystemTime {
    fs::metadata(path).and_then(|m| m.modified()).unwrap_or(SystemTime::UNIX_EPOCH)
}

/// One component of the pattern.
#[derive(Debug)]
enum Part {
    /// `**`: the directory itself and every directory below it, symlinks not entered.
    Recursive,
    /// A name looked up directly.
    Precise(String),
    /// A wildcard name; `None` when it can never match (an empty character class).
    Wildcard(Option<GlobMatcher>),
}

#[derive(Debug)]
struct Selector {
    parts: Vec<Part>,
    /// The pattern ended with `/`: the last component matches directories only.
    dirs_only: bool,
}

type Emit<'a> = dyn FnMut(PathBuf) -> ControlFlow<()> + 'a;

impl Selector {
    /// Splits the pattern into components (`.` and empty ones dropped), with the reference's
    /// errors for an empty pattern and for `**` inside a component.
    fn parse(pattern: &str) -> Result<Self, String> {
        if pattern.is_empty() {
            return Err("Unacceptable pattern: ''".to_owned());
        }
        let mut parts = Vec::new();
        for part in pattern.split('/').filter(|p| !p.is_empty() && *p != ".") {
            parts.push(if part == "**" {
                Part::Recursive
            } else if part.contains("**") {
                return Err("Invalid pattern: '**' can only be an entire path component".to_owned());
            } else if part.contains(['*', '?', '[']) {
                Part::Wildcard(fnmatch::matcher(part)?)
            } else {
                Part::Precise(part.to_owned())
            });
        }
        Ok(Self { parts, dirs_only: pattern.ends_with('/') })
    }

    /// Emits every match of `parts[idx..]` below `parent`.
    fn select(&self, idx: usize, parent: &Path, emit: &mut Emit<'_>) -> ControlFlow<()> {
        let Some(part) = self.parts.get(idx) else {
            return emit(parent.to_owned());
        };
        // Components followed by another (or by a trailing `/`) must be directories.
        let dirs_only = idx + 1 < self.parts.len() || self.dirs_only;
        match part {
            Part::Precise(name) => {
                let path = parent.join(name);
                let found = fs::metadata(&path).is_ok_and(|m| !dirs_only || m.is_dir());
                if found {
                    self.select(idx + 1, &path, emit)?;
                }
            }
            Part::Wildcard(None) => {}
            Part::Wildcard(Some(matcher)) => {
                for entry in entries(parent) {
                    let kind = entry.file_type();
                    // Like `DirEntry.is_dir()`, a symlink to a directory counts.
                    let is_dir = || {
                        kind.is_some_and(|k| k.is_dir())
                            || kind.is_some_and(|k| k.is_symlink())
                                && fs::metadata(entry.path()).is_ok_and(|m| m.is_dir())
                    };
                    if dirs_only && !is_dir() {
                        continue;
                    }
                    if matcher.is_match(entry.file_name()) {
                        self.select(idx + 1, entry.path(), emit)?;
                    }
                }
            }
            Part::Recursive => {
                let mut yielded = HashSet::new();
                let mut dedup = |path: PathBuf| {
                    if yielded.insert(path.clone()) { emit(path) } else { ControlFlow::Continue(()) }
                };
                self.each_directory(parent, &mut |dir| self.select(idx + 1, dir, &mut dedup))?;
            }
        }
        ControlFlow::Continue(())
    }

    /// Calls `f` for `dir` and then, depth first in name order, for every directory below it,
    /// without entering symlinks.
    fn each_directory(&self, dir: &Path, f: &mut dyn FnMut(&Path) -> ControlFlow<()>) -> ControlFlow<()> {
        // The walk's root itself is never filtered (and is followed if it is a symlink).
        let walk = walker(dir).filter_entry(|entry| entry.file_type().is_some_and(|k| k.is_dir())).build();
        // Unreadable directories are skipped.
        for entry in walk.filter_map(Result::ok) {
            f(entry.path())?;
        }
        ControlFlow::Continue(())
    }
}

/// A walk of `dir` that sees everything (hidden entries, ignore files not consulted), follows
/// no symlink below `dir` and visits entries in name order.
fn walker(dir: &Path) -> WalkBuilder {
    let mut builder = WalkBuilder::new(dir);
    builder.standard_filters(false).follow_links(false).sort_by_file_name(|a, b| a.cmp(b));
    builder
}

/// The entries of `dir` in name order, symlinks not followed. An unreadable directory has none.
fn entries(dir: &Path) -> impl Iterator<Item = DirEntry> {
    walker(dir).max_depth(Some(1)).build().filter_map(Result::ok).filter(|entry| entry.depth() == 1)
}

#[cfg(test)]
mod tests {
    use std::fs::File;
    use std::os::unix::fs::symlink;
    use std::time::Duration;

    use serde_json::json;

    use super::*;

    use crate::tools::testing::{links_out_of, setup, text};

    fn glob(ctx: &ToolContext, input: Value) -> Result<String, String> {
        text(run(ctx, input))
    }

    fn touch(path: &Path, secs_after_epoch: u64) {
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).unwrap();
        }
        let f = File::create(path).unwrap();
        f.set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(1_600_000_000 + secs_after_epoch)).unwrap();
    }

    /// The tool's answer listing `names` under `root`, in that order.
    fn shown(root: &Path, names: &[&str]) -> String {
        names.iter().map(|n| root.join(n).display().to_string()).collect::<Vec<_>>().join("\n")
    }

    #[test]
    fn lists_matches_newest_first_as_absolute_paths() {
        let (_d, root, ctx) = setup();
        touch(&root.join("old.rs"), 10);
        touch(&root.join("new.rs"), 30);
        touch(&root.join("mid.rs"), 20);
        touch(&root.join("other.txt"), 40);
        assert_eq!(glob(&ctx, json!({"pattern": "*.rs"})).unwrap(), shown(&root, &["new.rs", "mid.rs", "old.rs"]));
    }

    #[test]
    fn recursive_pattern_includes_hidden_and_skips_symlinked_dirs() {
        let (_d, root, ctx) = setup();
        touch(&root.join("top.md"), 1);
        touch(&root.join("a/b/deep.md"), 2);
        touch(&root.join(".hidden/h.md"), 3);
        touch(&root.join(".dot.md"), 4);
        symlink(root.join("a"), root.join("link")).unwrap();
        let out = glob(&ctx, json!({"pattern": "**/*.md"})).unwrap();
        assert_eq!(out, shown(&root, &[".dot.md", ".hidden/h.md", "a/b/deep.md", "top.md"]));
        // A non-`**` component does pass through a symlinked directory.
        let out = glob(&ctx, json!({"pattern": "link/b/*.md"})).unwrap();
        assert_eq!(out, shown(&root, &["link/b/deep.md"]));
    }

    #[test]
    fn walks_in_name_order_ignoring_ignore_files() {
        let (_d, root, ctx) = setup();
        for f in ["top.md", "z.md", "a/x.md", "a/b/deep.md", ".hid/h.md", ".git/g.md", ".gitignore", "a/.ignore"] {
            touch(&root.join(f), 0);
        }
        fs::write(root.join(".gitignore"), "*.md\n").unwrap();
        fs::write(root.join("a/.ignore"), "*\n").unwrap();
        symlink(root.join("a"), root.join("link")).unwrap();
        let matches = |pattern: &str| glob(&ctx, json!({"pattern": pattern})).unwrap();
        // Equal times keep the walk order: a directory's own matches, then each subdirectory's.
        assert_eq!(
            matches("**/*.md"),
            shown(&root, &["top.md", "z.md", ".git/g.md", ".hid/h.md", "a/x.md", "a/b/deep.md"])
        );
        // `**` below a symlinked directory walks its target; wildcards pass through symlinks.
        assert_eq!(matches("link/**/*.md"), shown(&root, &["link/x.md", "link/b/deep.md"]));
        assert_eq!(matches("*/b/*.md"), shown(&root, &["a/b/deep.md", "link/b/deep.md"]));
        let sorted = |pattern: &str| {
            let mut l: Vec<_> = matches(pattern).lines().map(str::to_owned).collect();
            l.sort();
            l.join("\n")
        };
        assert_eq!(sorted("*/"), shown(&root, &[".git", ".hid", "a", "link"]));
        assert_eq!(sorted("**/"), format!("{}\n{}", root.display(), shown(&root, &[".git", ".hid", "a", "a/b"])));
    }

    #[test]
    fn double_star_alone_lists_directories_including_the_root() {
        let (_d, root, ctx) = setup();
        touch(&root.join("a/f"), 1);
        fs::create_dir(root.join("b")).unwrap();
        let out = glob(&ctx, json!({"pattern": "**"})).unwrap();
        let mut lines: Vec<&str> = out.lines().collect();
        lines.sort();
        assert_eq!(lines.join("\n"), format!("{}\n{}", root.display(), shown(&root, &["a", "b"])));
    }

    #[test]
    fn trailing_slash_keeps_directories() {
        let (_d, root, ctx) = setup();
        touch(&root.join("dir1/f"), 1);
        touch(&root.join("dfile"), 2);
        assert_eq!(glob(&ctx, json!({"pattern": "d*/"})).unwrap(), shown(&root, &["dir1"]));
        assert_eq!(glob(&ctx, json!({"pattern": "dfile/"})).unwrap(), "no matches");
    }

    #[test]
    fn path_narrows_the_search_and_is_confined() {
        let (_d, root, ctx) = setup();
        touch(&root.join("sub/x.txt"), 1);
        touch(&root.join("y.txt"), 2);
        assert_eq!(glob(&ctx, json!({"pattern": "*.txt", "path": "sub"})).unwrap(), shown(&root, &["sub/x.txt"]));
        assert_eq!(
            glob(&ctx, json!({"pattern": "*", "path": "/etc"})).unwrap_err(),
            "glob: path '/etc' is outside the session's working directory"
        );
        assert_eq!(glob(&ctx, json!({"pattern": "*", "path": "missing"})).unwrap(), "no matches");
    }

    #[test]
    fn refuses_absolute_patterns_and_dotdot() {
        let (_d, _root, ctx) = setup();
        let dotdot = "glob: '..' is not permitted in the pattern";
        for (pattern, refusal) in [
            ("/etc/*", "glob: absolute pattern not permitted; pass a relative pattern (and optionally path)"),
            ("../*", dotdot),
            ("a/../../*", dotdot),
            ("..", dotdot),
            ("", "glob: Unacceptable pattern: ''"),
            ("a**/x", "glob: Invalid pattern: '**' can only be an entire path component"),
        ] {
            assert_eq!(glob(&ctx, json!({"pattern": pattern})).unwrap_err(), refusal, "{pattern}");
        }
    }

    #[test]
    fn drops_matches_that_escape_through_symlinks() {
        let (_d, root, ctx) = setup();
        let _outside = links_out_of(&root, "secret.txt", "leaf.txt", "");
        touch(&root.join("ok.txt"), 1);
        assert_eq!(glob(&ctx, json!({"pattern": "*/*.txt"})).unwrap(), "no matches");
        assert_eq!(glob(&ctx, json!({"pattern": "*.txt"})).unwrap(), shown(&root, &["ok.txt"]));
    }

    #[test]
    fn no_matches() {
        let (_d, _root, ctx) = setup();
        assert_eq!(glob(&ctx, json!({"pattern": "*.nothing"})).unwrap(), "no matches");
        assert_eq!(glob(&ctx, json!({"pattern": "literal.txt"})).unwrap(), "no matches");
    }

    #[test]
    fn returns_at_most_200_paths() {
        let (_d, root, ctx) = setup();
        for i in 0..250 {
            touch(&root.join(format!("f{i:03}")), i);
        }
        let out = glob(&ctx, json!({"pattern": "f*"})).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 200);
        assert_eq!((lines[0], lines[199]), (shown(&root, &["f249"]).as_str(), shown(&root, &["f050"]).as_str()));
    }
}
