//! The `bash` tool: one persistent shell per session.
//!
//! [`BashShell`] is the process: `/bin/bash --noprofile --norc` reading commands from a pipe,
//! its stdout and stderr merged into one pipe we read. [`BashSession`] is the tool on top: it
//! starts the shell on first use, restarts it on request and turns input and results into the
//! tool's texts.
//!
//! # Framing
//!
//! Each command is written as `{ CMD\n} </dev/null 2>&1; printf … "$?"`: stdin from `/dev/null`
//! so `cat` or `read` cannot block on the command pipe, stderr merged, then a line carrying a
//! fresh random sentinel and the exit status. Output is read until that line. A command cannot
//! forge it without knowing the sentinel, and the sentinel never appears whole in what we write
//! (printf joins it from two arguments), so neither `set -v` nor `set -x` echoes it early.
//!
//! # Ending a shell
//!
//! The shell leads its own process group. A timeout, a restart, the end of the session or a
//! call abandoned mid-command kills the whole group, so a hung command or a background job
//! (`sleep 1000 &`) dies with the shell instead of lingering with the output pipe open.

use std::borrow::Cow;
use std::io;
use std::os::fd::OwnedFd;
use std::process::Stdio;
use std::time::Duration;

use serde::{Deserialize, Deserializer};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::pipe;
use tokio::process::{Child, ChildStdin};
use tokio::time::Instant;

use super::sandbox::{self, BASH};
use super::{ToolContext, ToolError, ToolOutput, parse_input};

/// Only the last this many bytes of a command's output are returned (100 KiB).
const OUTPUT_LIMIT: usize = 100 * 1024;
/// A command's timeout unless `timeout_ms` gives one.
const DEFAULT_TIMEOUT_MS: i64 = 120_000;
/// Marks a result whose head was dropped.
const TRUNCATED_PREFIX: &str = "[output truncated]\n";
/// How long a namespace-wrapped shell may take to come up (mounts included).
const SANDBOX_START_TIMEOUT: Duration = Duration::from_secs(30);
/// After the shell exited, how long to keep reading output a background job still writes.
const EXIT_GRACE: Duration = Duration::from_millis(200);
const READ_CHUNK: usize = 16 * 1024;
/// Room kept beyond [`OUTPUT_LIMIT`] for the frame line (newline, sentinel, status, newline),
/// so trimming the buffer never cuts a frame that is still arriving.
const FRAME_SLACK: usize = 128;
/// An exit status longer than this is not one (`printf %d` of `$?` prints at most 3 digits).
const MAX_STATUS_LEN: usize = 16;
/// Kills a process group by id without unsafe code: bash's `kill` builtin.
const KILL_GROUP: &str = r#"kill -KILL -- "-$1" 2>/dev/null"#;

/// The captured output and exit status of one command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BashResult {
    /// Stdout and stderr merged, ANSI escapes removed, trailing newlines trimmed, at most the
    /// last 100 KiB (then prefixed `[output truncated]`).
    pub output: String,
    /// `-1` when no status could be read (the shell ended mid-command).
    pub exit_code: i32,
}

