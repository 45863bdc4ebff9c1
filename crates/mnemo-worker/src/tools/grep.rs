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
//! The walk is `ignore`'s (every filter off, symlinks not followed, pruning in `filter_entry`) and
//! each file is searched by `grep-searcher` with a `grep-regex` pattern. Lines are split on `\n`
//! like the reference's binary file iteration; the pattern sees each line as the reference does —
//! decoded with invalid UTF-8 replaced by U+FFFD and with every trailing `\r`/`\n` removed — which
//! [`LineMatcher`] arranges. Binary detection is the reference's own sniff of the first 512 bytes:
//! `grep-searcher`'s `BinaryDetection::quit` would also drop files whose first NUL comes later in
//! its first buffer, and stop midway through files with a NUL further on. BOM sniffing is off, so
//! a UTF-16 file is searched as its raw bytes, as by the reference.
//!
//! Deviations: the pattern uses Rust `regex` syntax (no backreferences or look-around; such a
//! pattern is an invalid regex) and invalid-regex details are that engine's; the 30 s budget is
//! wall-clock time rather than CPU time (the engine runs in linear time, so CPU time is not the
//! risk it is for a backtracking engine), looked at for every walked entry, every match and every
//! read of a file; entries are visited in name order, where the reference sees them in the order
//! the filesystem lists them; the searcher holds a whole line in memory, and a file with a line
//! longer than [`MAX_BUFFER`] bytes is searched only up to that line (the reference holds such a
//! line too, and goes on).

use std::cmp::Ordering;
use std::collections::HashMap;
use std::ffi::OsString;
use std::fmt::Display;
use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use grep_matcher::{LineTerminator, Match, Matcher, NoCaptures, NoError};
use grep_regex::RegexMatcher;
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkError, SinkMatch};
use ignore::WalkBuilder;
use serde_json::Value;

use super::paths::{self, SearchInput};
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
/// The most the searcher's line buffer may grow to; it must hold a whole line.
const MAX_BUFFER: usize = 64 << 20;

pub(super) fn run(ctx: &ToolContext, input: Value) -> Result<ToolOutput, ToolError> {
    let input: SearchInput = parse_input("grep", input)?;
    let search = input.root(ctx, "grep")?;
    // No line terminator is set on the matcher: a pattern that mentions `\n` stays valid (it
    // never matches a line, as with the reference) instead of being refused by the builder.
    let matcher = RegexMatcher::new(&input.pattern)
        .map_err(|e| ToolError(format!("grep: invalid regex: {}", regex_detail(&e))))?;
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

/// The pattern applied to one line as the reference applies it: to the line decoded with invalid
/// UTF-8 replaced, every trailing `\r`/`\n` removed (the searcher strips only an exact `\r\n` in
/// CRLF mode, and a lone `\n` not at all). It has no line terminator, so the searcher hands it
/// one line at a time; a match is reported as the whole line, which is all the sink uses.
#[derive(Debug)]
struct LineMatcher<'a>(&'a RegexMatcher);

impl Matcher for LineMatcher<'_> {
    type Captures = NoCaptures;
    type Error = NoError;

    fn find_at(&self, line: &[u8], at: usize) -> Result<Option<Match>, NoError> {
        // Longer than a kept line even without its terminator: the sink would skip it anyway.
        if at > 0 || line.len() > MAX_LINE_LENGTH {
            return Ok(None);
        }
        let text = String::from_utf8_lossy(line);
        let text = text.trim_end_matches(['\r', '\n']);
        Ok(self.0.is_match(text.as_bytes())?.then(|| Match::new(0, line.len())))
    }

    fn new_captures(&self) -> Result<NoCaptures, NoError> {
        Ok(NoCaptures::new())
    }
}

/// Why a scan stopped early.
#[derive(Debug)]
enum Stop {
    /// The output budget is spent or the file limit reached: return what was found.
    Done,
    TimedOut,
    /// This file could not be read to the end: go on with the next (the reference ignores
    /// `OSError`s, keeping the lines already found).
    Failed,
}

impl SinkError for Stop {
    fn error_message<T: Display>(_message: T) -> Self {
        Stop::Failed
    }

    fn error_io(err: io::Error) -> Self {
        if err.get_ref().is_some_and(|inner| inner.is::<DeadlinePassed>()) { Stop::TimedOut } else { Stop::Failed }
    }
}

/// The error [`DeadlineReader`] fails a read with once the deadline has passed.
#[derive(Debug, thiserror::Error)]
#[error("deadline passed")]
struct DeadlinePassed;

/// Looks at the clock before every read, so that one huge file cannot outlast the deadline.
struct DeadlineReader<R> {
    inner: R,
    deadline: Instant,
}

impl<R: Read> Read for DeadlineReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if Instant::now() >= self.deadline {
            return Err(io::Error::other(DeadlinePassed));
        }
        self.inner.read(buf)
    }
}

#[derive(Debug)]
struct Grep<'a> {
    matcher: LineMatcher<'a>,
    searcher: Searcher,
    deadline: Instant,
    hits: Vec<String>,
    /// Characters of output still allowed.
    budget: isize,
}

