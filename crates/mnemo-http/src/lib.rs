//! Typed HTTP input, shared by the API (`mnemo-server`) and the web console (`mnemo-console`).
//!
//! A handler names what it takes — `Id<MemoryStoreId>` for a `{store}` in its route,
//! `Query<Paging>` for `limit` and `page` — and never sees text it must parse itself. The rules
//! of each input (which ids exist, the page size's range, what a cursor is) are written here
//! once; the words of a refusal are fixed here too, so both front ends answer the same input the
//! same way. How a refusal is *shown* is each application's: the API renders a [`BadInput`] as
//! its error envelope, the console as a page. An application says so by implementing [`Refuse`]
//! for its router's state.
//!
//! This crate parses; it never reads the store, never authorises, and holds no state.

mod path;
mod query;

use std::future::Future;

use axum::extract::rejection::PathRejection;
use axum::http::request::Parts;
use axum::response::IntoResponse;
use mnemo_store::StoreError;

pub use path::{Id, PathId};
pub use query::{
    ArchivablePaging, FromQuery, Order, PageParam, Paging, Params, Query, SearchParams, ViewPaging, ViewParam, cursor,
    filter_id, flag, page, page_limit, positive, positive_limit, time_range, timestamp, view,
};

/// Input that cannot be served, found before a handler runs (or by the parsers a handler calls).
#[derive(Debug)]
pub enum BadInput {
    /// A path id that cannot name anything (so it is simply not found).
    NotFound {
        /// What a person calls it: `memory store`.
        noun: &'static str,
        /// The text the path held, percent-decoded.
        raw: String,
        /// The `error_code` the API gives this resource's not-found answer, if any.
        code: Option<&'static str>,
    },
    /// A malformed parameter; the message says which and why.
    Invalid(String),
    /// A `page` this server did not hand out (its words are each front end's).
    Cursor(StoreError),
    /// A parameter given twice where the endpoint takes it once.
    Duplicate(&'static str),
    /// The path did not decode (a percent-escape of something that is not UTF-8): axum's answer.
    Path(PathRejection),
    /// The route has no `{param}` of this name: a handler mounted on the wrong route.
    NoSuchParam(&'static str),
}

impl BadInput {
    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Self::Invalid(message.into())
    }

    /// The message of a [`BadInput::NotFound`], as the API and the console word it:
    /// ``memory store `x` not found``.
    pub fn not_found_message(noun: &str, raw: &str) -> String {
        format!("{noun} `{raw}` not found")
    }
}

/// How an application shows [`BadInput`]: implemented by a router's state, so every extractor
/// of this crate refuses in that application's form (the API's error envelope, the console's
/// error page).
pub trait Refuse: Send + Sync {
    /// What a refused request is answered with.
    type Rejection: IntoResponse;

    /// The answer to `bad`. `parts` is the request's head, for an application that must look
    /// at more than the input (the console checks who is signed in before saying "not found").
    fn refuse(&self, parts: &mut Parts, bad: BadInput) -> impl Future<Output = Self::Rejection> + Send;
}
