//! `grep`: searches file contents for a regular expression (spec §8.8).
//!
//! This is always the reference's built-in engine, never an `rg` executable: we do not shell out,
//! so the result is the same whether or not ripgrep is installed on the host. Its rules: walk the
//! search directory depth first (a directory's files before its subdirectories), skipping `.git`
//! and `node_modules` directories, symlinks (to directories and to files), anything that is not a
//! regular file, files with a NUL byte in their first 512 bytes and lines longer than 2,000 bytes;
//! scan at most 50,000 files; print `<path>:<line number>:<line>` with the absolute path; stop
//! after 102,400 characters of output with a `[output truncated at 102400 bytes]` line; give up
//! after 30 s.
//!
//! Each line is matched on its own, decoded (invalid UTF-8 replaced) and with trailing `\r`/`\n`
//! removed, exactly as the reference does; `grep-searcher` is not used because it decides matches
//! on the raw bytes, where `\r` and invalid UTF-8 would make some lines match differently.
//!
//! Deviations: the pattern uses Rust `regex` syntax (no backreferences or look-around; such a
//! pattern is an invalid regex) and invalid-regex details are that engine's; the 30 s budget is
//! wall-clock time rather than CPU time (the engine runs in linear time, so CPU time is not the
//! risk it is for a backtracking engine); entries are visited in name order, where the reference
//! sees them in the order the filesystem lists them.

use std::fs;
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use grep_matcher::Matcher;
use grep_regex::RegexMatcher;
use serde::Deserialize;
use serde_json::Value;

use super::paths::{self, canonicalize};
use super::{ToolContext, ToolError, ToolOutput, parse_input};

/// Output budget in characters; the marker line calls them bytes, as the reference does.
const OUTPUT_LIMIT: usize = 100 * 1024;
/// Lines longer than this (counting the line terminator) are skipped.
const MAX_LINE_LENGTH: usize = 2000;
/// At most this many files are scanned.
const MAX_FILES: usize = 50_000;
const TIMEOUT: Duration = Duration::from_secs(30);
/// Files with a NUL byte among their first this many bytes are binary and skipped.
const BINARY_SNIFF_BYTES: u64 = 512;
/// How many lines are scanned between two looks at the clock.
const CLOCK_EVERY_LINES: u32 = 1024;

#[derive(Debug, Deserialize)]
struct Input {
    pattern: String,
    #[serde(default)]
    path: Option<String>,
}

pub(super) fn run(ctx: &ToolContext, input: Value) -> Result<ToolOutput, ToolError> {
    let Input { pattern, path } = parse_input("grep", input)?;
    let search = match path.as_deref() {
        Some(p) if !p.is_empty() => paths::resolve(ctx, "grep", p)?,
        _ => canonicalize(&ctx.workdir).unwrap_or_else(|_| ctx.workdir.clone()),
    };
    let matcher =
        RegexMatcher::new(&pattern).map_err(|e| ToolError(format!("grep: invalid regex: {}", regex_detail(&e))))?;
    let mut grep = Grep::new(&matcher, Instant::now() + TIMEOUT);
    grep.search(&search)?;
    Ok(ToolOutput::text(if grep.hits.is_empty() { "no matches".to_owned() } else { grep.hits.join("\n") }))
}

/// The gist of a pattern error on one line. The engine's own message spans several lines and
/// quotes the pattern as it was wrapped internally (`(?:…)`), which would mislead.
fn regex_detail(e: &grep_regex::Error) -> String {
    let text = e.to_string();
    text.lines()
        .find_map(|line| line.strip_prefix("error: "))
        .map_or_else(|| text.split_whitespace().collect::<Vec<_>>().join(" "), str::to_owned)
}

