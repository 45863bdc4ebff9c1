//! The tool shell's confinement: it cannot see or touch the worker, and read-only roots hold
//! for `bash` too.
//!
//! The worker holds credentials (the environment key, each item's sessions token) that an agent
//! must never reach, and the file tools refuse writes under a read-only root themselves, but a
//! shell cannot be policed path by path: the operating system has to say no. [`detect`] probes
//! once what the host allows, and every shell starts through the strongest wrapper available:
//!
//! - [`Sandbox::Namespace`]: the shell starts in its own mount namespace and its own PID
//!   namespace with its own `/proc` (util-linux `unshare --pid --fork --mount-proc`, because
//!   this crate forbids unsafe code). It sees no process of the worker's: not its environment,
//!   not its command line, not `/proc/<worker>/root` (a way round read-only mounts), nothing to
//!   `ptrace`. Every read-only root is bind-mounted onto itself and remounted read-only, so writes
//!   fail with "Read-only file system" whoever the shell runs as. A bind mount shows the same
//!   directory, so the files the memory sync engine (which stays in the worker's namespace)
//!   writes into a read-only folder appear in the shell at once.
//! - [`Sandbox::Permissions`]: the fallback where namespaces cannot be made (no root, a seccomp
//!   filter). The worker calls [`lock_read_only`] on each read-only root after every memory sync
//!   and [`unlock_read_only`] before the next one, which must write there. File modes are only
//!   best-effort: the owner can change them back and root ignores them. The shell shares the
//!   worker's `/proc`: only a separate user ([`ToolUser`], `--tool-user`) and the worker being
//!   non-dumpable keep it from the worker's memory; the worker warns at start
//!   ([`missing_protections`]).
//!
//! Under both, where util-linux `setpriv` exists, the shell runs with `no_new_privs` (no setuid
//! binary raises it again), as the [`ToolUser`] when one is configured, and — when the worker
//! holds capabilities — with the capability bounding set cut to [`SHELL_CAPABILITIES`]: what a
//! root shell needs to install packages and manage its own files, and nothing that reaches past
//! the namespaces (no `sys_admin` to remount or `setns`, no `sys_ptrace`, no `dac_read_search`
//! for `open_by_handle_at`, no `mknod` for a raw block device under a read-only mount, no
//! `sys_rawio`, `sys_module`, `net_admin`, `setfcap`, `bpf` or `sys_chroot`).

use std::ffi::{CStr, CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use rustix::fs::{FileType, Mode, OFlags};

use super::ToolContext;

/// How `bash` enforces the read-only roots of its [`ToolContext`], and whether it has its own
/// view of the processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Sandbox {
    /// No enforcement: bash may write anywhere its user may.
    #[default]
    None,
    /// Private mount and PID namespaces, its own `/proc`, every read-only root mounted
    /// read-only.
    Namespace,
    /// File modes, set by [`lock_read_only`] (best-effort; root ignores them).
    Permissions,
}

/// The capabilities a shell keeps when the worker may cut its bounding set (Docker's default set
/// without `mknod`, `net_raw`, `setfcap`, `setpcap`, `sys_chroot` and `audit_write`).
pub const SHELL_CAPABILITIES: [&str; 8] =
    ["chown", "dac_override", "fowner", "fsetid", "kill", "setgid", "setuid", "net_bind_service"];

/// The shell every session runs.
pub(super) const BASH: &str = "/bin/bash";

/// File and directory modes of a locked read-only root.
const LOCKED: Modes = Modes { file: 0o444, dir: 0o555 };
/// The modes the memory sync engine gives its files and directories.
const UNLOCKED: Modes = Modes { file: 0o600, dir: 0o700 };