/// Why a shell could not run a command.
#[derive(Debug, thiserror::Error)]
pub enum BashError {
    #[error("bash session terminated; restart required")]
    Terminated,
    #[error("bash command timed out after {}s", python_seconds(.0.as_millis().try_into().unwrap_or(i64::MAX)))]
    TimedOut(Duration),
    #[error("cannot start the shell: {0}")]
    Start(#[source] io::Error),
    #[error("cannot start the sandboxed shell: {0}")]
    Sandbox(String),
    #[error("the shell's pipes failed: {0}")]
    Io(#[source] io::Error),
}

/// A persistent `/bin/bash` process. Working directory, variables and background jobs survive
/// from one [`exec`](Self::exec) to the next. Not for concurrent use: calls take `&mut self`.
#[derive(Debug)]
pub struct BashShell {
    child: Child,
    /// The shell's pid, which is also its process group id.
    pgid: Option<u32>,
    stdin: Option<ChildStdin>,
    /// The read end of the pipe behind the shell's stdout and stderr.
    output: pipe::Receiver,
    /// Output read after the last frame (a background job's), shown with the next command.
    pending: Vec<u8>,
    /// The output pipe closed or the shell exited: no command can run any more.
    dead: bool,
    /// A command was written but its frame never read: the call was abandoned.
    in_flight: bool,
    /// [`Self::close`] ran.
    closed: bool,
}

impl BashShell {
    /// Starts the shell for `ctx` (see [`sandbox::shell_command`]). A namespace-wrapped shell is
    /// only returned once its read-only mounts are in place.
    pub async fn start(ctx: &ToolContext) -> Result<Self, BashError> {
        let wrapped = sandbox::wraps(ctx.sandbox, ctx);
        let start_error = |e: io::Error| if wrapped { BashError::Sandbox(e.to_string()) } else { BashError::Start(e) };
        // One pipe for stdout and stderr, as `stderr=STDOUT` would give: bash's own messages
        // (a syntax error) land in the output too.
        let (reader, writer) = io::pipe().map_err(start_error)?;
        let writer_too = writer.try_clone().map_err(start_error)?;
        let mut cmd = sandbox::shell_command(ctx.sandbox, ctx);
        cmd.stdin(Stdio::piped()).stdout(writer).stderr(writer_too).kill_on_drop(true).process_group(0);
        let spawned = cmd.spawn();
        // The command holds our copies of the write end; only without them does the read end
        // see end-of-file when the shell is gone.
        drop(cmd);
        let mut child = spawned.map_err(start_error)?;
        let pgid = child.id();
        let stdin = child.stdin.take();
        let output = match pipe::Receiver::from_owned_fd(OwnedFd::from(reader)) {
            Ok(output) => output,
            Err(e) => {
                if let Some(pgid) = pgid {
                    kill_group(pgid).await;
                }
                return Err(start_error(e));
            }
        };
        let mut shell =
            Self { child, pgid, stdin, output, pending: Vec::new(), dead: false, in_flight: false, closed: false };
        if wrapped {
            // The setup prints why it failed and exits before the shell proper reads anything.
            let failure = match shell.exec(":", SANDBOX_START_TIMEOUT).await {
                Ok(r) if r.exit_code == 0 => return Ok(shell),
                Ok(r) if r.output.is_empty() => "the namespace setup exited".to_owned(),
                Ok(r) => r.output,
                Err(e) => e.to_string(),
            };
            shell.close().await;
            return Err(BashError::Sandbox(failure));
        }
        Ok(shell)
    }

    /// Whether the shell can no longer run commands.
    pub fn is_closed(&mut self) -> bool {
        self.closed || self.dead || !matches!(self.child.try_wait(), Ok(None))
    }

    /// Runs `command` and returns its output and exit status. On timeout the shell is closed.
    pub async fn exec(&mut self, command: &str, timeout: Duration) -> Result<BashResult, BashError> {
        if self.is_closed() {
            return Err(BashError::Terminated);
        }
        let sentinel = format!("__ANT_CMD_{}_DONE__", hex::encode(rand::random::<[u8; 16]>()));
        let (head, rest) = sentinel.split_at(8);
        let script = format!("{{ {command}\n}} </dev/null 2>&1; printf '\\n%s%s%d\\n' '{head}' '{rest}' \"$?\"\n");
        self.in_flight = true;
        // Dropped unarmed only if this future runs to the end; a caller that abandons the call
        // (its own timeout, a shutdown) kills the command here rather than leaving it running
        // with its output due to the next call.
        let guard = KillOnDrop(self.pgid);
        let result = tokio::time::timeout(timeout, self.run(script.as_bytes(), sentinel.as_bytes())).await;
        guard.disarm();
        match result {
            Ok(Ok(done)) => {
                self.in_flight = false;
                Ok(done)
            }
            Ok(Err(e)) => {
                // A write or read failed: the shell is unusable, and it stays so until a restart.
                self.dead = true;
                self.in_flight = false;
                Err(if e.kind() == io::ErrorKind::BrokenPipe { BashError::Terminated } else { BashError::Io(e) })
            }
            Err(_elapsed) => {
                self.close().await;
                Err(BashError::TimedOut(timeout))
            }
        }
    }

    /// Writes `script` and reads until the line with `sentinel`, keeping a bounded tail.
    async fn run(&mut self, script: &[u8], sentinel: &[u8]) -> io::Result<BashResult> {
        let stdin = self.stdin.as_mut().ok_or(io::ErrorKind::BrokenPipe)?;
        stdin.write_all(script).await?;
        stdin.flush().await?;
        let mut tail = Tail::new(std::mem::take(&mut self.pending));
        let mut chunk = vec![0; READ_CHUNK];
        let mut exited_at = None;
        loop {
            if let Some(frame) = tail.find_frame(sentinel) {
                self.pending = tail.buf.split_off(frame.end);
                return Ok(BashResult { output: tail.render(frame.output_end, true), exit_code: frame.status });
            }
            tail.compact();
            let read = match exited_at {
                None => tokio::select! {
                    read = self.output.read(&mut chunk) => read?,
                    _ = self.child.wait() => {
                        exited_at = Some(Instant::now());
                        continue;
                    }
                },
                // The shell is gone, but a background job may hold the pipe open for ever.
                Some(at) => {
                    tokio::time::timeout_at(at + EXIT_GRACE, self.output.read(&mut chunk)).await.unwrap_or(Ok(0))?
                }
            };
            if read == 0 {
                self.dead = true;
                let end = tail.buf.len();
                return Ok(BashResult { output: tail.render(end, false), exit_code: -1 });
            }
            tail.buf.extend_from_slice(&chunk[..read]);
        }
    }

    /// Ends the shell and everything it started. Idempotent.
    pub async fn close(&mut self) {
        if self.closed {
            return;
        }
        self.closed = true;
        self.stdin = None;
        // The group first, while the shell (its leader) is surely not yet reaped.
        if let Some(pgid) = self.pgid {
            kill_group(pgid).await;
        }
        let _ = self.child.start_kill();
        let _ = tokio::time::timeout(Duration::from_secs(2), self.child.wait()).await;
    }
}

impl Drop for BashShell {
    fn drop(&mut self) {
        // `kill_on_drop` ends the shell itself; its children need the group kill.
        if !self.closed
            && let Some(pgid) = self.pgid
        {
            kill_group_now(pgid);
        }
    }
}

/// Kills a process group when dropped, unless disarmed first.
struct KillOnDrop(Option<u32>);

impl KillOnDrop {
    fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(pgid) = self.0 {
            kill_group_now(pgid);
        }
    }
}

fn kill_group_command(pgid: u32) -> std::process::Command {
    let mut cmd = std::process::Command::new(BASH);
    cmd.args(["--noprofile", "--norc", "-c", KILL_GROUP, "kill", &pgid.to_string()])
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    cmd
}

async fn kill_group(pgid: u32) {
    if let Err(e) = tokio::process::Command::from(kill_group_command(pgid)).status().await {
        tracing::warn!(pgid, "failed to kill the bash process group: {e}");
    }
}

/// [`kill_group`] for `Drop`, which cannot await; the helper exits within milliseconds.
fn kill_group_now(pgid: u32) {
    if let Err(e) = kill_group_command(pgid).status() {
        tracing::warn!(pgid, "failed to kill the bash process group: {e}");
    }
}

/// The end of a command's output: at most the last [`OUTPUT_LIMIT`] bytes plus the frame,
/// however much the command prints.
#[derive(Debug)]
struct Tail {
    buf: Vec<u8>,
    /// Bytes dropped from the front so far.
    dropped: usize,
    /// Where a sentinel not yet seen could start.
    search_from: usize,
}

/// A frame line found in [`Tail::buf`].
#[derive(Debug, PartialEq, Eq)]
struct Frame {
    /// Where the output ends: the frame line's leading newline.
    output_end: usize,
    /// Just past the frame line's newline.
    end: usize,
    status: i32,
}

impl Tail {
    fn new(pending: Vec<u8>) -> Self {
        Self { buf: pending, dropped: 0, search_from: 0 }
    }

