//! The agent's shell cannot see or touch the worker (issue 38): real `mnemo serve` and `mnemo
//! worker` processes on 127.0.0.1, the test playing the agent through the events endpoint.
//!
//! Run as root, the shell gets its own PID and mount namespaces and a reduced capability set;
//! run as an unprivileged user (`scripts/test` does both), it gets the fallback, and the worker
//! says so at start. Either way no credential can be read from the worker's `/proc` files, the
//! worker cannot be traced, and a read-only store cannot be written through `/proc/<pid>/root`.

mod common;
#[path = "common/fixture.rs"]
mod fixture;

use std::io::Read;
use std::process::{Child, Stdio};
use std::time::Duration;

use mnemo_client::Method;
use serde_json::json;

use common::{mnemo, wait_until_async};
use fixture::Setup;

impl Setup {
    /// `mnemo worker poll` against this server, the key in its environment, the mount root
    /// the server's, `extra` flags and `env` variables added.
    fn worker(&self, extra: &[&str], env: &[(&str, &str)]) -> Worker {
        let mut child =
            self.poll(&self.tmp.path().join("state")).args(extra).envs(env.iter().copied()).spawn().unwrap();
        let mut stderr = child.stderr.take().unwrap();
        let log = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = stderr.read_to_string(&mut s);
            s
        });
        Worker { child: Some(child), log: Some(log) }
    }

    /// Runs one bash command as the agent and answers the result's text and whether it is an
    /// error.
    async fn bash(&self, session: &str, command: &str) -> (String, bool) {
        let id = common::call(&self.api, session, "bash", json!({ "command": command })).await;
        let result = common::result(&self.api, session, &id).await;
        let text = result["content"].as_array().unwrap().iter().filter_map(|b| b["text"].as_str()).collect();
        (text, result["is_error"] == true)
    }

    async fn memory(&self, store: &str, path: &str) -> String {
        let page = self
            .api
            .json(Method::GET, &format!("/v1/memory_stores/{store}/memories?view=full&limit=100"), None)
            .await
            .unwrap();
        page["data"].as_array().unwrap().iter().find(|m| m["path"] == path).unwrap()["content"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// Whether the session's work items are all `stopped` within `secs` seconds.
    async fn stopped_within(&self, session: &str, secs: u64) -> bool {
        wait_until_async(Duration::from_secs(secs), || async {
            let states = self.work_states(session).await;
            !states.is_empty() && states.iter().all(|state| state == "stopped")
        })
        .await
    }
}

/// A worker process, killed on drop; its log printed when the test failed.
struct Worker {
    child: Option<Child>,
    log: Option<std::thread::JoinHandle<String>>,
}

impl Worker {
    fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// Stops the worker with SIGTERM (an `--on-work` poller stops its script's worker too, which
    /// shares its stderr) and answers its log.
    fn stop(mut self) -> String {
        let mut child = self.child.take().unwrap();
        common::signal(&child, "-TERM");
        let _ = child.wait();
        self.log.take().unwrap().join().unwrap()
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SIGTERM first: an `--on-work` poller then stops its script's worker, which shares
            // its stderr (a SIGKILL would leave that worker holding the log pipe open).
            common::signal(&child, "-TERM");
            if !common::wait_until(Duration::from_secs(60), || child.try_wait().is_ok_and(|s| s.is_some())) {
                let _ = child.kill();
                let _ = child.wait();
            }
            let log = self.log.take().unwrap();
            if std::thread::panicking() && common::wait_until(Duration::from_secs(5), || log.is_finished()) {
                eprintln!("---- worker log ----\n{}", log.join().unwrap_or_default());
            }
        }
    }
}

fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").unwrap().uid() == 0
}

/// Whether the host lets root make the shell's namespaces (`unshare` from util-linux and no
/// seccomp filter against it).
fn host_has_namespaces() -> bool {
    is_root()
        && std::process::Command::new("unshare")
            .args(["--mount", "--pid", "--fork", "--mount-proc", "true"])
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
}

/// What the worker's own `/proc` files show, read from outside (by the test): a file the test
/// may not read (the worker is non-dumpable; the test runs as another user) shows nothing.
fn proc_file(pid: u32, name: &str) -> Vec<u8> {
    std::fs::read(format!("/proc/{pid}/{name}")).unwrap_or_default()
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle.as_bytes())
}