/// Runs inside the new namespaces as `bash -c SETUP mnemo-sandbox MOUNT N PRIV... ROOT...`: the
/// first `N` arguments after the count are the `setpriv` command line the shell is started
/// through (none without setpriv), the rest the read-only roots. Everything arrives as positional
/// parameters, so no path is ever parsed as shell code. Any failed mount ends the setup before
/// the shell reads a command: an unprotected shell never starts. `SHLVL` is lowered so the final
/// shell looks like one started directly.
const SETUP: &str = r#"m=$1 n=$2
shift 2
p=("${@:1:n}")
shift "$n"
for r in "$@"; do
  "$m" --bind -- "$r" "$r" && "$m" -o remount,bind,ro -- "$r" || {
    printf 'cannot mount %s read-only\n' "$r"
    exit 125
  }
done
export SHLVL=$((SHLVL - 1))
exec "${p[@]}" /bin/bash --noprofile --norc"#;

/// The user the tool shell runs as (`--tool-user`), resolved once at start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolUser {
    pub uid: u32,
    pub gid: u32,
    /// The login name, when the user database knows the uid: supplementary groups are then
    /// initialised from it, else cleared.
    pub name: Option<String>,
    pub home: Option<PathBuf>,
}

impl ToolUser {
    /// Resolves `spec` (a user name or a numeric uid) through the system's user database
    /// (`getent passwd`, so NSS sources count). A uid the database does not know is taken as is,
    /// with the same number as its group and no supplementary groups.
    pub fn resolve(spec: &str) -> Result<Self, String> {
        let spec = spec.trim();
        if spec.is_empty() || spec.contains(['\n', '\0', ':']) {
            return Err(format!("--tool-user {spec:?} is not a user name or uid"));
        }
        let out = std::process::Command::new(find_program("getent").unwrap_or_else(|| "getent".into()))
            .args(["passwd", spec])
            .env_clear()
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .output();
        let found = out
            .ok()
            .filter(|o| o.status.success())
            .and_then(|o| String::from_utf8_lossy(&o.stdout).lines().next().and_then(Self::from_passwd_line));
        match (found, spec.parse::<u32>()) {
            (Some(user), _) => Ok(user),
            (None, Ok(uid)) => Ok(Self { uid, gid: uid, name: None, home: None }),
            (None, Err(_)) => Err(format!(
                "--tool-user {spec}: no such user (create it, e.g. `useradd --system --no-create-home {spec}`, or give a numeric uid)"
            )),
        }
    }

    /// One `passwd(5)` line: `name:x:uid:gid:gecos:home:shell`.
    fn from_passwd_line(line: &str) -> Option<Self> {
        let fields: Vec<&str> = line.split(':').collect();
        let [name, _, uid, gid, _, home, ..] = fields.as_slice() else { return None };
        Some(Self {
            uid: uid.parse().ok()?,
            gid: gid.parse().ok()?,
            name: Some((*name).to_owned()).filter(|n| !n.is_empty()),
            home: Some(PathBuf::from(home)).filter(|h| h.is_absolute()),
        })
    }
}

/// What the host allows, probed once per process by [`isolation`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Isolation {
    pub sandbox: Sandbox,
    /// Why there is no namespace, when there is none.
    pub namespace_missing: Option<String>,
    /// `setpriv`, when installed and working: the shell's `no_new_privs`, user and capabilities.
    privileges: Option<Privileges>,
    /// Why `setpriv` cannot be used, when it cannot.
    privileges_missing: Option<String>,
    /// The worker holds capabilities (it runs as root, or was given some).
    has_capabilities: bool,
}

impl Isolation {
    /// Whether `setpriv` works here (needed for `--tool-user`).
    pub fn has_setpriv(&self) -> bool {
        self.privileges.is_some()
    }
}

/// How the shell loses privileges: `setpriv`, and whether the bounding set can be cut (the
/// worker holds `CAP_SETPCAP`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Privileges {
    setpriv: PathBuf,
    bounding: bool,
}

/// The enforcement this host supports (see [`isolation`]).
pub fn detect() -> Sandbox {
    isolation().sandbox
}

