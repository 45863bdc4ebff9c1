//! `read`: a text file (whole or a range of lines), or an image/PDF as a base64 content block
//! (spec §8.4).
//!
//! The file is examined with `lstat` before it is opened, so a FIFO or a device is refused
//! instead of blocking the worker, and a file too large for the cap is refused before it is
//! loaded; with `view_range` a large file is streamed and only the selected lines are kept.

use std::fs::{self, File};
use std::io::{self, Read};
use std::path::Path;

use base64::Engine;
use serde::Deserialize;
use serde_json::{Value, json};

use super::paths::{self, fs_error};
use super::{ToolContext, ToolError, ToolOutput, parse_input};

/// An image's base64 form must stay within 5 MiB, so its raw size within three quarters of that.
const MAX_IMAGE_BYTES: u64 = (5 * 1024 * 1024 / 4) * 3;
const MAX_PDF_BYTES: u64 = 20 * 1024 * 1024;
const STREAM_CHUNK_BYTES: usize = 64 * 1024;
/// The end of an open-ended range (`end_line` ≤ 0): the reference's `sys.maxsize`.
const OPEN_END: u64 = i64::MAX as u64;

#[derive(Debug, Deserialize)]
struct Input {
    file_path: String,
    #[serde(default)]
    view_range: Option<Vec<i64>>,
}

pub(super) fn run(ctx: &ToolContext, input: Value) -> Result<ToolOutput, ToolError> {
    let Input { file_path, view_range } = parse_input("read", input)?;
    let target = paths::resolve(ctx, "read", &file_path)?;
    // An empty list means no range, like an absent one.
    let view_range = match view_range.as_deref() {
        None | Some([]) => None,
        Some(&[start, end]) => Some((start, end)),
        Some(_) => return Err(ToolError::new("read: view_range must be [start_line, end_line]")),
    };
    let meta = fs::symlink_metadata(&target).map_err(|e| fs_error("read", &file_path, &e))?;
    if !meta.file_type().is_file() {
        return Err(not_regular(&file_path));
    }
    let size = meta.len();

    if let Some(media_type) = binary_media_type(&target) {
        if view_range.is_some() {
            return Err(ToolError::new("read: view_range is not supported for image/PDF files"));
        }
        return read_binary_block(ctx, &target, &file_path, size, media_type).map(|block| ToolOutput {
            content: vec![block],
            is_error: false,
            wrote: None,
        });
    }

    // Over the cap, only a range can be read, streamed.
    let over_cap = |size: u64, limit: u64| match view_range {
        None => Err(ToolError(format!(
            "read: {file_path} is {size} bytes, exceeds {limit}-byte limit. Use the view_range parameter to read \
             specific line ranges, e.g. view_range: [1, 500]."
        ))),
        Some((start_line, end_line)) => {
            LineRange::new(&file_path, start_line, end_line, limit).read(&target).map(ToolOutput::text)
        }
    };
    if let Some(limit) = ctx.max_file_bytes
        && size > limit
    {
        return over_cap(size, limit);
    }
    // Capped as well, in case the file grew since it was measured.
    let bytes = read_at_most(&target, &file_path, ctx.max_file_bytes)?;
    if let Some(limit) = ctx.max_file_bytes
        && bytes.len() as u64 > limit
    {
        return over_cap(bytes.len() as u64, limit);
    }
    let text = String::from_utf8(bytes).map_err(|_| not_utf8(&file_path))?;
    let Some((start_line, end_line)) = view_range else {
        return Ok(ToolOutput::text(text));
    };
    let lines: Vec<&str> = text.split('\n').collect();
    let start = clamp_index(start_line.saturating_sub(1), lines.len());
    let end = if end_line > 0 { clamp_index(end_line, lines.len()) } else { lines.len() };
    Ok(ToolOutput::text(if start < end { lines[start..end].join("\n") } else { String::new() }))
}

fn clamp_index(i: i64, len: usize) -> usize {
    usize::try_from(i.max(0)).map_or(len, |i| i.min(len))
}

