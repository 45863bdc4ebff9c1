//! Python's `fnmatch` patterns (one path component each) as `globset` matchers: no escapes,
//! no `{a,b}` alternation, `[!…]` negation, an unclosed `[` literal, reversed ranges dropped.

use globset::{GlobBuilder, GlobMatcher};

/// The matcher of one wildcard component; `Ok(None)` when it can never match anything.
pub(super) fn matcher(component: &str) -> Result<Option<GlobMatcher>, String> {
    fnmatch_to_globset(component).map(|glob| compile(&glob)).transpose()
}

fn compile(glob: &str) -> Result<GlobMatcher, String> {
    let glob =
        GlobBuilder::new(glob).literal_separator(true).backslash_escape(true).build().map_err(|e| e.to_string())?;
    Ok(glob.compile_matcher())
}

/// Translates one `fnmatch` component (Python's `fnmatch.translate` rules) into a `globset`
/// pattern with the same meaning, or `None` when the component can never match.
///
/// `fnmatch` knows no escapes and no alternation, treats an unclosed `[` as a literal, negates a
/// class with `!` only (a leading `^` is literal) and drops reversed ranges; everything literal is
/// escaped for `globset`, and each class is rebuilt from the set of characters it denotes.
fn fnmatch_to_globset(pat: &str) -> Option<String> {
    let p: Vec<char> = pat.chars().collect();
    let mut out = String::new();
    let mut last_star = false;
    let mut i = 0;
    while i < p.len() {
        let c = p[i];
        i += 1;
        match c {
            '*' => {
                if !last_star {
                    out.push('*');
                }
                last_star = true;
                continue;
            }
            '?' => out.push('?'),
            '[' => {
                let mut j = i;
                if j < p.len() && p[j] == '!' {
                    j += 1;
                }
                if j < p.len() && p[j] == ']' {
                    j += 1;
                }
                while j < p.len() && p[j] != ']' {
                    j += 1;
                }
                if j >= p.len() {
                    out.push_str("\\[");
                } else {
                    match class_set(&p[i..j]) {
                        ClassSet::Never => return None,
                        ClassSet::Any => out.push('?'),
                        ClassSet::Set { negated, ranges } => out.push_str(&globset_class(negated, ranges)),
                    }
                    i = j + 1;
                }
            }
            c => push_literal(&mut out, c),
        }
        last_star = false;
    }
    Some(out)
}

fn push_literal(out: &mut String, c: char) {
    if matches!(c, '\\' | '*' | '?' | '[' | ']' | '{' | '}' | ',') {
        out.push('\\');
    }
    out.push(c);
}

#[derive(Debug, PartialEq)]
enum ClassSet {
    /// Matches nothing (every range was reversed).
    Never,
    /// Matches any character (`[!` followed by nothing left).
    Any,
    Set {
        negated: bool,
        ranges: Vec<(char, char)>,
    },
}

/// The characters a `fnmatch` class denotes, given the text between its brackets.
fn class_set(content: &[char]) -> ClassSet {
    let mut chunks: Vec<Vec<char>> = if content.contains(&'-') {
        // Hyphens that form ranges split the class into chunks; a range joins the last character
        // of one chunk with the first of the next, every other character is literal.
        let mut chunks = Vec::new();
        let mut i = 0;
        let mut k = if content[0] == '!' { 2 } else { 1 };
        while let Some(pos) = content.get(k..).and_then(|rest| rest.iter().position(|&c| c == '-')).map(|p| k + p) {
            chunks.push(content[i..pos].to_vec());
            i = pos + 1;
            k = pos + 3;
        }
        let last = &content[i..];
        if last.is_empty() {
            if let Some(prev) = chunks.last_mut() {
                prev.push('-');
            }
        } else {
            chunks.push(last.to_vec());
        }
        // Drop reversed ranges by merging their chunks.
        for k in (1..chunks.len()).rev() {
            if let (Some(&hi), Some(&lo)) = (chunks[k - 1].last(), chunks[k].first())
                && hi > lo
            {
                let next = chunks.remove(k);
                let prev = &mut chunks[k - 1];
                prev.pop();
                prev.extend_from_slice(&next[1..]);
            }
        }
        chunks
    } else {
        vec![content.to_vec()]
    };
    if chunks.len() == 1 && chunks[0].is_empty() {
        return ClassSet::Never;
    }
    if chunks.len() == 1 && chunks[0] == ['!'] {
        return ClassSet::Any;
    }
    let negated = chunks[0].first() == Some(&'!');
    if negated {
        chunks[0].remove(0);
    }
    let mut ranges: Vec<(char, char)> = chunks.iter().flatten().map(|&c| (c, c)).collect();
    ranges.extend(chunks.windows(2).filter_map(|w| Some((*w[0].last()?, *w[1].first()?))));
    ClassSet::Set { negated, ranges }
}

