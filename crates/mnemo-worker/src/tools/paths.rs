//! The file tools' paths (spec §8.1): confined by `mnemo_sync`'s [`host`] confinement, the same
//! code that confines the sync engine's folders, and reported in the tools' own words.
//!
//! A tool path is made absolute against the workdir, collapsed lexically (`.`/`..`), and then
//! every symlink on it is followed — the last component too, even when it dangles — so the result
//! names the object the operation will really touch. Only then is it compared, component by
//! component, with the canonical permitted roots, and the tool works on that canonical path from
//! there on: a symlink cannot redirect an operation after it was allowed ([`host::confine`],
//! [`host::open_read`], [`host::open_write`]).
//!
//! The messages reproduce the reference toolset's wording (`read: path 'x' is outside …`,
//! `write: notes.md: permission denied`), because the agent sees them verbatim.

use std::io;
use std::path::{Component, Path, PathBuf};

use mnemo_sync::fs::host::{self, CanonicalizeError, ConfineError, canonicalize};
pub(super) use mnemo_sync::fs::host::{open_read, open_write};
use rustix::io::Errno;
use serde::Deserialize;

use super::{ToolContext, ToolError};

/// Resolves the tool path `p` (relative to the workdir) and checks that it lies inside the
/// workdir or one of the other permitted roots. Returns the canonical path to operate on.
pub(super) fn resolve(ctx: &ToolContext, tool: &str, p: &str) -> Result<PathBuf, ToolError> {
    match host::confine(&ctx.workdir, &ctx.allowed_roots, p) {
        Ok(full) => Ok(full),
        // The reference reports a NUL byte before touching the filesystem, without the path.
        Err(ConfineError::Nul) => Err(ToolError(format!("{tool}: embedded null byte"))),
        Err(ConfineError::Unresolvable(e)) => Err(ToolError(format!("{tool}: path {}: {}", py_repr(p), reason(&e)))),
        Err(ConfineError::Outside) => {
            let others = if ctx.allowed_roots.is_empty() { "" } else { " and its other permitted directories" };
            Err(ToolError(format!("{tool}: path {} is outside the session's working directory{others}", py_repr(p))))
        }
    }
}

/// The input of the search tools (`glob`, `grep`): a pattern and where to search.
#[derive(Debug, Deserialize)]
pub(super) struct SearchInput {
    pub(super) pattern: String,
    #[serde(default)]
    pub(super) path: Option<String>,
}

impl SearchInput {
    /// Where to search: `path` resolved and confined, or the workdir (canonical where it can be)
    /// when `path` is absent or empty.
    pub(super) fn root(&self, ctx: &ToolContext, tool: &str) -> Result<PathBuf, ToolError> {
        match self.path.as_deref() {
            Some(p) if !p.is_empty() => resolve(ctx, tool, p),
            _ => Ok(canonicalize(&ctx.workdir).unwrap_or_else(|_| ctx.workdir.clone())),
        }
    }
}

/// Refuses a canonical `target` that lies under one of the read-only roots (resolved at check
/// time, like the permitted roots, so a symlinked root protects what it grants).
pub(super) fn reject_read_only(ctx: &ToolContext, target: &Path, op: &str, file_path: &str) -> Result<(), ToolError> {
    match host::read_only_root(&ctx.read_only_roots, target) {
        Some(root) => Err(ToolError(format!("{op}: {file_path} is inside read-only directory {}", display_path(root)))),
        None => Ok(()),
    }
}

/// Why a path could not be canonicalised, as a normalised reason (`permission denied`), never
/// the OS message with a path.
fn reason(e: &CanonicalizeError) -> String {
    match e {
        CanonicalizeError::SymlinkLoop => e.to_string(),
        CanonicalizeError::Io(e) => fs_reason(e),
    }
}

/// A filesystem error as one runtime-independent phrase that never embeds a host path.
pub(crate) fn fs_reason(e: &io::Error) -> String {
    if let Some(code) = e.raw_os_error() {
        let errno = Errno::from_raw_os_error(code);
        let known = match errno {
            Errno::NOENT => Some("no such file or directory"),
            Errno::NOTDIR => Some("not a directory"),
            Errno::ISDIR => Some("is a directory"),
            Errno::ACCESS | Errno::PERM => Some("permission denied"),
            Errno::EXIST => Some("file already exists"),
            Errno::LOOP => Some("too many levels of symbolic links"),
            _ => None,
        };
        if let Some(reason) = known {
            return reason.to_owned();
        }
        // std renders an OS error as `<strerror> (os error <n>)`; keep the strerror part.
        let text = io::Error::from_raw_os_error(code).to_string();
        let suffix = format!(" (os error {code})");
        return text.strip_suffix(&suffix).unwrap_or(&text).to_lowercase();
    }
    match e.kind() {
        io::ErrorKind::NotFound => "no such file or directory".to_owned(),
        io::ErrorKind::NotADirectory => "not a directory".to_owned(),
        io::ErrorKind::IsADirectory => "is a directory".to_owned(),
        io::ErrorKind::PermissionDenied => "permission denied".to_owned(),
        io::ErrorKind::AlreadyExists => "file already exists".to_owned(),
        _ => e.to_string().to_lowercase(),
    }
}