fn not_regular(file_path: &str) -> ToolError {
    ToolError(format!("read: {file_path}: not a regular file"))
}

fn not_utf8(file_path: &str) -> ToolError {
    ToolError(format!(
        "read: {file_path}: not valid UTF-8 text (binary files are only supported for image/PDF extensions)"
    ))
}

/// The media type of a file `read` returns as a content block, by its (canonical) extension.
fn binary_media_type(target: &Path) -> Option<&'static str> {
    let ext = target.extension()?.to_str()?.to_lowercase();
    Some(match ext.as_str() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "pdf" => "application/pdf",
        _ => return None,
    })
}

/// Opens the canonical path without following a symlink or blocking on a FIFO, and checks again
/// through the descriptor that it is a regular file.
fn open_regular(target: &Path, file_path: &str) -> Result<File, ToolError> {
    let file = paths::open_read(target).map_err(|e| fs_error("read", file_path, &e))?;
    let meta = file.metadata().map_err(|e| fs_error("read", file_path, &e))?;
    if !meta.file_type().is_file() {
        return Err(not_regular(file_path));
    }
    Ok(file)
}

/// The whole file, or with `cap` at most one byte more than `cap`: a file that grew after it was
/// measured is then still refused by the caller's size check, without being loaded whole.
fn read_at_most(target: &Path, file_path: &str, cap: Option<u64>) -> Result<Vec<u8>, ToolError> {
    let file = open_regular(target, file_path)?;
    let mut bytes = Vec::new();
    let result = match cap {
        Some(limit) => file.take(limit.saturating_add(1)).read_to_end(&mut bytes),
        None => (&file).read_to_end(&mut bytes),
    };
    result.map_err(|e| fs_error("read", file_path, &e))?;
    Ok(bytes)
}

/// An image or PDF as one base64 `image`/`document` block. The text cap does not apply (its
/// default would refuse most images); the media limits do, tightened by an explicitly configured
/// `max_file_bytes`.
fn read_binary_block(
    ctx: &ToolContext,
    target: &Path,
    file_path: &str,
    size: u64,
    media_type: &str,
) -> Result<Value, ToolError> {
    let pdf = media_type == "application/pdf";
    let mut limit = if pdf { MAX_PDF_BYTES } else { MAX_IMAGE_BYTES };
    if ctx.max_file_bytes_explicit
        && let Some(cap) = ctx.max_file_bytes
    {
        limit = limit.min(cap);
    }
    let too_large = |size: u64| {
        ToolError(format!("read: {file_path} is {size} bytes, exceeds {limit}-byte limit for image/PDF files."))
    };
    if size > limit {
        return Err(too_large(size));
    }
    let bytes = read_at_most(target, file_path, Some(limit))?;
    if bytes.len() as u64 > limit {
        return Err(too_large(bytes.len() as u64));
    }
    let data = base64::engine::general_purpose::STANDARD.encode(bytes);
    Ok(if pdf {
        json!({"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": data}})
    } else {
        json!({"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}})
    })
}

/// Collects lines `[start_line, end_line]` of a file too large to load whole, reading it in
/// chunks and stopping once the range is complete; more than `limit` selected bytes is an error.
#[derive(Debug)]
struct LineRange<'a> {
    file_path: &'a str,
    start_line: i64,
    end_line: i64,
    /// 0-based index of the first selected line.
    start: u64,
    /// 0-based index one past the last selected line.
    end: u64,
    limit: u64,
    /// 0-based index of the line being read.
    line: u64,
    collected: Vec<u8>,
}

impl<'a> LineRange<'a> {
    fn new(file_path: &'a str, start_line: i64, end_line: i64, limit: u64) -> Self {
        let start = u64::try_from(start_line.saturating_sub(1)).unwrap_or(0);
        let end = u64::try_from(end_line).ok().filter(|&e| e > 0).unwrap_or(OPEN_END);
        Self { file_path, start_line, end_line, start, end, limit, line: 0, collected: Vec::new() }
    }

