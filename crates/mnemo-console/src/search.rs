//! Searching memories: the workspace's search page (`/console/search`), which a store's page
//! also submits to with its store named (`?store=…`), so one store is searched. Results come
//! best first with their snippets, the matched terms highlighted (`<mark>`), each linking to the
//! memory, scrolled to the first match where the browser follows text fragments.

use askama::Template;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use mnemo_api::{MemoryStoreId, SearchMode};
use mnemo_http::{BadInput, FromQuery, Params, Query};
use mnemo_store::Cursor;
use mnemo_store::rules::search::{self as rule, MARK_CLOSE, MARK_OPEN, SearchQuery};
use mnemo_store::search::{SearchMemories, SearchScope, Searched};

use crate::Console;
use crate::auth::{Signed, encode_component};
use crate::page::{Chrome, PageError, Section, render_with};
use crate::text::when;

/// Results per page.
const PAGE: u32 = 20;

/// A piece of a snippet: plain text, or a matched term (`mark`).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Piece {
    text: String,
    mark: bool,
}

/// A snippet split at its marks, so the template escapes every piece and highlights the marked
/// ones; the marks themselves are dropped.
fn pieces(snippet: &str) -> Vec<Piece> {
    let mut out = Vec::new();
    let mut rest = snippet;
    while let Some(open) = rest.find(MARK_OPEN) {
        let after = &rest[open + MARK_OPEN.len_utf8()..];
        let Some(close) = after.find(MARK_CLOSE) else { break };
        if open > 0 {
            out.push(Piece { text: rest[..open].to_owned(), mark: false });
        }
        out.push(Piece { text: after[..close].to_owned(), mark: true });
        rest = &after[close + MARK_CLOSE.len_utf8()..];
    }
    if !rest.is_empty() {
        out.push(Piece { text: rest.to_owned(), mark: false });
    }
    out
}

/// One result as the page shows it.
#[derive(Debug)]
pub(crate) struct Hit {
    path: String,
    href: String,
    store: String,
    store_href: String,
    updated: String,
    snippet: Vec<Piece>,
}

#[derive(Debug, Template)]
#[template(path = "search.html")]
struct SearchPage {
    chrome: Chrome,
    q: String,
    /// The store searched, `(id, name)`; `None` for every store of the workspace.
    store: Option<(String, String)>,
    hits: Vec<Hit>,
    searched: bool,
    next: Option<String>,
    message: Option<String>,
    /// The "Rank by" choices, when the server ranks by meaning: `(value, label, chosen)`.
    modes: Vec<(&'static str, &'static str, bool)>,
    /// Why the results are not ranked as asked.
    notice: Option<String>,
}

/// The "Rank by" choices: the API's `mode` and what a person reads.
const MODES: [(SearchMode, &str); 3] =
    [(SearchMode::Text, "Words"), (SearchMode::Semantic, "Meaning"), (SearchMode::Hybrid, "Words and meaning")];

/// The page's parameters: the query as typed (parsed below, so a malformed one is shown back
/// with its message), the store, and the page.
#[derive(Debug)]
pub(crate) struct SearchForm {
    q: String,
    store: Option<MemoryStoreId>,
    after: Option<Cursor>,
    mode: SearchMode,
}

impl FromQuery for SearchForm {
    const ONCE: &'static [&'static str] = &["q", "store", "page", "mode"];

    fn from_query(q: &Params) -> Result<Self, BadInput> {
        let store = mnemo_http::filter_id("store", q.one("store").filter(|s| !s.is_empty()))?;
        let mode = q.one("mode").filter(|m| !m.is_empty()).map(SearchMode::parse).transpose();
        Ok(Self {
            q: q.one("q").unwrap_or("").trim().to_owned(),
            store,
            after: mnemo_http::cursor(q.one("page"))?,
            mode: mode.map_err(BadInput::Invalid)?.unwrap_or_default(),
        })
    }
}

