//! Opaque pagination cursors.
//!
//! Every list is keyset-paginated, so a page boundary stays put while other writers change the
//! store: an item appears at most once per traversal.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

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
}

impl Cursor {
    /// The opaque text handed to clients as `next_page`.
    pub fn encode(&self) -> String {
        let raw = match self {
            Self::Before(seq) => format!("s{seq}"),
            Self::After(seq) => format!("n{seq}"),
            Self::AfterPath(p) => format!("a{p}"),
            Self::FromPath(p) => format!("f{p}"),
        };
        URL_SAFE_NO_PAD.encode(raw)
    }

    /// Parses a `page` value received from a client.
    pub fn decode(s: &str) -> Result<Self, StoreError> {
        let bad = || StoreError::InvalidCursor;
        let raw = URL_SAFE_NO_PAD.decode(s.trim_end_matches('=')).map_err(|_| bad())?;
        let raw = String::from_utf8(raw).map_err(|_| bad())?;
        let (tag, rest) = raw.split_at_checked(1).ok_or_else(bad)?;
        match tag {
            "s" => rest.parse().map(Self::Before).map_err(|_| bad()),
            "n" => rest.parse().map(Self::After).map_err(|_| bad()),
            "a" if rest.starts_with('/') => Ok(Self::AfterPath(rest.to_owned())),
            "f" if rest.starts_with('/') => Ok(Self::FromPath(rest.to_owned())),
            _ => Err(bad()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip() {
        for c in [Cursor::Before(42), Cursor::AfterPath("/a/ü b".into()), Cursor::FromPath("/a0".into())] {
            assert_eq!(Cursor::decode(&c.encode()).unwrap(), c);
        }
    }

    #[test]
    fn garbage_is_refused() {
        for s in ["", "!!", "eHl6", &URL_SAFE_NO_PAD.encode("snope"), &URL_SAFE_NO_PAD.encode("anopath")] {
            assert!(Cursor::decode(s).is_err(), "{s}");
        }
    }
}
