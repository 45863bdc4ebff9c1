//! What the tools do to a memory's text, as pure functions: a numbered view, `str_replace` and
//! `insert`, each refusal worded for a model to act on.

/// `text` with 1-based line numbers (right-aligned to six columns, a tab, the line), lines
/// `range` only when given (`[start, end]`, inclusive, `end = -1` for the last).
pub(crate) fn numbered(text: &str, range: Option<[i64; 2]>) -> Result<String, String> {
    let lines: Vec<&str> = text.lines().collect();
    let (start, end) = match range {
        None => (1, lines.len()),
        Some([start, end]) => {
            let n = lines.len() as i64;
            let end = if end == -1 { n } else { end };
            if start < 1 || start > n.max(1) || end < start || end > n {
                let [first, last] = range.unwrap_or_default();
                return Err(format!(
                    "view_range [{first}, {last}] is outside the file's lines 1 to {n} (end -1 means the last line)"
                ));
            }
            (start as usize, end as usize)
        }
    };
    let mut out = String::new();
    for (i, line) in lines.iter().enumerate().take(end).skip(start - 1) {
        out.push_str(&format!("{:>6}\t{line}\n", i + 1));
    }
    Ok(out)
}

/// `text` with its one occurrence of `old` replaced by `new`.
pub(crate) fn str_replace(text: &str, old: &str, new: &str) -> Result<String, String> {
    if old.is_empty() {
        return Err("old_str is empty: give the exact text to replace".into());
    }
    let found: Vec<usize> = text.match_indices(old).map(|(at, _)| at).collect();
    match found.as_slice() {
        [] => Err("old_str does not occur in the file: view it and copy the exact text, whitespace included".into()),
        [at] => Ok(format!("{}{new}{}", &text[..*at], &text[at + old.len()..])),
        many => {
            let lines: Vec<String> =
                many.iter().map(|at| (text[..*at].matches('\n').count() + 1).to_string()).collect();
            Err(format!(
                "old_str occurs {} times (lines {}): include more of the surrounding text so it occurs once",
                many.len(),
                lines.join(", ")
            ))
        }
    }
}

/// `text` with `new` inserted after line `after` (0: at the start).
pub(crate) fn insert(text: &str, after: u64, new: &str) -> Result<String, String> {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let count = text.lines().count() as u64;
    if after > count {
        return Err(format!(
            "insert_line {after} is past the file's end: it has {count} lines (0 inserts at the start)"
        ));
    }
    let mut new = new.to_owned();
    if !new.ends_with('\n') {
        new.push('\n');
    }
    let mut out = String::with_capacity(text.len() + new.len() + 1);
    for line in &lines[..after as usize] {
        out.push_str(line);
    }
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(&new);
    for line in &lines[after as usize..] {
        out.push_str(line);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn views_number_lines() {
        let text = "one\ntwo\nthree\n";
        assert_eq!(numbered(text, None).unwrap(), "     1\tone\n     2\ttwo\n     3\tthree\n");
        assert_eq!(numbered(text, Some([2, 3])).unwrap(), "     2\ttwo\n     3\tthree\n");
        assert_eq!(numbered(text, Some([3, -1])).unwrap(), "     3\tthree\n");
        assert_eq!(numbered("", None).unwrap(), "");
        for bad in [[0, 1], [4, 4], [2, 1], [1, 9]] {
            let e = numbered(text, Some(bad)).unwrap_err();
            assert!(e.contains("outside the file's lines 1 to 3"), "{bad:?}: {e}");
        }
    }

    #[test]
    fn str_replace_needs_exactly_one_occurrence() {
        #[rustfmt::skip]
        let rows = [
            ("one occurrence", "a\nb\nc\n", "b", "B", Ok("a\nB\nc\n".to_owned())),
            ("across lines", "a\nb\nc\n", "a\nb", "ab", Ok("ab\nc\n".to_owned())),
            ("to nothing", "keep drop", " drop", "", Ok("keep".to_owned())),
            ("missing", "a\n", "z", "y", Err("does not occur")),
            ("twice, with its lines", "x\ny\nx\n", "x", "z", Err("occurs 2 times (lines 1, 3)")),
            ("empty", "a", "", "b", Err("old_str is empty")),
        ];
        for (rule, text, old, new, expected) in rows {
            match (str_replace(text, old, new), expected) {
                (Ok(out), Ok(want)) => assert_eq!(out, want, "rule: {rule}"),
                (Err(e), Err(want)) => assert!(e.contains(want), "rule: {rule}: {e}"),
                (got, want) => panic!("rule: {rule}: {got:?}, expected {want:?}"),
            }
        }
    }

    #[test]
    fn insert_goes_after_the_line_given() {
        #[rustfmt::skip]
        let rows = [
            ("at the start", "a\nb\n", 0, "new", Ok("new\na\nb\n")),
            ("in the middle", "a\nb\n", 1, "new", Ok("a\nnew\nb\n")),
            ("at the end", "a\nb\n", 2, "new\n", Ok("a\nb\nnew\n")),
            ("after a last line without newline", "a\nb", 2, "new", Ok("a\nb\nnew\n")),
            ("into an empty file", "", 0, "first", Ok("first\n")),
            ("past the end", "a\n", 2, "x", Err("past the file's end: it has 1 lines")),
        ];
        for (rule, text, after, new, expected) in rows {
            match (insert(text, after, new), expected) {
                (Ok(out), Ok(want)) => assert_eq!(out, want, "rule: {rule}"),
                (Err(e), Err(want)) => assert!(e.contains(want), "rule: {rule}: {e}"),
                (got, want) => panic!("rule: {rule}: {got:?}, expected {want:?}"),
            }
        }
    }
}
