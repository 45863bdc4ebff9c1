//! `edit`: replaces an exact string in a text file, once (it must be unique) or everywhere
//! (spec §8.6).

use std::fs;
use std::io::{Read, Write};

use serde::Deserialize;
use serde_json::Value;

use super::paths::{self, fs_error};
use super::{ToolContext, ToolError, ToolOutput, parse_input};

#[derive(Debug, Deserialize)]
struct Input {
    file_path: String,
    old_string: String,
    new_string: String,
    #[serde(default)]
    replace_all: Option<bool>,
}

pub(super) fn run(ctx: &ToolContext, input: Value) -> Result<ToolOutput, ToolError> {
    let Input { file_path, old_string, new_string, replace_all } = parse_input("edit", input)?;
    let replace_all = replace_all.unwrap_or(false);
    let target = paths::resolve(ctx, "edit", &file_path)?;
    paths::reject_read_only(ctx, &target, "edit", &file_path)?;

    // Examined before it is opened: a FIFO must not block, a huge file must not be loaded.
    let meta = fs::symlink_metadata(&target).map_err(|e| fs_error("edit", &file_path, &e))?;
    let not_regular = || ToolError(format!("edit: {file_path}: not a regular file"));
    if !meta.file_type().is_file() {
        return Err(not_regular());
    }
    if let Some(limit) = ctx.max_file_bytes
        && meta.len() > limit
    {
        return Err(ToolError(format!(
            "edit: {file_path} is {} bytes, exceeds {limit}-byte limit. The edit tool loads the whole file and \
             cannot modify a file this large.",
            meta.len()
        )));
    }
    let mut file = paths::open_read(&target).map_err(|e| fs_error("edit", &file_path, &e))?;
    if !file.metadata().map_err(|e| fs_error("edit", &file_path, &e))?.file_type().is_file() {
        return Err(not_regular());
    }
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(|e| fs_error("edit", &file_path, &e))?;
    drop(file);
    let text = String::from_utf8(bytes)
        .map_err(|_| ToolError(format!("edit: {file_path}: not valid UTF-8 text (cannot edit binary files)")))?;

    // Non-overlapping occurrences, as Python's `str.count` (an empty `old_string` matches
    // between every character, like there).
    let count = text.matches(old_string.as_str()).count();
    if count == 0 {
        return Err(ToolError(format!("edit: old_string not found in {file_path}")));
    }
    if !replace_all && count > 1 {
        return Err(ToolError(format!("edit: old_string appears {count} times in {file_path} (must be unique)")));
    }
    let updated =
        if replace_all { text.replace(&old_string, &new_string) } else { text.replacen(&old_string, &new_string, 1) };
    paths::open_write(&target)
        .and_then(|mut f| f.write_all(updated.as_bytes()))
        .map_err(|e| fs_error("edit", &file_path, &e))?;
    let replaced = if replace_all { count } else { 1 };
    Ok(ToolOutput::text(format!("edited {file_path} ({replaced} replacement(s))")).wrote(target))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use serde_json::json;

    use super::*;

    use crate::tools::testing::{setup, text};

    fn edit(ctx: &ToolContext, input: Value) -> Result<String, String> {
        text(run(ctx, input))
    }

    #[test]
    fn replaces_a_unique_occurrence() {
        let (_d, root, ctx) = setup();
        fs::write(root.join("f.txt"), "alpha beta\r\ngamma").unwrap();
        let out = edit(&ctx, json!({"file_path": "f.txt", "old_string": "beta", "new_string": "BETA"})).unwrap();
        assert_eq!(out, "edited f.txt (1 replacement(s))");
        assert_eq!(fs::read_to_string(root.join("f.txt")).unwrap(), "alpha BETA\r\ngamma");
    }

    #[test]
    fn refuses_ambiguous_and_missing_strings() {
        let (_d, root, ctx) = setup();
        fs::write(root.join("f.txt"), "aaaa b b").unwrap();
        assert_eq!(
            edit(&ctx, json!({"file_path": "f.txt", "old_string": "b", "new_string": "c"})).unwrap_err(),
            "edit: old_string appears 2 times in f.txt (must be unique)"
        );
        // Occurrences do not overlap: "aa" is in "aaaa" twice, not three times.
        assert_eq!(
            edit(&ctx, json!({"file_path": "f.txt", "old_string": "aa", "new_string": "x", "replace_all": false}))
                .unwrap_err(),
            "edit: old_string appears 2 times in f.txt (must be unique)"
        );
        assert_eq!(
            edit(&ctx, json!({"file_path": "f.txt", "old_string": "zzz", "new_string": "c"})).unwrap_err(),
            "edit: old_string not found in f.txt"
        );
        assert_eq!(fs::read_to_string(root.join("f.txt")).unwrap(), "aaaa b b");
    }

    #[test]
    fn replace_all_replaces_every_occurrence() {
        let (_d, root, ctx) = setup();
        fs::write(root.join("f.txt"), "aaaaa").unwrap();
        let out = edit(&ctx, json!({"file_path": "f.txt", "old_string": "aa", "new_string": "b", "replace_all": true}))
            .unwrap();
        assert_eq!(out, "edited f.txt (2 replacement(s))");
        assert_eq!(fs::read_to_string(root.join("f.txt")).unwrap(), "bba");
    }

    #[test]
    fn refuses_read_only_roots() {
        let (_d, root, mut ctx) = setup();
        fs::create_dir(root.join("ro")).unwrap();
        fs::write(root.join("ro/f.txt"), "keep").unwrap();
        ctx.read_only_roots.push(root.join("ro"));
        assert_eq!(
            edit(&ctx, json!({"file_path": "ro/f.txt", "old_string": "keep", "new_string": "x"})).unwrap_err(),
            format!("edit: ro/f.txt is inside read-only directory {}", root.join("ro").display())
        );
        assert_eq!(fs::read_to_string(root.join("ro/f.txt")).unwrap(), "keep");
    }

    #[test]
    fn checks_the_file_before_loading_it() {
        let (_d, root, mut ctx) = setup();
        fs::create_dir(root.join("dir")).unwrap();
        let args = |p: &str| json!({"file_path": p, "old_string": "a", "new_string": "b"});
        assert_eq!(edit(&ctx, args("dir")).unwrap_err(), "edit: dir: not a regular file");
        assert_eq!(edit(&ctx, args("nope")).unwrap_err(), "edit: nope: no such file or directory");
        fs::write(root.join("bin"), b"a\xff").unwrap();
        assert_eq!(edit(&ctx, args("bin")).unwrap_err(), "edit: bin: not valid UTF-8 text (cannot edit binary files)");
        fs::write(root.join("big"), "a".repeat(11)).unwrap();
        ctx.max_file_bytes = Some(10);
        assert_eq!(
            edit(&ctx, args("big")).unwrap_err(),
            "edit: big is 11 bytes, exceeds 10-byte limit. The edit tool loads the whole file and cannot modify a \
             file this large."
        );
    }

    #[test]
    fn refuses_symlink_escapes() {
        let (_d, root, ctx) = setup();
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join("victim"), "a").unwrap();
        symlink(outside.path().join("victim"), root.join("link")).unwrap();
        assert_eq!(
            edit(&ctx, json!({"file_path": "link", "old_string": "a", "new_string": "b"})).unwrap_err(),
            "edit: path 'link' is outside the session's working directory"
        );
        assert_eq!(fs::read_to_string(outside.path().join("victim")).unwrap(), "a");
    }
}