    /// The first frame line, once complete.
    fn find_frame(&mut self, sentinel: &[u8]) -> Option<Frame> {
        let Some(start) = find(&self.buf[self.search_from..], sentinel).map(|i| i + self.search_from) else {
            self.search_from = self.buf.len().saturating_sub(sentinel.len() - 1);
            return None;
        };
        self.search_from = start;
        let after = start + sentinel.len();
        // The newline printf puts before the sentinel is framing, not output.
        let output_end = if start > 0 && self.buf[start - 1] == b'\n' { start - 1 } else { start };
        let rest = &self.buf[after..];
        match rest.iter().position(|&b| b == b'\n') {
            Some(nl) => Some(Frame { output_end, end: after + nl + 1, status: parse_status(&rest[..nl]) }),
            None if rest.len() > MAX_STATUS_LEN => Some(Frame { output_end, end: self.buf.len(), status: -1 }),
            None => None,
        }
    }

    /// Drops the head beyond what can still be returned. Amortised: the buffer may grow to
    /// twice its bound before it is cut back.
    fn compact(&mut self) {
        let keep = OUTPUT_LIMIT + FRAME_SLACK;
        if self.buf.len() > 2 * keep {
            let cut = self.buf.len() - keep;
            self.buf.drain(..cut);
            self.dropped += cut;
            self.search_from = self.search_from.saturating_sub(cut);
        }
    }

