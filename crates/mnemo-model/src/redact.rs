//! Keeping the model key out of what a provider says.
//!
//! A provider's error text (an HTTP error body, an error event in the stream, a transport
//! error) can hold the key the call carried: a gateway that echoes `x-api-key` or
//! `Authorization: Bearer …` in its complaint, a proxy that prints the request it refused.
//! [`clean`] is applied to every such text before it leaves this crate (inside a
//! [`ModelError`](crate::ModelError)): the key is cut out, control characters become spaces
//! (a text that reaches a log line cannot forge another line) and the result is capped at
//! [`MAX_TEXT_BYTES`].
//!
//! **What is cut.** Every run of at least [`MIN_RUN`] characters of the text that also occurs
//! in the key (ASCII letters compared without case), which covers the whole key, the key in
//! `Bearer <key>` form, the key cut in two (each half at least [`MIN_RUN`] long), and a key
//! quoted in part. A key shorter than [`MIN_RUN`] is cut where it occurs whole.
//!
//! **Why [`MIN_RUN`] is 8.** A provider's key is random text (base62/base64: about 6 bits per
//! character), so what a leaked fragment of `r` characters gives away is about `6·r` bits of a
//! key of hundreds (Anthropic keys carry ~90 random characters, OpenAI's ~48): a run of 7
//! leaves well over 200 bits unknown. Below 8, cutting would start to hit ordinary words that
//! merely share letters with the key's public prefix (`sk-`, `api`), and fragments that short
//! cannot be told apart from chance: 8 characters of a random key turn up by chance in a
//! 64 KiB text with a probability near 2⁻³⁰. Shorter fragments are not a channel either,
//! because the `session.error` events the sandbox can read carry no provider text at all (only
//! the HTTP status and the error type); the cut text goes to the operator's logs only.

use std::borrow::Cow;
use std::collections::HashSet;

/// The shortest run of the key that is cut out of a text (see the module documentation).
pub const MIN_RUN: usize = 8;

/// The longest provider text kept (bytes; longer texts are cut at a character boundary and
/// end in `…`).
pub const MAX_TEXT_BYTES: usize = 512;

/// What a cut run of the key is replaced with.
pub use mnemo_api::REDACTED;

/// `text` without any run of `key` of [`MIN_RUN`] characters or more (nor the whole key, when
/// shorter), each maximal run replaced by [`REDACTED`]. `None` or an empty key: unchanged.
pub fn scrub<'a>(text: &'a str, key: Option<&str>) -> Cow<'a, str> {
    let Some(key) = key.filter(|k| !k.is_empty()) else { return Cow::Borrowed(text) };
    let key = key.as_bytes().to_ascii_lowercase();
    let run = MIN_RUN.min(key.len());
    if text.len() < run {
        return Cow::Borrowed(text);
    }
    let windows: HashSet<&[u8]> = key.windows(run).collect();
    let lower = text.as_bytes().to_ascii_lowercase();
    // Maximal covered spans [start, end): every window of the text found in the key covers its bytes.
    let mut spans: Vec<(usize, usize)> = Vec::new();
    for (at, window) in lower.windows(run).enumerate() {
        if windows.contains(window) {
            match spans.last_mut() {
                Some((_, end)) if *end >= at => *end = at + run,
                _ => spans.push((at, at + run)),
            }
        }
    }
    if spans.is_empty() {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut from = 0;
    for (mut start, mut end) in spans {
        // A key is ASCII (it travels in a header), so spans fall on character boundaries;
        // widen them if not, rather than split a character.
        while !text.is_char_boundary(start) {
            start -= 1;
        }
        while !text.is_char_boundary(end) {
            end += 1;
        }
        if start < from {
            start = from;
        }
        out.push_str(&text[from..start]);
        if !out.ends_with(REDACTED) {
            out.push_str(REDACTED);
        }
        from = end.max(from);
    }
    out.push_str(&text[from..]);
    Cow::Owned(out)
}

/// `text` cut to at most `max` bytes at a character boundary, ending in `…` when cut.
pub fn cap(text: &str, max: usize) -> Cow<'_, str> {
    if text.len() <= max {
        return Cow::Borrowed(text);
    }
    let mut end = max.saturating_sub('…'.len_utf8());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    Cow::Owned(format!("{}…", &text[..end]))
}

/// A provider's text as it may be kept: the key cut out ([`scrub`]), control characters as
/// spaces, at most [`MAX_TEXT_BYTES`].
pub fn clean(text: &str, key: Option<&str>) -> String {
    let scrubbed = scrub(text, key);
    let flat: String = scrubbed.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    cap(&flat, MAX_TEXT_BYTES).into_owned()
}

