//! Paths on the worker's host, resolved the way the reference worker resolves them: one lexical
//! normalisation ([`normalize`], `os.path.normpath`) and one non-strict canonicalisation
//! ([`canonicalize`], `Path.resolve()` after `normpath`). The file tools' confinement, the skills
//! directory and the memory mount paths all go through these two.
//!
//! Lexical normalisation resolves no symlink: `a/link/..` becomes `a` whatever `link` points
//! to. Only [`canonicalize`] names the object an operation will really touch.

use std::ffi::OsString;
use std::fs;
use std::io;
use std::path::{Component, Path, PathBuf};

use rustix::io::Errno;

/// More symlinks than this on one path count as a loop (the Linux limit).
const MAX_SYMLINK_HOPS: u32 = 40;

/// Why a path could not be canonicalised.
#[derive(Debug, thiserror::Error)]
pub enum CanonicalizeError {
    /// More than 40 symlinks had to be followed (counted by hand or by the kernel: `ELOOP`).
    #[error("too many levels of symbolic links")]
    SymlinkLoop,
    /// A component could not be examined (permission denied, not a directory, …).
    #[error(transparent)]
    Io(io::Error),
}

impl From<io::Error> for CanonicalizeError {
    fn from(e: io::Error) -> Self {
        if e.raw_os_error() == Some(Errno::LOOP.raw_os_error()) { Self::SymlinkLoop } else { Self::Io(e) }
    }
}

impl From<CanonicalizeError> for io::Error {
    fn from(e: CanonicalizeError) -> Self {
        match e {
            CanonicalizeError::SymlinkLoop => Errno::LOOP.into(),
            CanonicalizeError::Io(e) => e,
        }
    }
}

/// Returns `path` made absolute (against the current directory), with `.`/`..` collapsed
/// lexically and every symlink followed, including the last component even when it dangles.
/// Trailing components that do not exist yet are kept as spelled, so a file about to be created
/// under directories about to be created still canonicalises. The result is never a partly
/// resolved path: whatever cannot be resolved is an error.
pub fn canonicalize(path: &Path) -> Result<PathBuf, CanonicalizeError> {
    let mut prefix = normalize(&std::path::absolute(path)?);
    // Names below `prefix` that do not exist, innermost first.
    let mut missing: Vec<OsString> = Vec::new();
    let mut hops = 0;
    loop {
        let unresolved = match fs::canonicalize(&prefix) {
            Ok(mut real) => {
                real.extend(missing.iter().rev());
                return Ok(real);
            }
            Err(e) if is_missing(&e) => e,
            Err(e) => return Err(e.into()),
        };
        match fs::symlink_metadata(&prefix) {
            Err(e) => {
                let (true, Some(parent), Some(name)) = (is_missing(&e), prefix.parent(), prefix.file_name()) else {
                    return Err(e.into());
                };
                missing.push(name.to_owned());
                prefix = parent.to_owned();
            }
            // It exists, is no symlink, and still does not resolve: report why.
            Ok(meta) if !meta.file_type().is_symlink() => return Err(unresolved.into()),
            // A dangling symlink (or one through a dangling chain): follow it by hand.
            Ok(_) => {
                hops += 1;
                if hops > MAX_SYMLINK_HOPS {
                    return Err(CanonicalizeError::SymlinkLoop);
                }
                let parent = fs::canonicalize(prefix.parent().unwrap_or(Path::new("/")))?;
                let mut next = parent.join(fs::read_link(&prefix)?);
                next.extend(missing.drain(..).rev());
                prefix = normalize(&next);
            }
        }
    }
}

/// Whether `e` says a component is absent (`ENOENT`) or is no directory (`ENOTDIR`): the cases
/// where the rest of the path may simply not exist yet.
fn is_missing(e: &io::Error) -> bool {
    e.raw_os_error().is_some_and(|code| [Errno::NOENT, Errno::NOTDIR].contains(&Errno::from_raw_os_error(code)))
}

/// Collapses `.` and `..` without looking at the filesystem (`os.path.normpath`); `..` at the
/// root stays at the root.
pub fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::Prefix(_) | Component::RootDir | Component::Normal(_) => out.push(component),
            Component::CurDir => {}
            Component::ParentDir => match out.components().next_back() {
                Some(Component::Normal(_)) => {
                    out.pop();
                }
                Some(Component::RootDir | Component::Prefix(_)) => {}
                _ => out.push(component),
            },
        }
    }
    out
}