    /// The result text of the output in `buf[..end]`. A framed output loses its trailing
    /// newlines; an unframed one (the shell died) is trimmed on both sides.
    fn render(&self, end: usize, framed: bool) -> String {
        let start = end.saturating_sub(OUTPUT_LIMIT);
        let truncated = self.dropped + end > OUTPUT_LIMIT;
        let decoded = String::from_utf8_lossy(&self.buf[start..end]);
        let text = strip_ansi(&decoded);
        let text = if framed { text.trim_end_matches('\n') } else { text.trim_matches(is_python_space) };
        if truncated { format!("{TRUNCATED_PREFIX}{text}") } else { text.to_owned() }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn parse_status(bytes: &[u8]) -> i32 {
    std::str::from_utf8(bytes).ok().and_then(|s| s.trim().parse().ok()).unwrap_or(-1)
}

/// Python's `str.isspace`: Unicode white space plus the four information separators.
fn is_python_space(c: char) -> bool {
    c.is_whitespace() || ('\x1c'..='\x1f').contains(&c)
}

/// Removes CSI escape sequences (`ESC [ params intermediates final`), the reference's
/// `\x1b\[[0-9;?]*[ -/]*[@-~]`. Other control characters (tabs, carriage returns) stay.
fn strip_ansi(text: &str) -> Cow<'_, str> {
    let bytes = text.as_bytes();
    if !bytes.contains(&0x1b) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == 0x1b && bytes.get(i + 1) == Some(&b'[') {
            let mut j = i + 2;
            while j < bytes.len() && matches!(bytes[j], b'0'..=b'9' | b';' | b'?') {
                j += 1;
            }
            while j < bytes.len() && matches!(bytes[j], b' '..=b'/') {
                j += 1;
            }
            if j < bytes.len() && matches!(bytes[j], b'@'..=b'~') {
                // Every byte matched is ASCII, so both cuts fall on character boundaries.
                out.push_str(&text[copied..i]);
                i = j + 1;
                copied = i;
                continue;
            }
        }
        i += 1;
    }
    out.push_str(&text[copied..]);
    Cow::Owned(out)
}

/// Seconds as Python prints a float (`120.0`, `1.5`, `0.001`): shortest round-trip digits, and
/// `.0` on whole numbers. Millisecond counts never reach Python's exponent notation.
fn python_seconds(ms: i64) -> String {
    let text = (ms as f64 / 1000.0).to_string();
    if text.contains('.') { text } else { format!("{text}.0") }
}

/// The tool's input.
#[derive(Debug, Deserialize)]
struct BashInput {
    #[serde(default)]
    command: Option<String>,
    #[serde(default)]
    restart: Option<bool>,
    /// Zero or absent: the 120 s default; negative: times out at once, as in the reference.
    #[serde(default, deserialize_with = "integer")]
    timeout_ms: Option<i64>,
}

/// An integer, also written as a float with no fraction (`5000.0`); above `i64::MAX`, saturated.
fn integer<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<i64>, D::Error> {
    let Some(n) = Option::<serde_json::Number>::deserialize(deserializer)? else {
        return Ok(None);
    };
    if let Some(i) = n.as_i64() {
        return Ok(Some(i));
    }
    if n.as_u64().is_some() {
        return Ok(Some(i64::MAX));
    }
    match n.as_f64() {
        Some(f) if f.fract() == 0.0 => Ok(Some(f as i64)),
        _ => Err(serde::de::Error::custom(format!("invalid value: {n}, expected an integer"))),
    }
}

/// The `bash` tool of one session: a lazily started [`BashShell`], restarted on request. A
/// timeout or an abandoned call ends the shell and the next call starts a fresh one; a shell
/// that died by itself (`exit`) stays dead until `restart`.
#[derive(Debug)]
pub struct BashSession {
    ctx: ToolContext,
    shell: Option<BashShell>,
}

impl BashSession {
    pub fn new(ctx: ToolContext) -> Self {
        Self { ctx, shell: None }
    }

