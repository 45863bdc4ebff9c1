//! Read-only roots hold for `bash` too.
//!
//! The file tools refuse writes under a read-only root themselves, but a shell cannot be policed
//! path by path, so the operating system has to say no. Two ways exist, and [`detect`] picks the
//! best one the host allows:
//!
//! - [`Sandbox::Namespace`]: the shell starts in a private mount namespace in which every
//!   read-only root is bind-mounted onto itself and remounted read-only, so writes fail with
//!   "Read-only file system" whoever the shell runs as. The namespace is made with util-linux
//!   (`unshare`, `mount`) because this crate forbids unsafe code. Where `setpriv` exists the
//!   shell also loses `CAP_SYS_ADMIN`, so it cannot simply remount the roots read-write. A bind
//!   mount shows the same directory, so the files the memory sync engine (which stays in the
//!   worker's namespace) writes into a read-only folder appear in the shell at once.
//! - [`Sandbox::Permissions`]: the fallback. The worker calls [`lock_read_only`] on each
//!   read-only root after every memory sync and [`unlock_read_only`] before the next one, which
//!   must write there. File modes are only best-effort: the owner can change them back and root
//!   ignores them.
//!
//! Neither is a security boundary against a determined root process (it can reach the worker's
//! own view of the filesystem through `/proc/<pid>/root`); both stop an agent's ordinary writes.

use std::ffi::{CStr, CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use rustix::fs::{FileType, Mode, OFlags};

use super::ToolContext;

/// How `bash` enforces the read-only roots of its [`ToolContext`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Sandbox {
    /// No enforcement: bash may write anywhere its user may.
    #[default]
    None,
    /// A private mount namespace with every read-only root mounted read-only.
    Namespace,
    /// File modes, set by [`lock_read_only`] (best-effort; root ignores them).
    Permissions,
}

/// The shell every session runs.
pub(super) const BASH: &str = "/bin/bash";

/// File and directory modes of a locked read-only root.
const LOCKED: Modes = Modes { file: 0o444, dir: 0o555 };
/// The modes the memory sync engine gives its files and directories.
const UNLOCKED: Modes = Modes { file: 0o600, dir: 0o700 };

/// Runs inside the new mount namespace as `bash -c SETUP mnemo-sandbox MOUNT SETPRIV ROOT...`.
/// The roots arrive as positional parameters, so no path is ever parsed as shell code. Any failed
/// mount ends the shell before it reads a command: an unprotected shell never starts. `SHLVL` is
/// lowered so the final shell looks like one started directly.
const SETUP: &str = r#"m=$1 p=$2
shift 2
for r in "$@"; do
  "$m" --bind -- "$r" "$r" && "$m" -o remount,bind,ro -- "$r" || {
    printf 'cannot mount %s read-only\n' "$r"
    exit 125
  }
done
export SHLVL=$((SHLVL - 1))
if [ -n "$p" ]; then
  exec "$p" --bounding-set -sys_admin -- /bin/bash --noprofile --norc
fi
exec /bin/bash --noprofile --norc"#;

/// The enforcement this host supports, probed once per process: [`Sandbox::Namespace`] when a
/// mount namespace can be made here (root, or `CAP_SYS_ADMIN`, and no seccomp filter against
/// `unshare`), else [`Sandbox::Permissions`], with one warning that the fallback is best-effort.
pub fn detect() -> Sandbox {
    static DETECTED: OnceLock<Sandbox> = OnceLock::new();
    *DETECTED.get_or_init(|| match probe_namespace() {
        Ok(()) => {
            tracing::debug!("bash runs in a mount namespace with read-only memory stores mounted read-only");
            Sandbox::Namespace
        }
        Err(reason) => {
            tracing::warn!(
                %reason,
                "bash cannot run in a mount namespace here; read-only memory stores are protected from bash only \
                 by file modes, which is best-effort (root ignores them)"
            );
            Sandbox::Permissions
        }
    })
}

/// Whether a shell for `ctx` under `sandbox` starts through the namespace wrapper, which may
/// fail after the process started (a mount refused).
pub(super) fn wraps(sandbox: Sandbox, ctx: &ToolContext) -> bool {
    sandbox == Sandbox::Namespace && !ctx.read_only_roots.is_empty()
}

