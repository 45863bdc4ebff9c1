//! Field readers for answers the client reads leniently: a value of an unexpected type reads
//! as absent (or as the type's default) instead of failing the whole answer.

use serde::Deserialize;
use serde::de::{DeserializeOwned, Deserializer};
use serde_json::Value;

/// A string, or `None` for any other value.
pub(crate) fn string<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::String(s) => Some(s),
        _ => None,
    })
}

/// A non-empty string or a number written out, or `None`.
pub(crate) fn text<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::String(s) if !s.is_empty() => Some(s),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    })
}

/// The value read as `T`, or `T`'s default when it does not fit.
pub(crate) fn lenient<'de, D: Deserializer<'de>, T: DeserializeOwned + Default>(d: D) -> Result<T, D::Error> {
    Ok(serde_json::from_value(Value::deserialize(d)?).unwrap_or_default())
}

/// An array read entry by entry (see [`lenient`]); anything but an array is empty.
pub(crate) fn list<'de, D: Deserializer<'de>, T: DeserializeOwned + Default>(d: D) -> Result<Vec<T>, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::Array(items) => items.into_iter().map(|v| serde_json::from_value(v).unwrap_or_default()).collect(),
        _ => Vec::new(),
    })
}