/// What tests of path handling share.
#[cfg(test)]
pub(crate) mod testing {
    use std::path::PathBuf;

    /// A temp dir and its canonical path (macOS `/var` → `/private/var`, symlinked TMPDIR), so
    /// canonicalised results compare equal.
    pub(crate) fn canonical_tempdir() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = std::fs::canonicalize(dir.path()).unwrap();
        (dir, path)
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::testing::canonical_tempdir as tmp;
    use super::*;

    #[test]
    fn normalize_collapses_dots_lexically() {
        for (path, normal) in [
            ("/a/./b//c/", "/a/b/c"),
            ("/a/b/../c", "/a/c"),
            ("/a/../../..", "/"),
            ("/..", "/"),
            ("/", "/"),
            ("a/../../b", "../b"),
            ("./a/./", "a"),
            ("../..", "../.."),
        ] {
            assert_eq!(normalize(Path::new(path)), PathBuf::from(normal), "{path}");
        }
    }

    #[test]
    fn canonicalize_collapses_dots_and_keeps_missing_tail() {
        let (_d, root) = tmp();
        fs::create_dir(root.join("a")).unwrap();
        let got = canonicalize(&root.join("a/./b/../new/deeper/file.txt")).unwrap();
        assert_eq!(got, root.join("a/new/deeper/file.txt"));
    }

    #[test]
    fn canonicalize_collapses_dotdot_lexically_before_symlinks() {
        let (_d, root) = tmp();
        let (_o, outside) = tmp();
        fs::create_dir(outside.join("sub")).unwrap();
        symlink(outside.join("sub"), root.join("link")).unwrap();
        // `link/..` is collapsed to the root first, so the symlink is never consulted.
        assert_eq!(canonicalize(&root.join("link/../x")).unwrap(), root.join("x"));
    }

    #[test]
    fn canonicalize_follows_intermediate_and_final_symlinks() {
        let (_d, root) = tmp();
        fs::create_dir_all(root.join("real/dir")).unwrap();
        fs::write(root.join("real/dir/f"), "x").unwrap();
        symlink("real", root.join("r")).unwrap();
        symlink("dir/f", root.join("real/lf")).unwrap();
        assert_eq!(canonicalize(&root.join("r/lf")).unwrap(), root.join("real/dir/f"));
    }

    #[test]
    fn canonicalize_follows_dangling_symlinks() {
        let (_d, root) = tmp();
        let (_o, outside) = tmp();
        symlink(outside.join("nope/deeper"), root.join("dangling")).unwrap();
        assert_eq!(canonicalize(&root.join("dangling")).unwrap(), outside.join("nope/deeper"));
        assert_eq!(canonicalize(&root.join("dangling/child")).unwrap(), outside.join("nope/deeper/child"));
        // A chain of dangling relative links.
        symlink("d2", root.join("d1")).unwrap();
        symlink("gone/x", root.join("d2")).unwrap();
        assert_eq!(canonicalize(&root.join("d1")).unwrap(), root.join("gone/x"));
    }

    #[test]
    fn canonicalize_reports_loops() {
        let (_d, root) = tmp();
        symlink("b", root.join("a")).unwrap();
        symlink("a", root.join("b")).unwrap();
        for path in ["a", "a/child"] {
            let err = canonicalize(&root.join(path)).unwrap_err();
            assert_eq!(err.to_string(), "too many levels of symbolic links", "{path}");
        }
    }

    #[test]
    fn canonicalize_counts_hops_of_dangling_chains() {
        let (_d, root) = tmp();
        // 41 dangling links in a chain: each is followed by hand, one hop too many.
        for i in 0..41 {
            symlink(format!("l{}", i + 1), root.join(format!("l{i}"))).unwrap();
        }
        let err = canonicalize(&root.join("l0")).unwrap_err();
        assert_eq!(err.to_string(), "too many levels of symbolic links");
        // 40 hops are fine.
        assert_eq!(canonicalize(&root.join("l1")).unwrap(), root.join("l41"));
    }

    #[test]
    fn canonicalize_through_a_file_keeps_the_tail() {
        let (_d, root) = tmp();
        fs::write(root.join("f"), "").unwrap();
        assert_eq!(canonicalize(&root.join("f/x")).unwrap(), root.join("f/x"));
    }
}
