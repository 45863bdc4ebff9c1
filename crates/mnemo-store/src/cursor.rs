//! Opaque pagination cursors.
//!
//! Every list is keyset-paginated, so a page boundary stays put while other writers change the
//! store: an item appears at most once per traversal.
//!
//! A cursor carries a check (the first bytes of a SHA-256 of its position), so a cursor that was
//! altered, truncated or mistyped is refused (`400`) instead of quietly starting a page
//! somewhere else. It is no secret: a client that forges one gains nothing it could not list.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest, Sha256};

use crate::StoreError;

/// Where the next page starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cursor {
    /// Rows older than this insertion sequence number (newest-first lists).
    Before(i64),
    /// Rows newer than this insertion sequence number (oldest-first lists).
    After(i64),
    /// Paths strictly greater than this one (path-ordered lists).
    AfterPath(String),
    /// Paths greater than or equal to this one (after a rolled-up prefix, skip its subtree).
    FromPath(String),
    /// The ranked results after this many (search results, which have no stable key: a
    /// write between two pages may move a result across the boundary).
    Offset(u64),
}

impl Cursor {
    /// The opaque text handed to clients as `next_page`.
    pub fn encode(&self) -> String {
        let raw = match self {
            Self::Before(seq) => format!("s{seq}"),
            Self::After(seq) => format!("n{seq}"),
            Self::AfterPath(p) => format!("a{p}"),
            Self::FromPath(p) => format!("f{p}"),
            Self::Offset(n) => format!("o{n}"),
        };
        let mut bytes = raw.into_bytes();
        bytes.extend_from_slice(&check(&bytes));
        URL_SAFE_NO_PAD.encode(bytes)
    }

    /// Parses a `page` value received from a client.
    pub fn decode(s: &str) -> Result<Self, StoreError> {
        let bad = || StoreError::InvalidCursor;
        let mut raw = URL_SAFE_NO_PAD.decode(s.trim_end_matches('=')).map_err(|_| bad())?;
        let body = raw.len().checked_sub(CHECK_BYTES).filter(|n| *n > 0).ok_or_else(bad)?;
        if raw[body..] != check(&raw[..body]) {
            return Err(bad());
        }
        raw.truncate(body);
        let raw = String::from_utf8(raw).map_err(|_| bad())?;
        let (tag, rest) = raw.split_at_checked(1).ok_or_else(bad)?;
        match tag {
            "s" => rest.parse().map(Self::Before).map_err(|_| bad()),
            "n" => rest.parse().map(Self::After).map_err(|_| bad()),
            "a" if rest.starts_with('/') => Ok(Self::AfterPath(rest.to_owned())),
            "f" if rest.starts_with('/') => Ok(Self::FromPath(rest.to_owned())),
            "o" => rest.parse().map(Self::Offset).map_err(|_| bad()),
            _ => Err(bad()),
        }
    }
}

/// How many bytes of check a cursor carries.
const CHECK_BYTES: usize = 4;

fn check(raw: &[u8]) -> [u8; CHECK_BYTES] {
    let digest = Sha256::new().chain_update(b"mnemo cursor\0").chain_update(raw).finalize();
    let mut out = [0; CHECK_BYTES];
    out.copy_from_slice(&digest[..CHECK_BYTES]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip() {
        for c in
            [Cursor::Before(42), Cursor::AfterPath("/a/ü b".into()), Cursor::FromPath("/a0".into()), Cursor::Offset(40)]
        {
            assert_eq!(Cursor::decode(&c.encode()).unwrap(), c);
        }
    }

    proptest::proptest! {
        /// Any change to a cursor's text — a character replaced, one cut off or added — is
        /// refused, never read as another position.
        #[test]
        fn altered_cursors_are_refused(seq in proptest::num::i64::ANY, path in "/[a-zé0-9/ ]{0,40}", kind in 0..4u8,
                                       at in proptest::num::usize::ANY, c in proptest::char::range('-', 'z'), how in 0..3u8) {
            let cursor = match kind {
                0 => Cursor::Before(seq),
                1 => Cursor::After(seq),
                2 => Cursor::AfterPath(path),
                _ => Cursor::FromPath(path),
            };
            let text = cursor.encode();
            let mut chars: Vec<char> = text.chars().collect();
            let i = at % chars.len();
            match how {
                0 => chars[i] = c,
                1 => { chars.remove(i); }
                _ => chars.insert(i, c),
            }
            let altered: String = chars.into_iter().collect();
            if altered != text {
                proptest::prop_assert!(Cursor::decode(&altered).is_err(), "{text} → {altered} was accepted");
            }
        }
    }

    #[test]
    fn garbage_is_refused() {
        for s in ["", "!!", "eHl6", &URL_SAFE_NO_PAD.encode("snope"), &URL_SAFE_NO_PAD.encode("anopath")] {
            assert!(Cursor::decode(s).is_err(), "{s}");
        }
    }
}
