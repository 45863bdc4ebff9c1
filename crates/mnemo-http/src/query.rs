//! Query strings: one reader ([`Params`]), one extractor ([`Query`]) over types that say how they
//! are read ([`FromQuery`]), and the parameters lists share — paging, `view`, `include_archived`,
//! time ranges — each with the words it has always been refused in.

use std::str::FromStr;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use mnemo_api::limits::{DEFAULT_PAGE_LIMIT, MAX_FULL_VIEW_PAGE_LIMIT, MAX_PAGE_LIMIT};
use mnemo_api::{Page, Timestamp, View};
use mnemo_store::{Cursor, Listing};

use crate::{BadInput, Refuse};

/// A query string's parameters, decoded (`+` and percent-escapes), in the order given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Params(Vec<(String, String)>);

impl Params {
    /// Reads a query string (without its `?`).
    pub fn parse(query: &str) -> Self {
        Self(form_urlencoded::parse(query.as_bytes()).into_owned().collect())
    }

    /// The first value of `name`.
    pub fn one(&self, name: &str) -> Option<&str> {
        self.0.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    /// Every value of any of `names`, in order (an array parameter: `types[]=a&types=b`).
    pub fn all(&self, names: &[&str]) -> Vec<String> {
        self.0.iter().filter(|(k, _)| names.contains(&k.as_str())).map(|(_, v)| v.clone()).collect()
    }

    /// Reads the parameters as `T`. For a handler that must decide who may call before it
    /// judges the input (a caller refused by the scope rules hears only that): it extracts the
    /// raw `Query<Params>` and reads them once the caller is allowed.
    pub fn read<T: FromQuery>(&self) -> Result<T, BadInput> {
        match self.repeated(T::ONCE) {
            Some(name) => Err(BadInput::Duplicate(name)),
            None => T::from_query(self),
        }
    }

    /// The first of `names` to come a second time.
    fn repeated(&self, names: &[&'static str]) -> Option<&'static str> {
        let mut seen = Vec::new();
        for (key, _) in &self.0 {
            if let Some(name) = names.iter().find(|n| **n == key) {
                if seen.contains(name) {
                    return Some(name);
                }
                seen.push(*name);
            }
        }
        None
    }
}

/// A typed query: how an endpoint's parameters are read and checked.
pub trait FromQuery: Sized + Send {
    /// Parameters this endpoint takes once: a second one is refused ([`BadInput::Duplicate`]).
    /// Endpoints that always took the first of each leave this empty.
    const ONCE: &'static [&'static str];

    /// Reads and checks the parameters, in the order their refusals are reported.
    fn from_query(q: &Params) -> Result<Self, BadInput>;
}

/// A query string read as `T`; unknown parameters are ignored.
#[derive(Debug, Clone, PartialEq)]
pub struct Query<T>(pub T);

impl<T: FromQuery, S: Refuse> FromRequestParts<S> for Query<T> {
    type Rejection = S::Rejection;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match Params::parse(parts.uri.query().unwrap_or("")).read::<T>() {
            Ok(value) => Ok(Self(value)),
            Err(bad) => Err(state.refuse(parts, bad).await),
        }
    }
}

impl FromQuery for Params {
    const ONCE: &'static [&'static str] = &[];

    fn from_query(q: &Params) -> Result<Self, BadInput> {
        Ok(q.clone())
    }
}

/// `limit`: 1–100, 20 when not given; under `view=full` silently at most 20.
pub fn page_limit(raw: Option<&str>, view: View) -> Result<u32, BadInput> {
    let limit = match raw {
        None => DEFAULT_PAGE_LIMIT,
        Some(s) => s.parse::<u32>().ok().filter(|n| (1..=MAX_PAGE_LIMIT).contains(n)).ok_or_else(|| {
            BadInput::invalid(format!("limit must be an integer from 1 to {MAX_PAGE_LIMIT} (got `{s}`)"))
        })?,
    };
    Ok(if view == View::Full { limit.min(MAX_FULL_VIEW_PAGE_LIMIT) } else { limit })
}