/// `<op>: <file_path>: <reason>`.
pub(super) fn fs_error(op: &str, file_path: &str, e: &io::Error) -> ToolError {
    ToolError(format!("{op}: {file_path}: {}", fs_reason(e)))
}

/// Renders a configured path like Python's `str(Path)`: repeated separators, `.` components and
/// a trailing separator dropped.
fn display_path(path: &Path) -> String {
    let cleaned: PathBuf = path.components().filter(|c| !matches!(c, Component::CurDir)).collect();
    if cleaned.as_os_str().is_empty() { ".".to_owned() } else { cleaned.display().to_string() }
}

/// Quotes `s` the way Python's `repr(str)` does, which the reference uses for paths in messages:
/// single quotes unless the text holds a single quote and no double quote, backslash escapes for
/// the quote, `\\`, `\t`, `\n`, `\r` and for characters that are not printable.
pub(super) fn py_repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') { '"' } else { '\'' };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if py_printable(c) => out.push(c),
            c if u32::from(c) < 0x100 => out.push_str(&format!("\\x{:02x}", u32::from(c))),
            c if u32::from(c) < 0x10000 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push_str(&format!("\\U{:08x}", u32::from(c))),
        }
    }
    out.push(quote);
    out
}

/// Python's `str.isprintable` for one character, without the Unicode tables: control, separator
/// (other than the space), format and private-use characters and the noncharacters are not
/// printable. Unassigned code points count as printable here (Python escapes them).
fn py_printable(c: char) -> bool {
    if c == ' ' {
        return true;
    }
    if c.is_control() || c.is_whitespace() {
        return false;
    }
    let format_or_private = matches!(u32::from(c),
        0xAD | 0x600..=0x605 | 0x61C | 0x6DD | 0x70F | 0x890..=0x891 | 0x8E2 | 0x180E | 0x200B..=0x200F
        | 0x202A..=0x202E | 0x2060..=0x2064 | 0x2066..=0x206F | 0xFEFF | 0xFFF9..=0xFFFB | 0x110BD | 0x110CD
        | 0x13430..=0x1343F | 0x1BCA0..=0x1BCA3 | 0x1D173..=0x1D17A | 0xE0001 | 0xE0020..=0xE007F
        | 0xE000..=0xF8FF | 0xF0000..=0x10FFFF | 0xFDD0..=0xFDEF);
    let noncharacter = u32::from(c) & 0xFFFE == 0xFFFE;
    !format_or_private && !noncharacter
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::os::unix::fs::symlink;

    use super::*;
    use crate::tools::testing::canonical_tempdir as tmp;
    use crate::tools::testing::links_out_of;

    fn ctx(dir: &Path) -> ToolContext {
        ToolContext::new(dir)
    }

    #[test]
    fn resolve_relative_and_absolute_inside() {
        let (_d, root) = tmp();
        let c = ctx(&root);
        assert_eq!(resolve(&c, "read", "notes.md").unwrap(), root.join("notes.md"));
        assert_eq!(resolve(&c, "read", "").unwrap(), root);
        assert_eq!(resolve(&c, "read", root.join("x/y").to_str().unwrap()).unwrap(), root.join("x/y"));
    }

    #[test]
    fn resolve_rejects_escapes() {
        let (_d, root) = tmp();
        let c = ctx(&root);
        assert_eq!(
            resolve(&c, "read", "../x").unwrap_err().0,
            "read: path '../x' is outside the session's working directory"
        );
        assert_eq!(
            resolve(&c, "write", "/etc/passwd").unwrap_err().0,
            "write: path '/etc/passwd' is outside the session's working directory"
        );
        // A sibling sharing the root's name as a prefix is outside (component-wise comparison).
        let sibling = format!("{}-other/x", root.display());
        assert_eq!(
            resolve(&c, "read", &sibling).unwrap_err().0,
            format!("read: path '{sibling}' is outside the session's working directory")
        );
    }

    #[test]
    fn resolve_rejects_symlink_escapes() {
        let (_d, root) = tmp();
        let outside = links_out_of(&root, "secret", "leaf", "s");
        symlink(outside.path().join("missing"), root.join("dangling")).unwrap();
        let c = ctx(&root);
        for p in ["out/secret", "leaf", "dangling", "out"] {
            assert_eq!(
                resolve(&c, "read", p).unwrap_err().0,
                format!("read: path '{p}' is outside the session's working directory")
            );
        }
    }

    #[test]
    fn resolve_reports_loops_with_the_path() {
        let (_d, root) = tmp();
        symlink("loop", root.join("loop")).unwrap();
        let c = ctx(&root);
        assert_eq!(resolve(&c, "edit", "loop").unwrap_err().0, "edit: path 'loop': too many levels of symbolic links");
    }

    #[test]
    fn resolve_reports_unreadable_components() {
        let (_d, root) = tmp();
        fs::create_dir(root.join("locked")).unwrap();
        fs::write(root.join("locked/f"), "").unwrap();
        let mut perms = fs::metadata(root.join("locked")).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o000);
        fs::set_permissions(root.join("locked"), perms.clone()).unwrap();
        let result = resolve(&ctx(&root), "read", "locked/f");
        std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
        fs::set_permissions(root.join("locked"), perms).unwrap();
        // Root bypasses permission bits; only check the message when the denial happened.
        if let Err(e) = result {
            assert_eq!(e.0, "read: path 'locked/f': permission denied");
        }
    }

    #[test]
    fn resolve_allows_other_roots_and_mentions_them() {
        let (_d, root) = tmp();
        let (_m, memory) = tmp();
        let mut c = ctx(&root);
        c.allowed_roots.push(memory.clone());
        let inside = memory.join("notes.md");
        assert_eq!(resolve(&c, "read", inside.to_str().unwrap()).unwrap(), inside);
        // Reached through a symlink in the workdir, the canonical path is the memory folder's.
        symlink(&memory, root.join("mem")).unwrap();
        assert_eq!(resolve(&c, "read", "mem/notes.md").unwrap(), inside);
        assert_eq!(
            resolve(&c, "read", "/etc").unwrap_err().0,
            "read: path '/etc' is outside the session's working directory and its other permitted directories"
        );
    }

    #[test]
    fn resolve_canonicalises_roots_at_check_time() {
        let (_d, base) = tmp();
        fs::create_dir(base.join("real")).unwrap();
        symlink(base.join("real"), base.join("work")).unwrap();
        let c = ctx(&base.join("work"));
        assert_eq!(resolve(&c, "read", "f").unwrap(), base.join("real/f"));
        let abs = base.join("real/f");
        assert_eq!(resolve(&c, "read", abs.to_str().unwrap()).unwrap(), abs);
    }

    #[test]
    fn resolve_rejects_nul() {
        let (_d, root) = tmp();
        assert_eq!(resolve(&ctx(&root), "read", "a\0b").unwrap_err().0, "read: embedded null byte");
    }

    #[test]
    fn read_only_roots_refuse_targets_under_them() {
        let (_d, root) = tmp();
        let mut c = ctx(&root);
        c.read_only_roots.push(root.join("ro/"));
        assert_eq!(
            reject_read_only(&c, &root.join("ro/x/y"), "write", "ro/x/y").unwrap_err().0,
            format!("write: ro/x/y is inside read-only directory {}", root.join("ro").display())
        );
        assert!(reject_read_only(&c, &root.join("ro-not/x"), "write", "ro-not/x").is_ok());
        assert!(reject_read_only(&c, &root.join("x"), "write", "x").is_ok());
    }

    #[test]
    fn fs_reasons_are_normalised() {
        let reason = |e: Errno| fs_reason(&io::Error::from(e));
        assert_eq!(reason(Errno::NOENT), "no such file or directory");
        assert_eq!(reason(Errno::NOTDIR), "not a directory");
        assert_eq!(reason(Errno::ISDIR), "is a directory");
        assert_eq!(reason(Errno::ACCESS), "permission denied");
        assert_eq!(reason(Errno::PERM), "permission denied");
        assert_eq!(reason(Errno::EXIST), "file already exists");
        assert_eq!(reason(Errno::LOOP), "too many levels of symbolic links");
        assert_eq!(reason(Errno::IO), "input/output error");
        assert_eq!(reason(Errno::NXIO), "no such device or address");
        assert_eq!(fs_reason(&io::Error::other("Weird Thing")), "weird thing");
    }

    #[test]
    fn repr_matches_python() {
        // Expected values printed by CPython 3.11's repr().
        assert_eq!(py_repr("notes.md"), "'notes.md'");
        assert_eq!(py_repr("it's"), "\"it's\"");
        assert_eq!(py_repr("it's \"x\""), "'it\\'s \"x\"'");
        assert_eq!(py_repr("a\\b\tc\nd\re"), "'a\\\\b\\tc\\nd\\re'");
        assert_eq!(py_repr("\x01\x7f\u{a0}\u{ad}"), "'\\x01\\x7f\\xa0\\xad'");
        assert_eq!(py_repr("\u{200b}\u{2028}\u{feff}é日本"), "'\\u200b\\u2028\\ufeffé日本'");
        assert_eq!(py_repr("\u{e0001}\u{1f600}"), "'\\U000e0001\u{1f600}'");
    }
}
