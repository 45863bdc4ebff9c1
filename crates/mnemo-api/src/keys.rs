//! API keys' lifecycle as the Admin API names it (admin-api.md §4.2, §8.4).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Where an API key is in its life. `inactive` ↔ `active` is reversible; `archived` and
/// `expired` are final.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ApiKeyStatus {
    Active,
    Inactive,
    Archived,
    Expired,
}

impl ApiKeyStatus {
    /// The wire name (and the stored one).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Active => "active",
            Self::Inactive => "inactive",
            Self::Archived => "archived",
            Self::Expired => "expired",
        }
    }

    /// Parses the wire name.
    pub fn parse(s: &str) -> Option<Self> {
        [Self::Active, Self::Inactive, Self::Archived, Self::Expired].into_iter().find(|k| k.as_str() == s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_parses_back_from_its_wire_name() {
        for status in [ApiKeyStatus::Active, ApiKeyStatus::Inactive, ApiKeyStatus::Archived, ApiKeyStatus::Expired] {
            assert_eq!(ApiKeyStatus::parse(status.as_str()), Some(status));
            assert_eq!(serde_json::to_value(status).unwrap(), status.as_str());
        }
        assert_eq!(ApiKeyStatus::parse("revoked"), None);
    }
}
