//! The command line as shipped: `--version`, shell completions, `healthcheck`, and the command
//! lines of the packaging (the systemd units with their example environment files, and the
//! Dockerfile), run through the real binary so that a renamed flag or variable breaks a test.

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

/// The repository's root.
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(rel: &str) -> String {
    let path = repo().join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// The binary with an empty environment, so nothing from the developer's shell (an
/// `ANTHROPIC_*` or `MNEMO_*` variable) takes part.
fn bare_mnemo() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mnemo"));
    cmd.env_clear().env("RUST_LOG", "warn");
    cmd
}

fn text(out: &[u8]) -> String {
    String::from_utf8_lossy(out).into_owned()
}

#[test]
fn version_names_the_version_and_the_commit() {
    let out = common::mnemo().arg("--version").output().unwrap();
    assert!(out.status.success());
    let stdout = text(&out.stdout);
    // build.rs sets MNEMO_GIT_COMMIT for every target of the package, these tests included.
    let commit = env!("MNEMO_GIT_COMMIT");
    assert_eq!(stdout, format!("mnemo {} (git {commit})\n", env!("CARGO_PKG_VERSION")));
    let hash = commit.strip_suffix("-dirty").unwrap_or(commit);
    let from_git = hash.len() >= 7 && hash.bytes().all(|b| b.is_ascii_hexdigit());
    assert!(
        commit == "unknown" || from_git || std::env::var_os("MNEMO_GIT_COMMIT").is_some(),
        "not a commit: {commit:?}"
    );
    assert_eq!(text(&common::mnemo().arg("-V").output().unwrap().stdout), stdout);
}

fn completions(shell: &str) -> String {
    let out = common::mnemo().args(["completions", shell]).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout)
}

#[test]
fn completion_scripts_cover_the_subcommands() {
    let bash = completions("bash");
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("mnemo.bash");
    std::fs::write(&script, &bash).unwrap();
    let check = Command::new("bash").arg("-n").arg(&script).output().unwrap();
    assert!(check.status.success(), "bash -n: {}", text(&check.stderr));
    assert!(bash.contains("complete -F _mnemo"), "{bash}");

    let zsh = completions("zsh");
    assert!(zsh.starts_with("#compdef mnemo"), "{zsh}");
    let fish = completions("fish");
    assert!(fish.contains("complete -c mnemo"), "{fish}");
    for script in [&bash, &zsh, &fish] {
        for word in ["serve", "worker", "mount", "env-key", "completions", "healthcheck", "database", "on-work"] {
            assert!(script.contains(word), "{word} missing from\n{script}");
        }
    }

    let out = common::mnemo().args(["completions", "tcsh"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "an unknown shell is a usage error");
}

/// A systemd unit's settings, in order (a key may repeat).
struct Unit {
    settings: Vec<(String, String)>,
}

impl Unit {
    fn load(rel: &str) -> Self {
        let mut settings = Vec::new();
        let mut continued = String::new();
        for line in read(rel).lines() {
            let line = line.trim();
            if line.starts_with('#') || line.starts_with(';') || line.starts_with('[') || line.is_empty() {
                continue;
            }
            if let Some(head) = line.strip_suffix('\\') {
                continued.push_str(head);
                continue;
            }
            let full = std::mem::take(&mut continued) + line;
            let (key, value) = full.split_once('=').unwrap_or_else(|| panic!("{rel}: not a setting: {full}"));
            settings.push((key.trim().to_owned(), value.trim().to_owned()));
        }
        Self { settings }
    }

    fn all(&self, key: &str) -> Vec<&str> {
        self.settings.iter().filter(|(k, _)| k == key).map(|(_, v)| v.as_str()).collect()
    }

    fn one(&self, key: &str) -> &str {
        match self.all(key)[..] {
            [v] => v,
            ref all => panic!("{key} is set {} times", all.len()),
        }
    }

    /// The arguments of the one `ExecStart`, after the binary's path.
    fn mnemo_args(&self) -> Vec<String> {
        let exec = self.one("ExecStart");
        assert!(!exec.contains(['"', '\'', '$', '%']), "keep ExecStart free of quoting and expansion: {exec}");
        let mut words = exec.split_whitespace();
        assert_eq!(words.next(), Some("/usr/local/bin/mnemo"), "{exec}");
        words.map(str::to_owned).collect()
    }

    /// The environment the service gets: `Environment=` lines, then the example of each
    /// `EnvironmentFile=` (its values win, as in systemd). Also every variable the files only
    /// mention in a comment, for the name check.
    fn environment(&self) -> (BTreeMap<String, String>, Vec<String>) {
        let mut env = BTreeMap::new();
        for assignment in self.all("Environment") {
            let (k, v) = assignment.split_once('=').expect("NAME=VALUE");
            env.insert(k.to_owned(), v.to_owned());
        }
        let mut mentioned: Vec<String> = env.keys().cloned().collect();
        for file in self.all("EnvironmentFile") {
            let name = Path::new(file.trim_start_matches('-')).file_name().unwrap().to_str().unwrap().to_owned();
            assert!(file.starts_with("/etc/mnemo/"), "{file}");
            let example = read(&format!("packaging/systemd/{name}.example"));
            for line in example.lines() {
                let (commented, line) = match line.strip_prefix('#') {
                    Some(rest) => (true, rest),
                    None => (false, line),
                };
                let Some((k, v)) = line.split_once('=') else { continue };
                if k.is_empty() || !k.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_') {
                    continue;
                }
                mentioned.push(k.to_owned());
                if !commented {
                    env.insert(k.to_owned(), v.to_owned());
                }
            }
        }
        (env, mentioned)
    }
}

