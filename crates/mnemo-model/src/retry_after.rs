//! The `retry-after` header: seconds (integer or decimal) or an HTTP date; OpenAI-compatible
//! servers may also send `retry-after-ms`.

use std::time::{Duration, SystemTime};

use reqwest::header::HeaderMap;

/// The wait a response asked for, if any (a date in the past is zero).
pub(crate) fn parse(headers: &HeaderMap) -> Option<Duration> {
    let ms = headers.get("retry-after-ms").and_then(|v| v.to_str().ok());
    if let Some(d) = ms.and_then(|ms| seconds(ms.trim())).map(|d| d / 1000) {
        return Some(d);
    }
    let value = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?.trim();
    parse_value(value, SystemTime::now())
}

/// One `retry-after` value, relative to `now`.
pub(crate) fn parse_value(value: &str, now: SystemTime) -> Option<Duration> {
    if let Some(d) = seconds(value) {
        return Some(d);
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

fn seconds(value: &str) -> Option<Duration> {
    let n: f64 = value.parse().ok()?;
    // At most a day: a larger value is more likely a mistake than a plan.
    (n.is_finite() && n >= 0.0).then(|| Duration::from_secs_f64(n.min(86_400.0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_decimals_and_dates() {
        let now = httpdate::parse_http_date("Wed, 02 Dec 2026 07:00:00 GMT").unwrap();
        assert_eq!(parse_value("7", now), Some(Duration::from_secs(7)));
        assert_eq!(parse_value("1.5", now), Some(Duration::from_millis(1500)));
        assert_eq!(parse_value("Wed, 02 Dec 2026 07:00:30 GMT", now), Some(Duration::from_secs(30)));
        assert_eq!(parse_value("Wed, 02 Dec 2026 06:00:00 GMT", now), Some(Duration::ZERO));
        assert_eq!(parse_value("soon", now), None);
        assert_eq!(parse_value("-3", now), None);
        assert_eq!(parse_value("", now), None);
    }

    #[test]
    fn headers_prefer_milliseconds() {
        let mut h = HeaderMap::new();
        h.insert("retry-after", "3".parse().unwrap());
        assert_eq!(parse(&h), Some(Duration::from_secs(3)));
        h.insert("retry-after-ms", "250".parse().unwrap());
        assert_eq!(parse(&h), Some(Duration::from_millis(250)));
        assert_eq!(parse(&HeaderMap::new()), None);
    }
}
