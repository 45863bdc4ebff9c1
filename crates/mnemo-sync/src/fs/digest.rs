//! [`Digest`]: a file's or memory's SHA-256, as 32 bytes.
//!
//! The engine keeps a digest per path in several maps (the baseline, the last scan, the last
//! listing, the hash cache); as bytes each costs 32 bytes in place, where the API's lowercase hex
//! `String` cost 24 bytes in place plus an 80-byte allocation. Hex appears only at the edges: the
//! API's `content_sha256` fields, the journal, logs.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sha2::Digest as _;

/// A SHA-256. Displays (and serialises) as the API's 64 lowercase hex characters.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Digest([u8; 32]);

impl Digest {
    /// The digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        Self(sha2::Sha256::digest(bytes).into())
    }

    /// A digest given as its bytes.
    pub const fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }

    /// Its bytes.
    pub const fn into_bytes(self) -> [u8; 32] {
        self.0
    }

    /// Parses the API's form: 64 hexadecimal characters (either case, as a lenient reader of a
    /// server's answer); `None` for anything else.
    pub fn parse_hex(hex: &str) -> Option<Self> {
        let mut out = [0u8; 32];
        hex::decode_to_slice(hex, &mut out).ok()?;
        Some(Self(out))
    }

    /// The API's form: 64 lowercase hexadecimal characters.
    pub fn to_hex(self) -> String {
        hex::encode(self.0)
    }
}

impl From<sha2::Sha256> for Digest {
    fn from(hasher: sha2::Sha256) -> Self {
        Self(hasher.finalize().into())
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut buf = [0u8; 64];
        hex::encode_to_slice(self.0, &mut buf).map_err(|_| fmt::Error)?;
        f.write_str(std::str::from_utf8(&buf).map_err(|_| fmt::Error)?)
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl Serialize for Digest {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Digest {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let hex = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        Self::parse_hex(&hex).ok_or_else(|| serde::de::Error::custom("not a SHA-256 (64 hexadecimal characters)"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips_and_matches_the_apis_digest() {
        let d = Digest::of(b"hello");
        assert_eq!(d.to_hex(), mnemo_api::content_sha256(b"hello"));
        assert_eq!(d.to_string(), d.to_hex());
        assert_eq!(Digest::parse_hex(&d.to_hex()), Some(d));
        assert_eq!(Digest::parse_hex(&d.to_hex().to_uppercase()), Some(d), "a server's uppercase is read");
        assert_eq!(serde_json::to_string(&d).unwrap(), format!("\"{d}\""));
        assert_eq!(serde_json::from_str::<Digest>(&format!("\"{d}\"")).unwrap(), d);
    }

    #[test]
    fn anything_but_64_hex_characters_is_refused() {
        let hex = Digest::of(b"x").to_hex();
        for bad in ["", "abc", &hex[..63], &format!("{hex}0"), &format!("{}g", &hex[..63]), &"é".repeat(32)] {
            assert_eq!(Digest::parse_hex(bad), None, "{bad:?}");
        }
        assert!(serde_json::from_str::<Digest>("\"not-a-digest\"").is_err());
    }
}