/// Every variable in `names` is one that `mnemo ARGS` reads through clap, as its help shows.
fn assert_read_by(args: &[String], names: &[String]) {
    let out = bare_mnemo().args(args).arg("--help").output().unwrap();
    assert!(out.status.success(), "mnemo {args:?} --help: {}", text(&out.stderr));
    let help = text(&out.stdout);
    for name in names {
        // Logging's filter is read by tracing, not by clap.
        if name == "RUST_LOG" {
            continue;
        }
        assert!(
            help.contains(&format!("[env: {name}]")) || help.contains(&format!("[env: {name}=")),
            "`mnemo {}` reads no variable {name}",
            args.join(" ")
        );
    }
}

/// The packaging's deployment paths and addresses, moved into `tmp` and onto a free port, so
/// the command lines can run here with every flag and variable name left as shipped.
fn localize(value: &str, tmp: &Path) -> String {
    let tmp = tmp.display();
    value
        // The worker's state root does not exist here, so the worker stops right after parsing.
        .replace("/var/lib/mnemo-worker", &format!("{tmp}/absent-worker-root"))
        .replace("/var/lib/mnemo", &tmp.to_string())
        .replace("/data/", &format!("{tmp}/"))
        .replace("0.0.0.0:8080", "127.0.0.1:0")
        .replace("127.0.0.1:8080", "127.0.0.1:0")
}

/// A `mnemo serve` started from shipped arguments and environment; its address once ready.
fn start_serve(args: &[String], env: &BTreeMap<String, String>) -> (Child, String) {
    let mut child = bare_mnemo().args(args).envs(env).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let Some(addr) = line.trim().strip_prefix("listening on http://").map(str::to_owned) else {
        let mut stderr = String::new();
        child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
        panic!("mnemo {} did not start: {line:?}\n{stderr}", args.join(" "));
    };
    (child, addr)
}

fn stop(mut child: Child) {
    common::signal(&child, "-TERM");
    assert!(child.wait().unwrap().success(), "SIGTERM stops the server cleanly");
}

fn healthcheck(url: &str) -> Output {
    bare_mnemo().args(["healthcheck", "--timeout", "5", url]).output().unwrap()
}

#[test]
fn the_serve_unit_runs_as_written() {
    let unit = Unit::load("packaging/systemd/mnemo-serve.service");
    let args = unit.mnemo_args();
    assert_eq!(args, ["serve"]);
    let (env, mentioned) = unit.environment();
    assert_read_by(&args, &mentioned);
    assert_eq!(unit.one("KillSignal"), "SIGTERM");
    // SIGTERM gives in-flight requests 30 s (SHUTDOWN_GRACE in src/command/serve.rs).
    assert!(unit.one("TimeoutStopSec").parse::<u64>().unwrap() > 30);
    assert_eq!(unit.one("StateDirectory"), "mnemo");
    assert!(env["MNEMO_DATABASE"].starts_with("sqlite:///var/lib/mnemo/"), "the database lives in StateDirectory");

    let dir = tempfile::tempdir().unwrap();
    let env: BTreeMap<String, String> = env.iter().map(|(k, v)| (k.clone(), localize(v, dir.path()))).collect();
    let (server, addr) = start_serve(&args, &env);
    assert!(dir.path().join("mnemo.sqlite").exists(), "the database is where MNEMO_DATABASE says");
    let out = healthcheck(&format!("http://{addr}/healthz"));
    assert!(out.status.success(), "{}", text(&out.stderr));
    stop(server);
}