/// A `limit` of a log or feed: any positive integer, `default` when not given, and more than
/// `max` read as `max`.
pub fn positive_limit(raw: Option<&str>, default: u32, max: u32) -> Result<u32, BadInput> {
    match raw {
        None => Ok(default),
        Some(s) => Ok(s
            .parse::<u32>()
            .ok()
            .filter(|n| *n >= 1)
            .ok_or_else(|| BadInput::invalid(format!("limit must be a positive integer (got `{s}`)")))?
            .min(max)),
    }
}

/// A whole number of at least 1 (and at most `max`, when there is one).
pub fn positive(name: &str, raw: Option<&str>, max: Option<u64>) -> Result<Option<u64>, BadInput> {
    raw.map(|s| {
        s.parse::<u64>().ok().filter(|n| *n >= 1 && max.is_none_or(|m| *n <= m)).ok_or_else(|| {
            let range = max.map_or_else(|| "at least 1".to_owned(), |m| format!("from 1 to {m}"));
            BadInput::invalid(format!("{name} must be an integer {range} (got `{s}`)"))
        })
    })
    .transpose()
}

/// `view`: `basic` or `full`; `None` leaves the endpoint's default.
pub fn view(raw: Option<&str>) -> Result<Option<View>, BadInput> {
    match raw {
        None => Ok(None),
        Some("basic") => Ok(Some(View::Basic)),
        Some("full") => Ok(Some(View::Full)),
        Some(other) => Err(BadInput::invalid(format!("view must be `basic` or `full` (got `{other}`)"))),
    }
}

/// `page`: a cursor handed out by a previous page (empty: the first page).
pub fn cursor(raw: Option<&str>) -> Result<Option<Cursor>, BadInput> {
    raw.filter(|s| !s.is_empty()).map(Cursor::decode).transpose().map_err(BadInput::Cursor)
}

/// A boolean flag: `true`/`1` or `false`/`0`, false when not given.
pub fn flag(name: &str, raw: Option<&str>) -> Result<bool, BadInput> {
    match raw {
        None | Some("false" | "0") => Ok(false),
        Some("true" | "1") => Ok(true),
        Some(other) => Err(BadInput::invalid(format!("{name} must be `true` or `false` (got `{other}`)"))),
    }
}

/// An RFC 3339 timestamp (`Z` or an offset).
pub fn timestamp(name: &str, raw: Option<&str>) -> Result<Option<Timestamp>, BadInput> {
    raw.map(|s| {
        chrono::DateTime::parse_from_rfc3339(s)
            .map(|t| t.to_utc())
            .map_err(|e| BadInput::invalid(format!("{name} must be an RFC 3339 timestamp (got `{s}`: {e})")))
    })
    .transpose()
}

/// `name[gte]`, `name[gt]`, `name[lte]`, `name[lt]` as one inclusive range (timestamps have
/// microsecond resolution, so a strict bound is the inclusive one a microsecond inside).
pub fn time_range(q: &Params, name: &str) -> Result<(Option<Timestamp>, Option<Timestamp>), BadInput> {
    let micro = chrono::Duration::microseconds(1);
    let get = |op: &str| {
        let key = format!("{name}[{op}]");
        timestamp(&key, q.one(&key))
    };
    let gte = match (get("gte")?, get("gt")?) {
        (a, Some(b)) => Some(a.map_or(b + micro, |a: Timestamp| a.max(b + micro))),
        (a, None) => a,
    };
    let lte = match (get("lte")?, get("lt")?) {
        (a, Some(b)) => Some(a.map_or(b - micro, |a: Timestamp| a.min(b - micro))),
        (a, None) => a,
    };
    Ok((gte, lte))
}

/// A filter id: one of the wrong shape would match nothing, but is refused so typos surface.
pub fn filter_id<T: FromStr>(name: &str, raw: Option<&str>) -> Result<Option<T>, BadInput>
where
    T::Err: std::fmt::Display,
{
    raw.map(|s| s.parse().map_err(|e| BadInput::invalid(format!("{name}: {e}")))).transpose()
}

/// `order`: `asc` (oldest first, the default) or `desc`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Order {
    #[default]
    Asc,
    Desc,
}

impl Order {
    pub fn parse(raw: Option<&str>) -> Result<Self, BadInput> {
        match raw {
            None | Some("asc") => Ok(Self::Asc),
            Some("desc") => Ok(Self::Desc),
            Some(other) => Err(BadInput::invalid(format!("order must be `asc` or `desc` (got `{other}`)"))),
        }
    }
}