/// An agent script that reads every `/proc/*/environ` and `/proc/*/cmdline` it can, and its
/// parent's, looking for `secret` with shell builtins only (a `grep` would carry the secret in
/// its own command line), and prints how many files it read and where it found the secret.
fn proc_walk(secret: &str) -> String {
    let (a, b) = secret.split_at(secret.len() / 2);
    format!(
        r#"k='{a}''{b}'; read_files=0; hits=''
for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline "/proc/$PPID/environ" "/proc/$PPID/cmdline"; do
  [ -r "$f" ] || continue
  while IFS= read -r -d '' x || [ -n "$x" ]; do
    case "$x" in *"$k"*) hits="$hits $f";; esac
  done < "$f" 2>/dev/null && read_files=$((read_files + 1))
done
echo "read=$read_files hits=[$hits]""#
    )
}

/// An agent walks `/proc` (its parent's files included) for the worker's environment and command
/// line, with the key given both in the environment and as `--environment-key`: it finds nothing,
/// and neither does anyone reading the worker's `/proc` files from outside.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_finds_no_credential_in_proc() {
    let s = Setup::new(&[]).await;
    let worker = s.worker(&["--environment-key", &s.env_key.clone()], &[]);
    let pid = worker.pid();
    let session = s.session(json!([])).await;
    let (text, is_error) = s.bash(&session, &proc_walk(&s.env_key)).await;
    assert!(!is_error, "{text}");
    assert!(text.starts_with("read=") && text.ends_with("hits=[]"), "the agent found the key: {text}");
    assert!(!text.starts_with("read=0 "), "the agent could read no /proc file at all: {text}");
    // From outside: the worker (same pid after it re-executed itself) holds the key in neither.
    for name in ["environ", "cmdline"] {
        assert!(!contains(&proc_file(pid, name), &s.env_key), "/proc/{pid}/{name} holds the key");
    }
    assert!(contains(&proc_file(pid, "cmdline"), "poll"), "the worker's command line is still readable");
    let log = worker.stop();
    assert!(log.contains("--environment-key was given on the command line, which every local user can read"), "{log}");
    assert!(!log.contains(&s.env_key), "{log}");
}

/// In the `--on-work` pattern, `mnemo worker run` gets the item's work secret (which holds its
/// sessions token) and the key in its environment: its shell finds neither.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_on_work_sandbox_hides_its_work_secret() {
    let s = Setup::new(&[]).await;
    let script = s.tmp.path().join("on-work.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nset -e\nsecret=$(sed -n 's/.*\"secret\":\"\\([^\"]*\\)\".*/\\1/p')\ntest -n \"$secret\"\n\
             printf %s \"$secret\" > {dir}/secret-seen\n\
             ANTHROPIC_WORK_SECRET=\"$secret\" exec {bin} worker run --workdir {dir}/work --state-dir {dir}/inner --max-idle 1s\n",
            bin = env!("CARGO_BIN_EXE_mnemo"),
            dir = s.tmp.path().display(),
        ),
    )
    .unwrap();
    std::process::Command::new("chmod").arg("+x").arg(&script).status().unwrap();
    let poller = s.worker(&["--on-work", script.to_str().unwrap()], &[]);
    let session = s.session(json!([])).await;
    let (first, _) = s.bash(&session, "echo ready").await;
    assert_eq!(first, "ready");
    let secret = std::fs::read_to_string(s.tmp.path().join("secret-seen")).unwrap();
    for needle in [&secret, &s.env_key] {
        let (text, is_error) = s.bash(&session, &proc_walk(needle)).await;
        assert!(!is_error && text.ends_with("hits=[]"), "the agent found a credential: {text}");
    }
    poller.stop();
}

