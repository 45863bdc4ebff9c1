//! When a stored credential still authenticates.

use mnemo_api::ApiKeyStatus;

use super::work::Micros;

/// Whether an API key in `status`, expiring at `expires_at`, authenticates at `now`: only an
/// `active` key before its expiry (admin-api.md §8.4: a key expires at `expires_at` whether or
/// not the server has written `expired` yet).
pub fn api_key_usable(status: ApiKeyStatus, expires_at: Option<Micros>, now: Micros) -> bool {
    status == ApiKeyStatus::Active && expires_at.is_none_or(|at| now < at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_active_unexpired_key_authenticates() {
        use ApiKeyStatus::*;
        let cases = [
            (Active, None, 10, true),
            (Active, Some(11), 10, true),
            (Active, Some(10), 10, false),
            (Active, Some(9), 10, false),
            (Inactive, None, 10, false),
            (Archived, None, 10, false),
            (Expired, Some(11), 10, false),
        ];
        for (status, expires_at, now, usable) in cases {
            assert_eq!(api_key_usable(status, expires_at, now), usable, "{status:?} {expires_at:?} at {now}");
        }
    }
}