/// Writes a character set as a `globset` class. `globset` reads `]` as a literal only first,
/// `-` as a literal only first or last, `!`/`^` first as negation and `[:` as a POSIX class, so
/// the set is normalised into ranges written `lo-hi` and those characters are placed where they
/// are literal.
fn globset_class(negated: bool, ranges: Vec<(char, char)>) -> String {
    let (mut items, has_bracket, has_dash) = split_out(normalise(ranges), &[']', '-']);
    let mut dash_first = false;
    if !negated && !has_bracket && items.first().is_some_and(|r| matches!(r.0, '!' | '^')) {
        // Start with an item whose first character does not read as negation.
        if let Some(pos) = items.iter().position(|r| !matches!(r.0, '!' | '^')) {
            items.swap(0, pos);
        } else if let Some(pos) = items.iter().position(|r| r.0 < r.1) {
            let (lo, hi) = items[pos];
            items[pos] = (lo, lo);
            let next = char::from_u32(u32::from(lo) + 1).unwrap_or(hi);
            items.insert(0, (next, hi));
        } else if has_dash {
            dash_first = true;
        } else {
            // Only `!` and/or `^`: no class can start with them, so spell the alternatives out.
            let alts: Vec<String> = items.iter().map(|r| format!("\\{}", r.0)).collect();
            return if alts.len() == 1 { alts[0].clone() } else { format!("{{{}}}", alts.join(",")) };
        }
    }
    let mut s = String::from("[");
    if negated {
        s.push('!');
    }
    if has_bracket {
        s.push(']');
    }
    if dash_first {
        s.push('-');
    }
    for (lo, hi) in items {
        s.push(lo);
        s.push('-');
        s.push(hi);
    }
    if has_dash && !dash_first {
        s.push('-');
    }
    s.push(']');
    s
}

/// Sorted, merged ranges.
fn normalise(mut ranges: Vec<(char, char)>) -> Vec<(char, char)> {
    ranges.sort();
    let mut out: Vec<(char, char)> = Vec::with_capacity(ranges.len());
    for (lo, hi) in ranges {
        match out.last_mut() {
            Some(last) if u32::from(lo) <= u32::from(last.1) + 1 => last.1 = last.1.max(hi),
            _ => out.push((lo, hi)),
        }
    }
    out
}

/// Removes `specials` (ASCII) from the ranges; reports whether the first two were present.
fn split_out(ranges: Vec<(char, char)>, specials: &[char; 2]) -> (Vec<(char, char)>, bool, bool) {
    let mut found = [false; 2];
    let mut out = ranges;
    for (n, &special) in specials.iter().enumerate() {
        let mut next = Vec::with_capacity(out.len() + 1);
        for (lo, hi) in out {
            if lo <= special && special <= hi {
                found[n] = true;
                let below = char::from_u32(u32::from(special) - 1).unwrap_or(special);
                let above = char::from_u32(u32::from(special) + 1).unwrap_or(special);
                if lo < special {
                    next.push((lo, below));
                }
                if special < hi {
                    next.push((above, hi));
                }
            } else {
                next.push((lo, hi));
            }
        }
        out = next;
    }
    (out, found[0], found[1])
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    /// Whether the fnmatch `pattern` matches `name` (through the globset translation).
    fn fnmatch(pattern: &str, name: &str) -> bool {
        fnmatch_to_globset(pattern).is_some_and(|g| compile(&g).unwrap().is_match(Path::new(name)))
    }

    #[test]
    fn fnmatch_semantics() {
        for (pattern, name, matches) in [
            ("*.py", ".hidden.py", true),
            ("a?c", "abc", true),
            ("a?c", "ac", false),
            // No alternation, no escapes.
            ("{a,b}", "{a,b}", true),
            ("{a,b}", "a", false),
            ("a\\*", "a\\xyz", true),
            // Classes.
            ("[abc]", "b", true),
            ("[abc]", "d", false),
            ("[!abc]", "d", true),
            ("[!abc]", "a", false),
            ("[a-c]x", "bx", true),
            ("[^a]", "^", true),
            ("[^a]", "b", false),
            ("[]]", "]", true),
            ("[!]]", "a", true),
            ("[!]]", "]", false),
            ("[a-]", "-", true),
            ("[-a]", "-", true),
            ("[a-c-e]", "-", true),
            ("[a-c-e]", "d", false),
            ("[!-a]", "b", true),
            ("[!-a]", "-", false),
            ("[[:]", ":", true),
            ("[[:]", "[", true),
            ("[!]", "[!]", true),
            ("[abc", "[abc", true),
            // A reversed range is dropped; an empty class matches nothing, `[!` + nothing anything.
            ("[z-a]", "m", false),
            ("[!a-Z]", "q", true),
            ("[^!]", "!", true),
            ("[^!]", "^", true),
            ("[!^]", "a", true),
            ("[\\]", "\\", true),
            ("*", "a\nb", true),
            ("x[*]", "x*", true),
            ("x[*]", "xy", false),
        ] {
            assert_eq!(fnmatch(pattern, name), matches, "{pattern:?} against {name:?}");
        }
    }

    #[test]
    fn class_sets_follow_fnmatch() {
        let set = |s: &str| class_set(&s.chars().collect::<Vec<_>>());
        assert_eq!(
            set("a-c-e"),
            ClassSet::Set { negated: false, ranges: vec![('a', 'a'), ('c', 'c'), ('-', '-'), ('e', 'e'), ('a', 'c')] }
        );
        assert_eq!(set("z-a"), ClassSet::Never);
        assert_eq!(set("!a-Z"), ClassSet::Any);
    }
}