/// Reads the next line (with its `\n`) into `line`, keeping no more than a line may have:
/// `Some(true)` when it was longer than [`MAX_LINE_LENGTH`] bytes (the rest is skipped, so a huge
/// single-line file is never held in memory), `None` at the end of the file.
fn read_line(reader: &mut impl BufRead, line: &mut Vec<u8>) -> io::Result<Option<bool>> {
    line.clear();
    let mut length = 0usize;
    loop {
        let buf = match reader.fill_buf() {
            Ok(buf) => buf,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buf.is_empty() {
            return Ok((length > 0).then_some(length > MAX_LINE_LENGTH));
        }
        let (take, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        if length + take <= MAX_LINE_LENGTH + 1 {
            line.extend_from_slice(&buf[..take]);
        }
        length += take;
        reader.consume(take);
        if done {
            return Ok(Some(length > MAX_LINE_LENGTH));
        }
    }
}

/// Why a scan stopped early.
#[derive(Debug)]
enum Stop {
    /// The output budget is spent or the file limit reached: return what was found.
    Done,
    TimedOut,
}

#[derive(Debug)]
struct Grep<'a> {
    matcher: &'a RegexMatcher,
    deadline: Instant,
    hits: Vec<String>,
    /// Characters of output still allowed.
    budget: isize,
    lines_since_clock: u32,
}

impl<'a> Grep<'a> {
    fn new(matcher: &'a RegexMatcher, deadline: Instant) -> Self {
        Self { matcher, deadline, hits: Vec::new(), budget: OUTPUT_LIMIT as isize, lines_since_clock: 0 }
    }

    fn search(&mut self, search: &Path) -> Result<(), ToolError> {
        let stopped =
            if fs::metadata(search).is_ok_and(|m| m.is_file()) { self.scan(search) } else { self.walk(search) };
        match stopped {
            Err(Stop::TimedOut) => Err(ToolError(format!("grep: timed out after {}s", TIMEOUT.as_secs()))),
            Ok(()) | Err(Stop::Done) => Ok(()),
        }
    }

    /// Depth first, each directory's files before its subdirectories.
    fn walk(&mut self, root: &Path) -> Result<(), Stop> {
        let mut seen = 0;
        let mut pending: Vec<PathBuf> = vec![root.to_owned()];
        while let Some(dir) = pending.pop() {
            self.check_clock()?;
            let Ok(read) = fs::read_dir(&dir) else { continue };
            let mut files = Vec::new();
            let mut dirs = Vec::new();
            for entry in read.filter_map(Result::ok) {
                // The entry's own type: symlinks are neither files nor directories here.
                let Ok(kind) = entry.file_type() else { continue };
                let name = entry.file_name();
                if kind.is_dir() {
                    if name != ".git" && name != "node_modules" {
                        dirs.push(name);
                    }
                } else if kind.is_file() {
                    files.push(name);
                }
            }
            files.sort();
            for name in files {
                seen += 1;
                if seen > MAX_FILES {
                    return Err(Stop::Done);
                }
                self.scan(&dir.join(name))?;
            }
            dirs.sort();
            pending.extend(dirs.into_iter().rev().map(|name| dir.join(name)));
        }
        Ok(())
    }

    /// Searches one regular file; unreadable files are skipped silently.
    fn scan(&mut self, path: &Path) -> Result<(), Stop> {
        let Ok(file) = paths::open_read(path) else { return Ok(()) };
        let mut head = Vec::new();
        if (&file).take(BINARY_SNIFF_BYTES).read_to_end(&mut head).is_err() || head.contains(&0) {
            return Ok(());
        }
        let mut reader = BufReader::new(head.as_slice().chain(file));
        let display = path.to_string_lossy();
        let mut raw = Vec::new();
        let mut number = 0u64;
        loop {
            let too_long = match read_line(&mut reader, &mut raw) {
                Ok(None) | Err(_) => return Ok(()),
                Ok(Some(too_long)) => too_long,
            };
            number += 1;
            self.lines_since_clock += 1;
            if self.lines_since_clock >= CLOCK_EVERY_LINES {
                self.check_clock()?;
            }
            if too_long {
                continue;
            }
            let line = String::from_utf8_lossy(&raw);
            let line = line.trim_end_matches(['\r', '\n']);
            if self.matcher.is_match(line.as_bytes()).unwrap_or(false) {
                self.push(format!("{display}:{number}:{line}"))?;
            }
        }
    }

    fn push(&mut self, hit: String) -> Result<(), Stop> {
        self.budget -= hit.chars().count() as isize + 1;
        if self.budget < 0 {
            self.hits.push(format!("[output truncated at {OUTPUT_LIMIT} bytes]"));
            return Err(Stop::Done);
        }
        self.hits.push(hit);
        Ok(())
    }

    fn check_clock(&mut self) -> Result<(), Stop> {
        self.lines_since_clock = 0;
        if Instant::now() >= self.deadline { Err(Stop::TimedOut) } else { Ok(()) }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use serde_json::json;

    use super::*;

    fn setup() -> (tempfile::TempDir, PathBuf, ToolContext) {
        let dir = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(dir.path()).unwrap();
        let ctx = ToolContext::new(&root);
        (dir, root, ctx)
    }

    fn grep(ctx: &ToolContext, input: Value) -> Result<String, String> {
        run(ctx, input).map(|o| o.joined_text()).map_err(|e| e.0)
    }

    #[test]
    fn prints_absolute_path_line_number_and_line() {
        let (_d, root, ctx) = setup();
        fs::write(root.join("a.txt"), "hello world\r\nbye\nhello again").unwrap();
        fs::create_dir(root.join("sub")).unwrap();
        fs::write(root.join("sub/b.txt"), "say hello\n").unwrap();
        fs::write(root.join("z.txt"), "hello z\n").unwrap();
        let a = root.join("a.txt").display().to_string();
        let b = root.join("sub/b.txt").display().to_string();
        let z = root.join("z.txt").display().to_string();
        // A directory's files come before its subdirectories.
        assert_eq!(
            grep(&ctx, json!({"pattern": "hel+o"})).unwrap(),
            format!("{a}:1:hello world\n{a}:3:hello again\n{z}:1:hello z\n{b}:1:say hello")
        );
        // `$` sees the line without its `\r\n`.
        assert_eq!(grep(&ctx, json!({"pattern": "world$"})).unwrap(), format!("{a}:1:hello world"));
        // A file as the search path.
        assert_eq!(grep(&ctx, json!({"pattern": "say", "path": "sub/b.txt"})).unwrap(), format!("{b}:1:say hello"));
        assert_eq!(grep(&ctx, json!({"pattern": "hello", "path": "sub"})).unwrap(), format!("{b}:1:say hello"));
    }

    #[test]
    fn no_matches_and_invalid_regex() {
        let (_d, root, ctx) = setup();
        fs::write(root.join("a.txt"), "abc\n").unwrap();
        assert_eq!(grep(&ctx, json!({"pattern": "xyz"})).unwrap(), "no matches");
        assert_eq!(grep(&ctx, json!({"pattern": "x", "path": "missing"})).unwrap(), "no matches");
        assert_eq!(grep(&ctx, json!({"pattern": "(unclosed"})).unwrap_err(), "grep: invalid regex: unclosed group");
        assert_eq!(
            grep(&ctx, json!({"pattern": "a{2,1}"})).unwrap_err(),
            "grep: invalid regex: invalid repetition count range, the start must be <= the end"
        );
        assert_eq!(
            grep(&ctx, json!({"pattern": "x", "path": "/etc"})).unwrap_err(),
            "grep: path '/etc' is outside the session's working directory"
        );
    }

    #[test]
    fn skips_binary_files_long_lines_and_ignored_directories() {
        let (_d, root, ctx) = setup();
        fs::write(root.join("bin.dat"), b"needle\0more").unwrap();
        // A NUL beyond the first 512 bytes does not make a file binary.
        let mut late = vec![b'a'; 600];
        late.extend_from_slice(b"\0\nneedle late\n");
        fs::write(root.join("late.dat"), &late).unwrap();
        // 1,999 characters + newline = 2,000 bytes is kept; one more is skipped.
        let kept = format!("needle{}", "x".repeat(1993));
        let long = format!("needle{}", "x".repeat(1994));
        fs::write(root.join("long.txt"), format!("{long}\n{kept}\n")).unwrap();
        for dir in [".git", "node_modules"] {
            fs::create_dir(root.join(dir)).unwrap();
            fs::write(root.join(dir).join("f"), "needle\n").unwrap();
        }
        fs::create_dir(root.join(".hidden")).unwrap();
        fs::write(root.join(".hidden/f"), "needle hidden\n").unwrap();
        // A file named `.git` is searched; only directories are skipped.
        fs::write(root.join("sub.git"), "needle gitfile\n").unwrap();
        let out = grep(&ctx, json!({"pattern": "needle"})).unwrap();
        let late_path = root.join("late.dat").display().to_string();
        let long_path = root.join("long.txt").display().to_string();
        let hidden = root.join(".hidden/f").display().to_string();
        let gitfile = root.join("sub.git").display().to_string();
        assert_eq!(
            out,
            format!(
                "{late_path}:2:needle late\n{long_path}:2:{kept}\n{gitfile}:1:needle gitfile\n{hidden}:1:needle hidden"
            )
        );
    }

    #[test]
    fn skips_symlinks_and_special_files() {
        let (_d, root, ctx) = setup();
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join("secret"), "needle secret\n").unwrap();
        symlink(outside.path(), root.join("out")).unwrap();
        symlink(outside.path().join("secret"), root.join("leaf")).unwrap();
        fs::write(root.join("real"), "needle\n").unwrap();
        symlink(root.join("real"), root.join("inner-link")).unwrap();
        let status = std::process::Command::new("mkfifo").arg(root.join("pipe")).status().unwrap();
        assert!(status.success());
        let out = grep(&ctx, json!({"pattern": "needle"})).unwrap();
        assert_eq!(out, format!("{}:1:needle", root.join("real").display()));
    }

    #[test]
    fn invalid_utf8_is_replaced() {
        let (_d, root, ctx) = setup();
        fs::write(root.join("a"), b"caf\xe9 needle\n").unwrap();
        assert_eq!(
            grep(&ctx, json!({"pattern": "needle"})).unwrap(),
            format!("{}:1:caf\u{fffd} needle", root.join("a").display())
        );
    }

    #[test]
    fn output_is_truncated_at_the_budget() {
        let (_d, root, ctx) = setup();
        let line = "m".repeat(99);
        fs::write(root.join("f"), format!("{line}\n").repeat(3000)).unwrap();
        let out = grep(&ctx, json!({"pattern": "m"})).unwrap();
        let prefix = format!("{}:", root.join("f").display());
        let lines: Vec<&str> = out.split('\n').collect();
        assert_eq!(lines.last().copied(), Some("[output truncated at 102400 bytes]"));
        let hits = &lines[..lines.len() - 1];
        // Exactly as many hits as fit: each costs its characters plus one.
        let cost: usize = hits.iter().map(|h| h.chars().count() + 1).sum();
        let next = format!("{prefix}{}:{line}", hits.len() + 1).chars().count() + 1;
        assert!(cost <= OUTPUT_LIMIT && cost + next > OUTPUT_LIMIT, "cost {cost}");
        assert_eq!(hits[0], format!("{prefix}1:{line}"));
    }

    #[test]
    fn lines_are_read_across_buffer_refills_and_bounded() {
        let long = "y".repeat(MAX_LINE_LENGTH);
        let text = format!("ab\n{long}\nc\r\n\n{long}z\nlast");
        let mut reader = BufReader::with_capacity(7, text.as_bytes());
        let mut line = Vec::new();
        let mut got = Vec::new();
        while let Some(too_long) = read_line(&mut reader, &mut line).unwrap() {
            got.push((too_long, if too_long { String::new() } else { String::from_utf8(line.clone()).unwrap() }));
        }
        let expected = [(false, "ab\n"), (true, ""), (false, "c\r\n"), (false, "\n"), (true, ""), (false, "last")];
        assert_eq!(got, expected.map(|(t, l)| (t, l.to_owned())));
        // Exactly the limit, terminator included, is not too long.
        let text = format!("{}\n", "y".repeat(MAX_LINE_LENGTH - 1));
        let mut reader = BufReader::with_capacity(7, text.as_bytes());
        assert_eq!(read_line(&mut reader, &mut line).unwrap(), Some(false));
        assert_eq!(line.len(), MAX_LINE_LENGTH);
    }

    #[test]
    fn times_out() {
        let (_d, root, _ctx) = setup();
        fs::write(root.join("f"), "x\n".repeat(2000)).unwrap();
        let matcher = RegexMatcher::new("x").unwrap();
        // Walking checks the clock per directory, scanning every 1,024 lines.
        let mut grep = Grep::new(&matcher, Instant::now());
        assert_eq!(grep.search(&root).unwrap_err().0, "grep: timed out after 30s");
        let mut grep = Grep::new(&matcher, Instant::now());
        assert_eq!(grep.search(&root.join("f")).unwrap_err().0, "grep: timed out after 30s");
        let mut grep = Grep::new(&matcher, Instant::now() + TIMEOUT);
        grep.search(&root).unwrap();
        assert_eq!(grep.hits.len(), 2000);
    }
}
