//! The worker's credentials never stay in its environment block or its command line.
//!
//! `/proc/<pid>/environ` and `/proc/<pid>/cmdline` show what a process was started with, whatever
//! it does to its environment later (`remove_var` changes the C library's copy, not the block the
//! kernel shows), so a worker given `ANTHROPIC_ENVIRONMENT_KEY` or `--environment-key` used to
//! show it to every process of its user for its whole life — the agent's shell included.
//!
//! [`seal`] runs first thing in `main`, before any thread or the async runtime. For `mnemo
//! worker …` with a credential in its environment or arguments, it writes the credentials into a
//! pipe, puts the pipe's read end on standard input (the worker never reads its stdin), and
//! re-executes the same binary (in place, so the same process id: supervisors and tests
//! keep their handle) with the credentials removed from both the environment and the arguments
//! and [`SEALED_CREDENTIALS_FD`] set. The new image reads the pipe once at start — draining it,
//! so nobody can read it after — and puts `/dev/null` on stdin, which closes it. The values then
//! live in the process's memory only, which the worker makes non-dumpable.
//!
//! A value on the command line is visible to every local user (`ps`) until the re-execution, so
//! it keeps working but is warned about; the environment (not visible to other users) or a 0600
//! file (`--environment-key-file`, `ANTHROPIC_WORK_SECRET_FILE`) are the ways to pass one.

use std::ffi::{OsStr, OsString};
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::sync::OnceLock;

use anyhow::{Context, bail};
use mnemo_api::Secret;
use mnemo_worker::hardening::SEALED_CREDENTIALS_FD;

/// A credential the worker takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Credential {
    /// `ANTHROPIC_ENVIRONMENT_KEY` / `--environment-key`.
    EnvironmentKey,
    /// `ANTHROPIC_WORK_SECRET` / `--work-secret` (`mnemo worker run`).
    WorkSecret,
}

impl Credential {
    const ALL: [Self; 2] = [Self::EnvironmentKey, Self::WorkSecret];

    fn variable(self) -> &'static str {
        match self {
            Self::EnvironmentKey => "ANTHROPIC_ENVIRONMENT_KEY",
            Self::WorkSecret => "ANTHROPIC_WORK_SECRET",
        }
    }

    pub(crate) fn flag(self) -> &'static str {
        match self {
            Self::EnvironmentKey => "--environment-key",
            Self::WorkSecret => "--work-secret",
        }
    }
}

/// Where a credential was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    Environment,
    /// The command line: readable by every local user until the re-execution.
    Flag,
}

/// One credential, taken out of the environment or the arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Sealed {
    pub(crate) credential: Credential,
    pub(crate) source: Source,
    pub(crate) value: Secret,
}

/// The credentials this process was handed sealed, read once at start.
static SEALED: OnceLock<Vec<Sealed>> = OnceLock::new();

/// The sealed value of `credential`: the flag's when both were given (as clap would choose).
pub(crate) fn sealed(credential: Credential) -> Option<&'static Sealed> {
    let all = SEALED.get()?;
    let of = |source| all.iter().find(|s| s.credential == credential && s.source == source);
    of(Source::Flag).or_else(|| of(Source::Environment))
}

/// The start-up step described in the module docs. Returns only when this process holds no
/// credential in its environment block or arguments (it re-executed itself otherwise); an error
/// means the worker must not start.
pub(crate) fn seal() -> anyhow::Result<()> {
    let args: Vec<OsString> = std::env::args_os().collect();
    if !is_worker(&args) {
        return Ok(());
    }
    if let Some(fd) = std::env::var_os(SEALED_CREDENTIALS_FD) {
        if fd != "0" {
            bail!("{SEALED_CREDENTIALS_FD} is set to {fd:?} but only mnemo itself sets it (to 0); unset it");
        }
        let sealed = receive().with_context(|| {
            format!("read the credentials sealed by the worker's first start ({SEALED_CREDENTIALS_FD} is set; unset it if mnemo did not set it)")
        })?;
        // Anything sealed again is a bug: the new image's arguments and environment hold none.
        let rest = split(&args, std::env::vars_os());
        anyhow::ensure!(rest.sealed.is_empty(), "the re-executed worker still holds a credential in its arguments");
        let _ = SEALED.set(sealed);
        return Ok(());
    }
    let plan = split(&args, std::env::vars_os());
    if plan.sealed.is_empty() {
        return Ok(());
    }
    Err(reexec(&plan)).context("re-execute the worker without its credentials in /proc/<pid>/environ and cmdline")
}