/// A provider's error type (`invalid_request_error`, `rate_limit_exceeded`…) as it may be
/// kept: a short identifier (letters, digits, `_`, `.`, `-`; at most 64) that holds no run of
/// the key; anything else is dropped.
pub fn error_type(kind: &str, key: Option<&str>) -> Option<String> {
    let plain = !kind.is_empty()
        && kind.len() <= 64
        && kind.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
    (plain && matches!(scrub(kind, key), Cow::Borrowed(_))).then(|| kind.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "sk-ant-api03-Xq7vR2mK9pL4wT8nB3cF6hJ1dS5gZ0yA";

    #[test]
    fn scrub_cuts_every_long_run_of_the_key() {
        let key = Some(KEY);
        let head = &KEY[..20];
        let tail = &KEY[20..];
        let cases: &[(&str, &str)] = &[
            // (text, expected)
            ("invalid x-api-key", "invalid x-api-key"),
            (&format!("invalid key {KEY}"), "invalid key [redacted]"),
            (&format!("Authorization: Bearer {KEY}."), "Authorization: Bearer [redacted]."),
            (&format!("{KEY}{KEY}"), "[redacted]"),
            (&format!("key={KEY}&x=1"), "key=[redacted]&x=1"),
            // Split in two, each half long enough.
            (&format!("got {head} … {tail}"), "got [redacted] … [redacted]"),
            // Case changed.
            (&format!("KEY {}", KEY.to_uppercase()), "KEY [redacted]"),
            // A run of exactly MIN_RUN inside other text, and one of MIN_RUN - 1 (kept).
            (&format!("ab{}cd", &KEY[15..23]), "ab[redacted]cd"),
            (&format!("ab{}cd", &KEY[15..22]), &format!("ab{}cd", &KEY[15..22])),
            // Multibyte text around it stays whole.
            (&format!("é{}ü", &KEY[10..30]), "é[redacted]ü"),
            ("", ""),
        ];
        for (text, want) in cases {
            assert_eq!(scrub(text, key), *want, "{text}");
        }
        assert_eq!(scrub(&format!("x {KEY}"), None), format!("x {KEY}"));
        assert_eq!(scrub(&format!("x {KEY}"), Some("")), format!("x {KEY}"));
    }

    #[test]
    fn a_short_key_is_cut_where_it_occurs_whole() {
        assert_eq!(
            scrub("bad key abc12 here; abc1 is not it", Some("abc12")),
            "bad key [redacted] here; abc1 is not it"
        );
        assert_eq!(scrub("k", Some("abc12")), "k");
    }

    #[test]
    fn no_long_run_survives_any_text() {
        use proptest::prelude::*;
        let alphabet: Vec<char> = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_".chars().collect();
        let key = proptest::collection::vec(proptest::sample::select(alphabet), 1..64)
            .prop_map(|v| v.into_iter().collect::<String>());
        proptest!(|(key in key, pieces in proptest::collection::vec((0usize..64, 0usize..64, "[ a-zé]{0,6}"), 0..8))| {
            // A text made of pieces of the key and other characters.
            let mut text = String::new();
            for (a, b, filler) in &pieces {
                let (a, b) = ((*a).min(key.len()), (*b).min(key.len()));
                text.push_str(&key[a.min(b)..a.max(b)]);
                text.push_str(filler);
            }
            let out = scrub(&text, Some(&key)).into_owned();
            let run = MIN_RUN.min(key.len());
            let lower_key = key.to_ascii_lowercase();
            for segment in out.to_ascii_lowercase().split(REDACTED) {
                for w in segment.as_bytes().windows(run) {
                    let w = std::str::from_utf8(w).unwrap_or("");
                    prop_assert!(w.is_empty() || !lower_key.contains(w), "{out:?} holds {w:?} of {key:?}");
                }
            }
        });
    }

    #[test]
    fn cap_cuts_at_a_character_boundary() {
        assert_eq!(cap("short", 10), "short");
        assert_eq!(cap("abcdefghij", 10), "abcdefghij");
        assert_eq!(cap("abcdefghijk", 10), "abcdefg…");
        let long = "é".repeat(100);
        let cut = cap(&long, 11);
        assert!(cut.len() <= 11 && cut.ends_with('…'), "{cut}");
        assert!(cap(&"x".repeat(100_000), MAX_TEXT_BYTES).len() <= MAX_TEXT_BYTES);
    }

    #[test]
    fn clean_scrubs_flattens_and_caps() {
        let text = format!("line one\nfake log line: key {KEY}\r\n{}", "y".repeat(1000));
        let out = clean(&text, Some(KEY));
        assert!(out.starts_with("line one fake log line: key [redacted]  yyy"), "{out}");
        assert!(out.len() <= MAX_TEXT_BYTES && out.ends_with('…'));
        assert!(!out.contains(&KEY[13..21]));
    }

    #[test]
    fn error_types_are_short_identifiers_without_the_key() {
        let cases = [
            ("authentication_error", Some("authentication_error")),
            ("rate_limit_exceeded", Some("rate_limit_exceeded")),
            ("invalid request", None),
            ("", None),
            ("a\nb", None),
            (KEY, None),
            (&KEY[13..30], None),
        ];
        for (kind, want) in cases {
            assert_eq!(error_type(kind, Some(KEY)).as_deref(), want, "{kind}");
        }
        assert_eq!(error_type(&"x".repeat(65), None), None);
    }
}