#[test]
fn the_worker_unit_parses_and_waits_long_enough_to_drain() {
    let unit = Unit::load("packaging/systemd/mnemo-worker.service");
    let args = unit.mnemo_args();
    assert_eq!(args, ["worker", "poll"]);
    let (env, mentioned) = unit.environment();
    assert_read_by(&args, &mentioned);
    assert_eq!(unit.one("KillSignal"), "SIGTERM");
    assert_eq!(unit.one("KillMode"), "mixed", "SIGTERM must reach mnemo, not the tool call it drains");
    // The drain: the tool call in flight, then the final sync and the flush.
    let drain = mnemo_worker::tools::TOOL_CALL_TIMEOUT + 2 * mnemo_sync::TEARDOWN_BOUND;
    let timeout = Duration::from_secs(unit.one("TimeoutStopSec").parse().unwrap());
    assert!(timeout > drain, "TimeoutStopSec={timeout:?} does not cover the drain ({drain:?})");
    for dir in ["ANTHROPIC_WORKDIR", "MNEMO_WORKER_STATE_DIR"] {
        let state = unit.one("StateDirectory").split_whitespace().map(|d| format!("/var/lib/{d}")).collect::<Vec<_>>();
        assert!(state.contains(&env[dir]), "{dir}={} is not a StateDirectory", env[dir]);
    }

    // Every flag and value is accepted: the worker gets as far as checking its workdir (exit 1,
    // not clap's usage error 2).
    let dir = tempfile::tempdir().unwrap();
    let env: BTreeMap<String, String> = env.iter().map(|(k, v)| (k.clone(), localize(v, dir.path()))).collect();
    let out = bare_mnemo().args(&args).envs(&env).output().unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("absent-worker-root/workspace is not a directory"), "{stderr}");
}

/// The Dockerfile's instructions, continuation lines joined.
fn dockerfile() -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut continued = String::new();
    for line in read("Dockerfile").lines() {
        let line = line.trim();
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        if let Some(head) = line.strip_suffix('\\') {
            continued.push_str(head);
            continue;
        }
        let full = std::mem::take(&mut continued) + line;
        let (op, rest) = full.split_once(' ').unwrap();
        out.push((op.to_owned(), rest.trim().to_owned()));
    }
    out
}

fn exec_form(json: &str) -> Vec<String> {
    serde_json::from_str(json).unwrap_or_else(|e| panic!("not an exec-form array ({e}): {json}"))
}

#[test]
fn the_docker_image_runs_as_written_and_its_healthcheck_tells_up_from_down() {
    let steps = dockerfile();
    let only = |op: &str| -> &str {
        match steps.iter().filter(|(o, _)| o == op).map(|(_, r)| r.as_str()).collect::<Vec<_>>()[..] {
            [r] => r,
            ref all => panic!("{op} appears {} times", all.len()),
        }
    };
    // The builder's toolchain is the repository's.
    let toolchain = read("rust-toolchain.toml");
    let channel = toolchain.lines().find_map(|l| l.strip_prefix("channel = ")).unwrap().trim_matches('"');
    let froms: Vec<&str> = steps.iter().filter(|(o, _)| o == "FROM").map(|(_, r)| r.as_str()).collect();
    let rust: Vec<&&str> = froms.iter().filter(|f| f.starts_with("rust:")).collect();
    assert!(!rust.is_empty());
    for from in rust {
        assert!(from.starts_with(&format!("rust:{channel}-")), "{from} is not toolchain {channel}");
    }
    assert_eq!(only("USER"), "mnemo", "the server does not run as root");
    assert_eq!(only("VOLUME"), "/data");
    assert_eq!(only("EXPOSE"), "8080");
    assert!(steps.iter().any(|(o, r)| o == "ARG" && r.starts_with("MNEMO_GIT_COMMIT")));

    let entrypoint = exec_form(only("ENTRYPOINT"));
    assert_eq!(entrypoint, ["mnemo"]);
    let args = exec_form(only("CMD"));
    assert_eq!(args[..], ["serve", "--listen", "0.0.0.0:8080", "--database", "sqlite:///data/mnemo.sqlite"]);
    let probe = only("HEALTHCHECK");
    let probe = exec_form(probe.split_once("CMD ").expect("HEALTHCHECK ... CMD [...]").1);
    assert_eq!(probe[..2], ["mnemo", "healthcheck"]);

    let dir = tempfile::tempdir().unwrap();
    let args: Vec<String> = args.iter().map(|a| localize(a, dir.path())).collect();
    let (server, addr) = start_serve(&args, &BTreeMap::new());
    assert!(dir.path().join("mnemo.sqlite").exists());
    let probe: Vec<String> = probe[1..].iter().map(|a| a.replace("127.0.0.1:8080", &addr)).collect();
    let up = bare_mnemo().args(&probe).output().unwrap();
    assert!(up.status.success(), "{}", text(&up.stderr));
    assert!(up.stdout.is_empty() && up.stderr.is_empty(), "a healthy check prints nothing");

    let missing = healthcheck(&format!("http://{addr}/no-such-endpoint"));
    assert_eq!(missing.status.code(), Some(1));
    let stderr = text(&missing.stderr);
    assert!(stderr.contains("answered 404 Not Found"), "{stderr}");

    stop(server);
    let down = bare_mnemo().args(&probe).output().unwrap();
    assert_eq!(down.status.code(), Some(1));
    let stderr = text(&down.stderr);
    assert!(stderr.starts_with(&format!("error: unhealthy: cannot connect to http://{addr}/healthz (")), "{stderr}");
    assert!(stderr.contains("is `mnemo serve` listening there?"), "{stderr}");
}