    /// Runs one call: `{"command"?: string, "restart"?: bool, "timeout_ms"?: int}`. A non-zero
    /// exit status is an error result carrying the output.
    pub async fn call(&mut self, input: Value) -> Result<ToolOutput, ToolError> {
        let input: BashInput = parse_input("bash", input)?;
        if input.restart == Some(true) {
            self.close().await;
            self.shell().await?;
            return Ok(ToolOutput::text("bash session restarted"));
        }
        let Some(command) = input.command.filter(|c| !c.is_empty()) else {
            return Err(ToolError::new("bash: command is required"));
        };
        let timeout_ms = input.timeout_ms.filter(|&ms| ms != 0).unwrap_or(DEFAULT_TIMEOUT_MS);
        let timeout = Duration::from_millis(timeout_ms.try_into().unwrap_or(0));
        let shell = self.shell().await?;
        match shell.exec(&command, timeout).await {
            Ok(done) if done.exit_code == 0 => Ok(ToolOutput::text(done.output)),
            Ok(done) => Err(ToolError(done.output)),
            Err(BashError::TimedOut(_)) => {
                self.shell = None;
                Err(ToolError(format!("bash: bash command timed out after {}s", python_seconds(timeout_ms))))
            }
            Err(e) => Err(ToolError(format!("bash: {e}"))),
        }
    }

    /// Ends the shell, if one runs.
    pub async fn close(&mut self) {
        if let Some(mut shell) = self.shell.take() {
            shell.close().await;
        }
    }

    /// The running shell, started if there is none or the last call was abandoned mid-command.
    async fn shell(&mut self) -> Result<&mut BashShell, ToolError> {
        if self.shell.as_ref().is_some_and(|s| s.in_flight) {
            self.close().await;
        }
        if self.shell.is_none() {
            let shell = BashShell::start(&self.ctx).await.map_err(|e| ToolError(format!("bash: {e}")))?;
            self.shell = Some(shell);
        }
        Ok(self.shell.as_mut().expect("a shell was just started"))
    }
}

#[cfg(test)]
mod tests {
    use std::ffi::OsString;

    use serde_json::json;

    use super::*;

    fn session(dir: &tempfile::TempDir) -> BashSession {
        BashSession::new(ToolContext::new(dir.path()))
    }

    async fn run(bash: &mut BashSession, input: Value) -> ToolOutput {
        match bash.call(input).await {
            Ok(out) => out,
            Err(e) => e.into(),
        }
    }

    async fn ok(bash: &mut BashSession, command: &str) -> String {
        let out = run(bash, json!({ "command": command })).await;
        assert!(!out.is_error, "{command}: {out:?}");
        out.joined_text()
    }

    async fn err(bash: &mut BashSession, input: Value) -> String {
        let out = run(bash, input).await;
        assert!(out.is_error, "{out:?}");
        out.joined_text()
    }

    /// Whether a live (non-zombie) process has `needle` in its command line.
    fn process_running(needle: &str) -> bool {
        std::fs::read_dir("/proc").unwrap().flatten().any(|entry| {
            std::fs::read(entry.path().join("cmdline"))
                .is_ok_and(|c| c.split(|&b| b == 0).any(|arg| arg == needle.as_bytes()))
        })
    }