/// Probes the host once per process: [`Sandbox::Namespace`] when the whole namespace wrapper
/// works here (root, or `CAP_SYS_ADMIN`, and no seccomp filter against `unshare`), else
/// [`Sandbox::Permissions`]; and whether `setpriv` works.
pub fn isolation() -> &'static Isolation {
    static DETECTED: OnceLock<Isolation> = OnceLock::new();
    DETECTED.get_or_init(|| {
        let caps = effective_capabilities();
        let (privileges, privileges_missing) = match probe_privileges(caps) {
            Ok(p) => (Some(p), None),
            Err(reason) => (None, Some(reason)),
        };
        let namespace = probe_namespace(privileges.as_ref(), caps != 0);
        let iso = Isolation {
            sandbox: if namespace.is_ok() { Sandbox::Namespace } else { Sandbox::Permissions },
            namespace_missing: namespace.err(),
            privileges,
            privileges_missing,
            has_capabilities: caps != 0,
        };
        tracing::debug!(?iso, "tool shell isolation probed");
        iso
    })
}

/// What the tool shell will run without, in words for the operator; empty when nothing is
/// missing. A missing separate user only counts without a PID namespace: it is then the one
/// thing between the shell and the worker's memory.
pub fn missing_protections(iso: &Isolation, tool_user: Option<&ToolUser>) -> Vec<String> {
    let mut missing = Vec::new();
    if let Some(reason) = &iso.namespace_missing {
        missing.push(format!("its own PID and mount namespaces ({reason})"));
        if tool_user.is_none() {
            missing.push("a separate user (--tool-user)".to_owned());
        }
    }
    match (&iso.privileges, &iso.privileges_missing) {
        (None, reason) => missing.push(format!(
            "no_new_privs and a reduced capability bounding set ({})",
            reason.as_deref().unwrap_or("setpriv is not installed")
        )),
        (Some(p), _) if iso.has_capabilities && !p.bounding => {
            missing.push("a reduced capability bounding set (the worker lacks CAP_SETPCAP)".to_owned())
        }
        _ => {}
    }
    missing
}

/// Whether the shell could read or trace the worker: it shares the worker's PID namespace and
/// runs as the worker's user.
pub fn shell_sees_worker(iso: &Isolation, tool_user: Option<&ToolUser>) -> bool {
    iso.sandbox != Sandbox::Namespace && tool_user.is_none()
}

/// Logs, once at start, what the tool shell runs without: one warning naming it all, plainly.
pub fn warn_at_start(tool_user: Option<&ToolUser>) {
    let iso = isolation();
    let missing = missing_protections(iso, tool_user);
    if missing.is_empty() {
        tracing::info!(
            "tool shells run in their own PID and mount namespaces with no_new_privs and a reduced capability set"
        );
        return;
    }
    let missing = missing.join("; ");
    if shell_sees_worker(iso, tool_user) {
        tracing::warn!(
            "the agent's shell runs without {missing}: it shares this worker's processes and user, so read-only memory is \
             best-effort and only the worker being non-dumpable keeps its memory out of reach; run the worker as root (or \
             with CAP_SYS_ADMIN) with util-linux installed, set --tool-user, or run one sandbox per session with --on-work \
             (see docs/WORKER.md)"
        );
    } else {
        tracing::warn!("the agent's shell runs without {missing} (see docs/WORKER.md)");
    }
}

/// Whether a shell for `ctx` under `sandbox` starts through a wrapper (the namespaces or
/// `setpriv`), which may fail after the process started.
pub(super) fn wraps(sandbox: Sandbox, _ctx: &ToolContext) -> bool {
    match sandbox {
        Sandbox::Namespace => true,
        Sandbox::Permissions => isolation().privileges.is_some(),
        Sandbox::None => false,
    }
}

