//! Tidy tests: the promises of `ARCHITECTURE.md` that a program can check, checked.
//!
//! They read the repository's files with `std` only (no build of anything they look at), so a
//! failure costs seconds and names the file, the line and what to do. Each rule is a table here;
//! a rule that no longer holds for a good reason is changed here, in the same commit as
//! `ARCHITECTURE.md`, with its reason beside it.
//!
//! - every crate is in `ARCHITECTURE.md`'s code map and in `crates/README.md`, and both name only
//!   crates that exist; `ARCHITECTURE.md` stays a map (a bounded number of lines);
//! - every crate's root says what the crate is (`//!`);
//! - each crate's dependencies stay within its allowlist, and never cross its boundary;
//! - only the crates whose job it is touch the filesystem;
//! - a backend crate holds no state name, event type or product constant: every decision is in
//!   `mnemo_store::rules` and `mnemo_store::ops`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("the workspace root")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// The workspace's crates: every folder under `crates/` with a `Cargo.toml`.
fn crates() -> BTreeSet<String> {
    let dir = root().join("crates");
    let mut out = BTreeSet::new();
    for entry in std::fs::read_dir(&dir).expect("read crates/") {
        let path = entry.expect("an entry of crates/").path();
        if path.join("Cargo.toml").is_file() {
            out.insert(path.file_name().expect("a crate folder's name").to_string_lossy().into_owned());
        }
    }
    assert!(out.len() > 5, "found only {out:?} under {}", dir.display());
    out
}

/// The `.rs` files under `dir`, recursively, in a stable order.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(dir) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                todo.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

fn relative(path: &Path) -> String {
    path.strip_prefix(root()).unwrap_or(path).display().to_string()
}

/// Fails with every finding, one per line, and what to do about them.
fn report(findings: &[String], fix: &str) {
    assert!(findings.is_empty(), "\n{}\n\nFix: {fix}\n", findings.join("\n"));
}

// ---------------------------------------------------------------------------------------------
// The code map

/// The crates named in backticks on the `### ` headings of `ARCHITECTURE.md`'s code map.
fn code_map_crates(architecture: &str) -> BTreeSet<String> {
    let start = architecture.find("\n## Code map").expect("ARCHITECTURE.md has a `## Code map` section");
    let section = &architecture[start + 1..];
    let section = section[3..].find("\n## ").map_or(section, |end| &section[..end + 3]);
    section
        .lines()
        .filter(|l| l.starts_with("### "))
        .flat_map(|l| l.split('`').skip(1).step_by(2).map(str::to_owned).collect::<Vec<_>>())
        .collect()
}

/// The crates named at the start of a list item of `crates/README.md` (``- `name` — …``).
fn readme_crates(readme: &str) -> BTreeSet<String> {
    readme
        .lines()
        .filter_map(|l| l.strip_prefix("- `"))
        .filter_map(|l| l.split('`').next())
        .map(str::to_owned)
        .collect()
}

fn same_crates(listed: &BTreeSet<String>, file: &str, how: &str) {
    let crates = crates();
    let mut findings = Vec::new();
    for missing in crates.difference(listed) {
        findings.push(format!("{file}: crates/{missing} is not listed"));
    }
    for stale in listed.difference(&crates) {
        findings.push(format!("{file}: lists `{stale}`, which is not a folder of crates/ (renamed or removed?)"));
    }
    report(&findings, how);
}

#[test]
fn every_crate_is_in_the_code_map() {
    let listed = code_map_crates(&read(&root().join("ARCHITECTURE.md")));
    same_crates(
        &listed,
        "ARCHITECTURE.md",
        "give each crate a `### `name`` heading under `## Code map` saying what it owns and, on an \
         *Invariant:* line, what it must never do; remove headings of crates that are gone.",
    );
}

/// How long `ARCHITECTURE.md` may grow: it is a map of boundaries and invariants, not a record of
/// how things work (that is what module docs are for).
const ARCHITECTURE_MAX_LINES: usize = 160;

#[test]
fn architecture_md_stays_a_map() {
    let lines = read(&root().join("ARCHITECTURE.md")).lines().count();
    assert!(
        lines <= ARCHITECTURE_MAX_LINES,
        "ARCHITECTURE.md has {lines} lines, more than {ARCHITECTURE_MAX_LINES}.\n\nFix: keep what each crate owns and \
         its invariants there, and move how it works into the `//!` docs of the module that does it."
    );
}

#[test]
fn every_crate_is_in_the_crates_readme() {
    let listed = readme_crates(&read(&root().join("crates/README.md")));
    same_crates(
        &listed,
        "crates/README.md",
        "add a line ``- `name` — what it is`` per crate to crates/README.md; remove lines of crates \
         that are gone.",
    );
}

#[test]
fn the_code_map_readers_see_what_they_should() {
    let map = "# A\n## Code map\n### `a`\n### `b`, `c`\ntext `d`\n## Cross-cutting\n### `e`\n";
    assert_eq!(code_map_crates(map), ["a", "b", "c"].map(String::from).into());
    let readme = "# Crates\nSee `x`.\n- `a` — one.\n- `b-c` — two.\n  - nested `d`\n";
    assert_eq!(readme_crates(readme), ["a", "b-c"].map(String::from).into());
}

