//! `/mcp` on `mnemo serve`: the same server over streamable HTTP, each request served as the
//! credential it carries (`x-api-key`, else `Authorization: Bearer`), over the memory stores
//! that credential may list — so every rule of the API (scope, role, actor, rate limits, audit)
//! applies unchanged, because every tool call is an API call made with the caller's own key.
//!
//! The stores are listed afresh for every request (one call, so a store created a moment ago
//! is there). What lasts between requests is kept per credential (by its SHA-256, never the
//! secret): the digest of each file as the model saw it, and the stores' change feed once a
//! client subscribes. Protocol versions without sessions (2026-07-28) build a server per
//! request, so "seen" could not live in one.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use mnemo_client::{Client, ListMemoryStoresParams};
use rmcp::model::Extensions;
use sha2::{Digest, Sha256};
use tokio::sync::OnceCell;

use crate::caller::{Caller, Seen};
use crate::feed::Feed;
use crate::paths::Mount;

/// Callers remembered at most; past it, the least recently served are forgotten (their next
/// request starts afresh: edits then need a new `view`).
const REMEMBERED: usize = 1024;

/// What one credential's requests share.
#[derive(Default)]
struct Account {
    seen: Seen,
    /// Started by the first subscription, following every store the caller has subscribed
    /// with since; dropping the account stops it.
    feed: OnceCell<Option<Feed>>,
    used: Mutex<Option<Instant>>,
}

/// Every caller of `/mcp`, by credential.
pub(crate) struct Accounts {
    /// The API this server is (its own listening address), with no credential of its own.
    api: Client,
    by_credential: Mutex<HashMap<[u8; 32], Arc<Account>>>,
}

impl Accounts {
    pub(crate) fn new(api: Client) -> Self {
        Self { api, by_credential: Mutex::default() }
    }

    /// The caller of the HTTP request whose parts `extensions` hold.
    pub(crate) async fn caller(&self, extensions: &Extensions) -> Result<Caller, String> {
        let (token, account) = self.account(extensions)?;
        let client = self.api.with_token(token).in_workspace(workspace(extensions));
        let mounts = Arc::new(stores(&client).await?);
        Ok(Caller { client, mounts, seen: Arc::clone(&account.seen), whole_workspace: true })
    }

    /// The change feed of `caller`'s stores, following any store created since the last call.
    pub(crate) async fn feed(&self, extensions: &Extensions, caller: &Caller) -> Option<Feed> {
        let (_, account) = self.account(extensions).ok()?;
        let feed = account.feed.get_or_init(|| Feed::start(&caller.client, &caller.mounts)).await.clone()?;
        feed.follow(&caller.client, &caller.mounts).await;
        Some(feed)
    }

    /// The credential of the HTTP request whose parts `extensions` hold, and its account.
    fn account<'e>(&self, extensions: &'e Extensions) -> Result<(&'e str, Arc<Account>), String> {
        let parts = extensions.get::<http::request::Parts>().ok_or("this request did not come over HTTP")?;
        let token = credential(&parts.headers).ok_or(MISSING)?;
        // The same credential in another workspace (a person's token) is another account.
        let mut digest = Sha256::new();
        digest.update(token.as_bytes());
        digest.update(b"\0");
        digest.update(workspace(extensions).as_ref().map_or("", |w| w.as_str()).as_bytes());
        let key: [u8; 32] = digest.finalize().into();
        let mut accounts = self.by_credential.lock().expect("accounts poisoned");
        if !accounts.contains_key(&key) && accounts.len() >= REMEMBERED {
            forget_least_recent(&mut accounts, REMEMBERED / 4);
        }
        let account = Arc::clone(accounts.entry(key).or_default());
        *account.used.lock().expect("account poisoned") = Some(Instant::now());
        Ok((token, account))
    }
}

/// Forgets the `count` accounts served least recently.
fn forget_least_recent(accounts: &mut HashMap<[u8; 32], Arc<Account>>, count: usize) {
    let mut by_use: Vec<([u8; 32], Option<Instant>)> =
        accounts.iter().map(|(k, a)| (*k, *a.used.lock().expect("account poisoned"))).collect();
    by_use.sort_by_key(|(_, used)| *used);
    for (key, _) in by_use.into_iter().take(count) {
        accounts.remove(&key);
    }
}