/// The command that starts the session's shell: `/bin/bash --noprofile --norc` in the workdir
/// with exactly `ctx.env` plus `PS1=""`, `PS2=""` and `TERM=dumb` (and the [`ToolUser`]'s `HOME`
/// and `USER`); under [`Sandbox::Namespace`], in its own namespaces with the read-only roots
/// mounted read-only; under it and [`Sandbox::Permissions`], through `setpriv` where it works.
/// [`Sandbox::None`] (tests) starts bash as it is. The caller sets up stdio and the process
/// group. A [`ToolUser`] without `setpriv` is an error, never a shell as the worker's user.
pub fn shell_command(sandbox: Sandbox, ctx: &ToolContext) -> Result<tokio::process::Command, String> {
    let iso = isolation();
    let privileges = setpriv_args(iso.privileges.as_ref(), iso.has_capabilities, ctx.tool_user.as_ref());
    if ctx.tool_user.is_some() && privileges.is_empty() {
        return Err("--tool-user needs util-linux's setpriv, which does not work here".to_owned());
    }
    let mut cmd = match sandbox {
        Sandbox::Namespace => {
            // Missing tools make the spawn or the setup fail: never a silently unprotected shell.
            let (unshare, args) = match namespace_tools() {
                Some(tools) => (tools.unshare.as_os_str(), wrapper_args(tools, &privileges, &ctx.read_only_roots)),
                None => {
                    (OsStr::new("unshare"), wrapper_args(&NamespaceTools::by_name(), &privileges, &ctx.read_only_roots))
                }
            };
            let mut cmd = tokio::process::Command::new(unshare);
            cmd.args(args);
            cmd
        }
        Sandbox::Permissions if !privileges.is_empty() => {
            let mut cmd = tokio::process::Command::new(&privileges[0]);
            cmd.args(&privileges[1..]).args([BASH, "--noprofile", "--norc"]);
            cmd
        }
        Sandbox::Permissions | Sandbox::None => {
            let mut cmd = tokio::process::Command::new(BASH);
            cmd.args(["--noprofile", "--norc"]);
            cmd
        }
    };
    cmd.current_dir(&ctx.workdir).env_clear().envs(ctx.env.iter().map(|(k, v)| (k, v)));
    if let Some(user) = &ctx.tool_user {
        if let Some(home) = &user.home {
            cmd.env("HOME", home);
        }
        if let Some(name) = &user.name {
            cmd.env("USER", name);
        }
    }
    cmd.env("PS1", "").env("PS2", "").env("TERM", "dumb");
    Ok(cmd)
}

/// The `setpriv` command line (ending in `--`) the shell starts through: `no_new_privs` always,
/// the inheritable and ambient sets emptied and the bounding set cut to [`SHELL_CAPABILITIES`]
/// when the worker holds capabilities (and may cut it), the [`ToolUser`]'s ids when one is set.
/// Empty without setpriv.
fn setpriv_args(privileges: Option<&Privileges>, has_capabilities: bool, user: Option<&ToolUser>) -> Vec<OsString> {
    let Some(p) = privileges else { return Vec::new() };
    let mut args: Vec<OsString> = vec![p.setpriv.clone().into(), "--no-new-privs".into()];
    if has_capabilities {
        args.extend(["--inh-caps".into(), "-all".into(), "--ambient-caps".into(), "-all".into()]);
    }
    if p.bounding {
        let keep: String = SHELL_CAPABILITIES.iter().map(|c| format!(",+{c}")).collect();
        args.extend(["--bounding-set".into(), format!("-all{keep}").into()]);
    }
    if let Some(user) = user {
        args.extend(["--reuid".into(), user.uid.to_string().into(), "--regid".into(), user.gid.to_string().into()]);
        args.push(if user.name.is_some() { "--init-groups" } else { "--clear-groups" }.into());
    }
    args.push("--".into());
    args
}

/// The util-linux programs the namespace wrapper runs, by absolute path (the shell's own
/// environment may have no `PATH`).
#[derive(Debug)]
struct NamespaceTools {
    unshare: PathBuf,
    mount: PathBuf,
}

impl NamespaceTools {
    fn find() -> Option<Self> {
        Some(Self { unshare: find_program("unshare")?, mount: find_program("mount")? })
    }

    /// Bare names, for a host where [`Self::find`] failed; the spawn then fails visibly.
    fn by_name() -> Self {
        Self { unshare: "unshare".into(), mount: "mount".into() }
    }
}

fn namespace_tools() -> Option<&'static NamespaceTools> {
    static TOOLS: OnceLock<Option<NamespaceTools>> = OnceLock::new();
    TOOLS.get_or_init(NamespaceTools::find).as_ref()
}