#[test]
fn every_crate_root_says_what_the_crate_is() {
    let mut findings = Vec::new();
    for name in crates() {
        let src = root().join("crates").join(&name).join("src");
        let lib = if src.join("lib.rs").is_file() { src.join("lib.rs") } else { src.join("main.rs") };
        if !read(&lib).trim_start().starts_with("//!") {
            findings.push(format!("{}: does not start with a `//!` crate doc", relative(&lib)));
        }
    }
    report(&findings, "open the crate root with `//!` lines saying what the crate owns and what it must never do.");
}

// ---------------------------------------------------------------------------------------------
// Dependencies

/// The packages a `Cargo.toml` depends on outside tests: `[dependencies]`,
/// `[build-dependencies]` and their `[target.….dependencies]` forms, by package name (a renamed
/// dependency counts as the package it renames).
fn normal_dependencies(manifest: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut in_deps = false;
    for line in manifest.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        if let Some(header) = line.strip_prefix('[') {
            let header = header.trim_end_matches(']').trim();
            let last = header.rsplit('.').next().unwrap_or(header);
            // `[dependencies.foo]` names one dependency in its header.
            if let Some(name) = header.strip_prefix("dependencies.") {
                out.insert(name.to_owned());
                in_deps = false;
                continue;
            }
            in_deps = matches!(last, "dependencies" | "build-dependencies");
            continue;
        }
        if !in_deps || line.is_empty() {
            continue;
        }
        let Some((key, value)) = line.split_once('=') else { continue };
        let key = key.trim().split('.').next().unwrap_or("").trim_matches('"');
        // `{ package = "real", … }`: the inline table's `package` key, not the word anywhere.
        let package = value
            .trim()
            .strip_prefix('{')
            .into_iter()
            .flat_map(|table| table.split(','))
            .filter_map(|pair| pair.split_once('='))
            .find(|(k, _)| k.trim() == "package")
            .and_then(|(_, v)| v.split('"').nth(1))
            .unwrap_or(key);
        out.insert(package.to_owned());
    }
    out
}

/// A crate's dependencies outside tests: what it may use, and what would break its boundary.
struct Boundary {
    krate: &'static str,
    /// Every normal dependency it has; a new one is added here on purpose, in review.
    allowed: &'static [&'static str],
    /// Dependencies that would cross its boundary in `ARCHITECTURE.md`: never allowed.
    never: &'static [&'static str],
}

const DATABASE_DRIVERS: &[&str] = &["rusqlite", "tokio-postgres", "deadpool-postgres", "tokio-postgres-rustls"];
const HTTP_SERVER: &[&str] = &["axum", "hyper", "hyper-util", "tower", "tower-http", "utoipa-axum", "askama"];
const SERVER_SIDE: &[&str] = &[
    "mnemo-store",
    "mnemo-search",
    "mnemo-store-sqlite",
    "mnemo-store-postgres",
    "mnemo-store-tests",
    "mnemo-server",
    "mnemo-http",
    "mnemo-console",
];
const HOST_SIDE: &[&str] = &["mnemo-client", "mnemo-sync", "mnemo-worker", "mnemo-export", "mnemo-mcp"];
/// The crates that tie code to one particular database (the conformance suite opens both).
const STORE_BACKENDS: &[&str] = &["mnemo-store-sqlite", "mnemo-store-postgres", "mnemo-store-tests"];