/// The shell can neither trace the worker nor write a read-only store through the worker's
/// `/proc/<pid>/root`, nor remount the store read-write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shell_cannot_trace_the_worker_or_write_through_its_root() {
    let s = Setup::new(&[]).await;
    let reference = s.store("ref", &[("/r.md", "reference\n")]).await;
    let worker = s.worker(&[], &[]);
    let pid = worker.pid();
    let session =
        s.session(json!([{"type": "memory_store", "memory_store_id": reference, "access": "read_only"}])).await;
    let ro = s.mnt().join("ref");
    let ro = ro.display();
    let (text, _) = s.bash(&session, &format!("cat {ro}/r.md")).await;
    assert_eq!(text, "reference");

    // ptrace: with whatever this host has; none of them may attach.
    let trace = format!(
        r#"p={pid}
if command -v python3 >/dev/null && python3 -c 'import ctypes' 2>/dev/null; then
  python3 - "$p" <<'EOF'
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
pid = int(sys.argv[1])
if libc.ptrace(16, pid, 0, 0) == 0:
    os.waitpid(pid, 0x40000000)
    libc.ptrace(17, pid, 0, 0)
    print("ptrace: ATTACHED")
else:
    print("ptrace: refused:", os.strerror(ctypes.get_errno()))
EOF
elif command -v strace >/dev/null; then
  if timeout 3 strace -qq -e trace=none -p "$p" 2>&1 | grep -q . ; then echo "ptrace: refused (strace)"; else echo "ptrace: ATTACHED"; fi
elif command -v gdb >/dev/null; then
  if gdb -q -batch -p "$p" -ex detach 2>&1 | grep -q 'Attaching to process.*\|Detaching from'; then echo "ptrace: ATTACHED"; else echo "ptrace: refused (gdb)"; fi
else
  echo "ptrace: nothing here can try it"
fi"#
    );
    let (text, _) = s.bash(&session, &trace).await;
    if text.contains("nothing here can try it") {
        eprintln!("skipped the ptrace attempt: no python3, strace or gdb on this host");
    } else {
        assert!(text.starts_with("ptrace: refused"), "the shell traced the worker: {text}");
    }

    // Writes through every /proc/*/root the shell can see (the worker's among them on a host
    // without namespaces), and through the worker's pid by number.
    let through_root = format!(
        "for r in /proc/[0-9]*/root /proc/{pid}/root; do \
           if (echo vandalised > \"$r{ro}/r.md\") 2>/dev/null; then echo \"WROTE via $r\"; fi; \
         done; echo done"
    );
    let (text, _) = s.bash(&session, &through_root).await;
    assert_eq!(text, "done", "a write went through /proc/<pid>/root: {text}");
    let (text, is_error) =
        s.bash(&session, &format!("mount -o remount,bind,rw {ro} && echo vandalised > {ro}/r.md")).await;
    assert!(is_error, "the shell remounted the store read-write: {text}");

    assert_eq!(std::fs::read_to_string(s.mnt().join("ref/r.md")).unwrap(), "reference\n");
    s.bash(&session, "true").await;
    assert_eq!(s.memory(&reference, "/r.md").await, "reference\n");
    let log = worker.stop();
    if host_has_namespaces() {
        assert!(log.contains("tool shells run in their own PID and mount namespaces"), "{log}");
    } else {
        assert!(log.contains("the agent's shell runs without its own PID and mount namespaces"), "{log}");
        assert!(log.contains("--on-work"), "{log}");
    }
}

/// The shell's environment is the allowlist plus `--tool-env`: nothing else the worker has.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_allowlisted_variables_and_tool_env_reach_the_shell() {
    let s = Setup::new(&[]).await;
    let worker = s.worker(
        &["--tool-env", "MNEMO_TEST_PASSED"],
        &[
            ("MNEMO_TEST_PASSED", "yes"),
            ("SOME_TOKEN", "must-not-leak"),
            ("HTTPS_PROXY", "http://user:pw@proxy"),
            ("LC_MESSAGES", "C"),
            ("TZ", "UTC"),
        ],
    );
    let session = s.session(json!([])).await;
    let (text, is_error) = s.bash(&session, "env | cut -d= -f1 | sort | tr '\\n' ' '").await;
    assert!(!is_error, "{text}");
    let names: Vec<&str> = text.split_whitespace().collect();
    for name in ["MNEMO_TEST_PASSED", "LC_MESSAGES", "TZ", "PATH", "TERM"] {
        assert!(names.contains(&name), "{name} is missing: {text}");
    }
    let allowed = ["PATH", "HOME", "LANG", "TERM", "TZ", "USER", "MNEMO_TEST_PASSED", "PWD", "SHLVL", "_", "OLDPWD"];
    let unexpected: Vec<&&str> = names.iter().filter(|n| !allowed.contains(n) && !n.starts_with("LC_")).collect();
    assert!(unexpected.is_empty(), "variables beyond the allowlist reached the shell: {unexpected:?}");
    worker.stop();

    // A credential cannot be asked for.
    let out = mnemo()
        .args(["worker", "poll", "--environment-id", &s.env_id, "--base-url", &s.server.base])
        .args(["--tool-env", "ANTHROPIC_ENVIRONMENT_KEY"])
        .env("ANTHROPIC_ENVIRONMENT_KEY", &s.env_key)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--tool-env ANTHROPIC_ENVIRONMENT_KEY would hand a worker credential to the agent's shell"),
        "{err}"
    );
}