    /// Whether `process_running(needle)` becomes `want` within a second.
    async fn becomes(needle: &str, want: bool) -> bool {
        for _ in 0..50 {
            if process_running(needle) == want {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        false
    }

    async fn gone(needle: &str) -> bool {
        becomes(needle, false).await
    }

    #[tokio::test]
    async fn state_persists_across_calls() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        let mut bash = session(&dir);
        assert_eq!(ok(&mut bash, "pwd").await, dir.path().display().to_string());
        ok(&mut bash, "cd sub && X=41 && f() { echo $((X + 1)); }").await;
        assert_eq!(ok(&mut bash, "pwd; f").await, format!("{}\n42", dir.path().join("sub").display()));
        bash.close().await;
    }

    #[tokio::test]
    async fn non_zero_exit_is_an_error_with_the_merged_output() {
        let dir = tempfile::tempdir().unwrap();
        let mut bash = session(&dir);
        assert_eq!(err(&mut bash, json!({ "command": "echo out; echo oops >&2; false" })).await, "out\noops");
        assert_eq!(err(&mut bash, json!({ "command": "false" })).await, "(no output)");
        assert_eq!(ok(&mut bash, "true").await, "(no output)");
        // A syntax error comes from the shell itself, on its stderr: merged too. It also ends a
        // non-interactive shell, as in the reference.
        assert!(err(&mut bash, json!({ "command": "echo (" })).await.contains("syntax error"));
        bash.close().await;
    }

    #[tokio::test]
    async fn commands_read_dev_null_not_the_command_pipe() {
        let dir = tempfile::tempdir().unwrap();
        let mut bash = session(&dir);
        assert_eq!(ok(&mut bash, "cat; read -r line; echo \"[$line]\"").await, "[]");
        bash.close().await;
    }

    #[tokio::test]
    async fn timeout_kills_the_shell_and_the_next_call_starts_fresh() {
        let dir = tempfile::tempdir().unwrap();
        let mut bash = session(&dir);
        ok(&mut bash, "X=kept").await;
        let started = std::time::Instant::now();
        let text = err(&mut bash, json!({ "command": "sleep 987.25", "timeout_ms": 300 })).await;
        assert_eq!(text, "bash: bash command timed out after 0.3s");
        assert!(started.elapsed() < Duration::from_secs(5));
        assert!(gone("987.25").await, "the timed-out command outlived its shell");
        assert_eq!(ok(&mut bash, "echo \"[$X]\"").await, "[]");
        bash.close().await;
    }

    #[tokio::test]
    async fn an_abandoned_call_kills_its_command() {
        let dir = tempfile::tempdir().unwrap();
        let mut bash = session(&dir);
        let call = bash.call(json!({ "command": "sleep 987.5" }));
        assert!(tokio::time::timeout(Duration::from_millis(300), call).await.is_err());
        assert!(gone("987.5").await, "the abandoned command is still running");
        assert_eq!(ok(&mut bash, "echo next").await, "next");
        bash.close().await;
    }

    #[tokio::test]
    async fn restart_gives_a_fresh_shell() {
        let dir = tempfile::tempdir().unwrap();
        let mut bash = session(&dir);
        assert_eq!(run(&mut bash, json!({ "restart": true })).await, ToolOutput::text("bash session restarted"));
        ok(&mut bash, "X=1").await;
        let out = run(&mut bash, json!({ "restart": true, "command": "echo ignored" })).await;
        assert_eq!(out, ToolOutput::text("bash session restarted"));
        assert_eq!(ok(&mut bash, "echo \"[$X]\"").await, "[]");
        bash.close().await;
    }

    #[tokio::test]
    async fn a_dead_shell_needs_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let mut bash = session(&dir);
        assert_eq!(err(&mut bash, json!({ "command": "echo bye; exit 3" })).await, "bye");
        assert_eq!(
            err(&mut bash, json!({ "command": "echo hi" })).await,
            "bash: bash session terminated; restart required"
        );
        run(&mut bash, json!({ "restart": true })).await;
        assert_eq!(ok(&mut bash, "echo hi").await, "hi");
        bash.close().await;
    }

    #[tokio::test]
    async fn command_is_required() {
        let dir = tempfile::tempdir().unwrap();
        let mut bash = session(&dir);
        for input in [json!({}), json!({ "command": "" }), json!({ "restart": false }), json!({ "command": null })] {
            assert_eq!(err(&mut bash, input).await, "bash: command is required");
        }
        assert!(err(&mut bash, json!({ "command": 5 })).await.starts_with("bash: invalid input: "));
        assert!(
            err(&mut bash, json!({ "command": "x", "timeout_ms": 1.5 })).await.starts_with("bash: invalid input: ")
        );
        assert!(bash.shell.is_none(), "no shell is started for an invalid call");
    }

    #[tokio::test]
    async fn truncation_keeps_the_tail() {
        let dir = tempfile::tempdir().unwrap();
        let mut bash = session(&dir);
        let text = ok(&mut bash, "head -c 300000 /dev/zero | tr '\\0' a; echo; echo END").await;
        let body = text.strip_prefix(TRUNCATED_PREFIX).expect("truncated");
        // The last 100 KiB of "a…a\nEND\n", trailing newline trimmed.
        assert_eq!(body.len(), OUTPUT_LIMIT - 1);
        assert!(body.ends_with("aaa\nEND"));
        assert_eq!(ok(&mut bash, "head -c 102400 /dev/zero | tr '\\0' b").await.len(), OUTPUT_LIMIT);
        bash.close().await;
    }