impl<'a> Grep<'a> {
    fn new(matcher: &'a RegexMatcher, deadline: Instant) -> Self {
        let searcher = SearcherBuilder::new()
            .line_terminator(LineTerminator::crlf())
            .line_number(true)
            .binary_detection(BinaryDetection::none())
            .bom_sniffing(false)
            .heap_limit(Some(MAX_BUFFER))
            .build();
        Self { matcher: LineMatcher(matcher), searcher, deadline, hits: Vec::new(), budget: OUTPUT_LIMIT as isize }
    }

    fn search(&mut self, search: &Path) -> Result<(), ToolError> {
        let stopped =
            if fs::metadata(search).is_ok_and(|m| m.is_file()) { self.scan(search) } else { self.walk(search) };
        match stopped {
            Err(Stop::TimedOut) => Err(ToolError(format!("grep: timed out after {}s", TIMEOUT.as_secs()))),
            Ok(()) | Err(Stop::Done | Stop::Failed) => Ok(()),
        }
    }

    /// Depth first, each directory's files before its subdirectories (the order of `os.walk`).
    fn walk(&mut self, root: &Path) -> Result<(), Stop> {
        let walk = WalkBuilder::new(root)
            .standard_filters(false)
            .follow_links(false)
            .sort_by_file_path(files_first())
            .filter_entry(|entry| {
                // The entry's own type: symlinks (to directories and to files) are dropped here.
                let name = entry.file_name();
                entry.file_type().is_some_and(|kind| {
                    !kind.is_symlink() && !(kind.is_dir() && (name == ".git" || name == "node_modules"))
                })
            })
            .build();
        let mut seen = 0;
        for entry in walk {
            self.check_clock()?;
            // Unreadable directories are skipped.
            let Ok(entry) = entry else { continue };
            if !entry.file_type().is_some_and(|kind| kind.is_file()) {
                continue;
            }
            seen += 1;
            if seen > MAX_FILES {
                return Err(Stop::Done);
            }
            self.scan(entry.path())?;
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
        let reader = DeadlineReader { inner: head.as_slice().chain(file), deadline: self.deadline };
        let display = path.to_string_lossy();
        let Self { matcher, searcher, deadline, hits, budget } = self;
        let sink = FileSink { display: &display, hits, budget, deadline: *deadline };
        match searcher.search_reader(&*matcher, reader, sink) {
            Ok(()) | Err(Stop::Failed) => Ok(()),
            Err(stop) => Err(stop),
        }
    }

    fn check_clock(&self) -> Result<(), Stop> {
        if Instant::now() >= self.deadline { Err(Stop::TimedOut) } else { Ok(()) }
    }
}

/// Orders the entries of one directory as `os.walk` visits them: what is not a directory (symlinks
/// included) by name, then the directories by name. `ignore` hands the comparator paths only, so
/// each entry's type is looked up once and kept while its directory is being sorted.
fn files_first() -> impl Fn(&Path, &Path) -> Ordering + Send + Sync + 'static {
    let cache: Mutex<(PathBuf, HashMap<OsString, bool>)> = Mutex::default();
    move |a, b| {
        let mut guard = cache.lock().unwrap_or_else(PoisonError::into_inner);
        let (dir, kinds) = &mut *guard;
        let mut is_dir = |path: &Path| {
            let parent = path.parent().unwrap_or(Path::new(""));
            if dir != parent {
                parent.clone_into(dir);
                kinds.clear();
            }
            let name = path.file_name().unwrap_or_default();
            if let Some(&known) = kinds.get(name) {
                return known;
            }
            let kind = fs::symlink_metadata(path).is_ok_and(|m| m.is_dir());
            kinds.insert(name.to_owned(), kind);
            kind
        };
        let (a_dir, b_dir) = (is_dir(a), is_dir(b));
        (a_dir, a.file_name()).cmp(&(b_dir, b.file_name()))
    }
}

/// Collects one file's matching lines.
struct FileSink<'s> {
    display: &'s str,
    hits: &'s mut Vec<String>,
    /// Characters of output still allowed.
    budget: &'s mut isize,
    deadline: Instant,
}