/// The workspace the request names (`anthropic-workspace-id`), passed on to every API call, as
/// a credential that reaches several workspaces (a person's token) must name one.
fn workspace(extensions: &Extensions) -> Option<mnemo_api::WorkspaceId> {
    let parts = extensions.get::<http::request::Parts>()?;
    parts.headers.get("anthropic-workspace-id")?.to_str().ok()?.trim().parse().ok()
}

const MISSING: &str = "missing credentials: send `Authorization: Bearer <key>` or `x-api-key: <key>`";

/// The credential of a request, as the API reads it: `x-api-key` wins over a bearer token.
fn credential(headers: &http::HeaderMap) -> Option<&str> {
    let key = headers.get("x-api-key").and_then(|v| v.to_str().ok()).map(str::trim).filter(|k| !k.is_empty());
    key.or_else(|| {
        let value = headers.get(http::header::AUTHORIZATION)?.to_str().ok()?;
        let (scheme, token) = value.trim().split_once(' ')?;
        scheme.eq_ignore_ascii_case("bearer").then(|| token.trim()).filter(|t| !t.is_empty())
    })
}

/// Every active memory store the credential of `client` may list, as mounts, oldest first: a
/// store's folder never changes when a newer store takes a name like its own (the newer one gets
/// the suffix), so a path the model learnt keeps naming the same store.
async fn stores(client: &Client) -> Result<Vec<Mount>, String> {
    let mut params = ListMemoryStoresParams { limit: Some(100), ..Default::default() };
    let mut named = Vec::new();
    loop {
        let page = client.list_memory_stores(&params).await.map_err(|e| match e {
            mnemo_client::ClientError::Api { error, .. } => {
                format!("cannot list your memory stores: {}", error.message)
            }
            other => format!("cannot list your memory stores: the memory service did not answer: {other}"),
        })?;
        named.extend(page.data.into_iter().filter(|s| s.archived_at.is_none()));
        match page.next_page.filter(|p| !p.is_empty()) {
            Some(next) => params.page = Some(next),
            None => break,
        }
    }
    named.sort_by(|a, b| (a.created_at, a.id.as_str()).cmp(&(b.created_at, b.id.as_str())));
    Ok(Mount::all(named.into_iter().map(|s| (s.id, s.name)).collect(), false))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_credential_is_read_as_the_api_reads_it() {
        let headers = |pairs: &[(&'static str, &str)]| {
            let mut h = http::HeaderMap::new();
            for (k, v) in pairs {
                h.insert(*k, v.parse().unwrap());
            }
            h
        };
        type Row<'a> = (&'a str, &'a [(&'a str, &'a str)], Option<&'a str>);
        #[rustfmt::skip]
        let rows: [Row<'_>; 6] = [
            ("a bearer token", &[("authorization", "Bearer sk-a")], Some("sk-a")),
            ("the scheme in any case", &[("authorization", "bearer sk-a")], Some("sk-a")),
            ("x-api-key wins over bearer", &[("authorization", "Bearer sk-a"), ("x-api-key", "sk-b")], Some("sk-b")),
            ("another scheme is no credential", &[("authorization", "Basic abc")], None),
            ("an empty key is no credential", &[("x-api-key", " ")], None),
            ("nothing", &[], None),
        ];
        for (rule, pairs, expected) in rows {
            assert_eq!(credential(&headers(pairs)), expected, "rule: {rule}");
        }
    }

    #[test]
    fn the_least_recently_served_are_forgotten_first() {
        let mut accounts = HashMap::new();
        let start = Instant::now();
        for i in 0..4u8 {
            let account = Account::default();
            *account.used.lock().unwrap() = Some(start + Duration::from_secs(u64::from(i)));
            accounts.insert([i; 32], Arc::new(account));
        }
        forget_least_recent(&mut accounts, 2);
        let mut left: Vec<u8> = accounts.keys().map(|k| k[0]).collect();
        left.sort_unstable();
        assert_eq!(left, [2, 3]);
    }
}
