//! [`BashShell`]: the process, `/bin/bash --noprofile --norc` reading commands from a pipe, its
//! stdout and stderr merged into one pipe we read, and the framing of each command's output.
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

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::pipe;
use tokio::process::{Child, ChildStdin};
use tokio::time::Instant;

use super::super::ToolContext;
use super::super::sandbox::{self, BASH};

/// Only the last this many bytes of a command's output are returned (100 KiB).
pub(super) const OUTPUT_LIMIT: usize = 100 * 1024;
/// Marks a result whose head was dropped.
pub(super) const TRUNCATED_PREFIX: &str = "[output truncated]\n";
/// How long a wrapped shell may take to come up (namespaces and mounts included).
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
    pub(super) in_flight: bool,
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
        let mut cmd = sandbox::shell_command(ctx.sandbox, ctx).map_err(BashError::Sandbox)?;
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
pub(super) fn python_seconds(ms: i64) -> String {
    let text = (ms as f64 / 1000.0).to_string();
    if text.contains('.') { text } else { format!("{text}.0") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeout_seconds_print_like_python_floats() {
        assert_eq!(python_seconds(120_000), "120.0");
        assert_eq!(python_seconds(1_500), "1.5");
        assert_eq!(python_seconds(1_234), "1.234");
        assert_eq!(python_seconds(1), "0.001");
        assert_eq!(python_seconds(-500), "-0.5");
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
