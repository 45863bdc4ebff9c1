//! The `bash` tool: one persistent shell per session.
//!
//! [`BashShell`] is the process: `/bin/bash --noprofile --norc` reading commands from a pipe,
//! its stdout and stderr merged into one pipe we read. [`BashSession`] is the tool on top: it
//! starts the shell on first use, restarts it on request and turns input and results into the
//! tool's texts. How a command is framed and how a shell ends: see `shell.rs`.

mod shell;

use std::time::Duration;

use serde::{Deserialize, Deserializer};
use serde_json::Value;

pub use self::shell::BashShell;
use self::shell::{BashError, python_seconds};
use super::{ToolContext, ToolError, ToolOutput, parse_input};

/// A command's timeout unless `timeout_ms` gives one.
const DEFAULT_TIMEOUT_MS: i64 = 120_000;

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

    use super::shell::{OUTPUT_LIMIT, TRUNCATED_PREFIX};
    use super::*;

    /// A session (no shell started yet) working in a fresh folder, which lives as long as the
    /// returned `TempDir`.
    fn session() -> (tempfile::TempDir, BashSession) {
        let dir = tempfile::tempdir().unwrap();
        let bash = BashSession::new(ToolContext::new(dir.path()));
        (dir, bash)
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
        let (dir, mut bash) = session();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        assert_eq!(ok(&mut bash, "pwd").await, dir.path().display().to_string());
        ok(&mut bash, "cd sub && X=41 && f() { echo $((X + 1)); }").await;
        assert_eq!(ok(&mut bash, "pwd; f").await, format!("{}\n42", dir.path().join("sub").display()));
        bash.close().await;
    }

    #[tokio::test]
    async fn non_zero_exit_is_an_error_with_the_merged_output() {
        let (_dir, mut bash) = session();
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
        let (_dir, mut bash) = session();
        assert_eq!(ok(&mut bash, "cat; read -r line; echo \"[$line]\"").await, "[]");
        bash.close().await;
    }

    #[tokio::test]
    async fn timeout_kills_the_shell_and_the_next_call_starts_fresh() {
        let (_dir, mut bash) = session();
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
        let (_dir, mut bash) = session();
        let call = bash.call(json!({ "command": "sleep 987.5" }));
        assert!(tokio::time::timeout(Duration::from_millis(300), call).await.is_err());
        assert!(gone("987.5").await, "the abandoned command is still running");
        assert_eq!(ok(&mut bash, "echo next").await, "next");
        bash.close().await;
    }

    #[tokio::test]
    async fn restart_gives_a_fresh_shell() {
        let (_dir, mut bash) = session();
        assert_eq!(run(&mut bash, json!({ "restart": true })).await, ToolOutput::text("bash session restarted"));
        ok(&mut bash, "X=1").await;
        let out = run(&mut bash, json!({ "restart": true, "command": "echo ignored" })).await;
        assert_eq!(out, ToolOutput::text("bash session restarted"));
        assert_eq!(ok(&mut bash, "echo \"[$X]\"").await, "[]");
        bash.close().await;
    }

    #[tokio::test]
    async fn a_dead_shell_needs_a_restart() {
        let (_dir, mut bash) = session();
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
        let (_dir, mut bash) = session();
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
        let (_dir, mut bash) = session();
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
        let (_dir, mut bash) = session();
        let text = ok(&mut bash, r"printf '\033[1;31mred\033[0m plain\ttab\r\n\033[?25lx\n'").await;
        assert_eq!(text, "red plain\ttab\r\nx");
        assert_eq!(ok(&mut bash, r"printf '\xff\xfeok'").await, "\u{fffd}\u{fffd}ok");
        bash.close().await;
    }

    #[tokio::test]
    async fn output_cannot_forge_the_frame() {
        let (_dir, mut bash) = session();
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
        let (_dir, mut bash) = session();
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
        let (dir, mut bash) = session();
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

    /// Runs `only_allowlisted_variables_reach_the_shell` in a child test process that has
    /// variables of its own, since this process cannot set one (`set_var` is unsafe).
    #[test]
    fn the_worker_environment_is_cut_to_the_allowlist() {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "tools::bash::tests::only_allowlisted_variables_reach_the_shell", "--nocapture"])
            .env("ANTHROPIC_TEST_SECRET", "sk-must-not-leak")
            .env("HTTPS_PROXY", "http://user:password@proxy")
            .env("TZ", "Europe/Paris")
            .env("LC_ALL", "C")
            .env("MNEMO_BASH_ENV_CHILD", "1")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
        assert!(stdout.contains("1 passed"), "{stdout}");
    }

    #[tokio::test]
    async fn only_allowlisted_variables_reach_the_shell() {
        if std::env::var_os("MNEMO_BASH_ENV_CHILD").is_none() {
            return;
        }
        assert_eq!(std::env::var("ANTHROPIC_TEST_SECRET").unwrap(), "sk-must-not-leak");
        let dir = tempfile::tempdir().unwrap();
        let mut bash = BashSession::new(ToolContext::new(dir.path()));
        assert_eq!(ok(&mut bash, "env | grep -c ^ANTHROPIC_ || true").await, "0");
        let shown = "echo \"[$MNEMO_BASH_ENV_CHILD] [$HTTPS_PROXY] [$TZ] [$LC_ALL]\"";
        assert_eq!(ok(&mut bash, shown).await, "[] [] [Europe/Paris] [C]");
        bash.close().await;
        // `--tool-env HTTPS_PROXY` passes that one too.
        let mut ctx = ToolContext::new(dir.path());
        ctx.env = crate::tools::tool_env(&["HTTPS_PROXY".to_owned()]);
        let mut bash = BashSession::new(ctx);
        assert_eq!(ok(&mut bash, shown).await, "[] [http://user:password@proxy] [Europe/Paris] [C]");
        bash.close().await;
    }

    #[tokio::test]
    async fn default_and_negative_timeouts() {
        let (_dir, mut bash) = session();
        assert_eq!(ok(&mut bash, "echo quick").await, "quick");
        let out = run(&mut bash, json!({ "command": "sleep 5", "timeout_ms": -500 })).await;
        assert_eq!(out, ToolOutput::error("bash: bash command timed out after -0.5s"));
        let out = run(&mut bash, json!({ "command": "echo float", "timeout_ms": 5000.0 })).await;
        assert_eq!(out, ToolOutput::text("float"));
        bash.close().await;
    }
}