/// The command that starts the session's shell: `/bin/bash --noprofile --norc` in the workdir
/// with exactly `ctx.env` plus `PS1=""`, `PS2=""` and `TERM=dumb`; under
/// [`Sandbox::Namespace`] with read-only roots, wrapped so those roots are read-only for it.
/// The caller sets up stdio and the process group.
pub fn shell_command(sandbox: Sandbox, ctx: &ToolContext) -> tokio::process::Command {
    let mut cmd = if wraps(sandbox, ctx) {
        // Missing tools make the spawn or the setup fail: never a silently unprotected shell.
        let (unshare, args) = match namespace_tools() {
            Some(tools) => (tools.unshare.as_os_str(), wrapper_args(tools, &ctx.read_only_roots)),
            None => (OsStr::new("unshare"), wrapper_args(&NamespaceTools::by_name(), &ctx.read_only_roots)),
        };
        let mut cmd = tokio::process::Command::new(unshare);
        cmd.args(args);
        cmd
    } else {
        let mut cmd = tokio::process::Command::new(BASH);
        cmd.args(["--noprofile", "--norc"]);
        cmd
    };
    cmd.current_dir(&ctx.workdir)
        .env_clear()
        .envs(ctx.env.iter().map(|(k, v)| (k, v)))
        .env("PS1", "")
        .env("PS2", "")
        .env("TERM", "dumb");
    cmd
}

/// The util-linux programs the namespace wrapper runs, by absolute path (the shell's own
/// environment may have no `PATH`).
#[derive(Debug)]
struct NamespaceTools {
    unshare: PathBuf,
    mount: PathBuf,
    /// Optional: without it the shell keeps `CAP_SYS_ADMIN` and could remount a root read-write.
    setpriv: Option<PathBuf>,
}

impl NamespaceTools {
    fn find() -> Option<Self> {
        Some(Self {
            unshare: find_program("unshare")?,
            mount: find_program("mount")?,
            setpriv: find_program("setpriv"),
        })
    }

    /// Bare names, for a host where [`Self::find`] failed; the spawn then fails visibly.
    fn by_name() -> Self {
        Self { unshare: "unshare".into(), mount: "mount".into(), setpriv: None }
    }
}

fn namespace_tools() -> Option<&'static NamespaceTools> {
    static TOOLS: OnceLock<Option<NamespaceTools>> = OnceLock::new();
    TOOLS.get_or_init(NamespaceTools::find).as_ref()
}

/// `unshare`'s arguments: a private mount namespace, then [`SETUP`] with the roots.
fn wrapper_args(tools: &NamespaceTools, roots: &[PathBuf]) -> Vec<OsString> {
    let mut args: Vec<OsString> = ["--mount", "--propagation", "private", "--", BASH, "--noprofile", "--norc", "-c"]
        .into_iter()
        .map(OsString::from)
        .collect();
    args.push(SETUP.into());
    args.push("mnemo-sandbox".into());
    args.push(tools.mount.clone().into());
    args.push(tools.setpriv.clone().map(OsString::from).unwrap_or_default());
    args.extend(roots.iter().map(|r| r.clone().into_os_string()));
    args
}

/// The first executable `name` on the worker's `PATH` or in the usual system directories.
fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let fixed = ["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"].map(PathBuf::from);
    std::env::split_paths(&path)
        .filter(|dir| dir.is_absolute())
        .chain(fixed)
        .map(|dir| dir.join(name))
        .find(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0))
}

/// Runs the whole wrapper once, on a scratch directory, with the shell reading an empty stdin:
/// only a full success (namespace, bind mount, read-only remount, capability drop) counts.
fn probe_namespace() -> Result<(), String> {
    let tools = namespace_tools().ok_or("`unshare` or `mount` is not installed")?;
    let scratch = std::env::temp_dir().join(format!("mnemo-sandbox-probe-{}", hex::encode(rand::random::<[u8; 8]>())));
    std::fs::create_dir(&scratch).map_err(|e| format!("cannot create {}: {e}", scratch.display()))?;
    let out = std::process::Command::new(&tools.unshare)
        .args(wrapper_args(tools, std::slice::from_ref(&scratch)))
        .env_clear()
        .stdin(std::process::Stdio::null())
        .output();
    // Best-effort: a leftover empty directory in the temp dir is harmless.
    let _ = std::fs::remove_dir(&scratch);
    let out = out.map_err(|e| format!("cannot run {}: {e}", tools.unshare.display()))?;
    if out.status.success() {
        return Ok(());
    }
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    Err(format!("{}: {}", out.status, text.trim()))
}