/// A link to a memory, scrolled to the first marked term where the browser supports text
/// fragments (`#:~:text=`); others open the memory at its top.
fn memory_href(store: &str, memory: &str, snippet: &[Piece]) -> String {
    let base = format!("/console/stores/{store}/memories/{memory}");
    match snippet.iter().find(|p| p.mark) {
        Some(p) => format!("{base}#:~:text={}", encode_component(&p.text)),
        None => base,
    }
}

pub(crate) async fn page(
    State(console): State<Console>,
    who: Signed,
    Query(form): Query<SearchForm>,
) -> Result<Response, PageError> {
    let store = match &form.store {
        Some(id) => Some(console.store.get_memory_store(&who.workspace, id).await?),
        None => None,
    };
    let embedder = console.hooks.query_embedder();
    // Without a provider only words rank (a link asking for meaning is answered by words).
    let mode = if embedder.is_some() { form.mode } else { SearchMode::Text };
    let modes = match &embedder {
        Some(_) => MODES.iter().map(|(m, label)| (m.as_str(), *label, *m == mode)).collect(),
        None => Vec::new(),
    };
    let mut page = SearchPage {
        chrome: who.chrome(Section::Search),
        q: form.q.clone(),
        store: store.as_ref().map(|s| (s.id.to_string(), s.name.clone())),
        hits: Vec::new(),
        searched: false,
        next: None,
        message: None,
        modes,
        notice: None,
    };
    if form.q.is_empty() {
        return Ok(render_with(StatusCode::OK, &page));
    }
    let query: SearchQuery = match rule::parse(&form.q) {
        Ok(query) => query,
        Err(e) => {
            page.message = Some(e.to_string().replacen("`q`", "the search", 1));
            return Ok(render_with(StatusCode::BAD_REQUEST, &page));
        }
    };
    let scope = match &form.store {
        Some(id) => SearchScope::Store(id.clone()),
        None => SearchScope::Workspace(None),
    };
    let request = SearchMemories { scope, query, path_prefix: None, limit: PAGE, after: form.after };
    let Searched { listing, notice, .. } =
        mnemo_store::search::run(&*console.store, embedder.as_deref(), &who.workspace, request, mode).await?;
    page.notice = notice;
    let mut names: Vec<(MemoryStoreId, String)> = store.iter().map(|s| (s.id.clone(), s.name.clone())).collect();
    for result in listing.items {
        let name = match names.iter().find(|(id, _)| *id == result.memory_store_id) {
            Some((_, name)) => name.clone(),
            None => {
                let name = console.store.get_memory_store(&who.workspace, &result.memory_store_id).await?.name;
                names.push((result.memory_store_id.clone(), name.clone()));
                name
            }
        };
        let snippet = pieces(&result.snippet);
        let store_id = result.memory_store_id.to_string();
        page.hits.push(Hit {
            href: memory_href(&store_id, result.memory_id.as_str(), &snippet),
            store_href: format!("/console/stores/{store_id}"),
            path: result.path,
            store: name,
            updated: when(&result.updated_at),
            snippet,
        });
    }
    page.searched = true;
    page.next = listing.next.map(|c| {
        let store = form.store.as_ref().map(|s| format!("&store={s}")).unwrap_or_default();
        format!(
            "/console/search?q={}{store}&mode={}&page={}",
            encode_component(&form.q),
            mode.as_str(),
            encode_component(&c.encode())
        )
    });
    Ok(render_with(StatusCode::OK, &page))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snippets_split_at_their_marks() {
        let p = |text: &str, mark| Piece { text: text.into(), mark };
        let table: &[(&str, Vec<Piece>)] = &[
            ("plain", vec![p("plain", false)]),
            ("«db» and «DB»…", vec![p("db", true), p(" and ", false), p("DB", true), p("…", false)]),
            ("…x «<b>» y", vec![p("…x ", false), p("<b>", true), p(" y", false)]),
            ("open « only", vec![p("open « only", false)]),
        ];
        for (snippet, want) in table {
            assert_eq!(&pieces(snippet), want, "{snippet}");
        }
    }
}