/// A list's `limit` and `page`.
#[derive(Debug, Clone, PartialEq, Eq, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct Paging {
    /// Page size, 1–100 (default 20).
    #[param(value_type = Option<u32>, minimum = 1, maximum = 100)]
    pub limit: u32,
    /// The `next_page` of the previous page.
    #[param(rename = "page", value_type = Option<String>)]
    pub after: Option<Cursor>,
}

impl Paging {
    /// `limit`, then `page`, with `limit` capped as `view` wants it.
    pub fn parse(q: &Params, view: View) -> Result<Self, BadInput> {
        Ok(Self { limit: page_limit(q.one("limit"), view)?, after: cursor(q.one("page"))? })
    }
}

impl FromQuery for Paging {
    const ONCE: &'static [&'static str] = &["limit", "page"];

    fn from_query(q: &Params) -> Result<Self, BadInput> {
        Self::parse(q, View::Basic)
    }
}

/// A list whose items may carry content: its `view` (`basic` unless asked) and its paging, at
/// most 20 items under `view=full`.
#[derive(Debug, Clone, PartialEq, Eq, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ViewPaging {
    /// Page size, 1–100 (default 20; at most 20 under `view=full`).
    #[param(value_type = Option<u32>, minimum = 1, maximum = 100)]
    pub limit: u32,
    /// The `next_page` of the previous page.
    #[param(rename = "page", value_type = Option<String>)]
    pub after: Option<Cursor>,
    /// `basic` (no content; the default) or `full`.
    #[param(value_type = Option<mnemo_api::View>)]
    pub view: View,
}

impl FromQuery for ViewPaging {
    const ONCE: &'static [&'static str] = &["limit", "page", "view"];

    fn from_query(q: &Params) -> Result<Self, BadInput> {
        let view = view(q.one("view"))?.unwrap_or(View::Basic);
        let Paging { limit, after } = Paging::parse(q, view)?;
        Ok(Self { limit, after, view })
    }
}

/// The list of an archivable resource (environments, agents): `include_archived` and paging.
#[derive(Debug, Clone, PartialEq, Eq, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ArchivablePaging {
    /// Page size, 1–100 (default 20).
    #[param(value_type = Option<u32>, minimum = 1, maximum = 100)]
    pub limit: u32,
    /// The `next_page` of the previous page.
    #[param(rename = "page", value_type = Option<String>)]
    pub after: Option<Cursor>,
    /// Include archived ones (default `false`).
    #[param(value_type = Option<bool>)]
    pub include_archived: bool,
}

impl FromQuery for ArchivablePaging {
    const ONCE: &'static [&'static str] = &["limit", "page", "include_archived"];

    fn from_query(q: &Params) -> Result<Self, BadInput> {
        let include_archived = flag("include_archived", q.one("include_archived"))?;
        let Paging { limit, after } = Paging::parse(q, View::Basic)?;
        Ok(Self { limit, after, include_archived })
    }
}

/// `view` alone, for one memory or version; the endpoint picks the default ([`ViewParam::or`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ViewParam(pub Option<View>);

impl ViewParam {
    /// The view asked for, else `default`.
    pub fn or(self, default: View) -> View {
        self.0.unwrap_or(default)
    }
}

impl FromQuery for ViewParam {
    const ONCE: &'static [&'static str] = &["view"];

    fn from_query(q: &Params) -> Result<Self, BadInput> {
        view(q.one("view")).map(Self)
    }
}

/// `page` alone, for a list whose page size the front end fixes (the console's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageParam(pub Option<Cursor>);

impl FromQuery for PageParam {
    const ONCE: &'static [&'static str] = &["page"];

    fn from_query(q: &Params) -> Result<Self, BadInput> {
        cursor(q.one("page")).map(Self)
    }
}