    fn read(mut self, target: &Path) -> Result<String, ToolError> {
        if self.end <= self.start {
            return Ok(String::new());
        }
        let mut file = open_regular(target, self.file_path)?;
        let mut chunk = vec![0; STREAM_CHUNK_BYTES];
        while !self.is_collected() {
            let n = match file.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(fs_error("read", self.file_path, &e)),
            };
            self.collect_from(&chunk[..n])?;
        }
        String::from_utf8(self.collected).map_err(|_| not_utf8(self.file_path))
    }

    fn is_collected(&self) -> bool {
        self.line >= self.end
    }

    fn collect_from(&mut self, chunk: &[u8]) -> Result<(), ToolError> {
        let mut line_start = 0;
        while line_start < chunk.len() && !self.is_collected() {
            let newline = chunk[line_start..].iter().position(|&b| b == b'\n').map(|i| line_start + i);
            let line_end = newline.unwrap_or(chunk.len());
            if self.line >= self.start {
                self.collect(&chunk[line_start..line_end], newline.is_some())?;
            }
            let Some(newline) = newline else { break };
            self.line += 1;
            line_start = newline + 1;
        }
        Ok(())
    }

    fn collect(&mut self, bytes: &[u8], newline_terminated: bool) -> Result<(), ToolError> {
        self.collected.extend_from_slice(bytes);
        // Lines are joined with `\n`; the last selected line gets none.
        if newline_terminated && self.line + 1 < self.end {
            self.collected.push(b'\n');
        }
        if self.collected.len() as u64 > self.limit {
            return Err(self.over_limit());
        }
        Ok(())
    }

    fn over_limit(&self) -> ToolError {
        let (file_path, limit) = (self.file_path, self.limit);
        if self.end - self.start == 1 {
            return ToolError(format!(
                "read: line {} of {file_path} alone exceeds {limit}-byte limit. The read tool cannot return part \
                 of a line, so view_range cannot narrow this further.",
                self.start + 1
            ));
        }
        ToolError(format!(
            "read: view_range [{}, {}] of {file_path} exceeds {limit}-byte limit. Narrow the view_range to read a \
             smaller portion.",
            self.start_line, self.end_line
        ))
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;
    use std::process::Command;
    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;

    use crate::tools::testing::{setup, text};

    fn read(ctx: &ToolContext, input: Value) -> Result<String, String> {
        text(run(ctx, input))
    }

    #[test]
    fn reads_exact_text() {
        let (_d, root, ctx) = setup();
        fs::write(root.join("a.txt"), "one\r\ntwo\n\nthree").unwrap();
        assert_eq!(read(&ctx, json!({"file_path": "a.txt"})).unwrap(), "one\r\ntwo\n\nthree");
        // An empty list is no range.
        assert_eq!(read(&ctx, json!({"file_path": "a.txt", "view_range": []})).unwrap(), "one\r\ntwo\n\nthree");
        fs::write(root.join("empty"), "").unwrap();
        assert_eq!(read(&ctx, json!({"file_path": "empty"})).unwrap(), "(no output)");
    }

    #[test]
    fn view_range_selects_lines() {
        let (_d, root, ctx) = setup();
        fs::write(root.join("a.txt"), "l1\nl2\nl3\nl4\n").unwrap();
        let range = |a: i64, b: i64| read(&ctx, json!({"file_path": "a.txt", "view_range": [a, b]})).unwrap();
        assert_eq!(range(2, 3), "l2\nl3");
        assert_eq!(range(3, 0), "l3\nl4\n");
        assert_eq!(range(3, -1), "l3\nl4\n");
        assert_eq!(range(0, 1), "l1");
        assert_eq!(range(-5, 2), "l1\nl2");
        assert_eq!(range(4, 99), "l4\n");
        assert_eq!(range(9, 10), "(no output)");
        assert_eq!(range(3, 2), "(no output)");
    }

    #[test]
    fn view_range_must_have_two_elements() {
        let (_d, root, ctx) = setup();
        fs::write(root.join("a.txt"), "x").unwrap();
        for range in [json!([1]), json!([1, 2, 3])] {
            assert_eq!(
                read(&ctx, json!({"file_path": "a.txt", "view_range": range})).unwrap_err(),
                "read: view_range must be [start_line, end_line]"
            );
        }
    }

    #[test]
    fn invalid_input_is_an_error() {
        let (_d, _root, ctx) = setup();
        assert!(read(&ctx, json!({"path": "a.txt"})).unwrap_err().starts_with("read: invalid input: "));
    }

    #[test]
    fn missing_directory_and_confinement_errors() {
        let (_d, root, ctx) = setup();
        fs::create_dir(root.join("dir")).unwrap();
        for (file_path, refusal) in [
            ("nope.txt", "read: nope.txt: no such file or directory"),
            ("dir", "read: dir: not a regular file"),
            ("../x", "read: path '../x' is outside the session's working directory"),
        ] {
            assert_eq!(read(&ctx, json!({"file_path": file_path})).unwrap_err(), refusal);
        }
    }

    #[test]
    fn symlink_inside_the_workdir_is_read_through_its_target() {
        let (_d, root, ctx) = setup();
        fs::write(root.join("real.txt"), "content").unwrap();
        symlink("real.txt", root.join("link.txt")).unwrap();
        assert_eq!(read(&ctx, json!({"file_path": "link.txt"})).unwrap(), "content");
    }

    #[test]
    fn fifo_is_refused_without_blocking() {
        let (_d, root, ctx) = setup();
        let fifo = root.join("pipe");
        let status = Command::new("mkfifo").arg(&fifo).status().unwrap();
        assert!(status.success());
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(read(&ctx, json!({"file_path": "pipe"})));
        });
        let result = rx.recv_timeout(Duration::from_secs(10)).expect("read of a FIFO blocked");
        assert_eq!(result.unwrap_err(), "read: pipe: not a regular file");
    }

    #[test]
    fn invalid_utf8_is_refused() {
        let (_d, root, ctx) = setup();
        fs::write(root.join("bin.dat"), b"ok\xff\xfe").unwrap();
        assert_eq!(
            read(&ctx, json!({"file_path": "bin.dat"})).unwrap_err(),
            "read: bin.dat: not valid UTF-8 text (binary files are only supported for image/PDF extensions)"
        );
    }

    #[test]
    fn too_large_without_range_is_refused() {
        let (_d, root, mut ctx) = setup();
        ctx.max_file_bytes = Some(10);
        fs::write(root.join("big.txt"), "0123456789abc").unwrap();
        assert_eq!(
            read(&ctx, json!({"file_path": "big.txt"})).unwrap_err(),
            "read: big.txt is 13 bytes, exceeds 10-byte limit. Use the view_range parameter to read specific line \
             ranges, e.g. view_range: [1, 500]."
        );
        ctx.max_file_bytes = None;
        assert_eq!(read(&ctx, json!({"file_path": "big.txt"})).unwrap(), "0123456789abc");
    }

    #[test]
    fn large_file_streams_view_range_under_the_cap() {
        let (_d, root, mut ctx) = setup();
        ctx.max_file_bytes = Some(20);
        // Longer than one stream chunk, so lines cross chunk boundaries.
        let mut text = String::new();
        for i in 1..=20_000 {
            text.push_str(&format!("line {i}\n"));
        }
        fs::write(root.join("big.txt"), &text).unwrap();
        let range = |a: i64, b: i64| read(&ctx, json!({"file_path": "big.txt", "view_range": [a, b]}));
        assert_eq!(range(2, 3).unwrap(), "line 2\nline 3");
        assert_eq!(range(9999, 10000).unwrap(), "line 9999\nline 10000");
        assert_eq!(range(20000, 0).unwrap(), "line 20000\n");
        assert_eq!(range(30000, 0).unwrap(), "(no output)");
        assert_eq!(range(5, 4).unwrap(), "(no output)");
        assert_eq!(
            range(1, 5).unwrap_err(),
            "read: view_range [1, 5] of big.txt exceeds 20-byte limit. Narrow the view_range to read a smaller \
             portion."
        );
        fs::write(root.join("long.txt"), format!("short\n{}\nshort\n", "x".repeat(100))).unwrap();
        assert_eq!(
            read(&ctx, json!({"file_path": "long.txt", "view_range": [2, 2]})).unwrap_err(),
            "read: line 2 of long.txt alone exceeds 20-byte limit. The read tool cannot return part of a line, so \
             view_range cannot narrow this further."
        );
        // Only the selected bytes are decoded.
        fs::write(
            root.join("mixed.txt"),
            b"ok\n\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\n",
        )
        .unwrap();
        assert_eq!(read(&ctx, json!({"file_path": "mixed.txt", "view_range": [1, 1]})).unwrap(), "ok");
        assert!(read(&ctx, json!({"file_path": "mixed.txt", "view_range": [2, 2]})).unwrap_err().contains("UTF-8"));
    }

    #[test]
    fn image_is_a_base64_block() {
        let (_d, root, ctx) = setup();
        fs::write(root.join("pic.PNG"), b"\x89PNG\r\n\x1a\n\0").unwrap();
        let out = run(&ctx, json!({"file_path": "pic.PNG"})).unwrap();
        assert!(!out.is_error);
        assert_eq!(
            out.content,
            vec![json!({
                "type": "image",
                "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgoA"},
            })]
        );
        fs::write(root.join("photo.jpeg"), b"\xff\xd8").unwrap();
        let out = run(&ctx, json!({"file_path": "photo.jpeg"})).unwrap();
        assert_eq!(out.content[0]["source"]["media_type"], "image/jpeg");
        assert_eq!(
            read(&ctx, json!({"file_path": "pic.PNG", "view_range": [1, 2]})).unwrap_err(),
            "read: view_range is not supported for image/PDF files"
        );
    }

    #[test]
    fn pdf_is_a_document_block() {
        let (_d, root, ctx) = setup();
        fs::write(root.join("doc.pdf"), b"%PDF-1.7").unwrap();
        let out = run(&ctx, json!({"file_path": "doc.pdf"})).unwrap();
        assert_eq!(
            out.content,
            vec![json!({
                "type": "document",
                "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0xLjc="},
            })]
        );
    }

    #[test]
    fn media_limits_ignore_the_default_cap_but_not_an_explicit_one() {
        let (_d, root, mut ctx) = setup();
        ctx.max_file_bytes = Some(4);
        fs::write(root.join("pic.gif"), b"GIF89a").unwrap();
        // The default text cap does not bind images.
        assert!(run(&ctx, json!({"file_path": "pic.gif"})).is_ok());
        ctx.max_file_bytes_explicit = true;
        assert_eq!(
            read(&ctx, json!({"file_path": "pic.gif"})).unwrap_err(),
            "read: pic.gif is 6 bytes, exceeds 4-byte limit for image/PDF files."
        );
        // An explicit "uncapped" leaves the media limits in force.
        ctx.max_file_bytes = None;
        let big = File::create(root.join("huge.webp")).unwrap();
        big.set_len(MAX_IMAGE_BYTES + 1).unwrap();
        assert_eq!(
            read(&ctx, json!({"file_path": "huge.webp"})).unwrap_err(),
            "read: huge.webp is 3932161 bytes, exceeds 3932160-byte limit for image/PDF files."
        );
    }

    #[test]
    fn extension_is_taken_from_the_canonical_path() {
        let (_d, root, ctx) = setup();
        fs::write(root.join("notes.txt"), "text").unwrap();
        symlink("notes.txt", root.join("disguised.png")).unwrap();
        assert_eq!(read(&ctx, json!({"file_path": "disguised.png"})).unwrap(), "text");
    }
}
