//! The built-in toolset `agent_toolset_20260401`: bash, read, write, edit, glob, grep.
//!
//! Every file tool is confined to the session's working directory plus the memory folders
//! ([`ToolContext::allowed_roots`]); writes under a read-only root are refused. Paths are
//! canonicalised before the check and the tool then works on the canonical path, so a symlink
//! cannot redirect an operation after it was allowed. `bash` is confined by the OS instead:
//! see [`sandbox`].
//!
//! A tool answers with content blocks ([`ToolOutput`]) or a [`ToolError`] whose message already
//! carries the tool's name (`read: …`). Input that does not match a tool's schema is an error
//! result too, never a panic.

mod bash;
mod edit;
mod glob;
mod grep;
mod paths;
mod read;
pub mod sandbox;
mod write;

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde_json::{Value, json};

pub use bash::{BashSession, BashShell};

/// The tool names of `agent_toolset_20260401`, in the reference order.
pub const TOOL_NAMES: [&str; 6] = ["bash", "read", "write", "edit", "glob", "grep"];

/// Size cap of a whole-file `read` and of `edit` unless configured (256 KiB).
pub const DEFAULT_MAX_FILE_BYTES: u64 = 256 * 1024;

/// A run of a tool ends after this long; it must exceed bash's own 120 s timeout.
pub const TOOL_CALL_TIMEOUT: Duration = Duration::from_secs(150);

/// Where and how the tools of one session may act.
#[derive(Debug, Clone)]
pub struct ToolContext {
    /// Relative paths resolve here; `bash` starts here.
    pub workdir: PathBuf,
    /// Directories besides the workdir that the file tools may reach (the memory folders).
    pub allowed_roots: Vec<PathBuf>,
    /// Directories the write and edit tools refuse to modify (read-only memory stores).
    pub read_only_roots: Vec<PathBuf>,
    /// Cap for whole-file `read` and for `edit`; `None` = uncapped. An explicit cap also
    /// tightens the image/PDF limits.
    pub max_file_bytes: Option<u64>,
    /// Whether `max_file_bytes` was set by the operator (binds image/PDF reads too).
    pub max_file_bytes_explicit: bool,
    /// The environment of `bash` (and of any helper process): the allowlisted variables of the
    /// worker's own environment ([`tool_env`]), unless replaced.
    pub env: Vec<(OsString, OsString)>,
    /// How `bash` enforces read-only roots.
    pub sandbox: sandbox::Sandbox,
    /// The user `bash` runs as (`--tool-user`); the worker's own when `None`.
    pub tool_user: Option<sandbox::ToolUser>,
}

impl ToolContext {
    /// A context for `workdir` with no memory roots, the default caps and the allowlisted
    /// process environment.
    pub fn new(workdir: impl Into<PathBuf>) -> Self {
        Self {
            workdir: workdir.into(),
            allowed_roots: Vec::new(),
            read_only_roots: Vec::new(),
            max_file_bytes: Some(DEFAULT_MAX_FILE_BYTES),
            max_file_bytes_explicit: false,
            env: tool_env(&[]),
            sandbox: sandbox::Sandbox::None,
            tool_user: None,
        }
    }
}

/// The variables every tool shell gets from the worker's environment (plus `LC_*`).
pub const TOOL_ENV: [&str; 6] = ["PATH", "HOME", "LANG", "TERM", "TZ", "USER"];

/// The worker's environment cut to an allowlist: [`TOOL_ENV`], every `LC_*`, and the names in
/// `extra` (`--tool-env`). Nothing else reaches a command the agent runs: not a credential, not
/// a proxy's password, not whatever the worker's own supervisor set.
pub fn tool_env(extra: &[String]) -> Vec<(OsString, OsString)> {
    allowed_env(std::env::vars_os(), extra)
}

fn allowed_env(vars: impl Iterator<Item = (OsString, OsString)>, extra: &[String]) -> Vec<(OsString, OsString)> {
    vars.filter(|(name, _)| {
        let name = name.as_encoded_bytes();
        TOOL_ENV.iter().any(|n| n.as_bytes() == name)
            || name.starts_with(b"LC_")
            || extra.iter().any(|n| n.as_bytes() == name)
    })
    .collect()
}

/// A tool's answer: content blocks as the API takes them (`text`, `image`, `document`).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    pub content: Vec<Value>,
    pub is_error: bool,
    /// The file this call wrote in full (`write`, `edit`): complete now, so memory sync need not
    /// wait for a quiet period to upload it.
    pub wrote: Option<PathBuf>,
}

impl ToolOutput {
    /// A successful text result; empty text reads `(no output)`.
    pub fn text(text: impl Into<String>) -> Self {
        Self { content: vec![text_block(text.into())], is_error: false, wrote: None }
    }

    /// This result, noting that the call wrote `path` in full.
    pub fn wrote(mut self, path: PathBuf) -> Self {
        self.wrote = Some(path);
        self
    }

    /// An error result with `message` as its only text block.
    pub fn error(message: impl Into<String>) -> Self {
        Self { content: vec![text_block(message.into())], is_error: true, wrote: None }
    }

    /// The text blocks joined, for logs and tests.
    pub fn joined_text(&self) -> String {
        self.content.iter().filter_map(|b| b.get("text").and_then(Value::as_str)).collect::<Vec<_>>().join("")
    }
}

fn text_block(text: String) -> Value {
    let text = if text.is_empty() { "(no output)".to_owned() } else { text };
    json!({"type": "text", "text": text})
}

/// A tool refusing or failing in a way the agent should see: the message is the whole text of
/// the error result (`read: notes.md: no such file or directory`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ToolError(pub String);

