//! [`Secret`]: a credential that never shows in `Debug` or `Display`.
//!
//! API keys, sessions tokens, webhook signing secrets, provider keys and database URLs (which
//! may carry a password) travel through structs that are logged with `?value` and printed in
//! panics. Holding the value in a `Secret` makes `#[derive(Debug)]` safe on those structs: the
//! only way to the text is [`Secret::expose`], which a reader can search for.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// What `Debug` and `Display` print in place of a secret.
pub const REDACTED: &str = "[redacted]";

/// A secret string. `Debug` and `Display` print [`REDACTED`]; serde reads and writes the bare
/// string (a wire field holding a secret is sent as one, on purpose).
#[derive(Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The secret's text, for the one place that must use it (a header, a signature, a
    /// connection).
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The secret's text, owned.
    pub fn into_exposed(self) -> String {
        self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

impl From<String> for Secret {
    fn from(value: String) -> Self {
        Self(value)
    }
}

impl From<&str> for Secret {
    fn from(value: &str) -> Self {
        Self(value.to_owned())
    }
}

/// So that a command-line argument or an environment variable can be a `Secret`.
impl FromStr for Secret {
    type Err = std::convert::Infallible;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(Self(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const VALUE: &str = "sk-very-secret-0123456789";

    #[derive(Debug)]
    #[allow(dead_code)] // read only through Debug
    struct Holder {
        name: &'static str,
        key: Secret,
        optional: Option<Secret>,
        many: Vec<Secret>,
    }

    #[test]
    fn debug_and_display_never_show_the_value() {
        let s = Secret::new(VALUE);
        let holder = Holder { name: "h", key: s.clone(), optional: Some(s.clone()), many: vec![s.clone()] };
        for printed in [
            format!("{s:?}"),
            format!("{s:#?}"),
            format!("{s}"),
            format!("{s:>40}"),
            format!("{holder:?}"),
            format!("{holder:#?}"),
        ] {
            assert!(!printed.contains(VALUE) && !printed.contains("sk-"), "{printed}");
            assert!(printed.contains(REDACTED), "{printed}");
        }
        assert_eq!(format!("{s:?}"), "[redacted]");
        assert_eq!(s.to_string(), "[redacted]");
    }

    #[test]
    fn the_value_is_reachable_only_on_purpose() {
        let s: Secret = VALUE.parse().unwrap();
        assert_eq!(s.expose(), VALUE);
        assert_eq!(s.clone().into_exposed(), VALUE);
        assert_eq!(s, Secret::from(VALUE.to_owned()));
        assert!(!s.is_empty() && Secret::default().is_empty());
    }

    #[test]
    fn serde_carries_the_bare_string() {
        let s = Secret::new(VALUE);
        assert_eq!(serde_json::to_string(&s).unwrap(), format!("\"{VALUE}\""));
        assert_eq!(serde_json::from_str::<Secret>(&format!("\"{VALUE}\"")).unwrap(), s);
    }
}