/// `unshare`'s arguments: private mount and PID namespaces with their own `/proc` (the shell is
/// the namespace's init, so everything it started dies with it; `--kill-child` ends it if
/// `unshare` itself is killed), then [`SETUP`] with the privileges and the roots.
fn wrapper_args(tools: &NamespaceTools, privileges: &[OsString], roots: &[PathBuf]) -> Vec<OsString> {
    let mut args: Vec<OsString> = [
        "--mount",
        "--propagation",
        "private",
        "--pid",
        "--fork",
        "--kill-child",
        "--mount-proc",
        "--",
        BASH,
        "--noprofile",
        "--norc",
        "-c",
    ]
    .into_iter()
    .map(OsString::from)
    .collect();
    args.push(SETUP.into());
    args.push("mnemo-sandbox".into());
    args.push(tools.mount.clone().into());
    args.push(privileges.len().to_string().into());
    args.extend(privileges.iter().cloned());
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

/// The worker's effective capabilities (`CapEff` of `/proc/self/status`); 0 when unreadable.
fn effective_capabilities() -> u64 {
    std::fs::read_to_string("/proc/self/status").ok().and_then(|s| parse_cap_eff(&s)).unwrap_or(0)
}

fn parse_cap_eff(status: &str) -> Option<u64> {
    let hex = status.lines().find_map(|l| l.strip_prefix("CapEff:"))?;
    u64::from_str_radix(hex.trim(), 16).ok()
}

/// `CAP_SETPCAP`'s bit: needed to cut the bounding set.
const CAP_SETPCAP: u64 = 1 << 8;

/// Whether `setpriv` is installed and works here, with the bounding set cut when the worker
/// may cut it.
fn probe_privileges(caps: u64) -> Result<Privileges, String> {
    let setpriv = find_program("setpriv").ok_or("setpriv (util-linux) is not installed")?;
    let privileges = Privileges { setpriv, bounding: caps & CAP_SETPCAP != 0 };
    let args = setpriv_args(Some(&privileges), caps != 0, None);
    run_probe(&args[0], &args[1..], &[OsStr::new(BASH), OsStr::new("-c"), OsStr::new(":")])?;
    Ok(privileges)
}

/// Runs the whole namespace wrapper once, on a scratch directory, with the shell reading an
/// empty stdin: only a full success (namespaces, `/proc`, bind mount, read-only remount,
/// privileges dropped) counts.
fn probe_namespace(privileges: Option<&Privileges>, has_capabilities: bool) -> Result<(), String> {
    let tools = namespace_tools().ok_or("`unshare` or `mount` is not installed")?;
    let scratch = std::env::temp_dir().join(format!("mnemo-sandbox-probe-{}", hex::encode(rand::random::<[u8; 8]>())));
    std::fs::create_dir(&scratch).map_err(|e| format!("cannot create {}: {e}", scratch.display()))?;
    let privileges = setpriv_args(privileges, has_capabilities, None);
    let out = run_probe(&tools.unshare, &wrapper_args(tools, &privileges, std::slice::from_ref(&scratch)), &[]);
    // Best-effort: a leftover empty directory in the temp dir is harmless.
    let _ = std::fs::remove_dir(&scratch);
    out
}

fn run_probe(program: impl AsRef<OsStr>, args: &[OsString], more: &[&OsStr]) -> Result<(), String> {
    let program = program.as_ref();
    let out = std::process::Command::new(program)
        .args(args)
        .args(more)
        .env_clear()
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", Path::new(program).display()))?;
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

/// Hands everything under `root` (`root` included) to `uid:gid`, so a [`ToolUser`]'s shell may
/// work in a read-write memory folder the worker's sync engine fills. Symlinks are changed
/// themselves, never followed; directories are entered through descriptors opened without
/// following one, as [`lock_read_only`] does. Every entry is tried; the first error is returned.
pub fn give_to(root: &Path, uid: u32, gid: u32) -> io::Result<()> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let dir = rustix::fs::open(root, flags, Mode::empty())?;
    let mut first_error = None;
    give_walk(dir.as_fd(), (rustix::fs::Uid::from_raw(uid), rustix::fs::Gid::from_raw(gid)), &mut first_error);
    first_error.map_or(Ok(()), Err)
}

fn give_walk(dir: BorrowedFd<'_>, owner: (rustix::fs::Uid, rustix::fs::Gid), first_error: &mut Option<io::Error>) {
    note(first_error, rustix::fs::fchown(dir, Some(owner.0), Some(owner.1)).map_err(io::Error::from));
    let names = match entry_names(dir) {
        Ok(names) => names,
        Err(e) => return note(first_error, Err(e)),
    };
    for name in names {
        let nofollow = rustix::fs::AtFlags::SYMLINK_NOFOLLOW;
        match rustix::fs::chownat(dir, name.as_c_str(), Some(owner.0), Some(owner.1), nofollow) {
            Ok(()) | Err(rustix::io::Errno::NOENT) => {}
            Err(e) => note(first_error, Err(e.into())),
        }
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        if let Ok(sub) = rustix::fs::openat(dir, name.as_c_str(), flags, Mode::empty()) {
            give_walk(sub.as_fd(), owner, first_error);
        }
    }
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

    fn privileges(bounding: bool) -> Privileges {
        Privileges { setpriv: "/usr/bin/setpriv".into(), bounding }
    }

    fn strings(args: &[OsString]) -> Vec<&str> {
        args.iter().map(|a| a.to_str().unwrap()).collect()
    }

    #[test]
    fn every_namespace_shell_gets_its_own_pid_namespace_and_proc() {
        let ctx = ToolContext::new("/tmp");
        let cmd = shell_command(Sandbox::Namespace, &ctx).unwrap();
        assert_ne!(cmd.as_std().get_program(), BASH);
        let args: Vec<_> = cmd.as_std().get_args().map(|a| a.to_str().unwrap()).collect();
        for flag in ["--mount", "--pid", "--fork", "--mount-proc", "--kill-child"] {
            assert!(args.contains(&flag), "{flag}: {args:?}");
        }
        assert_eq!(cmd.as_std().get_current_dir(), Some(Path::new("/tmp")));
        let envs: Vec<_> = cmd.as_std().get_envs().collect();
        for (k, v) in [("PS1", ""), ("PS2", ""), ("TERM", "dumb")] {
            assert!(envs.contains(&(OsStr::new(k), Some(OsStr::new(v)))), "{k}");
        }
    }

    #[test]
    fn shell_command_passes_roots_and_privileges_as_arguments_not_code() {
        let tools = NamespaceTools { unshare: "/u".into(), mount: "/m".into() };
        let privileges = setpriv_args(Some(&privileges(true)), true, None);
        let roots = [PathBuf::from("/mem/it's; rm -rf $HOME")];
        let args = wrapper_args(&tools, &privileges, &roots);
        let args = strings(&args);
        let script = args.iter().position(|a| *a == "-c").unwrap();
        assert_eq!(args[script + 1], SETUP);
        let n = privileges.len();
        assert_eq!(args[script + 2..script + 5], ["mnemo-sandbox", "/m", n.to_string().as_str()]);
        assert_eq!(args[script + 5..script + 5 + n], strings(&privileges)[..]);
        assert_eq!(args[script + 5 + n..], ["/mem/it's; rm -rf $HOME"]);
        let mut ctx = ToolContext::new("/tmp");
        ctx.read_only_roots = roots.to_vec();
        assert_eq!(shell_command(Sandbox::None, &ctx).unwrap().as_std().get_program(), BASH);
    }

    #[test]
    fn setpriv_drops_what_it_can() {
        let nobody = ToolUser { uid: 65534, gid: 65534, name: Some("nobody".into()), home: None };
        let numeric = ToolUser { uid: 4242, gid: 4242, name: None, home: None };
        let bounding = "-all,+chown,+dac_override,+fowner,+fsetid,+kill,+setgid,+setuid,+net_bind_service";
        let caps = ["--inh-caps", "-all", "--ambient-caps", "-all"];
        type Case<'a> = (Option<Privileges>, bool, Option<&'a ToolUser>, Vec<&'a str>);
        let cases: Vec<Case<'_>> = vec![
            (None, true, Some(&nobody), vec![]),
            (Some(privileges(false)), false, None, vec!["/usr/bin/setpriv", "--no-new-privs", "--"]),
            (
                Some(privileges(true)),
                true,
                None,
                [&["/usr/bin/setpriv", "--no-new-privs"][..], &caps, &["--bounding-set", bounding, "--"]].concat(),
            ),
            (
                Some(privileges(true)),
                true,
                Some(&nobody),
                [
                    &["/usr/bin/setpriv", "--no-new-privs"][..],
                    &caps,
                    &["--bounding-set", bounding, "--reuid", "65534", "--regid", "65534", "--init-groups", "--"],
                ]
                .concat(),
            ),
            (
                Some(privileges(false)),
                false,
                Some(&numeric),
                vec![
                    "/usr/bin/setpriv",
                    "--no-new-privs",
                    "--reuid",
                    "4242",
                    "--regid",
                    "4242",
                    "--clear-groups",
                    "--",
                ],
            ),
        ];
        for (privileges, has_caps, user, want) in cases {
            let got = setpriv_args(privileges.as_ref(), has_caps, user);
            assert_eq!(strings(&got), want, "{privileges:?} {has_caps} {user:?}");
        }
    }

    #[test]
    fn missing_protections_are_named() {
        let full = Isolation {
            sandbox: Sandbox::Namespace,
            namespace_missing: None,
            privileges: Some(privileges(true)),
            privileges_missing: None,
            has_capabilities: true,
        };
        let user = ToolUser { uid: 1, gid: 1, name: None, home: None };
        assert!(missing_protections(&full, None).is_empty());
        assert!(!shell_sees_worker(&full, None));

        let no_ns = Isolation {
            sandbox: Sandbox::Permissions,
            namespace_missing: Some("unshare failed: Operation not permitted".into()),
            privileges: Some(privileges(false)),
            privileges_missing: None,
            has_capabilities: false,
        };
        assert_eq!(
            missing_protections(&no_ns, None),
            [
                "its own PID and mount namespaces (unshare failed: Operation not permitted)",
                "a separate user (--tool-user)"
            ]
        );
        assert!(shell_sees_worker(&no_ns, None));
        assert_eq!(missing_protections(&no_ns, Some(&user)).len(), 1);
        assert!(!shell_sees_worker(&no_ns, Some(&user)));

        let bare = Isolation {
            privileges: None,
            privileges_missing: Some("setpriv (util-linux) is not installed".into()),
            ..no_ns
        };
        assert_eq!(
            missing_protections(&bare, None)[2],
            "no_new_privs and a reduced capability bounding set (setpriv (util-linux) is not installed)"
        );
        let root_without_setpcap = Isolation { privileges: Some(privileges(false)), has_capabilities: true, ..full };
        assert_eq!(
            missing_protections(&root_without_setpcap, None),
            ["a reduced capability bounding set (the worker lacks CAP_SETPCAP)"]
        );
    }

    #[test]
    fn tool_users_come_from_passwd_lines() {
        assert_eq!(
            ToolUser::from_passwd_line("agent:x:1001:1002:Agent,,,:/home/agent:/bin/bash"),
            Some(ToolUser { uid: 1001, gid: 1002, name: Some("agent".into()), home: Some("/home/agent".into()) })
        );
        assert_eq!(
            ToolUser::from_passwd_line("x:x:5:6::nowhere:"),
            Some(ToolUser { uid: 5, gid: 6, name: Some("x".into()), home: None })
        );
        for bad in ["", "a:x:1", "a:x:one:2::/h:/s", "a:x:1:-2::/h:/s"] {
            assert_eq!(ToolUser::from_passwd_line(bad), None, "{bad}");
        }
        assert_eq!(ToolUser::resolve("0").unwrap().uid, 0);
        assert_eq!(ToolUser::resolve("root").unwrap().name.as_deref(), Some("root"));
        assert_eq!(ToolUser::resolve("987654").unwrap(), ToolUser { uid: 987654, gid: 987654, name: None, home: None });
        assert!(ToolUser::resolve("no-such-user-here").unwrap_err().contains("no such user"));
        assert!(ToolUser::resolve("a:b").is_err());
    }

    #[test]
    fn effective_capabilities_are_read_from_status() {
        assert_eq!(
            parse_cap_eff("Name:\tx\nCapPrm:\t0000000000000001\nCapEff:\t000001ffffffffff\n"),
            Some(0x1ff_ffff_ffff)
        );
        assert_eq!(parse_cap_eff("CapEff:\t0000000000000000\n"), Some(0));
        assert_eq!(parse_cap_eff("Name: x\n"), None);
    }

    /// A namespace shell sees none of the worker's processes (here: the test process), cannot
    /// trace it, keeps no capability that reaches past its namespaces, and has no_new_privs.
    #[tokio::test]
    async fn a_namespace_shell_cannot_see_or_trace_the_worker() {
        if no_namespaces() {
            return;
        }
        let workdir = tempfile::tempdir().unwrap();
        let mut ctx = ToolContext::new(workdir.path());
        ctx.sandbox = Sandbox::Namespace;
        let mut bash = BashSession::new(ctx);
        let me = std::process::id();
        // Builtins only, so no other process shows up.
        let out = run(&mut bash, "echo \"$$ $PPID\" /proc/[0-9]*").await;
        assert_eq!(out.joined_text(), "1 0 /proc/1", "the shell is its namespace's init and alone in it: {out:?}");
        let out = run(&mut bash, &format!("cat /proc/{me}/environ")).await;
        assert!(out.is_error, "{out:?}");
        let status = run(&mut bash, "grep -E '^(CapBnd|CapEff|NoNewPrivs)' /proc/self/status").await.joined_text();
        let field = |name: &str| {
            status.lines().find_map(|l| l.strip_prefix(name)).map(|v| v.trim().to_owned()).unwrap_or_default()
        };
        if isolation().privileges.is_some() {
            assert_eq!(field("NoNewPrivs:"), "1", "{status}");
        }
        if isolation().privileges.as_ref().is_some_and(|p| p.bounding) {
            let bounding = u64::from_str_radix(&field("CapBnd:"), 16).unwrap();
            // CAP_DAC_READ_SEARCH 2, CAP_SYS_MODULE 16, CAP_SYS_RAWIO 17, CAP_SYS_PTRACE 19, CAP_SYS_ADMIN 21, CAP_MKNOD 27.
            for cap in [2, 16, 17, 19, 21, 27] {
                assert_eq!(bounding & (1 << cap), 0, "capability {cap} kept: {status}");
            }
        }
        bash.close().await;
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
        // Remounting read-write needs CAP_SYS_ADMIN, which the shell lost (when it may be cut).
        if isolation().privileges.as_ref().is_some_and(|p| p.bounding) {
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
    fn give_to_changes_owners_and_follows_no_symlink() {
        use std::os::unix::fs::MetadataExt;
        if !is_root() {
            eprintln!("skipped: only root may give files away");
            return;
        }
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let r = root.path();
        std::fs::create_dir_all(r.join("a/b")).unwrap();
        std::fs::write(r.join("a/b/deep.md"), "d").unwrap();
        std::fs::write(outside.path().join("target.md"), "o").unwrap();
        symlink(outside.path(), r.join("dirlink")).unwrap();
        symlink(outside.path().join("target.md"), r.join("a/link.md")).unwrap();
        give_to(r, 4242, 4343).unwrap();
        for p in
            [r.to_path_buf(), r.join("a"), r.join("a/b"), r.join("a/b/deep.md"), r.join("dirlink"), r.join("a/link.md")]
        {
            let m = std::fs::symlink_metadata(&p).unwrap();
            assert_eq!((m.uid(), m.gid()), (4242, 4343), "{}", p.display());
        }
        for p in [outside.path().to_path_buf(), outside.path().join("target.md")] {
            assert_eq!(std::fs::metadata(&p).unwrap().uid(), 0, "{}", p.display());
        }
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