/// Whether `args` run `mnemo worker …`: the first word that is not an option (or the value of
/// the global `--log-format`).
fn is_worker(args: &[OsString]) -> bool {
    let mut words = args.iter().skip(1);
    while let Some(word) = words.next() {
        if word == "--log-format" {
            words.next();
        } else if !word.as_encoded_bytes().starts_with(b"-") {
            return word == "worker";
        }
    }
    false
}

/// What re-execution starts: the arguments and environment without credentials, and the
/// credentials.
#[derive(Debug, PartialEq, Eq)]
struct Split {
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    sealed: Vec<Sealed>,
}

/// Takes every credential out of `args` (`--flag VALUE` and `--flag=VALUE`) and `env`. Empty
/// values are dropped as well, sealed as nothing.
fn split(args: &[OsString], env: impl IntoIterator<Item = (OsString, OsString)>) -> Split {
    let mut sealed = Vec::new();
    let mut keep_env = Vec::new();
    for (name, value) in env {
        match Credential::ALL.into_iter().find(|c| name == c.variable()) {
            Some(credential) => push(&mut sealed, credential, Source::Environment, &value),
            None => keep_env.push((name, value)),
        }
    }
    let mut keep_args = Vec::with_capacity(args.len());
    let mut words = args.iter();
    while let Some(word) = words.next() {
        let bytes = word.as_encoded_bytes();
        if bytes == b"--" {
            keep_args.push(word.clone());
            keep_args.extend(words.by_ref().cloned());
            break;
        }
        let found = Credential::ALL.into_iter().find_map(|c| {
            let flag = c.flag().as_bytes();
            if bytes == flag {
                Some((c, None))
            } else {
                let value = bytes.strip_prefix(flag)?.strip_prefix(b"=")?;
                Some((c, Some(OsStr::new(std::str::from_utf8(value).ok()?).to_owned())))
            }
        });
        match found {
            Some((credential, Some(value))) => push(&mut sealed, credential, Source::Flag, &value),
            Some((credential, None)) => match words.next() {
                Some(value) => push(&mut sealed, credential, Source::Flag, value),
                // `--environment-key` with no value: clap reports it.
                None => keep_args.push(word.clone()),
            },
            None => keep_args.push(word.clone()),
        }
    }
    Split { args: keep_args, env: keep_env, sealed }
}

fn push(sealed: &mut Vec<Sealed>, credential: Credential, source: Source, value: &OsStr) {
    let value = value.to_string_lossy().trim().to_owned();
    if !value.is_empty() {
        sealed.push(Sealed { credential, source, value: value.into() });
    }
}

/// The sealed stream: a header, then `credential NUL source NUL value NUL` per credential.
const HEADER: &[u8] = b"mnemo-sealed-credentials-v1\0";
/// Well under a pipe's capacity (64 KiB), so the writer never blocks before the exec.
const MAX_SEALED: usize = 32 * 1024;

fn encode(sealed: &[Sealed]) -> Vec<u8> {
    let mut out = HEADER.to_vec();
    for s in sealed {
        let credential = match s.credential {
            Credential::EnvironmentKey => "environment_key",
            Credential::WorkSecret => "work_secret",
        };
        let source = match s.source {
            Source::Environment => "env",
            Source::Flag => "flag",
        };
        for field in [credential, source, s.value.expose()] {
            out.extend_from_slice(field.as_bytes());
            out.push(0);
        }
    }
    out
}