fn boundaries() -> Vec<Boundary> {
    // `never` lists are built from the groups above; each `allowed` is the crate's
    // `[dependencies]` as reviewed.
    fn leak<T>(v: Vec<T>) -> &'static [T] {
        Vec::leak(v)
    }
    fn all(groups: &[&[&'static str]]) -> &'static [&'static str] {
        leak(groups.concat())
    }
    let backends_never = all(&[
        HTTP_SERVER,
        &["reqwest", "mnemo-server", "mnemo-console", "mnemo-model", "mnemo-store-tests", "anyhow"],
        HOST_SIDE,
    ]);
    vec![
        Boundary {
            krate: "mnemo-api",
            allowed: &[
                "serde",
                "serde_json",
                "serde_path_to_error",
                "chrono",
                "rand",
                "sha2",
                "hex",
                "unicode-normalization",
                "unicode-properties",
                "thiserror",
                "base64",
                "utoipa",
                "url",
            ],
            // The wire types: no framework, driver, runtime or other mnemo crate.
            never: all(&[
                DATABASE_DRIVERS,
                HTTP_SERVER,
                &["reqwest", "tokio", "anyhow", "mnemo-model"],
                SERVER_SIDE,
                HOST_SIDE,
            ]),
        },
        Boundary {
            krate: "mnemo-store",
            allowed: &[
                "metrics",
                "mnemo-api",
                "async-trait",
                "thiserror",
                "chrono",
                "serde",
                "serde_json",
                "base64",
                "hex",
                "sha2",
                // `Signal` channels (`tokio::sync::broadcast`).
                "tokio",
                // A lapsed work lease is logged where the operation applies it.
                "tracing",
            ],
            never: all(&[
                DATABASE_DRIVERS,
                HTTP_SERVER,
                STORE_BACKENDS,
                &["reqwest", "anyhow", "mnemo-server", "mnemo-console"],
                HOST_SIDE,
            ]),
        },
        Boundary {
            krate: "mnemo-search",
            // rustix: a writing thread's own nice value (`stand_back`, a safe wrapper of setpriority).
            allowed: &["mnemo-store", "memchr", "rustix", "tantivy", "thiserror", "tracing"],
            // A derived index over what a backend hands it: no database, HTTP or other mnemo crate.
            never: all(&[
                DATABASE_DRIVERS,
                HTTP_SERVER,
                STORE_BACKENDS,
                &["reqwest", "anyhow", "mnemo-server", "mnemo-console"],
                HOST_SIDE,
            ]),
        },
        Boundary {
            krate: "mnemo-store-sqlite",
            allowed: &[
                "metrics",
                "mnemo-api",
                "mnemo-store",
                // The search index SQLite keeps beside its file.
                "mnemo-search",
                "async-trait",
                "rusqlite",
                "tokio",
                "thiserror",
                "chrono",
                "tracing",
                "serde",
                "serde_json",
            ],
            never: leak([backends_never, &["mnemo-store-postgres", "tokio-postgres", "deadpool-postgres"]].concat()),
        },
        Boundary {
            krate: "mnemo-store-postgres",
            allowed: &[
                "mnemo-api",
                "mnemo-store",
                // This replica's search index.
                "mnemo-search",
                "async-trait",
                "chrono",
                "deadpool-postgres",
                "form_urlencoded",
                "futures",
                "serde",
                "serde_json",
                "thiserror",
                "tokio",
                "tokio-postgres",
                "tokio-postgres-rustls",
                "rustls",
                "webpki-roots",
                "tracing",
                "metrics",
            ],
            never: leak([backends_never, &["mnemo-store-sqlite", "rusqlite"]].concat()),
        },
        Boundary {
            krate: "mnemo-store-tests",
            allowed: &[
                "async-trait",
                "chrono",
                "futures",
                "mnemo-api",
                "mnemo-store",
                "mnemo-store-sqlite",
                "mnemo-store-postgres",
                "proptest",
                "rand",
                "serde_json",
                "tempfile",
                "tokio",
                // A fresh schema per test on PostgreSQL.
                "tokio-postgres",
            ],
            never: all(&[HTTP_SERVER, &["reqwest", "mnemo-server", "mnemo-console", "anyhow"], HOST_SIDE]),
        },
        Boundary {
            krate: "mnemo-server",
            allowed: &[
                "metrics",
                "base64",
                "hmac",
                "rand",
                // The webhook sender.
                "reqwest",
                "sha2",
                "async-trait",
                "futures",
                // A dream's glob and grep tools (run in the server, against the store).
                "globset",
                "grep-matcher",
                "grep-regex",
                "governor",
                "axum",
                "chrono",
                "mnemo-api",
                "mnemo-console",
                "mnemo-http",
                "mnemo-model",
                // People's bearer tokens of the identity provider.
                "mnemo-oidc",
                "mnemo-store",
                "serde",
                "serde_json",
                "serde_urlencoded",
                "form_urlencoded",
                "http-body",
                "hyper",
                "hyper-util",
                "thiserror",
                "tokio",
                "tower",
                "tracing",
                "url",
                "utoipa",
                "utoipa-axum",
            ],
            // Any `Store`, no particular database; the client only as a dev-dependency.
            never: all(&[DATABASE_DRIVERS, STORE_BACKENDS, &["anyhow"], HOST_SIDE]),
        },
        Boundary {
            krate: "mnemo-http",
            allowed: &["axum", "chrono", "form_urlencoded", "mnemo-api", "mnemo-store", "utoipa"],
            // Parsing only: no store backend, no client, no other front end.
            never: all(&[
                DATABASE_DRIVERS,
                STORE_BACKENDS,
                &["reqwest", "anyhow", "mnemo-server", "mnemo-console", "mnemo-model"],
                HOST_SIDE,
            ]),
        },
        Boundary {
            krate: "mnemo-console",
            allowed: &[
                // People's passwords (argon2id), hashed where they are typed.
                "argon2",
                "askama",
                "async-trait",
                "axum",
                "chrono",
                "form_urlencoded",
                "futures",
                "hex",
                "mnemo-api",
                "mnemo-http",
                // Single sign-on (`/console/oidc/…`).
                "mnemo-oidc",
                "mnemo-store",
                "serde",
                "serde_json",
                "serde_urlencoded",
                "sha2",
                "similar",
                "subtle",
                "thiserror",
                "tokio",
                "tracing",
            ],
            // The server reaches it through `Hooks`, not the other way round.
            never: all(&[DATABASE_DRIVERS, STORE_BACKENDS, &["reqwest", "mnemo-server", "anyhow"], HOST_SIDE]),
        },
        Boundary {
            krate: "mnemo-oidc",
            allowed: &[
                "base64",
                // JWS verification (on ring).
                "jsonwebtoken",
                // `Secret` for the client secret.
                "mnemo-api",
                "rand",
                // Discovery, JWKS, the code exchange, userinfo.
                "reqwest",
                "serde",
                "serde_json",
                "sha2",
                "thiserror",
                "tokio",
                "tracing",
                "url",
            ],
            // A protocol library: knows nothing of people, roles, the store or HTTP routes.
            never: all(&[DATABASE_DRIVERS, HTTP_SERVER, &["anyhow"], SERVER_SIDE, HOST_SIDE]),
        },
        Boundary {
            krate: "mnemo-model",
            allowed: &[
                "async-trait",
                // Optional: `FakeModelServer` (feature `testing`).
                "axum",
                "bytes",
                "futures",
                "httpdate",
                // `Secret` for the provider keys.
                "mnemo-api",
                "rand",
                "reqwest",
                "serde",
                "serde_json",
                "thiserror",
                "tokio",
                "toml",
                "tracing",
            ],
            // Knows nothing of sessions or the store.
            never: all(&[DATABASE_DRIVERS, &["anyhow"], SERVER_SIDE, HOST_SIDE]),
        },
        Boundary {
            krate: "mnemo-client",
            allowed: &[
                "futures",
                // `stream.rs`: finding the memory stream's line ends.
                "memchr",
                "mnemo-api",
                "rand",
                "reqwest",
                "serde",
                "serde_json",
                "thiserror",
                "tokio",
                "tracing",
            ],
            never: all(&[
                DATABASE_DRIVERS,
                HTTP_SERVER,
                &["anyhow", "mnemo-sync", "mnemo-worker", "mnemo-export"],
                SERVER_SIDE,
            ]),
        },
        Boundary {
            krate: "mnemo-sync",
            allowed: &[
                "metrics",
                "hex",
                "foldhash",
                "mnemo-api",
                "mnemo-client",
                "futures",
                "rand",
                "serde",
                "serde_json",
                "rustix",
                // `allocator.rs`: glibc's `mallopt`.
                "libc",
                "sha2",
                "thiserror",
                "tokio",
                "tracing",
            ],
            never: all(&[DATABASE_DRIVERS, HTTP_SERVER, &["anyhow", "mnemo-worker", "mnemo-export"], SERVER_SIDE]),
        },
        Boundary {
            krate: "mnemo-worker",
            allowed: &[
                "metrics",
                "base64",
                "bzip2",
                "flate2",
                "futures",
                "globset",
                "grep-matcher",
                "grep-regex",
                "grep-searcher",
                "hex",
                "ignore",
                "lzma-rust2",
                "mnemo-api",
                "mnemo-client",
                "mnemo-sync",
                "rand",
                "rustix",
                "serde",
                "serde_json",
                "tar",
                "tempfile",
                "thiserror",
                "tokio",
                "tokio-util",
                "tracing",
                "zip",
            ],
            never: all(&[DATABASE_DRIVERS, HTTP_SERVER, &["anyhow", "mnemo-export"], SERVER_SIDE]),
        },
        Boundary {
            krate: "mnemo-export",
            allowed: &["chrono", "futures", "mnemo-api", "mnemo-client", "serde", "serde_json", "thiserror"],
            // Only the public API through the client; no terminal (the binary draws progress).
            never: all(&[
                DATABASE_DRIVERS,
                HTTP_SERVER,
                &["anyhow", "indicatif", "mnemo-sync", "mnemo-worker"],
                SERVER_SIDE,
            ]),
        },
        Boundary {
            krate: "mnemo-mcp",
            allowed: &[
                "chrono",
                // The HTTP request's parts, which carry each `/mcp` caller's credential.
                "http",
                "mnemo-api",
                "mnemo-client",
                "rmcp",
                "schemars",
                // Remembering a `/mcp` caller by its credential's digest, never the secret.
                "sha2",
                "serde",
                "thiserror",
                "tokio",
                "tracing",
            ],
            // Only the public API through the client, as any MCP client's agent would have it.
            never: all(&[DATABASE_DRIVERS, HTTP_SERVER, &["anyhow", "mnemo-sync", "mnemo-worker"], SERVER_SIDE]),
        },
        Boundary {
            krate: "mnemo",
            allowed: &[
                "metrics",
                "metrics-exporter-prometheus",
                "axum",
                "futures",
                "mnemo-api",
                "mnemo-store",
                "mnemo-store-sqlite",
                "mnemo-store-postgres",
                "mnemo-server",
                "mnemo-model",
                "mnemo-console",
                "mnemo-client",
                "mnemo-export",
                "mnemo-mcp",
                "mnemo-oidc",
                "mnemo-sync",
                "mnemo-worker",
                "tokio-util",
                "anyhow",
                "clap",
                "clap_complete",
                "tokio",
                "tracing",
                "tracing-subscriber",
                "dirs",
                "tempfile",
                "serde",
                "serde_json",
                "indicatif",
                // `--database postgres://…` parsed into a connection config.
                "tokio-postgres",
                // `mnemo healthcheck`.
                "reqwest",
                // The worker's credential hand-over (`credentials.rs`).
                "rustix",
            ],
            // The binary glues every crate; the conformance suite is for tests only.
            never: &["mnemo-store-tests"],
        },
    ]
}

#[test]
fn dependencies_stay_within_each_crates_allowlist() {
    let boundaries = boundaries();
    let mut findings = Vec::new();
    let known: BTreeSet<&str> = boundaries.iter().map(|b| b.krate).collect();
    for name in crates() {
        if !known.contains(name.as_str()) {
            findings.push(format!(
                "crates/{name}: has no `Boundary` in crates/mnemo/tests/tidy.rs (its allowed and never-allowed \
                 dependencies)"
            ));
        }
    }
    for b in &boundaries {
        for dep in b.allowed.iter().filter(|d| b.never.contains(d)) {
            findings.push(format!(
                "crates/mnemo/tests/tidy.rs: `{}` both allows and forbids `{dep}`: it crosses the crate's boundary, \
                 so take it out of `allowed`",
                b.krate
            ));
        }
        let manifest = root().join("crates").join(b.krate).join("Cargo.toml");
        if !manifest.is_file() {
            findings.push(format!("crates/mnemo/tests/tidy.rs: a `Boundary` for `{}`, which is not a crate", b.krate));
            continue;
        }
        for dep in normal_dependencies(&read(&manifest)) {
            if b.never.contains(&dep.as_str()) {
                findings.push(format!(
                    "crates/{}/Cargo.toml: depends on `{dep}`, which crosses its boundary (ARCHITECTURE.md, code map): \
                     move the code that needs it into a crate whose job it is",
                    b.krate
                ));
            } else if !b.allowed.contains(&dep.as_str()) {
                findings.push(format!(
                    "crates/{}/Cargo.toml: depends on `{dep}`, which is not in its allowlist: if it belongs to what the \
                     crate owns (ARCHITECTURE.md, code map), add it to the crate's `allowed` in \
                     crates/mnemo/tests/tidy.rs, else remove it",
                    b.krate
                ));
            }
        }
    }
    report(&findings, "see each line; a dev-dependency is never checked, so tests may use anything.");
}

#[test]
fn the_manifest_reader_sees_every_form_of_dependency() {
    let manifest = r#"
[package]
name = "x"

[dependencies]
a = { workspace = true }
b.workspace = true
"c" = "1"
renamed = { package = "real", version = "2" } # a comment = "no"
d = { version = "1", features = ["package"] }

[dev-dependencies]
test-only = "1"

[target.'cfg(unix)'.dependencies]
e = "1"

[build-dependencies]
f = "1"

[dependencies.g]
version = "1"
"#;
    let deps: Vec<String> = normal_dependencies(manifest).into_iter().collect();
    assert_eq!(deps, ["a", "b", "c", "d", "e", "f", "g", "real"]);
}

// ---------------------------------------------------------------------------------------------
// Rust source, lexed just enough

/// A Rust file with its comments removed, its string and character literals blanked out of the
/// code and kept aside, and its `#[cfg(test)]` items dropped from both.
struct Source {
    /// The code, byte for byte, with comments, literals and test items blanked (newlines kept).
    code: Vec<u8>,
    /// Each string literal's contents (escapes as written) and the line it starts on.
    strings: Vec<(usize, String)>,
}

impl Source {
    fn parse(text: &str) -> Self {
        let bytes = text.as_bytes();
        let mut code = bytes.to_vec();
        let mut strings: Vec<(usize, usize, String)> = Vec::new(); // (offset, line, contents)
        let blank = |code: &mut Vec<u8>, from: usize, to: usize| {
            for b in &mut code[from..to.min(bytes.len())] {
                if *b != b'\n' {
                    *b = b' ';
                }
            }
        };
        let ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
        let mut line = 1;
        let mut i = 0;
        while i < bytes.len() {
            let at = |k: usize| bytes.get(k).copied().unwrap_or(0);
            let start = i;
            match bytes[i] {
                b'\n' => {
                    line += 1;
                    i += 1;
                }
                b'/' if at(i + 1) == b'/' => {
                    while i < bytes.len() && bytes[i] != b'\n' {
                        i += 1;
                    }
                    blank(&mut code, start, i);
                }
                b'/' if at(i + 1) == b'*' => {
                    let mut depth = 0;
                    while i < bytes.len() {
                        if bytes[i] == b'/' && at(i + 1) == b'*' {
                            depth += 1;
                            i += 2;
                        } else if bytes[i] == b'*' && at(i + 1) == b'/' {
                            depth -= 1;
                            i += 2;
                            if depth == 0 {
                                break;
                            }
                        } else {
                            line += usize::from(bytes[i] == b'\n');
                            i += 1;
                        }
                    }
                    blank(&mut code, start, i);
                }
                b'r' if (i == 0
                    || !ident(bytes[i - 1])
                    || (bytes[i - 1] == b'b' && (i < 2 || !ident(bytes[i - 2]))))
                    && (at(i + 1) == b'"' || at(i + 1) == b'#') =>
                {
                    let mut j = i + 1;
                    while at(j) == b'#' {
                        j += 1;
                    }
                    if at(j) != b'"' {
                        i += 1;
                        continue;
                    }
                    let hashes = j - i - 1;
                    let content_start = j + 1;
                    let mut k = content_start;
                    let first_line = line;
                    loop {
                        if k >= bytes.len() {
                            break;
                        }
                        if bytes[k] == b'"' && (1..=hashes).all(|h| at(k + h) == b'#') {
                            break;
                        }
                        line += usize::from(bytes[k] == b'\n');
                        k += 1;
                    }
                    strings.push((start, first_line, String::from_utf8_lossy(&bytes[content_start..k]).into_owned()));
                    i = k + 1 + hashes;
                    blank(&mut code, start, i);
                }
                b'"' => {
                    let first_line = line;
                    let mut k = i + 1;
                    while k < bytes.len() && bytes[k] != b'"' {
                        if bytes[k] == b'\\' {
                            k += 1;
                        }
                        line += usize::from(at(k) == b'\n');
                        k += 1;
                    }
                    strings.push((start, first_line, String::from_utf8_lossy(&bytes[i + 1..k]).into_owned()));
                    i = k + 1;
                    blank(&mut code, start, i);
                }
                b'\'' => {
                    // A character literal (`'x'`, `'\n'`, `'é'`), else a lifetime or label.
                    let end = if at(i + 1) == b'\\' {
                        (i + 3..bytes.len()).find(|&k| bytes[k] == b'\'')
                    } else {
                        let width = text[i + 1..].chars().next().map_or(1, char::len_utf8);
                        (at(i + 1 + width) == b'\'').then_some(i + 1 + width)
                    };
                    match end {
                        Some(end) => {
                            i = end + 1;
                            blank(&mut code, start, i);
                        }
                        None => i += 1,
                    }
                }
                _ => i += 1,
            }
        }
        // Drop `#[cfg(test)]` items: from the attribute to the end of the item (its `;`, or the
        // `}` matching its first `{`).
        let mut tests: Vec<(usize, usize)> = Vec::new();
        let attribute = b"#[cfg(test)]";
        let mut from = 0;
        while let Some(pos) = code[from..].windows(attribute.len()).position(|w| w == attribute) {
            let start = from + pos;
            let mut k = start + attribute.len();
            let mut depth = 0usize;
            while k < code.len() {
                match code[k] {
                    b'{' => depth += 1,
                    b'}' => {
                        depth = depth.saturating_sub(1);
                        if depth == 0 {
                            break;
                        }
                    }
                    b';' if depth == 0 => break,
                    _ => {}
                }
                k += 1;
            }
            let end = (k + 1).min(code.len());
            tests.push((start, end));
            from = end;
        }
        for &(start, end) in &tests {
            blank(&mut code, start, end);
        }
        let strings = strings
            .into_iter()
            .filter(|(offset, _, _)| !tests.iter().any(|&(s, e)| (s..e).contains(offset)))
            .map(|(_, line, s)| (line, s))
            .collect();
        Self { code, strings }
    }

    /// The code's lines with their 1-based numbers, literals and comments blanked.
    fn code_lines(&self) -> Vec<(usize, String)> {
        String::from_utf8_lossy(&self.code).lines().enumerate().map(|(n, l)| (n + 1, l.to_owned())).collect()
    }
}

#[test]
fn the_lexer_separates_code_strings_comments_and_tests() {
    let src = r####"
use std::fs; // std::fs in a comment
/* block /* nested */ std::fs */
fn f<'a>(x: &'a str) -> char {
    let s = "a \"quoted\" 'idle' value";
    let r = r#"raw "with" 'queued'"#;
    let c = '"';
    let e = '\'';
    x.len();
    'y'
}
#[cfg(test)]
mod tests {
    fn g() { let t = "'stopped'"; std::fs::read("x"); }
}
fn after() { let u = "kept"; }
"####;
    let parsed = Source::parse(src);
    let strings: Vec<&str> = parsed.strings.iter().map(|(_, s)| s.as_str()).collect();
    assert_eq!(strings, [r#"a \"quoted\" 'idle' value"#, r#"raw "with" 'queued'"#, "kept"]);
    assert_eq!(parsed.strings[2].0, 16, "line numbers count every newline, inside literals and comments too");
    let code = String::from_utf8_lossy(&parsed.code).into_owned();
    assert_eq!(code.matches("std::fs").count(), 1, "only the `use`, not comments or the test module: {code}");
    assert!(code.contains("fn after()") && code.contains("fn f<'a>(x: &'a str)"), "{code}");
    assert!(!code.contains("fn g"), "{code}");
}

// ---------------------------------------------------------------------------------------------
// The filesystem

/// Where `std::fs`, `tokio::fs`, `rustix::fs` or `std::os::unix::fs` may be used outside tests,
/// and why: a crate folder (all of its `src/`) or one file.
const FS_ALLOWED: &[(&str, &str)] = &[
    ("crates/mnemo/", "the binary: files named on the command line, `--out`, the credential pipe"),
    ("crates/mnemo-sync/", "memory folders, through its confined `fs`"),
    ("crates/mnemo-worker/", "the workdir, skills, session records, and the tools' file access"),
    ("crates/mnemo-store-sqlite/src/lib.rs", "creates the database file's folder"),
    ("crates/mnemo-store-sqlite/src/search_index.rs", "removes the search index file of earlier versions"),
    ("crates/mnemo-search/", "the index's own folder: made, and emptied when it is not an index of this layout"),
    ("crates/mnemo-store-sqlite/src/backup.rs", "`mnemo db backup`: the temporary copy, its fsync and rename"),
    ("crates/mnemo-store-sqlite/src/check.rs", "`mnemo db check`: the database file's size"),
    ("crates/mnemo-store-sqlite/src/copy.rs", "`mnemo db copy`: refuses one file as both source and target"),
    ("crates/mnemo-model/src/config.rs", "`ModelConfig::from_file`: the models file"),
];

/// The filesystem APIs code (literals and comments blanked) uses, with the byte offset of each.
fn filesystem_uses(code: &str) -> Vec<(usize, &'static str)> {
    let mut uses = Vec::new();
    for api in ["std::fs", "tokio::fs", "rustix::fs", "unix::fs"] {
        for (at, _) in code.match_indices(api) {
            let after = code[at + api.len()..].chars().next();
            if !after.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                uses.push((at, api));
            }
        }
    }
    // `use std::{fs, …}` and `use tokio::{…, fs::File}`, on one line or several.
    for (group, api) in [("std::{", "std::fs"), ("tokio::{", "tokio::fs"), ("rustix::{", "rustix::fs")] {
        for (at, _) in code.match_indices(group) {
            let inner = &code[at + group.len()..];
            let inner = &inner[..inner.find('}').unwrap_or(inner.len())];
            if inner.split(|c: char| !(c.is_alphanumeric() || c == '_')).any(|w| w == "fs") {
                uses.push((at, api));
            }
        }
    }
    uses.sort();
    uses
}

#[test]
fn only_the_crates_whose_job_it_is_touch_the_filesystem() {
    let root = root();
    let mut findings = Vec::new();
    for name in crates() {
        let dir = root.join("crates").join(&name);
        let mut files = rust_files(&dir.join("src"));
        if dir.join("build.rs").is_file() {
            files.push(dir.join("build.rs"));
        }
        for file in files {
            let path = relative(&file);
            if FS_ALLOWED.iter().any(|(allowed, _)| path.starts_with(allowed)) {
                continue;
            }
            let code = String::from_utf8_lossy(&Source::parse(&read(&file)).code).into_owned();
            for (at, api) in filesystem_uses(&code) {
                let line = code[..at].matches('\n').count() + 1;
                findings.push(format!("{path}:{line}: uses {api}"));
            }
        }
    }
    report(
        &findings,
        "only mnemo-sync (memory folders), mnemo-worker (its workdir and tools), the binary, SQLite's database \
         file and the models file touch the filesystem (ARCHITECTURE.md, cross-cutting concerns). Do the I/O in \
         one of them and pass the bytes or a handle in; if this file's job really is the filesystem, add it to \
         FS_ALLOWED in crates/mnemo/tests/tidy.rs with the reason, and say so in ARCHITECTURE.md.",
    );
}

#[test]
fn the_filesystem_check_sees_each_way_of_naming_it() {
    let cases: &[(&str, usize)] = &[
        ("use std::fs;", 1),
        ("let f = std::fs::File::open(p)?;", 1),
        ("tokio::fs::read(p).await", 1),
        ("use std::{fs, io};", 1),
        ("use std::{\n    io::Read,\n    fs::File,\n};", 1),
        ("use std::{io::Read, fs::File};", 1),
        ("use std::os::unix::fs::PermissionsExt;", 1),
        ("use rustix::fs::{openat, Mode};", 1),
        ("use std::{io, path::Path};", 0),
        ("let fsync = my_fs::write();", 0),
        ("std::fsx::nothing()", 0),
    ];
    for (code, uses) in cases {
        assert_eq!(filesystem_uses(code).len(), *uses, "{code}: {:?}", filesystem_uses(code));
    }
}

// ---------------------------------------------------------------------------------------------
// Backends decide nothing

/// The backend crates' sources (their `migrations/*.sql` are not looked at: a shipped migration
/// is never edited, and its `CHECK`s and defaults may name states).
const BACKENDS: &[&str] = &["crates/mnemo-store-sqlite/src", "crates/mnemo-store-postgres/src"];

/// The wire names of every stored state (`WorkState`, `SessionStatus`, `DeliveryStatus`).
const STATE_NAMES: &[&str] = &[
    "queued",
    "starting",
    "active",
    "stopping",
    "stopped",
    "rescheduling",
    "running",
    "idle",
    "terminated",
    "pending",
    "delivered",
    "failed",
];

/// The namespaces of session event types (`agent.tool_use`, `session.status_idle`, …) and of
/// webhook event types (`memory_store.created`, …).
const EVENT_NAMESPACES: &[&str] =
    &["agent", "user", "session", "span", "system", "memory_store", "memory", "memory_version", "environment"];

fn is_event_type(s: &str) -> bool {
    let Some((namespace, name)) = s.split_once('.') else { return false };
    EVENT_NAMESPACES.contains(&namespace)
        && !name.is_empty()
        && name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_' || b == b'.')
}

/// What a backend's string literal names that only `mnemo_store::rules` may: a state or an event
/// type, as the whole literal (Rust) or quoted inside it (SQL); each with its byte offset in the
/// literal.
fn literal_findings(literal: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut named = |at: usize, name: &str, quoted: bool| {
        let shown = if quoted { format!("'{name}'") } else { format!("\"{name}\"") };
        if STATE_NAMES.contains(&name) {
            out.push((at, format!("state name {shown}")));
        } else if is_event_type(name) {
            out.push((at, format!("event type {shown}")));
        }
    };
    named(0, literal, false);
    // SQL string literals: the odd pieces between single quotes.
    let mut at = 0;
    for (n, piece) in literal.split('\'').enumerate() {
        if n % 2 == 1 {
            named(at, piece, true);
        }
        at += piece.len() + 1;
    }
    // An id prefix (`format!("hc_{}", …)`) makes ids: that is `mnemo-api`'s or a rule's job.
    let head = literal.split('{').next().unwrap_or("");
    if head.len() > 2 && head.ends_with('_') && head[..head.len() - 1].bytes().all(|b| b.is_ascii_lowercase()) {
        out.push((0, format!("id prefix \"{head}\"")));
    }
    out
}

/// Product constants in a backend's code: a time in microseconds (a literal that is a whole
/// number of seconds, 1 000 000 µs or more) and hour or day arithmetic (`60 * 60`).
fn constant_findings(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let squeezed: String = code.split_whitespace().collect::<Vec<_>>().join(" ");
    if squeezed.contains("60 * 60") {
        out.push("hour/day arithmetic `60 * 60`".to_owned());
    }
    let bytes = code.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let starts =
            bytes[i].is_ascii_digit() && (i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_'));
        if !starts {
            i += 1;
            continue;
        }
        let mut j = i;
        while j < bytes.len() && (bytes[j].is_ascii_alphanumeric() || bytes[j] == b'_') {
            j += 1;
        }
        let token = &code[i..j];
        let digits: String =
            token.chars().take_while(|c| c.is_ascii_digit() || *c == '_').filter(|c| *c != '_').collect();
        if let Ok(value) = digits.parse::<u128>()
            && value >= 1_000_000
            && value % 1_000_000 == 0
            && !token.starts_with("0x")
        {
            out.push(format!("`{token}` (a time in microseconds?)"));
        }
        i = j;
    }
    out
}

#[test]

fn backends_hold_no_state_name_event_type_or_product_constant() {
    let root = root();
    let mut findings = Vec::new();
    for dir in BACKENDS {
        for file in rust_files(&root.join(dir)) {
            let path = relative(&file);
            let source = Source::parse(&read(&file));
            let mut found = Vec::new();
            for (line, literal) in &source.strings {
                for (at, what) in literal_findings(literal) {
                    found.push((line + literal[..at].matches('\n').count(), what));
                }
            }
            for (line, code) in source.code_lines() {
                for what in constant_findings(&code) {
                    found.push((line, what));
                }
            }
            found.sort();
            findings.extend(found.into_iter().map(|(line, what)| format!("{path}:{line}: {what}")));
        }
    }
    report(
        &findings,
        "a backend decides nothing (ARCHITECTURE.md, code map). Name a state through its enum (`WorkState::Queued`, \
         `SessionStatus::Idle`, `DeliveryStatus::Pending` — bound as a parameter, or `as_str()` formatted into the \
         SQL once), an event type through `mnemo_api`'s event types, and move a product constant (a window, a \
         retention, a clamp, an id prefix) and the decision using it into `mnemo_store::rules` with a table test, \
         handing the backend its result through `mnemo_store::ops`. Test code (`#[cfg(test)]`) and migrations are \
         not checked.",
    );
}

#[test]
fn the_backend_check_sees_what_it_should() {
    let literal_cases: &[(&str, &[&str])] = &[
        ("UPDATE sessions SET status = 'terminated' WHERE seq = ?2", &["state name 'terminated'"]),
        ("w.state IN ('starting', 'active')", &["state name 'starting'", "state name 'active'"]),
        ("delivered", &["state name \"delivered\""]),
        ("e.type IN ('agent.tool_use', 'user.message')", &["event type 'agent.tool_use'", "event type 'user.message'"]),
        ("hc_{}", &["id prefix \"hc_\""]),
        ("SELECT status FROM sessions WHERE id = ?1", &[]),
        ("failed to open {path}", &[]),
        ("w.id, e.id, w.state", &[]),
        ("memory_mib must be a whole number", &[]),
        ("PRAGMA journal_mode = 'wal'", &[]),
    ];
    for (literal, expected) in literal_cases {
        let found: Vec<String> = literal_findings(literal).into_iter().map(|(_, what)| what).collect();
        assert_eq!(found, *expected, "{literal}");
    }
    let sql = "INSERT INTO sessions (status)\n VALUES ('idle')";
    assert_eq!(literal_findings(sql)[0].0, sql.find("idle").unwrap(), "the offset of a quoted name, for its line");
    let constant_cases: &[(&str, usize)] = &[
        ("const POLLING_WINDOW_MICROS: i64 = 30_000_000;", 1),
        ("const KEPT_MICROS: i64 = 24 * 60 * 60 * 1_000_000;", 2),
        ("let ttl = secs.saturating_mul(1000000);", 1),
        ("const MAX_PARAMS: usize = 65_535;", 0),
        ("const MEMORY_SIGNALS: usize = 4096;", 0),
        ("Duration::from_secs(30)", 0),
        ("let x = v1_000_000;", 0),
    ];
    for (code, findings) in constant_cases {
        assert_eq!(constant_findings(code).len(), *findings, "{code}: {:?}", constant_findings(code));
    }
}

#[test]
fn every_tidy_rule_names_crates_that_exist() {
    let crates = crates();
    let mut findings = Vec::new();
    for (path, _) in FS_ALLOWED {
        if !root().join(path).exists() {
            findings.push(format!("FS_ALLOWED names {path}, which does not exist"));
        }
    }
    for dir in BACKENDS {
        if !root().join(dir).is_dir() {
            findings.push(format!("BACKENDS names {dir}, which does not exist"));
        }
    }
    let groups: BTreeMap<&str, &[&str]> = [("SERVER_SIDE", SERVER_SIDE), ("HOST_SIDE", HOST_SIDE)].into();
    for (group, members) in groups {
        for member in members.iter().filter(|m| !crates.contains(**m)) {
            findings.push(format!("{group} names {member}, which is not a crate"));
        }
    }
    report(&findings, "update crates/mnemo/tests/tidy.rs to the crates and files as they are now.");
}
