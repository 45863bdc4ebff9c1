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
//! Deviations: directory entries are visited in name order (the reference sees them in the
//! order the filesystem lists them), which decides which 50,000 matches are collected on a huge
//! tree and the order of matches with equal modification times; errors while listing a directory
//! are skipped rather than reported.

use std::cmp::Reverse;
use std::collections::HashSet;
use std::fs;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use globset::{GlobBuilder, GlobMatcher};
use ignore::{DirEntry, WalkBuilder};
use serde::Deserialize;
use serde_json::Value;

use super::paths;
use super::{ToolContext, ToolError, ToolOutput, parse_input};
use crate::host_path::canonicalize;

/// At most this many matches are collected (before the confinement filter).
const MAX_MATCHES: usize = 50_000;
/// At most this many paths are returned.
const RESULT_LIMIT: usize = 200;

#[derive(Debug, Deserialize)]
struct Input {
    pattern: String,
    #[serde(default)]
    path: Option<String>,
}

pub(super) fn run(ctx: &ToolContext, input: Value) -> Result<ToolOutput, ToolError> {
    let Input { pattern, path } = parse_input("glob", input)?;
    if pattern.starts_with('/') {
        return Err(ToolError::new(
            "glob: absolute pattern not permitted; pass a relative pattern (and optionally path)",
        ));
    }
    if pattern.split('/').any(|part| part == "..") {
        return Err(ToolError::new("glob: '..' is not permitted in the pattern"));
    }
    let root = match path.as_deref() {
        Some(p) if !p.is_empty() => paths::resolve(ctx, "glob", p)?,
        _ => canonicalize(&ctx.workdir).unwrap_or_else(|_| ctx.workdir.clone()),
    };
    let selector = Selector::parse(&pattern).map_err(|e| ToolError(format!("glob: {e}")))?;

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
                Part::Wildcard(fnmatch_to_globset(part).map(|glob| compile(&glob)).transpose()?)
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

fn compile(glob: &str) -> Result<GlobMatcher, String> {
    let glob =
        GlobBuilder::new(glob).literal_separator(true).backslash_escape(true).build().map_err(|e| e.to_string())?;
    Ok(glob.compile_matcher())
}

/// Translates one `fnmatch` component (Python's `fnmatch.translate` rules) into a `globset`
/// pattern with the same meaning, or `None` when the component can never match.
///
/// `fnmatch` knows no escapes and no alternation, treats an unclosed `[` as a literal, negates a
/// class with `!` only (a leading `^` is literal) and drops reversed ranges; everything literal is
/// escaped for `globset`, and each class is rebuilt from the set of characters it denotes.
fn fnmatch_to_globset(pat: &str) -> Option<String> {
    let p: Vec<char> = pat.chars().collect();
    let mut out = String::new();
    let mut last_star = false;
    let mut i = 0;
    while i < p.len() {
        let c = p[i];
        i += 1;
        match c {
            '*' => {
                if !last_star {
                    out.push('*');
                }
                last_star = true;
                continue;
            }
            '?' => out.push('?'),
            '[' => {
                let mut j = i;
                if j < p.len() && p[j] == '!' {
                    j += 1;
                }
                if j < p.len() && p[j] == ']' {
                    j += 1;
                }
                while j < p.len() && p[j] != ']' {
                    j += 1;
                }
                if j >= p.len() {
                    out.push_str("\\[");
                } else {
                    match class_set(&p[i..j]) {
                        ClassSet::Never => return None,
                        ClassSet::Any => out.push('?'),
                        ClassSet::Set { negated, ranges } => out.push_str(&globset_class(negated, ranges)),
                    }
                    i = j + 1;
                }
            }
            c => push_literal(&mut out, c),
        }
        last_star = false;
    }
    Some(out)
}

fn push_literal(out: &mut String, c: char) {
    if matches!(c, '\\' | '*' | '?' | '[' | ']' | '{' | '}' | ',') {
        out.push('\\');
    }
    out.push(c);
}

#[derive(Debug, PartialEq)]
enum ClassSet {
    /// Matches nothing (every range was reversed).
    Never,
    /// Matches any character (`[!` followed by nothing left).
    Any,
    Set {
        negated: bool,
        ranges: Vec<(char, char)>,
    },
}

/// The characters a `fnmatch` class denotes, given the text between its brackets.
fn class_set(content: &[char]) -> ClassSet {
    let mut chunks: Vec<Vec<char>> = if content.contains(&'-') {
        // Hyphens that form ranges split the class into chunks; a range joins the last character
        // of one chunk with the first of the next, every other character is literal.
        let mut chunks = Vec::new();
        let mut i = 0;
        let mut k = if content[0] == '!' { 2 } else { 1 };
        while let Some(pos) = content.get(k..).and_then(|rest| rest.iter().position(|&c| c == '-')).map(|p| k + p) {
            chunks.push(content[i..pos].to_vec());
            i = pos + 1;
            k = pos + 3;
        }
        let last = &content[i..];
        if last.is_empty() {
            if let Some(prev) = chunks.last_mut() {
                prev.push('-');
            }
        } else {
            chunks.push(last.to_vec());
        }
        // Drop reversed ranges by merging their chunks.
        for k in (1..chunks.len()).rev() {
            if let (Some(&hi), Some(&lo)) = (chunks[k - 1].last(), chunks[k].first())
                && hi > lo
            {
                let next = chunks.remove(k);
                let prev = &mut chunks[k - 1];
                prev.pop();
                prev.extend_from_slice(&next[1..]);
            }
        }
        chunks
    } else {
        vec![content.to_vec()]
    };
    if chunks.len() == 1 && chunks[0].is_empty() {
        return ClassSet::Never;
    }
    if chunks.len() == 1 && chunks[0] == ['!'] {
        return ClassSet::Any;
    }
    let negated = chunks[0].first() == Some(&'!');
    if negated {
        chunks[0].remove(0);
    }
    let mut ranges: Vec<(char, char)> = chunks.iter().flatten().map(|&c| (c, c)).collect();
    ranges.extend(chunks.windows(2).filter_map(|w| Some((*w[0].last()?, *w[1].first()?))));
    ClassSet::Set { negated, ranges }
}

/// Writes a character set as a `globset` class. `globset` reads `]` as a literal only first,
/// `-` as a literal only first or last, `!`/`^` first as negation and `[:` as a POSIX class, so
/// the set is normalised into ranges written `lo-hi` and those characters are placed where they
/// are literal.
fn globset_class(negated: bool, ranges: Vec<(char, char)>) -> String {
    let (mut items, has_bracket, has_dash) = split_out(normalise(ranges), &[']', '-']);
    let mut dash_first = false;
    if !negated && !has_bracket && items.first().is_some_and(|r| matches!(r.0, '!' | '^')) {
        // Start with an item whose first character does not read as negation.
        if let Some(pos) = items.iter().position(|r| !matches!(r.0, '!' | '^')) {
            items.swap(0, pos);
        } else if let Some(pos) = items.iter().position(|r| r.0 < r.1) {
            let (lo, hi) = items[pos];
            items[pos] = (lo, lo);
            let next = char::from_u32(u32::from(lo) + 1).unwrap_or(hi);
            items.insert(0, (next, hi));
        } else if has_dash {
            dash_first = true;
        } else {
            // Only `!` and/or `^`: no class can start with them, so spell the alternatives out.
            let alts: Vec<String> = items.iter().map(|r| format!("\\{}", r.0)).collect();
            return if alts.len() == 1 { alts[0].clone() } else { format!("{{{}}}", alts.join(",")) };
        }
    }
    let mut s = String::from("[");
    if negated {
        s.push('!');
    }
    if has_bracket {
        s.push(']');
    }
    if dash_first {
        s.push('-');
    }
    for (lo, hi) in items {
        s.push(lo);
        s.push('-');
        s.push(hi);
    }
    if has_dash && !dash_first {
        s.push('-');
    }
    s.push(']');
    s
}

/// Sorted, merged ranges.
fn normalise(mut ranges: Vec<(char, char)>) -> Vec<(char, char)> {
    ranges.sort();
    let mut out: Vec<(char, char)> = Vec::with_capacity(ranges.len());
    for (lo, hi) in ranges {
        match out.last_mut() {
            Some(last) if u32::from(lo) <= u32::from(last.1) + 1 => last.1 = last.1.max(hi),
            _ => out.push((lo, hi)),
        }
    }
    out
}

/// Removes `specials` (ASCII) from the ranges; reports whether the first two were present.
fn split_out(ranges: Vec<(char, char)>, specials: &[char; 2]) -> (Vec<(char, char)>, bool, bool) {
    let mut found = [false; 2];
    let mut out = ranges;
    for (n, &special) in specials.iter().enumerate() {
        let mut next = Vec::with_capacity(out.len() + 1);
        for (lo, hi) in out {
            if lo <= special && special <= hi {
                found[n] = true;
                let below = char::from_u32(u32::from(special) - 1).unwrap_or(special);
                let above = char::from_u32(u32::from(special) + 1).unwrap_or(special);
                if lo < special {
                    next.push((lo, below));
                }
                if special < hi {
                    next.push((above, hi));
                }
            } else {
                next.push((lo, hi));
            }
        }
        out = next;
    }
    (out, found[0], found[1])
}

#[cfg(test)]
mod tests {
    use std::fs::File;
    use std::os::unix::fs::symlink;
    use std::time::Duration;

    use serde_json::json;

    use super::*;

    use crate::tools::testing::{setup, text};

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

    /// Whether the fnmatch `pattern` matches `name` (through the globset translation).
    fn fnmatch(pattern: &str, name: &str) -> bool {
        fnmatch_to_globset(pattern).is_some_and(|g| compile(&g).unwrap().is_match(Path::new(name)))
    }

    #[test]
    fn lists_matches_newest_first_as_absolute_paths() {
        let (_d, root, ctx) = setup();
        touch(&root.join("old.rs"), 10);
        touch(&root.join("new.rs"), 30);
        touch(&root.join("mid.rs"), 20);
        touch(&root.join("other.txt"), 40);
        let out = glob(&ctx, json!({"pattern": "*.rs"})).unwrap();
        let expected = ["new.rs", "mid.rs", "old.rs"].map(|n| root.join(n).display().to_string()).join("\n");
        assert_eq!(out, expected);
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
        let expected =
            [".dot.md", ".hidden/h.md", "a/b/deep.md", "top.md"].map(|n| root.join(n).display().to_string()).join("\n");
        assert_eq!(out, expected);
        // A non-`**` component does pass through a symlinked directory.
        let out = glob(&ctx, json!({"pattern": "link/b/*.md"})).unwrap();
        assert_eq!(out, root.join("link/b/deep.md").display().to_string());
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
        let paths = |names: &[&str]| names.iter().map(|n| root.join(n).display().to_string()).collect::<Vec<_>>();
        let lines = |pattern: &str| {
            glob(&ctx, json!({"pattern": pattern})).unwrap().lines().map(str::to_owned).collect::<Vec<_>>()
        };
        // Equal times keep the walk order: a directory's own matches, then each subdirectory's.
        assert_eq!(lines("**/*.md"), paths(&["top.md", "z.md", ".git/g.md", ".hid/h.md", "a/x.md", "a/b/deep.md"]));
        // `**` below a symlinked directory walks its target; wildcards pass through symlinks.
        assert_eq!(lines("link/**/*.md"), paths(&["link/x.md", "link/b/deep.md"]));
        assert_eq!(lines("*/b/*.md"), paths(&["a/b/deep.md", "link/b/deep.md"]));
        let sorted = |pattern: &str| {
            let mut l = lines(pattern);
            l.sort();
            l
        };
        assert_eq!(sorted("*/"), paths(&[".git", ".hid", "a", "link"]));
        assert_eq!(sorted("**/"), [vec![root.display().to_string()], paths(&[".git", ".hid", "a", "a/b"])].concat());
    }

    #[test]
    fn double_star_alone_lists_directories_including_the_root() {
        let (_d, root, ctx) = setup();
        touch(&root.join("a/f"), 1);
        fs::create_dir(root.join("b")).unwrap();
        let out = glob(&ctx, json!({"pattern": "**"})).unwrap();
        let mut lines: Vec<&str> = out.lines().collect();
        lines.sort();
        let mut expected = vec![root.display().to_string(), root.join("a").display().to_string()];
        expected.push(root.join("b").display().to_string());
        expected.sort();
        assert_eq!(lines, expected);
    }

    #[test]
    fn trailing_slash_keeps_directories() {
        let (_d, root, ctx) = setup();
        touch(&root.join("dir1/f"), 1);
        touch(&root.join("dfile"), 2);
        assert_eq!(glob(&ctx, json!({"pattern": "d*/"})).unwrap(), root.join("dir1").display().to_string());
        assert_eq!(glob(&ctx, json!({"pattern": "dfile/"})).unwrap(), "no matches");
    }

    #[test]
    fn path_narrows_the_search_and_is_confined() {
        let (_d, root, ctx) = setup();
        touch(&root.join("sub/x.txt"), 1);
        touch(&root.join("y.txt"), 2);
        assert_eq!(
            glob(&ctx, json!({"pattern": "*.txt", "path": "sub"})).unwrap(),
            root.join("sub/x.txt").display().to_string()
        );
        assert_eq!(
            glob(&ctx, json!({"pattern": "*", "path": "/etc"})).unwrap_err(),
            "glob: path '/etc' is outside the session's working directory"
        );
        assert_eq!(glob(&ctx, json!({"pattern": "*", "path": "missing"})).unwrap(), "no matches");
    }

    #[test]
    fn refuses_absolute_patterns_and_dotdot() {
        let (_d, _root, ctx) = setup();
        assert_eq!(
            glob(&ctx, json!({"pattern": "/etc/*"})).unwrap_err(),
            "glob: absolute pattern not permitted; pass a relative pattern (and optionally path)"
        );
        for pattern in ["../*", "a/../../*", ".."] {
            assert_eq!(
                glob(&ctx, json!({"pattern": pattern})).unwrap_err(),
                "glob: '..' is not permitted in the pattern"
            );
        }
        assert_eq!(glob(&ctx, json!({"pattern": ""})).unwrap_err(), "glob: Unacceptable pattern: ''");
        assert_eq!(
            glob(&ctx, json!({"pattern": "a**/x"})).unwrap_err(),
            "glob: Invalid pattern: '**' can only be an entire path component"
        );
    }

    #[test]
    fn drops_matches_that_escape_through_symlinks() {
        let (_d, root, ctx) = setup();
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join("secret.txt"), "").unwrap();
        symlink(outside.path(), root.join("out")).unwrap();
        symlink(outside.path().join("secret.txt"), root.join("leaf.txt")).unwrap();
        touch(&root.join("ok.txt"), 1);
        assert_eq!(glob(&ctx, json!({"pattern": "*/*.txt"})).unwrap(), "no matches");
        assert_eq!(glob(&ctx, json!({"pattern": "*.txt"})).unwrap(), root.join("ok.txt").display().to_string());
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
        assert_eq!(lines[0], root.join("f249").display().to_string());
        assert_eq!(lines[199], root.join("f050").display().to_string());
    }

    #[test]
    fn fnmatch_semantics() {
        assert!(fnmatch("*.py", ".hidden.py"));
        assert!(fnmatch("a?c", "abc"));
        assert!(!fnmatch("a?c", "ac"));
        // No alternation, no escapes.
        assert!(fnmatch("{a,b}", "{a,b}"));
        assert!(!fnmatch("{a,b}", "a"));
        assert!(fnmatch("a\\*", "a\\xyz"));
        // Classes.
        assert!(fnmatch("[abc]", "b"));
        assert!(!fnmatch("[abc]", "d"));
        assert!(fnmatch("[!abc]", "d"));
        assert!(!fnmatch("[!abc]", "a"));
        assert!(fnmatch("[a-c]x", "bx"));
        assert!(fnmatch("[^a]", "^"));
        assert!(!fnmatch("[^a]", "b"));
        assert!(fnmatch("[]]", "]"));
        assert!(fnmatch("[!]]", "a"));
        assert!(!fnmatch("[!]]", "]"));
        assert!(fnmatch("[a-]", "-"));
        assert!(fnmatch("[-a]", "-"));
        assert!(fnmatch("[a-c-e]", "-"));
        assert!(!fnmatch("[a-c-e]", "d"));
        assert!(fnmatch("[!-a]", "b"));
        assert!(!fnmatch("[!-a]", "-"));
        assert!(fnmatch("[[:]", ":"));
        assert!(fnmatch("[[:]", "["));
        assert!(fnmatch("[!]", "[!]"));
        assert!(fnmatch("[abc", "[abc"));
        // A reversed range is dropped; an empty class matches nothing, `[!` + nothing anything.
        assert!(!fnmatch("[z-a]", "m"));
        assert!(fnmatch("[!a-Z]", "q"));
        assert!(fnmatch("[^!]", "!"));
        assert!(fnmatch("[^!]", "^"));
        assert!(fnmatch("[!^]", "a"));
        assert!(fnmatch("[\\]", "\\"));
        assert!(fnmatch("*", "a\nb"));
        assert!(fnmatch("x[*]", "x*"));
        assert!(!fnmatch("x[*]", "xy"));
    }

    #[test]
    fn class_sets_follow_fnmatch() {
        let set = |s: &str| class_set(&s.chars().collect::<Vec<_>>());
        assert_eq!(
            set("a-c-e"),
            ClassSet::Set { negated: false, ranges: vec![('a', 'a'), ('c', 'c'), ('-', '-'), ('e', 'e'), ('a', 'c')] }
        );
        assert_eq!(set("z-a"), ClassSet::Never);
        assert_eq!(set("!a-Z"), ClassSet::Any);
    }
}