/// A memory search's parameters (`memories:search`, a mnemo extension): `q` in the query
/// language of [`mnemo_store::rules::search`], `path_prefix`, and paging.
#[derive(Debug, Clone, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SearchParams {
    /// What to find: `words` (all must match, as case-insensitive substrings of the path or
    /// content), `"exact phrases"`, `prefix*`, `-excluded`, `path:notes/`; at most 512 bytes.
    #[param(rename = "q", value_type = String)]
    pub query: mnemo_store::rules::search::SearchQuery,
    /// Only memories under this prefix (`/` or a path ending in `/`).
    #[param(value_type = Option<String>)]
    pub path_prefix: Option<String>,
    /// Page size, 1–100 (default 20).
    #[param(value_type = Option<u32>, minimum = 1, maximum = 100)]
    pub limit: u32,
    /// The `next_page` of the previous page.
    #[param(rename = "page", value_type = Option<String>)]
    pub after: Option<Cursor>,
    /// How to rank: `text` (the default), `semantic` (by meaning) or `hybrid` (both, fused).
    /// `semantic` and `hybrid` need an embeddings provider (`[embeddings]` in the server's
    /// models file; the `memory-search-semantic` extension says the server has one).
    #[param(value_type = Option<mnemo_api::SearchMode>)]
    pub mode: mnemo_api::SearchMode,
}

impl FromQuery for SearchParams {
    const ONCE: &'static [&'static str] = &["q", "path_prefix", "limit", "page", "mode"];

    fn from_query(q: &Params) -> Result<Self, BadInput> {
        let query = mnemo_store::rules::search::parse(q.one("q").unwrap_or(""))
            .map_err(|e| BadInput::invalid(e.to_string()))?;
        let path_prefix = q
            .one("path_prefix")
            .map(|p| {
                mnemo_api::PathPrefix::parse(p)
                    .map(|p| p.as_str().to_owned())
                    .map_err(|e| BadInput::invalid(format!("invalid path_prefix `{}`: {e}", p.escape_debug())))
            })
            .transpose()?;
        let Paging { limit, after } = Paging::parse(q, View::Basic)?;
        let mode = q.one("mode").map(mnemo_api::SearchMode::parse).transpose().map_err(BadInput::invalid)?;
        Ok(Self { query, path_prefix, limit, after, mode: mode.unwrap_or_default() })
    }
}

