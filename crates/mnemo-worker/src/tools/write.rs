//! `write`: creates or overwrites a file with exactly the given text, creating missing parent
//! directories (spec §8.5).

use std::fs;
use std::io::Write;

use serde::Deserialize;
use serde_json::Value;

use super::paths::{self, fs_error};
use super::{ToolContext, ToolError, ToolOutput, parse_input};

#[derive(Debug, Deserialize)]
struct Input {
    file_path: String,
    content: String,
}

pub(super) fn run(ctx: &ToolContext, input: Value) -> Result<ToolOutput, ToolError> {
    let Input { file_path, content } = parse_input("write", input)?;
    let target = paths::resolve(ctx, "write", &file_path)?;
    paths::reject_read_only(ctx, &target, "write", &file_path)?;
    let write = || {
        if let Some(parent) = target.parent() {
            fs::create_dir_all(parent)?;
        }
        paths::open_write(&target)?.write_all(content.as_bytes())
    };
    write().map_err(|e| fs_error("write", &file_path, &e))?;
    // The reference counts characters (code points), not bytes, despite the wording.
    Ok(ToolOutput::text(format!("wrote {} bytes to {file_path}", content.chars().count())).wrote(target))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use serde_json::json;

    use super::*;

    use crate::tools::testing::{setup, text};

    fn write(ctx: &ToolContext, file_path: &str, content: &str) -> Result<String, String> {
        text(run(ctx, json!({"file_path": file_path, "content": content})))
    }

    #[test]
    fn writes_exact_bytes_and_creates_parents() {
        let (_d, root, ctx) = setup();
        assert_eq!(write(&ctx, "a/b/c.txt", "héllo\r\n").unwrap(), "wrote 7 bytes to a/b/c.txt");
        assert_eq!(fs::read(root.join("a/b/c.txt")).unwrap(), "héllo\r\n".as_bytes());
        // Overwrites (truncating) an existing file.
        assert_eq!(write(&ctx, "a/b/c.txt", "x").unwrap(), "wrote 1 bytes to a/b/c.txt");
        assert_eq!(fs::read_to_string(root.join("a/b/c.txt")).unwrap(), "x");
        assert_eq!(write(&ctx, "empty", "").unwrap(), "wrote 0 bytes to empty");
        assert_eq!(fs::read(root.join("empty")).unwrap(), b"");
    }

    #[test]
    fn refuses_read_only_roots() {
        let (_d, root, mut ctx) = setup();
        fs::create_dir(root.join("ro")).unwrap();
        ctx.read_only_roots.push(root.join("ro"));
        assert_eq!(
            write(&ctx, "ro/new.txt", "x").unwrap_err(),
            format!("write: ro/new.txt is inside read-only directory {}", root.join("ro").display())
        );
        assert!(!root.join("ro/new.txt").exists());
        // Reaching the read-only root through a symlink is refused too.
        symlink(root.join("ro"), root.join("alias")).unwrap();
        assert!(write(&ctx, "alias/new.txt", "x").unwrap_err().contains("is inside read-only directory"));
    }

    #[test]
    fn refuses_symlink_escapes() {
        let (_d, root, ctx) = setup();
        let outside = tempfile::tempdir().unwrap();
        symlink(outside.path().join("planted"), root.join("dangling")).unwrap();
        assert_eq!(
            write(&ctx, "dangling", "x").unwrap_err(),
            "write: path 'dangling' is outside the session's working directory"
        );
        assert!(!outside.path().join("planted").exists());
    }

    #[test]
    fn writing_through_an_inside_symlink_writes_its_target() {
        let (_d, root, ctx) = setup();
        symlink("real.txt", root.join("link.txt")).unwrap();
        write(&ctx, "link.txt", "data").unwrap();
        assert_eq!(fs::read_to_string(root.join("real.txt")).unwrap(), "data");
        assert!(fs::symlink_metadata(root.join("link.txt")).unwrap().file_type().is_symlink());
    }

    #[test]
    fn filesystem_errors_are_normalised() {
        let (_d, root, ctx) = setup();
        fs::create_dir(root.join("dir")).unwrap();
        fs::write(root.join("file"), "").unwrap();
        assert_eq!(write(&ctx, "dir", "x").unwrap_err(), "write: dir: is a directory");
        assert_eq!(write(&ctx, "file/sub/x", "x").unwrap_err(), "write: file/sub/x: not a directory");
    }
}