/// A store whose `mount_path` lies outside the worker's `--memory-mount-root` fails the item,
/// clearly, and nothing is created there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mount_path_outside_the_mount_root_is_refused() {
    let s = Setup::new(&[]).await;
    let notes = s.store("notes", &[("/a.md", "one")]).await;
    let root = s.tmp.path().join("elsewhere");
    let worker = s.worker(&[], &[("MNEMO_MEMORY_MOUNT_ROOT", root.to_str().unwrap())]);
    let session = s.session(json!([{"type": "memory_store", "memory_store_id": notes}])).await;
    assert!(s.stopped_within(&session, 30).await, "the item was not stopped");
    let log = worker.stop();
    let want = format!(
        "memory store {notes} asks for mount_path '{}', which is not under this worker's memory mount root {}",
        s.mnt().join("notes").display(),
        root.display()
    );
    assert!(log.contains(&want), "{log}");
    assert!(!s.mnt().join("notes").exists(), "the worker created the store's folder outside its mount root");
}

/// `--environment-key-file` serves from a 0600 file and refuses one its group or others may read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_environment_key_may_come_from_a_private_file() {
    use std::os::unix::fs::PermissionsExt;
    let s = Setup::new(&[]).await;
    let file = s.tmp.path().join("env-key");
    std::fs::write(&file, format!("{}\n", s.env_key)).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).unwrap();
    let refused = mnemo()
        .args(["worker", "poll", "--environment-id", &s.env_id, "--base-url", &s.server.base])
        .arg("--environment-key-file")
        .arg(&file)
        .env_remove("ANTHROPIC_ENVIRONMENT_KEY")
        .output()
        .unwrap();
    assert!(!refused.status.success());
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("is readable or writable by its group or others (mode 640); chmod 600 it"), "{err}");

    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let file = file.to_str().unwrap().to_owned();
    let worker = s.worker(&[], &[("ANTHROPIC_ENVIRONMENT_KEY", ""), ("ANTHROPIC_ENVIRONMENT_KEY_FILE", &file)]);
    let session = s.session(json!([])).await;
    let (text, _) = s.bash(&session, "echo served").await;
    assert_eq!(text, "served");
    let log = worker.stop();
    assert!(!log.contains("given on the command line"), "{log}");
}

/// `--tool-user` runs the shell as that user: it reads a read-only store and writes a
/// read-write one the worker (root) mounted, and the write lands on the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shell_runs_as_the_tool_user() {
    use std::os::unix::fs::PermissionsExt;
    if !is_root() {
        eprintln!("skipped: only a worker running as root can switch the shell to another user");
        return;
    }
    let s = Setup::new(&[]).await;
    // The tool user must reach the mount root and write the workdir (docs/WORKER.md).
    std::fs::set_permissions(s.tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(s.tmp.path().join("work"), std::fs::Permissions::from_mode(0o777)).unwrap();
    std::fs::create_dir(s.mnt()).unwrap();
    std::fs::set_permissions(s.mnt(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let notes = s.store("notes", &[("/a.md", "one\n")]).await;
    let reference = s.store("ref", &[("/r.md", "reference\n")]).await;
    let worker = s.worker(&["--tool-user", "nobody"], &[]);
    let session = s
        .session(json!([
            {"type": "memory_store", "memory_store_id": notes},
            {"type": "memory_store", "memory_store_id": reference, "access": "read_only"},
        ]))
        .await;
    let (n, r) = (s.mnt().join("notes"), s.mnt().join("ref"));
    let (text, is_error) = s
        .bash(
            &session,
            &format!(
                "id -un; cat {}/r.md {}/a.md && echo two > {}/a.md && echo here > ok.txt",
                r.display(),
                n.display(),
                n.display()
            ),
        )
        .await;
    assert!(!is_error, "{text}");
    assert_eq!(text, "nobody\nreference\none");
    let (text, is_error) = s.bash(&session, &format!("echo vandalised > {}/r.md", r.display())).await;
    assert!(is_error, "{text}");
    let log = worker.stop();
    assert_eq!(s.memory(&notes, "/a.md").await, "two\n", "{log}");
    assert_eq!(s.memory(&reference, "/r.md").await, "reference\n");
}