/// A store listing as the API's page: the items, and the cursor of the next page as `page`
/// takes it back.
pub fn page<T>(listing: Listing<T>) -> Page<T> {
    Page { data: listing.items, next_page: listing.next.map(|c| c.encode()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A value read, or the refusal's words.
    type Read<T> = Result<T, String>;
    /// A time range's two inclusive ends.
    type Range = (Option<Timestamp>, Option<Timestamp>);
    /// A raw value, its maximum, and what it reads as.
    type PositiveCase<'a> = (Option<&'a str>, Option<u64>, Result<Option<u64>, &'a str>);

    /// What reading `query` as `T` gives: the value, or the refusal's words.
    fn read<T: FromQuery>(query: &str) -> Read<T> {
        Params::parse(query).read::<T>().map_err(|bad| match bad {
            BadInput::Duplicate(name) => format!("duplicate {name}"),
            BadInput::Invalid(message) => message,
            BadInput::Cursor(e) => format!("cursor: {e}"),
            other => format!("{other:?}"),
        })
    }

    fn next_cursor() -> String {
        Cursor::After(7).encode()
    }

    #[test]
    fn paging_reads_limit_then_page_in_the_words_of_today() {
        let good = next_cursor();
        let cases: Vec<(String, Result<Paging, String>)> = vec![
            (String::new(), Ok(Paging { limit: 20, after: None })),
            ("limit=1".into(), Ok(Paging { limit: 1, after: None })),
            ("limit=100&page=".into(), Ok(Paging { limit: 100, after: None })),
            (format!("page={good}"), Ok(Paging { limit: 20, after: Some(Cursor::After(7)) })),
            ("limit=0".into(), Err("limit must be an integer from 1 to 100 (got `0`)".into())),
            ("limit=101".into(), Err("limit must be an integer from 1 to 100 (got `101`)".into())),
            ("limit=-1".into(), Err("limit must be an integer from 1 to 100 (got `-1`)".into())),
            ("limit=".into(), Err("limit must be an integer from 1 to 100 (got ``)".into())),
            ("limit=ten".into(), Err("limit must be an integer from 1 to 100 (got `ten`)".into())),
            // `limit` is judged before `page`.
            ("page=zzz&limit=0".into(), Err("limit must be an integer from 1 to 100 (got `0`)".into())),
            ("page=zzz".into(), Err(format!("cursor: {}", mnemo_store::StoreError::InvalidCursor))),
            ("limit=1&limit=2".into(), Err("duplicate limit".into())),
            ("page=a&limit=1&page=b".into(), Err("duplicate page".into())),
            // Unknown parameters are ignored, `view` included: this list has none.
            ("view=full&limit=50&x=1".into(), Ok(Paging { limit: 50, after: None })),
        ];
        for (query, expected) in cases {
            assert_eq!(read::<Paging>(&query), expected, "{query}");
        }
    }

    #[test]
    fn a_full_view_caps_the_page_and_a_bad_view_is_refused_first() {
        let cases: Vec<(&str, Read<(View, u32)>)> = vec![
            ("", Ok((View::Basic, 20))),
            ("limit=100", Ok((View::Basic, 100))),
            ("view=full", Ok((View::Full, 20))),
            ("view=full&limit=100", Ok((View::Full, 20))),
            ("view=full&limit=5", Ok((View::Full, 5))),
            ("view=basic&limit=50", Ok((View::Basic, 50))),
            ("view=Full", Err("view must be `basic` or `full` (got `Full`)".into())),
            ("view=&limit=0", Err("view must be `basic` or `full` (got ``)".into())),
            ("view=full&limit=101", Err("limit must be an integer from 1 to 100 (got `101`)".into())),
            ("view=full&view=basic", Err("duplicate view".into())),
        ];
        for (query, expected) in cases {
            assert_eq!(read::<ViewPaging>(query).map(|p| (p.view, p.limit)), expected, "{query}");
        }
        let views: Vec<(&str, Result<View, String>)> = vec![
            ("", Ok(View::Full)),
            ("view=basic", Ok(View::Basic)),
            ("view=x", Err("view must be `basic` or `full` (got `x`)".into())),
        ];
        for (query, expected) in views {
            assert_eq!(read::<ViewParam>(query).map(|v| v.or(View::Full)), expected, "{query}");
        }
    }

    #[test]
    fn flags_and_archivable_lists() {
        let cases: Vec<(&str, Read<(bool, u32)>)> = vec![
            ("", Ok((false, 20))),
            ("include_archived=true", Ok((true, 20))),
            ("include_archived=1&limit=3", Ok((true, 3))),
            ("include_archived=0", Ok((false, 20))),
            ("include_archived=false", Ok((false, 20))),
            ("include_archived=yes", Err("include_archived must be `true` or `false` (got `yes`)".into())),
            // The flag is judged before the paging.
            ("limit=0&include_archived=2", Err("include_archived must be `true` or `false` (got `2`)".into())),
            ("include_archived=true&include_archived=false", Err("duplicate include_archived".into())),
        ];
        for (query, expected) in cases {
            assert_eq!(read::<ArchivablePaging>(query).map(|p| (p.include_archived, p.limit)), expected, "{query}");
        }
    }

    #[test]
    fn a_search_reads_its_mode_defaulting_to_text() {
        use mnemo_api::SearchMode;
        let cases: Vec<(&str, Read<SearchMode>)> = vec![
            ("q=db", Ok(SearchMode::Text)),
            ("q=db&mode=text", Ok(SearchMode::Text)),
            ("q=db&mode=semantic", Ok(SearchMode::Semantic)),
            ("q=db&mode=hybrid", Ok(SearchMode::Hybrid)),
            ("q=db&mode=vector", Err("`mode` is `text`, `semantic` or `hybrid` (got `vector`)".into())),
            ("q=db&mode=text&mode=hybrid", Err("duplicate mode".into())),
        ];
        for (query, expected) in cases {
            assert_eq!(read::<SearchParams>(query).map(|p| p.mode), expected, "{query}");
        }
    }

    #[test]
    fn logs_take_any_positive_limit_up_to_their_cap() {
        let cases: &[(Option<&str>, Result<u32, &str>)] = &[
            (None, Ok(100)),
            (Some("1"), Ok(1)),
            (Some("1000"), Ok(1000)),
            (Some("5000"), Ok(1000)),
            (Some("0"), Err("limit must be a positive integer (got `0`)")),
            (Some("x"), Err("limit must be a positive integer (got `x`)")),
        ];
        for (raw, expected) in cases {
            let got = positive_limit(*raw, 100, 1000).map_err(|bad| format!("{bad:?}"));
            let expected = expected.map_err(|m| format!("{:?}", BadInput::Invalid(m.into())));
            assert_eq!(got, expected, "{raw:?}");
        }
        let orders: &[(Option<&str>, Result<Order, &str>)] = &[
            (None, Ok(Order::Asc)),
            (Some("asc"), Ok(Order::Asc)),
            (Some("desc"), Ok(Order::Desc)),
            (Some("DESC"), Err("order must be `asc` or `desc` (got `DESC`)")),
        ];
        for (raw, expected) in orders {
            let got = Order::parse(*raw).map_err(|bad| format!("{bad:?}"));
            assert_eq!(got, expected.map_err(|m| format!("{:?}", BadInput::Invalid(m.into()))), "{raw:?}");
        }
        let positives: &[PositiveCase<'_>] = &[
            (None, Some(999), Ok(None)),
            (Some("999"), Some(999), Ok(Some(999))),
            (Some("1000"), Some(999), Err("block_ms must be an integer from 1 to 999 (got `1000`)")),
            (Some("0"), None, Err("block_ms must be an integer at least 1 (got `0`)")),
            (Some("123456"), None, Ok(Some(123_456))),
        ];
        for (raw, max, expected) in positives {
            let got = positive("block_ms", *raw, *max).map_err(|bad| format!("{bad:?}"));
            assert_eq!(got, expected.map_err(|m| format!("{:?}", BadInput::Invalid(m.into()))), "{raw:?}");
        }
    }

    #[test]
    fn time_ranges_make_strict_bounds_inclusive_and_name_the_bad_one() {
        let t = |s: &str| chrono::DateTime::parse_from_rfc3339(s).unwrap().to_utc();
        let micro = chrono::Duration::microseconds(1);
        let cases: Vec<(&str, Read<Range>)> = vec![
            ("", Ok((None, None))),
            ("created_at[gte]=2026-01-01T00:00:00Z", Ok((Some(t("2026-01-01T00:00:00Z")), None))),
            ("created_at[gt]=2026-01-01T00:00:00Z", Ok((Some(t("2026-01-01T00:00:00Z") + micro), None))),
            ("created_at[lt]=2026-01-01T00:00:00%2B01:00", Ok((None, Some(t("2025-12-31T23:00:00Z") - micro)))),
            (
                "created_at[gte]=2026-01-02T00:00:00Z&created_at[gt]=2026-01-01T00:00:00Z",
                Ok((Some(t("2026-01-02T00:00:00Z")), None)),
            ),
            (
                "created_at[lte]=yesterday",
                Err("created_at[lte] must be an RFC 3339 timestamp (got `yesterday`: premature end of input)".into()),
            ),
        ];
        for (query, expected) in cases {
            let got = time_range(&Params::parse(query), "created_at").map_err(|bad| match bad {
                BadInput::Invalid(m) => m,
                other => format!("{other:?}"),
            });
            assert_eq!(got, expected, "{query}");
        }
    }

    #[test]
    fn filter_ids_and_arrays() {
        let q = Params::parse("types[]=a&types=b&other=c&types%5B%5D=d&agent_id=agent_x&memory_store_id=nope");
        assert_eq!(q.all(&["types[]", "types"]), ["a", "b", "d"]);
        assert_eq!(q.one("other"), Some("c"));
        let agent: Option<mnemo_api::AgentId> = filter_id("agent_id", q.one("agent_id")).unwrap();
        assert_eq!(agent.unwrap().as_str(), "agent_x");
        let store = filter_id::<mnemo_api::MemoryStoreId>("memory_store_id", q.one("memory_store_id"));
        assert!(
            matches!(&store, Err(BadInput::Invalid(m)) if m == "memory_store_id: `nope` is not a valid memory store id (expected `memstore_…`)"),
            "{store:?}"
        );
        assert!(matches!(filter_id::<mnemo_api::AgentId>("agent_id", None), Ok(None)));
    }

    #[test]
    fn a_listing_becomes_a_page_whose_next_page_reads_back() {
        let listed = page(Listing { items: vec![1, 2], next: Some(Cursor::After(2)) });
        let next = listed.next_page.clone().unwrap();
        assert_eq!(listed.data, [1, 2]);
        assert_eq!(cursor(Some(&next)).unwrap(), Some(Cursor::After(2)));
        assert_eq!(page(Listing::<u8> { items: vec![], next: None }).next_page, None);
    }
}