#[test]
fn healthcheck_refuses_what_is_not_a_url() {
    let out = healthcheck("localhost:8080/healthz");
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("is not an http:// or https:// URL"), "{stderr}");
}

/// Every line of `stderr` is one JSON object (`--log-format json`), and none holds a
/// credential: an API key (`sk-…`, mnemo's own `sk-mnemo-…`), an environment key
/// (`sk-mnemo-env-…`), a sessions token (`sk-mnemo-sess-…`) or a work item's `secret` (base64url
/// JSON whose encoding starts `eyJzZXNzaW9uc190b2tlbiI6`), nor a database password.
fn json_logs_without_credentials(what: &str, stderr: &str, secrets: &[&str]) -> usize {
    let mut lines = 0;
    for line in stderr.lines().filter(|l| !l.trim().is_empty()) {
        let parsed: Result<serde_json::Value, _> = serde_json::from_str(line);
        assert!(parsed.is_ok_and(|v| v.is_object()), "{what}: a log line that is not JSON: {line}");
        lines += 1;
    }
    for secret in ["sk-mnemo-", "eyJzZXNzaW9uc190b2tlbiI6", "hunter2"].iter().chain(secrets) {
        assert!(!stderr.contains(secret), "{what} logged a credential ({secret}…):\n{stderr}");
    }
    lines
}