impl ToolError {
    pub fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }
}

impl From<ToolError> for ToolOutput {
    fn from(e: ToolError) -> Self {
        ToolOutput::error(e.0)
    }
}

/// Decodes a tool's input; a mismatch is reported like the reference's function-tool wrapper
/// reports an invalid call.
fn parse_input<T: DeserializeOwned>(tool: &str, input: Value) -> Result<T, ToolError> {
    serde_json::from_value(input).map_err(|e| ToolError(format!("{tool}: invalid input: {e}")))
}

/// The six tools of one session. Holds the persistent bash shell; call [`Toolset::close`] when
/// the session ends.
#[derive(Debug)]
pub struct Toolset {
    ctx: ToolContext,
    bash: BashSession,
}

/// The label a call of `name` gets in metrics: the tool's own name for the built-in tools,
/// `other` for anything else (a label never takes an arbitrary string from the agent).
pub fn metric_name(name: &str) -> &'static str {
    TOOL_NAMES.iter().find(|t| **t == name).copied().unwrap_or("other")
}

impl Toolset {
    pub fn new(ctx: ToolContext) -> Self {
        let bash = BashSession::new(ctx.clone());
        Self { ctx, bash }
    }

    pub fn context(&self) -> &ToolContext {
        &self.ctx
    }

    /// Whether `name` is one of this toolset's tools (calls to other names belong to another
    /// client and are left alone).
    pub fn handles(name: &str) -> bool {
        TOOL_NAMES.contains(&name)
    }

    /// Runs one call. Never fails: every problem becomes an error result.
    pub async fn call(&mut self, name: &str, input: Value) -> ToolOutput {
        let file_tool: fn(&ToolContext, Value) -> Result<ToolOutput, ToolError> = match name {
            "bash" => {
                return match self.bash.call(input).await {
                    Ok(out) => out,
                    Err(e) => e.into(),
                };
            }
            "read" => read::run,
            "write" => write::run,
            "edit" => edit::run,
            "glob" => glob::run,
            "grep" => grep::run,
            other => return ToolOutput::error(format!("unknown tool '{other}'")),
        };
        let ctx = self.ctx.clone();
        match tokio::task::spawn_blocking(move || file_tool(&ctx, input)).await {
            Ok(Ok(out)) => out,
            Ok(Err(e)) => e.into(),
            Err(join) => ToolOutput::error(format!("{name}: internal error: {join}")),
        }
    }

    /// Ends the bash shell.
    pub async fn close(&mut self) {
        self.bash.close().await;
    }
}

/// What the tools' unit tests share: a canonical temp workdir and a tool's answer as text.
#[cfg(test)]
pub(crate) mod testing {
    use std::fs;
    use std::os::unix::fs::symlink;
    use std::path::{Path, PathBuf};

    use super::{ToolContext, ToolError, ToolOutput};

    /// A temp dir and its canonical path (macOS `/var` → `/private/var`, symlinked TMPDIR), so
    /// canonicalised results compare equal.
    pub(crate) fn canonical_tempdir() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = fs::canonicalize(dir.path()).unwrap();
        (dir, path)
    }

    /// A temp workdir (canonical, so symlinked `/tmp`s compare equal) and a context on it.
    pub(crate) fn setup() -> (tempfile::TempDir, PathBuf, ToolContext) {
        let (dir, root) = canonical_tempdir();
        let ctx = ToolContext::new(&root);
        (dir, root, ctx)
    }

    /// A folder outside `root` holding the file `secret` (with `content`), which `root` reaches
    /// through two symlinks no tool may follow: `out` (to the folder) and `leaf` (to the file).
    pub(crate) fn links_out_of(root: &Path, secret: &str, leaf: &str, content: &str) -> tempfile::TempDir {
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join(secret), content).unwrap();
        symlink(outside.path(), root.join("out")).unwrap();
        symlink(outside.path().join(secret), root.join(leaf)).unwrap();
        outside
    }

    /// A result's text, or the error's message.
    pub(crate) fn text(result: Result<ToolOutput, ToolError>) -> Result<String, String> {
        result.map(|o| o.joined_text()).map_err(|e| e.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shell_environment_is_an_allowlist() {
        let vars = [
            ("PATH", "/usr/bin"),
            ("HOME", "/root"),
            ("LANG", "C.UTF-8"),
            ("LC_ALL", "C"),
            ("LC_TIME", "en_GB"),
            ("TERM", "xterm"),
            ("TZ", "UTC"),
            ("USER", "root"),
            ("ANTHROPIC_ENVIRONMENT_KEY", "sk-env"),
            ("ANTHROPIC_WORK_SECRET", "secret"),
            ("AWS_SECRET_ACCESS_KEY", "aws"),
            ("HTTPS_PROXY", "http://user:pw@proxy"),
            ("MNEMO_SEALED_CREDENTIALS_FD", "3"),
            ("PATHX", "no"),
            ("XLC_ALL", "no"),
            ("PIP_INDEX_URL", "https://mirror"),
        ]
        .map(|(k, v)| (OsString::from(k), OsString::from(v)));
        let names = |extra: &[String]| -> Vec<String> {
            allowed_env(vars.clone().into_iter(), extra).into_iter().map(|(k, _)| k.into_string().unwrap()).collect()
        };
        assert_eq!(names(&[]), ["PATH", "HOME", "LANG", "LC_ALL", "LC_TIME", "TERM", "TZ", "USER"]);
        let extra = names(&["PIP_INDEX_URL".to_owned(), "NOT_SET".to_owned()]);
        assert_eq!(extra.last().map(String::as_str), Some("PIP_INDEX_URL"));
        assert_eq!(extra.len(), 9);
    }
}
