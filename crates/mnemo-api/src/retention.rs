//! How long a memory store keeps its versions (`--version-retention`, a store's own
//! `version_retention`): a window written like `30d`, `12h`, `45m` or `90s`, or `forever`.
//! Which versions a window purges is `mnemo_store::rules::retention`'s.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// How long versions are kept: a window, or forever.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Retention {
    /// Every version is kept.
    Forever,
    /// Versions older than this are purged (each live memory's newest kept).
    Window(Duration),
}

/// The longest window: a century. Longer is `forever` in all but name, and refusing it keeps
/// `now − window` inside the clock's range.
const MAX_WINDOW_SECS: u64 = 100 * 365 * 86_400;

/// Why a retention is malformed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "a version retention is a whole number followed by `s`, `m`, `h` or `d` (`90s`, `12h`, `30d`), at least 1 second and at most 100 years, or `forever` (got `{0}`)"
)]
pub struct BadRetention(pub String);

impl FromStr for Retention {
    type Err = BadRetention;

    fn from_str(raw: &str) -> Result<Self, BadRetention> {
        let bad = || BadRetention(raw.chars().take(40).collect());
        let text = raw.trim();
        if text.eq_ignore_ascii_case("forever") {
            return Ok(Self::Forever);
        }
        let unit_at = text.len().checked_sub(1).filter(|i| text.is_char_boundary(*i)).ok_or_else(bad)?;
        let (number, unit) = text.split_at(unit_at);
        let scale = match unit {
            "s" => 1,
            "m" => 60,
            "h" => 3600,
            "d" => 86_400,
            _ => return Err(bad()),
        };
        if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        let secs = number.parse::<u64>().ok().and_then(|n| n.checked_mul(scale)).ok_or_else(bad)?;
        if secs == 0 || secs > MAX_WINDOW_SECS {
            return Err(bad());
        }
        Ok(Self::Window(Duration::from_secs(secs)))
    }
}

impl fmt::Display for Retention {
    /// The shortest exact form (`30d`, `36h`, `90s`), or `forever`: what parses back to it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self::Window(window) = self else { return f.write_str("forever") };
        let secs = window.as_secs();
        for (unit, scale) in [("d", 86_400), ("h", 3600), ("m", 60)] {
            if secs % scale == 0 {
                return write!(f, "{}{unit}", secs / scale);
            }
        }
        write!(f, "{secs}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(secs: u64) -> Retention {
        Retention::Window(Duration::from_secs(secs))
    }

    #[test]
    fn parses_what_an_operator_writes() {
        let table: &[(&str, Option<Retention>)] = &[
            ("30d", Some(window(30 * 86_400))),
            ("12h", Some(window(12 * 3600))),
            ("90s", Some(window(90))),
            ("45m", Some(window(45 * 60))),
            (" 7d ", Some(window(7 * 86_400))),
            ("forever", Some(Retention::Forever)),
            ("Forever", Some(Retention::Forever)),
            ("36500d", Some(window(36_500 * 86_400))),
            ("0d", None),
            ("36501d", None),
            ("99999999999999999999d", None),
            ("30", None),
            ("d", None),
            ("-3d", None),
            ("1.5h", None),
            ("30 d", None),
            ("3w", None),
            ("", None),
            ("é", None),
            ("3é", None),
        ];
        for (raw, want) in table {
            assert_eq!(raw.parse::<Retention>().ok(), *want, "{raw:?}");
        }
        let err = "3w".parse::<Retention>().unwrap_err().to_string();
        assert!(err.contains("`30d`") && err.contains("`forever`") && err.contains("(got `3w`)"), "{err}");
    }

    #[test]
    fn displays_the_shortest_exact_form() {
        for (secs, want) in [(86_400 * 30, "30d"), (3600 * 36, "36h"), (90, "90s"), (120, "2m"), (86_400 + 1, "86401s")]
        {
            assert_eq!(window(secs).to_string(), want);
            assert_eq!(want.parse::<Retention>().unwrap(), window(secs), "{want} parses back");
        }
        assert_eq!(Retention::Forever.to_string(), "forever");
    }
}