/// Makes everything under `root` read-only by mode: files 0444, directories 0555 (`root`
/// included). Symlinks are skipped, never followed, and so are other special files. Every entry
/// is tried; the first error is returned.
pub fn lock_read_only(root: &Path) -> io::Result<()> {
    set_modes(root, LOCKED, Order::ChildrenFirst)
}

/// Undoes [`lock_read_only`]: files 0600, directories 0700, the modes the memory sync engine
/// writes with. Called before each memory sync, which must write pulled files there.
pub fn unlock_read_only(root: &Path) -> io::Result<()> {
    set_modes(root, UNLOCKED, Order::DirectoryFirst)
}

#[derive(Debug, Clone, Copy)]
struct Modes {
    file: u32,
    dir: u32,
}

/// When a directory's own mode changes relative to its entries: a lock closes a directory only
/// after its contents, an unlock opens it first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Order {
    ChildrenFirst,
    DirectoryFirst,
}

/// Walks `root` through directory descriptors opened without following symlinks, so an entry
/// swapped for a symlink during the walk cannot redirect a mode change outside the tree.
fn set_modes(root: &Path, modes: Modes, order: Order) -> io::Result<()> {
    let dir = rustix::fs::open(root, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?;
    let mut first_error = None;
    walk(dir.as_fd(), modes, order, &mut first_error);
    first_error.map_or(Ok(()), Err)
}

fn walk(dir: BorrowedFd<'_>, modes: Modes, order: Order, first_error: &mut Option<io::Error>) {
    if order == Order::DirectoryFirst {
        note(first_error, rustix::fs::fchmod(dir, Mode::from_raw_mode(modes.dir)).map_err(io::Error::from));
    }
    match entry_names(dir) {
        Ok(names) => {
            for name in names {
                let result = set_entry_mode(dir, &name, modes, order, first_error);
                note(first_error, result);
            }
        }
        Err(e) => note(first_error, Err(e)),
    }
    if order == Order::ChildrenFirst {
        note(first_error, rustix::fs::fchmod(dir, Mode::from_raw_mode(modes.dir)).map_err(io::Error::from));
    }
}

fn note(first_error: &mut Option<io::Error>, result: io::Result<()>) {
    if let Err(e) = result {
        first_error.get_or_insert(e);
    }
}

/// The directory's entry names, read up front so no descriptor stays open while recursing.
fn entry_names(dir: BorrowedFd<'_>) -> io::Result<Vec<CString>> {
    let mut names = Vec::new();
    for entry in rustix::fs::Dir::read_from(dir)? {
        let name = entry?.file_name().to_owned();
        if name.as_bytes() != b"." && name.as_bytes() != b".." {
            names.push(name);
        }
    }
    Ok(names)
}

fn set_entry_mode(
    dir: BorrowedFd<'_>,
    name: &CStr,
    modes: Modes,
    order: Order,
    first_error: &mut Option<io::Error>,
) -> io::Result<()> {
    // O_PATH with O_NOFOLLOW opens a symlink itself, never its target; the type check below is
    // on this very inode, so nothing can be swapped in between.
    let fd = match rustix::fs::openat(dir, name, OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC, Mode::empty()) {
        Ok(fd) => fd,
        // Deleted since the listing: nothing to change.
        Err(rustix::io::Errno::NOENT) => return Ok(()),
        Err(e) => return Err(e.into()),
    };
    match FileType::from_raw_mode(rustix::fs::fstat(&fd)?.st_mode) {
        FileType::Directory => {
            // Reopened through the O_PATH descriptor: the very directory just checked.
            let sub =
                rustix::fs::openat(&fd, ".", OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?;
            walk(sub.as_fd(), modes, order, first_error);
            Ok(())
        }
        FileType::RegularFile => chmod_path_fd(&fd, dir, name, modes.file),
        _ => Ok(()),
    }
}

/// `fchmod` does not take an `O_PATH` descriptor, but its `/proc/self/fd` link can be chmodded
/// (what the C library's `fchmodat(AT_SYMLINK_NOFOLLOW)` does). Without `/proc`, the file is
/// reopened for reading, still without following a symlink, and checked again.
fn chmod_path_fd(fd: &OwnedFd, dir: BorrowedFd<'_>, name: &CStr, mode: u32) -> io::Result<()> {
    let mode = Mode::from_raw_mode(mode);
    match rustix::fs::chmod(format!("/proc/self/fd/{}", fd.as_raw_fd()), mode) {
        Err(rustix::io::Errno::NOENT) => {}
        other => return other.map_err(io::Error::from),
    }
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    let file = rustix::fs::openat(dir, name, flags, Mode::empty())?;
    if FileType::from_raw_mode(rustix::fs::fstat(&file)?.st_mode) == FileType::RegularFile {
        rustix::fs::fchmod(&file, mode)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use serde_json::json;

    use super::*;
    use crate::tools::{BashSession, ToolOutput};

    /// Whether the tests run as root (a new file belongs to the effective user).
    fn is_root() -> bool {
        use std::os::unix::fs::MetadataExt;
        tempfile::tempfile().unwrap().metadata().unwrap().uid() == 0
    }

    fn mode_of(path: &Path) -> u32 {
        std::fs::symlink_metadata(path).unwrap().permissions().mode() & 0o7777
    }

    async fn run(bash: &mut BashSession, command: &str) -> ToolOutput {
        match bash.call(json!({ "command": command })).await {
            Ok(out) => out,
            Err(e) => e.into(),
        }
    }

    /// Whether this host cannot make mount namespaces (and the test calling it should stop).
    fn no_namespaces() -> bool {
        let missing = detect() != Sandbox::Namespace;
        if missing {
            eprintln!("skipped: this host cannot make mount namespaces");
        }
        missing
    }

    /// A folder standing for a memory store, holding `notes.md`.
    fn store_with_notes() -> tempfile::TempDir {
        let store = tempfile::tempdir().unwrap();
        std::fs::write(store.path().join("notes.md"), "remember\n").unwrap();
        store
    }

    /// A bash session in `workdir` whose one read-only root, `read_only`, `sandbox` enforces.
    fn sandboxed_bash(workdir: &Path, read_only: PathBuf, sandbox: Sandbox) -> BashSession {
        let mut ctx = ToolContext::new(workdir);
        ctx.read_only_roots = vec![read_only];
        ctx.sandbox = sandbox;
        BashSession::new(ctx)
    }

    #[test]
    fn detect_is_stable() {
        assert_eq!(detect(), detect());
        assert_ne!(detect(), Sandbox::None);
    }

    #[test]
    fn shell_command_runs_bash_directly_without_read_only_roots() {
        let ctx = ToolContext::new("/tmp");
        let cmd = shell_command(Sandbox::Namespace, &ctx);
        assert_eq!(cmd.as_std().get_program(), BASH);
        assert_eq!(cmd.as_std().get_current_dir(), Some(Path::new("/tmp")));
        let envs: Vec<_> = cmd.as_std().get_envs().collect();
        for (k, v) in [("PS1", ""), ("PS2", ""), ("TERM", "dumb")] {
            assert!(envs.contains(&(OsStr::new(k), Some(OsStr::new(v)))), "{k}");
        }
    }

    #[test]
    fn shell_command_passes_roots_as_arguments_not_code() {
        let mut ctx = ToolContext::new("/tmp");
        ctx.read_only_roots = vec![PathBuf::from("/mem/it's; rm -rf $HOME")];
        let cmd = shell_command(Sandbox::Namespace, &ctx);
        let args: Vec<_> = cmd.as_std().get_args().collect();
        assert_eq!(args.last().copied(), Some(OsStr::new("/mem/it's; rm -rf $HOME")));
        let script = args.iter().position(|a| *a == "-c").map(|i| args[i + 1]).unwrap();
        assert_eq!(script, SETUP);
        let permissions = shell_command(Sandbox::Permissions, &ctx);
        assert_eq!(permissions.as_std().get_program(), BASH);
    }

    #[tokio::test]
    async fn namespace_makes_read_only_roots_read_only_for_bash() {
        if no_namespaces() {
            return;
        }
        let workdir = tempfile::tempdir().unwrap();
        let store = store_with_notes();
        let mut bash = sandboxed_bash(workdir.path(), store.path().to_path_buf(), Sandbox::Namespace);
        let ro = store.path().display();

        let read = run(&mut bash, &format!("cat '{ro}/notes.md'")).await;
        assert!(!read.is_error, "{read:?}");
        assert_eq!(read.joined_text(), "remember");

        for write in [format!("echo x > '{ro}/notes.md'"), format!("touch '{ro}/new.md'"), format!("mkdir '{ro}/d'")] {
            let out = run(&mut bash, &write).await;
            assert!(out.is_error, "{write}: {out:?}");
            assert!(out.joined_text().contains("Read-only file system"), "{write}: {out:?}");
        }
        // Remounting read-write needs CAP_SYS_ADMIN, which the shell lost (when setpriv exists).
        if namespace_tools().is_some_and(|t| t.setpriv.is_some()) {
            let out = run(&mut bash, &format!("mount -o remount,bind,rw '{ro}' && echo x > '{ro}/notes.md'")).await;
            assert!(out.is_error, "{out:?}");
        }
        assert_eq!(std::fs::read_to_string(store.path().join("notes.md")).unwrap(), "remember\n");
        assert!(!store.path().join("new.md").exists());

        let out = run(&mut bash, "echo ok > here.txt && cat here.txt").await;
        assert_eq!((out.is_error, out.joined_text().as_str()), (false, "ok"));
        assert_eq!(std::fs::read_to_string(workdir.path().join("here.txt")).unwrap(), "ok\n");

        // The sync engine writes in the worker's namespace; the shell sees it through the bind.
        std::fs::write(store.path().join("pulled.md"), "from the server\n").unwrap();
        let out = run(&mut bash, &format!("cat '{ro}/pulled.md'")).await;
        assert_eq!((out.is_error, out.joined_text().as_str()), (false, "from the server"));
        bash.close().await;
    }

    #[tokio::test]
    async fn namespace_setup_failure_is_an_error_not_an_unprotected_shell() {
        if no_namespaces() {
            return;
        }
        let workdir = tempfile::tempdir().unwrap();
        let mut bash = sandboxed_bash(workdir.path(), workdir.path().join("missing"), Sandbox::Namespace);
        let err = bash.call(json!({ "command": "echo hi" })).await.unwrap_err();
        assert!(err.0.starts_with("bash: cannot start the sandboxed shell: "), "{err}");
        assert!(err.0.contains("missing"), "{err}");
        let err = bash.call(json!({ "restart": true })).await.unwrap_err();
        assert!(err.0.starts_with("bash: cannot start the sandboxed shell: "), "{err}");
    }

    #[test]
    fn lock_and_unlock_set_modes_recursively_and_skip_symlinks() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let r = root.path();
        std::fs::create_dir_all(r.join("a/b")).unwrap();
        std::fs::write(r.join("top.md"), "t").unwrap();
        std::fs::write(r.join("a/b/deep.md"), "d").unwrap();
        std::fs::write(outside.path().join("target.md"), "o").unwrap();
        std::fs::set_permissions(outside.path().join("target.md"), std::fs::Permissions::from_mode(0o640)).unwrap();
        symlink(outside.path().join("target.md"), r.join("a/link.md")).unwrap();
        symlink(outside.path(), r.join("dirlink")).unwrap();
        let outside_mode = mode_of(outside.path());
        // The modes of everything under the root, and nothing behind its symlinks touched.
        let assert_modes = |dirs: u32, files: u32| {
            for dir in [r.to_path_buf(), r.join("a"), r.join("a/b")] {
                assert_eq!(mode_of(&dir), dirs, "{}", dir.display());
            }
            for file in [r.join("top.md"), r.join("a/b/deep.md")] {
                assert_eq!(mode_of(&file), files, "{}", file.display());
            }
            assert_eq!(mode_of(&outside.path().join("target.md")), 0o640);
            assert_eq!(mode_of(outside.path()), outside_mode);
        };

        lock_read_only(r).unwrap();
        assert_modes(0o555, 0o444);
        unlock_read_only(r).unwrap();
        assert_modes(0o700, 0o600);
        std::fs::write(r.join("a/b/new.md"), "n").unwrap();
    }

    #[test]
    fn lock_reports_a_missing_root() {
        let root = tempfile::tempdir().unwrap();
        let err = lock_read_only(&root.path().join("missing")).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
    }

    #[tokio::test]
    async fn permissions_lock_stops_a_non_root_bash() {
        let workdir = tempfile::tempdir().unwrap();
        let store = store_with_notes();
        lock_read_only(store.path()).unwrap();
        let mut bash = sandboxed_bash(workdir.path(), store.path().to_path_buf(), Sandbox::Permissions);
        let ro = store.path().display();
        let read = run(&mut bash, &format!("cat '{ro}/notes.md'")).await;
        assert_eq!((read.is_error, read.joined_text().as_str()), (false, "remember"));
        let write = run(&mut bash, &format!("echo x > '{ro}/notes.md'")).await;
        if is_root() {
            // Root ignores file modes: the fallback is best-effort by design.
            eprintln!("running as root: the write is not refused ({write:?})");
        } else {
            assert!(write.is_error, "{write:?}");
            assert!(write.joined_text().contains("Permission denied"), "{write:?}");
        }
        bash.close().await;
        unlock_read_only(store.path()).unwrap();
    }
}