    #[tokio::test]
    async fn ansi_escapes_are_removed_other_controls_kept() {
        let dir = tempfile::tempdir().unwrap();
        let mut bash = session(&dir);
        let text = ok(&mut bash, r"printf '\033[1;31mred\033[0m plain\ttab\r\n\033[?25lx\n'").await;
        assert_eq!(text, "red plain\ttab\r\nx");
        assert_eq!(ok(&mut bash, r"printf '\xff\xfeok'").await, "\u{fffd}\u{fffd}ok");
        bash.close().await;
    }

    #[tokio::test]
    async fn output_cannot_forge_the_frame() {
        let dir = tempfile::tempdir().unwrap();
        let mut bash = session(&dir);
        let fake = format!("__ANT_CMD_{}_DONE__0", "0".repeat(32));
        let text = err(&mut bash, json!({ "command": format!("printf '\\n{fake}\\n'; echo after; false") })).await;
        assert_eq!(text, format!("\n{fake}\nafter"));
        // Tracing echoes the command and the frame's printf into the output, as in the
        // reference, but never the sentinel whole: the frame still ends the call.
        let traced = ok(&mut bash, "set -xv; echo hi").await;
        assert!(traced.contains("\nhi\n+ printf"), "{traced}");
        let traced = ok(&mut bash, "set +xv; echo next").await;
        assert!(traced.contains("+ set +xv\nnext"), "{traced}");
        assert_eq!(ok(&mut bash, "echo untraced").await, "untraced");
        bash.close().await;
    }

    #[tokio::test]
    async fn background_jobs_do_not_hang_the_call_and_die_with_the_shell() {
        let dir = tempfile::tempdir().unwrap();
        let mut bash = session(&dir);
        let call = bash.call(json!({ "command": "sleep 987.75 & echo started" }));
        let out = tokio::time::timeout(Duration::from_secs(10), call).await.expect("the call hung").unwrap();
        assert_eq!(out.joined_text(), "started");
        assert!(becomes("987.75", true).await, "the background job never started");
        // A shell that exits while its job holds the output pipe is still noticed.
        let call = bash.call(json!({ "command": "exit 0" }));
        let out = tokio::time::timeout(Duration::from_secs(10), call).await.expect("the call hung");
        assert_eq!(out.unwrap_err().0, "");
        bash.close().await;
        assert!(gone("987.75").await, "the background job outlived the session");
    }

    #[tokio::test]
    async fn late_background_output_shows_with_the_next_command() {
        let dir = tempfile::tempdir().unwrap();
        let mut bash = session(&dir);
        assert_eq!(ok(&mut bash, "(sleep 0.2; echo late; touch written) & echo now").await, "now");
        while !dir.path().join("written").exists() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(ok(&mut bash, "echo next").await, "late\nnext");
        bash.close().await;
    }

    #[tokio::test]
    async fn environment_is_exactly_the_context_env() {
        let dir = tempfile::tempdir().unwrap();
        let mut ctx = ToolContext::new(dir.path());
        ctx.env = vec![(OsString::from("MNEMO_ONLY"), OsString::from("yes")), ("PS1".into(), "$ ".into())];
        let mut bash = BashSession::new(ctx);
        let env = ok(&mut bash, "env | sort").await;
        let mut lines: Vec<_> =
            env.lines().filter(|l| !["PWD=", "SHLVL=", "_="].iter().any(|p| l.starts_with(p))).collect();
        lines.sort_unstable();
        // PS1 and PS2 are passed (see `sandbox::shell_command`), but bash drops both when it
        // is not interactive.
        assert_eq!(lines, ["MNEMO_ONLY=yes", "TERM=dumb"]);
        bash.close().await;
    }

