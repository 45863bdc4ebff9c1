//! The HTTP headers of the API that both ends must spell alike.

/// The `anthropic-version` a client sends on every request.
pub const API_VERSION: &str = "2026-10-21";
/// The header that names the betas a request opts into.
pub const BETA_HEADER: &str = "anthropic-beta";
/// The beta the memory endpoints are called under.
pub const MEMORY_BETA: &str = "agent-memory-2026-07-22";
/// The beta of environments, their work queue, agents and sessions.
pub const MANAGED_AGENTS_BETA: &str = "managed-agents-2026-04-01";
/// The beta of dreams (`/v1/dreams`).
pub const DREAMING_BETA: &str = "dreaming-2026-04-21";
/// Sent by `mnemo serve` on every answer: the mnemo extensions it serves, comma-separated. A
/// client learns from any answer (an error included) that it talks to `mnemo serve`; the hosted
/// API sends no such header.
pub const EXTENSIONS_HEADER: &str = "mnemo-extensions";
/// The extension of [`EXTENSIONS_HEADER`] that is a store's memory stream
/// (`GET /v1/memory_stores/{store}/memories:stream`).
pub const MEMORY_STREAM_EXTENSION: &str = "memory-stream";
/// The extension of [`EXTENSIONS_HEADER`] that applies an ordered batch of memory writes in one
/// request (`POST /v1/memory_stores/{store}/memories:batch`).
pub const MEMORY_BATCH_EXTENSION: &str = "memory-batch";
/// The extension of [`EXTENSIONS_HEADER`] that searches memories
/// (`GET /v1/memory_stores/{store}/memories:search` and `GET /v1/memories:search`).
pub const MEMORY_SEARCH_EXTENSION: &str = "memory-search";
/// The extension of [`EXTENSIONS_HEADER`] that says memory searches may rank by meaning
/// (`mode=semantic|hybrid`): the server has an embeddings provider.
pub const MEMORY_SEARCH_SEMANTIC_EXTENSION: &str = "memory-search-semantic";
/// The extension of [`EXTENSIONS_HEADER`] that reads and sets a store's version retention
/// (`GET`/`POST /v1/memory_stores/{store}/version_retention`).
pub const VERSION_RETENTION_EXTENSION: &str = "version-retention";

/// Names the client that sends a memory write, and the change feed it follows (a mnemo
/// extension): a feed opened with `content=inline` and this header leaves the content out of
/// the entries of versions written under the same id, because their writer holds those bytes
/// already (the entry keeps its digest, so the writer knows its own upload coming back). The
/// value is a [`WriterId`]. A client that sends none, or a write made through another replica,
/// gets every entry's content as before.
pub const WRITER_HEADER: &str = "mnemo-writer";

/// The value of [`WRITER_HEADER`]: 16 to 64 ASCII letters, digits, `-` or `_`, chosen at random
/// by the client (it is no credential: someone who sent another's id would only make that
/// client's feed leave out content it then fetches).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct WriterId(String);

impl WriterId {
    /// A new random id (32 hex digits).
    pub fn random() -> Self {
        use std::fmt::Write as _;
        let bytes: [u8; 16] = rand::random();
        let mut id = String::with_capacity(32);
        for b in bytes {
            let _ = write!(id, "{b:02x}");
        }
        Self(id)
    }

    /// Checks a header's value; the error says what is wrong with it.
    pub fn parse(raw: &str) -> Result<Self, String> {
        let ok =
            (16..=64).contains(&raw.len()) && raw.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if ok {
            Ok(Self(raw.to_owned()))
        } else {
            Err(format!(
                "{WRITER_HEADER} must be 16 to 64 ASCII letters, digits, `-` or `_` ({} bytes given)",
                raw.len()
            ))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::WriterId;

    #[test]
    fn writer_ids_are_checked() {
        for good in ["0123456789abcdef", "A-b_C-d_E-f_G-h_", &"x".repeat(64)] {
            assert_eq!(WriterId::parse(good).map(|w| w.as_str().to_owned()), Ok(good.to_owned()), "{good}");
        }
        for bad in [
            "",
            "short",
            "0123456789abcde",
            &"x".repeat(65),
            "0123456789abcdef ",
            "0123456789abcdé",
            "a/b.c:d=e,f;g h!",
        ] {
            let e = WriterId::parse(bad).expect_err(bad);
            assert!(e.starts_with("mnemo-writer must be 16 to 64"), "{e}");
        }
        let (a, b) = (WriterId::random(), WriterId::random());
        assert_ne!(a, b);
        assert_eq!(WriterId::parse(a.as_str()), Ok(a));
    }
}