impl Sink for FileSink<'_> {
    type Error = Stop;

    fn matched(&mut self, _searcher: &Searcher, mat: &SinkMatch<'_>) -> Result<bool, Stop> {
        if Instant::now() >= self.deadline {
            return Err(Stop::TimedOut);
        }
        // The raw line, terminator included, as the reference measures it.
        let raw = mat.bytes();
        if raw.len() > MAX_LINE_LENGTH {
            return Ok(true);
        }
        let line = String::from_utf8_lossy(raw);
        let line = line.trim_end_matches(['\r', '\n']);
        let number = mat.line_number().unwrap_or_default();
        let hit = format!("{}:{number}:{line}", self.display);
        *self.budget -= hit.chars().count() as isize + 1;
        if *self.budget < 0 {
            self.hits.push(format!("[output truncated at {OUTPUT_LIMIT} bytes]"));
            return Err(Stop::Done);
        }
        self.hits.push(hit);
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use serde_json::json;

    use super::*;

    use crate::tools::testing::{links_out_of, setup, text};

    fn grep(ctx: &ToolContext, input: Value) -> Result<String, String> {
        text(run(ctx, input))
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
        let _outside = links_out_of(&root, "secret", "leaf", "needle secret\n");
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
    fn lines_span_buffer_refills_and_are_numbered() {
        let (_d, root, ctx) = setup();
        // A line far longer than the searcher's first buffer, then CRLF, bare `\n` and a last
        // line without a terminator.
        let huge = format!("needle{}", "y".repeat(300_000));
        fs::write(root.join("f"), format!("{huge}\nneedle a\r\n\nneedle b\nneedle c")).unwrap();
        let f = root.join("f").display().to_string();
        assert_eq!(
            grep(&ctx, json!({"pattern": "needle [a-c]$"})).unwrap(),
            format!("{f}:2:needle a\n{f}:4:needle b\n{f}:5:needle c")
        );
        // Exactly 2,000 bytes without a terminator (the last line) is kept.
        let last = format!("needle{}", "z".repeat(MAX_LINE_LENGTH - 6));
        fs::write(root.join("g"), format!("x\n{last}")).unwrap();
        assert_eq!(
            grep(&ctx, json!({"pattern": "needle", "path": "g"})).unwrap(),
            format!("{}:2:{last}", root.join("g").display())
        );
    }

    #[test]
    fn lines_are_matched_as_the_reference_decodes_them() {
        let (_d, root, ctx) = setup();
        let f = root.join("f").display().to_string();
        // Invalid UTF-8 is U+FFFD to the pattern too, so `.` and `\x{FFFD}` match it.
        fs::write(root.join("f"), b"caf\xe9\nplain\n").unwrap();
        assert_eq!(grep(&ctx, json!({"pattern": "^caf.$"})).unwrap(), format!("{f}:1:caf\u{fffd}"));
        assert_eq!(grep(&ctx, json!({"pattern": "\\x{FFFD}"})).unwrap(), format!("{f}:1:caf\u{fffd}"));
        // Every trailing `\r` goes, an inner one stays and `.` matches it.
        fs::write(root.join("f"), "end\r\r\na\rb\n").unwrap();
        assert_eq!(grep(&ctx, json!({"pattern": "d$"})).unwrap(), format!("{f}:1:end"));
        assert_eq!(grep(&ctx, json!({"pattern": "^a.b$"})).unwrap(), format!("{f}:2:a\rb"));
        // A pattern naming `\n` is valid and matches no line.
        assert_eq!(grep(&ctx, json!({"pattern": "end\\nx"})).unwrap(), "no matches");
        // No BOM sniffing: a UTF-16 BOM without NULs is searched as raw bytes, and a UTF-8 BOM
        // stays part of the first line.
        fs::write(root.join("f"), b"\xff\xfeneedle\n").unwrap();
        assert_eq!(grep(&ctx, json!({"pattern": "needle"})).unwrap(), format!("{f}:1:\u{fffd}\u{fffd}needle"));
        fs::write(root.join("f"), "\u{feff}needle\n").unwrap();
        assert_eq!(grep(&ctx, json!({"pattern": "^needle"})).unwrap(), "no matches");
        assert_eq!(grep(&ctx, json!({"pattern": "^\u{feff}needle"})).unwrap(), format!("{f}:1:\u{feff}needle"));
    }

    #[test]
    fn stops_after_the_file_limit() {
        let (_d, root, ctx) = setup();
        // Files come before the subdirectory, so the limit is reached before `sub` is searched.
        fs::create_dir(root.join("sub")).unwrap();
        fs::write(root.join("sub/late"), "needle\n").unwrap();
        for i in 0..MAX_FILES {
            fs::write(root.join(format!("f{i:05}")), "").unwrap();
        }
        fs::write(root.join(format!("f{:05}", MAX_FILES - 1)), "needle\n").unwrap();
        assert_eq!(
            grep(&ctx, json!({"pattern": "needle"})).unwrap(),
            format!("{}:1:needle", root.join(format!("f{:05}", MAX_FILES - 1)).display())
        );
    }

    #[test]
    fn times_out() {
        let (_d, root, _ctx) = setup();
        fs::write(root.join("f"), "x\n".repeat(2000)).unwrap();
        let matcher = RegexMatcher::new("x").unwrap();
        // Walking checks the clock for every entry, searching before every read.
        let mut grep = Grep::new(&matcher, Instant::now());
        assert_eq!(grep.search(&root).unwrap_err().0, "grep: timed out after 30s");
        let mut grep = Grep::new(&matcher, Instant::now());
        assert_eq!(grep.search(&root.join("f")).unwrap_err().0, "grep: timed out after 30s");
        let mut grep = Grep::new(&matcher, Instant::now() + TIMEOUT);
        grep.search(&root).unwrap();
        assert_eq!(grep.hits.len(), 2000);
    }
}