    /// Runs `anthropic_variables_never_reach_the_shell` in a child test process that has an
    /// `ANTHROPIC_` variable, since this process cannot set one (`set_var` is unsafe).
    #[test]
    fn anthropic_variables_are_scrubbed() {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "tools::bash::tests::anthropic_variables_never_reach_the_shell", "--nocapture"])
            .env("ANTHROPIC_TEST_SECRET", "sk-must-not-leak")
            .env("MNEMO_BASH_ENV_CHILD", "1")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
        assert!(stdout.contains("1 passed"), "{stdout}");
    }

    #[tokio::test]
    async fn anthropic_variables_never_reach_the_shell() {
        if std::env::var_os("MNEMO_BASH_ENV_CHILD").is_none() {
            return;
        }
        assert_eq!(std::env::var("ANTHROPIC_TEST_SECRET").unwrap(), "sk-must-not-leak");
        let dir = tempfile::tempdir().unwrap();
        let mut bash = BashSession::new(ToolContext::new(dir.path()));
        assert_eq!(ok(&mut bash, "env | grep -c ^ANTHROPIC_ || true").await, "0");
        assert_eq!(ok(&mut bash, "echo \"[$MNEMO_BASH_ENV_CHILD]\"").await, "[1]");
        bash.close().await;
    }

    #[test]
    fn timeout_seconds_print_like_python_floats() {
        assert_eq!(python_seconds(120_000), "120.0");
        assert_eq!(python_seconds(1_500), "1.5");
        assert_eq!(python_seconds(1_234), "1.234");
        assert_eq!(python_seconds(1), "0.001");
        assert_eq!(python_seconds(-500), "-0.5");
    }

    #[tokio::test]
    async fn default_and_negative_timeouts() {
        let dir = tempfile::tempdir().unwrap();
        let mut bash = session(&dir);
        assert_eq!(ok(&mut bash, "echo quick").await, "quick");
        let out = run(&mut bash, json!({ "command": "sleep 5", "timeout_ms": -500 })).await;
        assert_eq!(out, ToolOutput::error("bash: bash command timed out after -0.5s"));
        let out = run(&mut bash, json!({ "command": "echo float", "timeout_ms": 5000.0 })).await;
        assert_eq!(out, ToolOutput::text("float"));
        bash.close().await;
    }

    #[test]
    fn frames_are_found_across_chunks_and_leftovers_kept() {
        let sentinel = b"__ANT_CMD_abc_DONE__";
        let mut tail = Tail::new(b"early\n".to_vec());
        tail.buf.extend_from_slice(b"out\n\n__ANT_CMD_a");
        assert_eq!(tail.find_frame(sentinel), None);
        tail.buf.extend_from_slice(b"bc_DONE__1");
        assert_eq!(tail.find_frame(sentinel), None);
        tail.buf.extend_from_slice(b"27\nlate");
        let frame = tail.find_frame(sentinel).unwrap();
        assert_eq!(frame.status, 127);
        assert_eq!(&tail.buf[frame.end..], b"late");
        assert_eq!(tail.render(frame.output_end, true), "early\nout");
    }

    #[test]
    fn a_bad_status_reads_as_minus_one() {
        assert_eq!(parse_status(b"x"), -1);
        assert_eq!(parse_status(b""), -1);
        assert_eq!(parse_status(b"0"), 0);
        let mut tail = Tail::new(Vec::new());
        tail.buf.extend_from_slice(b"__S__");
        tail.buf.extend_from_slice(&[b'9'; MAX_STATUS_LEN + 1]);
        assert_eq!(tail.find_frame(b"__S__").map(|f| f.status), Some(-1));
    }

    #[test]
    fn compaction_bounds_memory_and_counts_dropped_bytes() {
        let mut tail = Tail::new(Vec::new());
        for _ in 0..100 {
            tail.buf.extend_from_slice(&[b'z'; READ_CHUNK]);
            assert_eq!(tail.find_frame(b"__S__"), None);
            tail.compact();
            assert!(tail.buf.len() <= 2 * (OUTPUT_LIMIT + FRAME_SLACK));
        }
        let end = tail.buf.len();
        let text = tail.render(end, true);
        assert_eq!(text.len(), TRUNCATED_PREFIX.len() + OUTPUT_LIMIT);
    }

    #[test]
    fn strip_ansi_matches_the_reference_pattern() {
        assert_eq!(strip_ansi("plain"), "plain");
        assert_eq!(strip_ansi("\x1b[0mA\x1b[38;5;196mB\x1b[?1049hC\x1b[1 qD"), "ABCD");
        // Not CSI, or unterminated: kept as is.
        assert_eq!(strip_ansi("\x1b]0;t\x07x\x1b[12"), "\x1b]0;t\x07x\x1b[12");
        assert_eq!(strip_ansi("é\x1b[1mü"), "éü");
    }
}