fn decode(bytes: &[u8]) -> anyhow::Result<Vec<Sealed>> {
    let body = bytes.strip_prefix(HEADER).context("standard input holds no sealed credentials")?;
    let fields: Vec<&[u8]> = body.split(|&b| b == 0).collect();
    let (last, fields) = fields.split_last().context("empty")?;
    anyhow::ensure!(last.is_empty() && fields.len() % 3 == 0, "the sealed credentials are truncated");
    fields
        .chunks(3)
        .map(|f| {
            let credential = match f[0] {
                b"environment_key" => Credential::EnvironmentKey,
                b"work_secret" => Credential::WorkSecret,
                _ => bail!("unknown sealed credential"),
            };
            let source = match f[1] {
                b"env" => Source::Environment,
                b"flag" => Source::Flag,
                _ => bail!("unknown credential source"),
            };
            let value = String::from_utf8(f[2].to_vec()).context("a sealed credential is not UTF-8")?;
            Ok(Sealed { credential, source, value: value.into() })
        })
        .collect()
}

/// Writes the credentials into a pipe on stdin and replaces this process's image; returns only
/// on failure.
fn reexec(plan: &Split) -> anyhow::Error {
    let run = || -> anyhow::Result<std::convert::Infallible> {
        let payload = encode(&plan.sealed);
        anyhow::ensure!(payload.len() <= MAX_SEALED, "the credentials are longer than {MAX_SEALED} bytes");
        let (reader, mut writer) = std::io::pipe().context("create a pipe")?;
        writer.write_all(&payload).context("write to the pipe")?;
        drop(writer);
        rustix::stdio::dup2_stdin(&reader).context("put the pipe on stdin")?;
        drop(reader);
        // The binary's own path keeps the process's name (`ps`, `comm`) `mnemo`; `/proc/self/exe`
        // still reaches a binary replaced on disk since the start (an upgrade in progress).
        let exe = std::env::current_exe()
            .ok()
            .filter(|p| p.is_file())
            .unwrap_or_else(|| std::path::PathBuf::from("/proc/self/exe"));
        let (argv0, rest) = plan.args.split_first().context("no program name in the arguments")?;
        let err = std::process::Command::new(exe)
            .arg0(argv0)
            .args(rest)
            .env_clear()
            .envs(plan.env.iter().map(|(k, v)| (k, v)))
            .env(SEALED_CREDENTIALS_FD, "0")
            .exec();
        Err(err).context("exec")
    };
    match run() {
        Ok(never) => match never {},
        Err(e) => e,
    }
}