#[test]
fn every_command_logs_json_when_asked_and_never_a_credential() {
    let log = |cmd: &mut Command| {
        cmd.args(["--log-format", "json"]).env("RUST_LOG", "trace");
    };
    // The quick start mints every kind of credential — an API key, an environment key, sessions
    // tokens in work secrets — and serves, polls and syncs with them, all in one process.
    let mut quickstart = common::mnemo();
    log(&mut quickstart);
    let out = quickstart.args(["quickstart", "--exit", "--listen", "127.0.0.1:0"]).output().unwrap();
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{}\n{stderr}", text(&out.stdout));
    let lines = json_logs_without_credentials("quickstart", &stderr, &[]);
    assert!(lines > 100, "trace logging was on, yet only {lines} lines");
    assert!(
        stderr.lines().any(|l| l.contains("\"message\":\"answered\"") && l.contains("\"request_id\":\"req_")),
        "request lines carry their id: {stderr}"
    );

    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("db.sqlite").display());
    let backup = dir.path().join("backup.sqlite");
    let runs: Vec<(&str, Vec<String>)> = vec![
        ("db check (SQLite)", vec!["db".into(), "check".into(), "--database".into(), db.clone()]),
        (
            "db backup",
            vec!["db".into(), "backup".into(), "--database".into(), db.clone(), backup.display().to_string()],
        ),
        (
            "db check (PostgreSQL, unreachable)",
            vec!["db".into(), "check".into(), "--database".into(), "postgres://mnemo:hunter2@127.0.0.1:1/m".into()],
        ),
        (
            "healthcheck",
            vec!["healthcheck".into(), "--timeout".into(), "2".into(), "http://127.0.0.1:1/healthz".into()],
        ),
        ("completions", vec!["completions".into(), "bash".into()]),
    ];
    // A database to back up and check. (Given no keys, a first start prints the ones it mints on
    // stderr, once, by design, and the console's setup link for the first admin: those banners
    // are not log lines, so this server is given both keys and no console.)
    {
        let mut serve = common::mnemo();
        log(&mut serve);
        let mut child = serve
            .args([
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--database",
                &db,
                "--api-key",
                CLI_LOG_KEY,
                "--admin-key",
                CLI_LOG_ADMIN_KEY,
                "--no-console",
                "--webhook-allow-private",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        assert!(line.starts_with("listening on "), "{line}");
        let base = line.trim().strip_prefix("listening on ").unwrap().to_owned();
        // A webhook endpoint (nobody listens there) and a change it is sent: neither the server
        // nor the command logs its signing secret.
        let secret = webhook_attempted(&base, CLI_LOG_KEY, &log);
        let key = secret.strip_prefix("whsec_").unwrap().to_owned();
        common::signal(&child, "-TERM");
        assert!(child.wait().unwrap().success());
        let mut stderr = String::new();
        child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
        json_logs_without_credentials("serve", &stderr, &[CLI_LOG_KEY, CLI_LOG_ADMIN_KEY, "whsec_", &key]);
        assert!(stderr.contains("webhook attempt failed; will retry"), "the attempt was made: {stderr}");
    }
    for (what, args) in runs {
        let mut cmd = common::mnemo();
        log(&mut cmd);
        let out = cmd.args(&args).output().unwrap();
        json_logs_without_credentials(what, &text(&out.stderr), &[]);
        if what.ends_with("unreachable)") || what == "healthcheck" {
            assert!(!out.status.success(), "{what} should fail");
        } else {
            assert!(out.status.success(), "{what}: {}", text(&out.stderr));
        }
    }
}

/// The API key of the server whose logs are checked (operator keys have at least 32 characters).
const CLI_LOG_KEY: &str = "sk-cli-log-test-0123456789abcdefghij";
const CLI_LOG_ADMIN_KEY: &str = "sk-cli-log-admin-0123456789abcdefghij";

/// Registers a webhook endpoint on the server at `base` with `mnemo webhook add` (nobody listens
/// at its URL), makes a change it is sent, and waits until the server attempted it; every
/// `mnemo webhook` run logs JSON at trace without the secret. Returns the secret.
fn webhook_attempted(base: &str, api_key: &str, log: &dyn Fn(&mut Command)) -> String {
    let webhook = |args: &[&str]| {
        let mut cmd = common::mnemo();
        log(&mut cmd);
        let out = cmd.arg("webhook").args(args).args(["--base-url", base, "--api-key", api_key]).output().unwrap();
        assert!(out.status.success(), "webhook {args:?}: {}", text(&out.stderr));
        (text(&out.stdout), text(&out.stderr))
    };
    let (added, logs) = webhook(&["add", "http://127.0.0.1:1/hook", "--events", "memory_store.created"]);
    let mut lines = added.lines();
    let (id, secret) = (lines.next().unwrap().to_owned(), lines.next().unwrap().to_owned());
    assert!(secret.starts_with("whsec_"), "{added}");
    let key = secret.strip_prefix("whsec_").unwrap();
    json_logs_without_credentials("webhook add", &logs, &["whsec_", key, api_key]);
    let (shown, logs) = webhook(&["secret", &id]);
    assert_eq!(shown.trim(), secret);
    json_logs_without_credentials("webhook secret", &logs, &["whsec_", key, api_key]);

    let addr = base.strip_prefix("http://").unwrap();
    let body = r#"{"name": "hooked"}"#;
    let mut conn = std::net::TcpStream::connect(addr).unwrap();
    let request = format!(
        "POST /v1/memory_stores HTTP/1.1\r\nhost: {addr}\r\nx-api-key: {api_key}\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    std::io::Write::write_all(&mut conn, request.as_bytes()).unwrap();
    let mut answer = String::new();
    conn.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let attempted = common::wait_until(Duration::from_secs(20), || {
        let (listed, logs) = webhook(&["deliveries", &id]);
        json_logs_without_credentials("webhook deliveries", &logs, &["whsec_", key, api_key]);
        listed.contains("attempts=1") && listed.contains("last=could not connect")
    });
    assert!(attempted, "the delivery was attempted: {}", webhook(&["deliveries", &id]).0);
    secret
}
