//! Host paths confined to permitted roots: the confinement of the worker's file tools (`read`,
//! `write`, `edit`, `glob`, `grep`), its skills directory and its memory mount paths.
//!
//! A [`FileStore`](super::FileStore) reaches its files by walking fd-relative from its root and
//! refuses every symlink. The agent's working directory is not a store: symlinks inside it are
//! its own business, as long as what they name stays inside a permitted root. So a host path is
//! resolved the way the reference worker resolves it — one lexical normalisation ([`normalize`],
//! `os.path.normpath`) and one non-strict canonicalisation ([`canonicalize`], `Path.resolve()`
//! after `normpath`) — and only the canonical result is compared, component by component, with
//! the canonical roots ([`confine`], [`read_only_root`]). The file is then opened by that
//! canonical path with the store's own no-follow flags ([`open_read`], [`open_write`]), so a
//! symlink planted after the check is refused, not followed.
//!
//! Lexical normalisation resolves no symlink: `a/link/..` becomes `a` whatever `link` points
//! to. Only [`canonicalize`] names the object an operation will really touch.

use std::ffi::OsString;
use std::fs;
use std::io;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{Mode, OFlags};
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

/// The canonical form of a configured root, resolved at check time. A root that cannot be
/// resolved (a symlink loop) is compared in its lexical form, which nothing canonical can lie
/// under by accident.
pub fn canonical_root(root: &Path) -> PathBuf {
    canonicalize(root).unwrap_or_else(|_| normalize(&std::path::absolute(root).unwrap_or_else(|_| root.to_owned())))
}

/// Why [`confine`] refused a path.
#[derive(Debug, thiserror::Error)]
pub enum ConfineError {
    /// The path holds a NUL byte: it can name nothing.
    #[error("embedded null byte")]
    Nul,
    /// The path could not be canonicalised.
    #[error(transparent)]
    Unresolvable(CanonicalizeError),
    /// The canonical path lies under none of the permitted roots.
    #[error("outside the permitted directories")]
    Outside,
}

/// Resolves `path` (relative to `base`) to the canonical path it names, and checks that it lies
/// inside `base` or one of `others` (each compared canonical, component by component: `/a/b-c`
/// is not inside `/a/b`). The caller works on the returned path from there on.
pub fn confine(base: &Path, others: &[PathBuf], path: &str) -> Result<PathBuf, ConfineError> {
    if path.contains('\0') {
        return Err(ConfineError::Nul);
    }
    let base = canonical_root(base);
    let candidate = Path::new(path);
    let full = if candidate.is_absolute() { candidate.to_owned() } else { base.join(candidate) };
    let full = canonicalize(&full).map_err(ConfineError::Unresolvable)?;
    if full.starts_with(&base) || others.iter().any(|root| full.starts_with(canonical_root(root))) {
        Ok(full)
    } else {
        Err(ConfineError::Outside)
    }
}

/// The first of `roots` (each resolved at check time, so a symlinked root protects what it
/// names) that the canonical `target` lies under.
pub fn read_only_root<'a>(roots: &'a [PathBuf], target: &Path) -> Option<&'a Path> {
    roots.iter().find(|root| target.starts_with(canonical_root(root))).map(PathBuf::as_path)
}

/// Opens a canonical path for reading with the store's read flags: never through a symlink that
/// appeared since it was resolved, never blocking on a FIFO that appeared since it was checked.
pub fn open_read(path: &Path) -> io::Result<fs::File> {
    Ok(fs::File::from(rustix::fs::open(path, super::sys::READ_FLAGS, Mode::empty())?))
}

/// Creates or truncates a canonical path for writing, never through a symlink and never blocking
/// on a FIFO without a reader (that fails with `no such device or address` instead). The mode
/// is `rw-rw-rw-` less the umask, like any file the agent's shell creates.
pub fn open_write(path: &Path) -> io::Result<fs::File> {
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    Ok(fs::File::from(rustix::fs::open(path, flags, Mode::from_raw_mode(0o666))?))
}

/// What tests of host paths share.
#[cfg(test)]
mod testing {
    use std::path::PathBuf;

    /// A temp dir and its canonical path (macOS `/var` → `/private/var`, symlinked TMPDIR), so
    /// canonicalised results compare equal.
    pub(super) fn canonical_tempdir() -> (tempfile::TempDir, PathBuf) {
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

    #[test]
    fn confine_keeps_paths_inside_the_base_or_another_root() {
        let (_d, base) = tmp();
        let (_o, other) = tmp();
        let (_x, outside) = tmp();
        fs::create_dir(base.join("dir")).unwrap();
        symlink(&other, base.join("to-other")).unwrap();
        symlink(&outside, base.join("to-outside")).unwrap();
        let others = [other.clone()];
        let sibling = format!("{}-x/f", base.display());
        // (path, where it lands: Some(canonical path) or None for outside)
        let table: Vec<(String, Option<PathBuf>)> = vec![
            ("f".into(), Some(base.join("f"))),
            ("dir/../g".into(), Some(base.join("g"))),
            ("".into(), Some(base.clone())),
            (base.join("dir/new/file").display().to_string(), Some(base.join("dir/new/file"))),
            ("to-other/notes.md".into(), Some(other.join("notes.md"))),
            (other.join("a").display().to_string(), Some(other.join("a"))),
            ("to-outside/secret".into(), None),
            ("../x".into(), None),
            ("/etc/passwd".into(), None),
            (sibling, None),
        ];
        for (path, want) in table {
            match (confine(&base, &others, &path), want) {
                (Ok(got), Some(want)) => assert_eq!(got, want, "{path}"),
                (Err(ConfineError::Outside), None) => {}
                (got, want) => panic!("{path}: got {got:?}, want {want:?}"),
            }
        }
        assert!(matches!(confine(&base, &[], "to-other/x"), Err(ConfineError::Outside)));
        assert!(matches!(confine(&base, &[], "a\0b"), Err(ConfineError::Nul)));
        symlink("loop", base.join("loop")).unwrap();
        assert!(matches!(confine(&base, &[], "loop"), Err(ConfineError::Unresolvable(CanonicalizeError::SymlinkLoop))));
    }

    #[test]
    fn read_only_roots_are_matched_component_by_component() {
        let (_d, base) = tmp();
        let roots = [base.join("ro/")];
        assert_eq!(read_only_root(&roots, &base.join("ro/x")), Some(roots[0].as_path()));
        assert_eq!(read_only_root(&roots, &base.join("ro")), Some(roots[0].as_path()));
        assert_eq!(read_only_root(&roots, &base.join("ro-not/x")), None);
    }

    #[test]
    fn the_opens_follow_no_symlink() {
        let (_d, base) = tmp();
        fs::write(base.join("real"), "x").unwrap();
        symlink(base.join("real"), base.join("link")).unwrap();
        assert!(open_read(&base.join("real")).is_ok());
        assert_eq!(open_read(&base.join("link")).unwrap_err().raw_os_error(), Some(Errno::LOOP.raw_os_error()));
        assert_eq!(open_write(&base.join("link")).unwrap_err().raw_os_error(), Some(Errno::LOOP.raw_os_error()));
        assert_eq!(fs::read_to_string(base.join("real")).unwrap(), "x", "nothing was written through the link");
    }
}