/// Reads the sealed credentials from stdin, then puts `/dev/null` there (closing the pipe).
fn receive() -> anyhow::Result<Vec<Sealed>> {
    let mut bytes = Vec::new();
    std::io::stdin().lock().take(MAX_SEALED as u64 + 1).read_to_end(&mut bytes).context("read stdin")?;
    let null = std::fs::File::open("/dev/null").context("open /dev/null")?;
    rustix::stdio::dup2_stdin(&null).context("put /dev/null on stdin")?;
    decode(&bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(words: &[&str]) -> Vec<OsString> {
        words.iter().map(OsString::from).collect()
    }

    fn env(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs.iter().map(|(k, v)| (OsString::from(k), OsString::from(v))).collect()
    }

    fn sealed(credential: Credential, source: Source, value: &str) -> Sealed {
        Sealed { credential, source, value: value.into() }
    }

    #[test]
    fn only_worker_commands_are_sealed() {
        for (args, want) in [
            (&["mnemo", "worker", "poll"][..], true),
            (&["mnemo", "--log-format", "json", "worker", "run"], true),
            (&["mnemo", "--log-format=json", "worker"], true),
            (&["mnemo", "serve", "--environment-key", "x"], false),
            (&["mnemo", "--log-format", "worker", "serve"], false),
            (&["mnemo"], false),
            (&["mnemo", "mount", "worker"], false),
        ] {
            assert_eq!(is_worker(&os(args)), want, "{args:?}");
        }
    }

    #[test]
    fn credentials_leave_the_arguments_and_the_environment() {
        use Credential::*;
        use Source::*;
        /// Arguments and environment in; arguments, variable names and credentials out.
        type Case<'a> = (Vec<&'a str>, Vec<(&'a str, &'a str)>, Vec<&'a str>, Vec<&'a str>, Vec<Sealed>);
        let cases: Vec<Case<'_>> = vec![
            (
                vec!["mnemo", "worker", "poll", "--environment-id", "env_1"],
                vec![("ANTHROPIC_ENVIRONMENT_KEY", "sk-env"), ("PATH", "/bin")],
                vec!["mnemo", "worker", "poll", "--environment-id", "env_1"],
                vec!["PATH"],
                vec![sealed(EnvironmentKey, Environment, "sk-env")],
            ),
            (
                vec!["mnemo", "worker", "poll", "--environment-key", "sk-flag", "--max-idle", "1s"],
                vec![],
                vec!["mnemo", "worker", "poll", "--max-idle", "1s"],
                vec![],
                vec![sealed(EnvironmentKey, Flag, "sk-flag")],
            ),
            (
                vec!["mnemo", "worker", "run", "--work-secret=s3cr=t", "--environment-key=k"],
                vec![("ANTHROPIC_WORK_SECRET", " ws \n"), ("ANTHROPIC_WORK_ID", "work_1")],
                vec!["mnemo", "worker", "run"],
                vec!["ANTHROPIC_WORK_ID"],
                vec![
                    sealed(WorkSecret, Environment, "ws"),
                    sealed(WorkSecret, Flag, "s3cr=t"),
                    sealed(EnvironmentKey, Flag, "k"),
                ],
            ),
            // An empty value leaves the environment too, sealing nothing.
            (
                vec!["mnemo", "worker", "poll"],
                vec![("ANTHROPIC_ENVIRONMENT_KEY", "")],
                vec!["mnemo", "worker", "poll"],
                vec![],
                vec![],
            ),
            // A flag without its value is left for clap to report.
            (
                vec!["mnemo", "worker", "poll", "--environment-key"],
                vec![],
                vec!["mnemo", "worker", "poll", "--environment-key"],
                vec![],
                vec![],
            ),
            // Look-alikes stay.
            (
                vec!["mnemo", "worker", "poll", "--environment-key-file", "/k", "--environment-keys", "x"],
                vec![("ANTHROPIC_ENVIRONMENT_KEY_FILE", "/k"), ("ANTHROPIC_WORK_SECRET_FILE", "/s")],
                vec!["mnemo", "worker", "poll", "--environment-key-file", "/k", "--environment-keys", "x"],
                vec!["ANTHROPIC_ENVIRONMENT_KEY_FILE", "ANTHROPIC_WORK_SECRET_FILE"],
                vec![],
            ),
        ];
        for (args, vars, want_args, want_env, want_sealed) in cases {
            let got = split(&os(&args), env(&vars));
            assert_eq!(got.args, os(&want_args), "{args:?}");
            let names: Vec<_> = got.env.iter().map(|(k, _)| k.to_str().unwrap()).collect();
            assert_eq!(names, want_env, "{args:?}");
            assert_eq!(got.sealed, want_sealed, "{args:?}");
        }
    }

    #[test]
    fn sealed_credentials_round_trip_and_refuse_strangers() {
        let all = vec![
            sealed(Credential::EnvironmentKey, Source::Environment, "sk-env"),
            sealed(Credential::WorkSecret, Source::Flag, "a b=c"),
        ];
        assert_eq!(decode(&encode(&all)).unwrap(), all);
        assert_eq!(decode(HEADER).unwrap(), vec![]);
        for bad in [
            &b""[..],
            b"{\"work\": 1}",
            b"mnemo-sealed-credentials-v1\0environment_key\0env\0",
            b"mnemo-sealed-credentials-v1\0x\0env\0v\0",
        ] {
            assert!(decode(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn debug_never_shows_the_value() {
        let s = sealed(Credential::EnvironmentKey, Source::Flag, "sk-very-secret");
        assert!(!format!("{s:?}").contains("very-secret"));
    }
}
