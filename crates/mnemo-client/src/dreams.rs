//! Dreams (beta `dreaming-2026-04-21`): a model curates a memory store from the sessions that
//! used it, as an asynchronous job. Create one, read it, list a page of them, cancel it,
//! archive it; the job itself runs on the server (`mnemo serve`'s agent loop, or the hosted API).
//!
//! Every call here carries `anthropic-beta: dreaming-2026-04-21` (and only that beta, as the
//! reference client sends it), chosen for `/v1/dreams` paths by `beta_for`.

use mnemo_api::{Dream, DreamId, DreamInput, DreamRequest, DreamStatus, OutputBehavior, Page};
use reqwest::Method;
use serde::Serialize;

use crate::{Client, Result};

/// The beta the dream endpoints are called under.
pub use mnemo_api::headers::DREAMING_BETA;

/// The header that makes a retried create answer the dream the first attempt made.
const IDEMPOTENCY_KEY: &str = "idempotency-key";

/// Query of [`Client::list_dreams`]: one page, newest first.
#[derive(Debug, Clone, Default)]
pub struct ListDreamsParams {
    /// Only dreams in one of these statuses (every status when empty).
    pub statuses: Vec<DreamStatus>,
    /// Archived dreams too (the server leaves them out by default).
    pub include_archived: Option<bool>,
    /// Only dreams created after this RFC 3339 instant (exclusive).
    pub created_at_gt: Option<String>,
    /// Only dreams created before this RFC 3339 instant (exclusive).
    pub created_at_lt: Option<String>,
    /// 1–100 (the server's default is 20).
    pub limit: Option<u32>,
    /// The `next_page` of the previous page.
    pub page: Option<String>,
}

impl ListDreamsParams {
    /// The query as pairs: `statuses[]` once per status, the bracket form the reference client
    /// sends (a struct cannot say it: `serde_urlencoded` writes no sequences).
    fn pairs(&self) -> Vec<(&'static str, String)> {
        let mut out: Vec<(&'static str, String)> =
            self.statuses.iter().map(|s| ("statuses[]", s.as_str().to_owned())).collect();
        let optional = [
            ("include_archived", self.include_archived.map(|b| b.to_string())),
            ("created_at[gt]", self.created_at_gt.clone()),
            ("created_at[lt]", self.created_at_lt.clone()),
            ("limit", self.limit.map(|n| n.to_string())),
            ("page", self.page.clone()),
        ];
        out.extend(optional.into_iter().filter_map(|(k, v)| Some((k, v?))));
        out
    }
}

/// The body of `POST /v1/dreams` as the reference client writes it: optional keys left out.
#[derive(Serialize)]
struct CreateBody<'a> {
    inputs: Vec<DreamInput>,
    model: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    instructions: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    output_behavior: Option<OutputBehavior>,
}

impl<'a> CreateBody<'a> {
    fn of(request: &'a DreamRequest) -> Self {
        Self {
            inputs: request.inputs(),
            model: &request.model,
            instructions: request.instructions.as_deref(),
            output_behavior: request.update_existing.then(|| request.output_behavior()),
        }
    }
}

impl Client {
    /// Creates a dream over `request`'s store and sessions; the answer is `pending`. The
    /// server checks the request (and answers `400` naming the field); this sends it as is.
    ///
    /// A create is not idempotent on its own, and this client retries connection failures and
    /// `5xx`: every attempt of one call carries the same fresh `Idempotency-Key`, so a server
    /// that honours it (`mnemo serve`) answers a retry with the dream the first attempt made.
    pub async fn create_dream(&self, request: &DreamRequest) -> Result<Dream> {
        let body = CreateBody::of(request);
        let key = format!("mnemo-{:032x}", rand::random::<u128>());
        self.send(|| self.request(Method::POST, "/v1/dreams").header(IDEMPOTENCY_KEY, &key).json(&body)).await
    }

    /// A dream, archived or not.
    pub async fn get_dream(&self, id: &DreamId) -> Result<Dream> {
        self.send(|| self.request(Method::GET, &format!("/v1/dreams/{id}"))).await
    }

    /// One page of dreams, newest first; follow `next_page` with `params.page`.
    pub async fn list_dreams(&self, params: &ListDreamsParams) -> Result<Page<Dream>> {
        let query = params.pairs();
        self.send(|| self.request(Method::GET, "/v1/dreams").query(&query)).await
    }

    /// Cancels a pending or running dream (`canceled` at once; a canceled one is answered
    /// unchanged). A dream that already completed or failed is a `400`.
    pub async fn cancel_dream(&self, id: &DreamId) -> Result<Dream> {
        self.send(|| self.request(Method::POST, &format!("/v1/dreams/{id}/cancel"))).await
    }

    /// Archives a completed, failed or canceled dream: hidden from default lists, irreversible
    /// (an archived one is answered unchanged). A pending or running dream is a `400`.
    pub async fn archive_dream(&self, id: &DreamId) -> Result<Dream> {
        self.send(|| self.request(Method::POST, &format!("/v1/dreams/{id}/archive"))).await
    }
}

#[cfg(test)]
mod tests {
    use mnemo_api::{MemoryStoreId, SessionId};
    use serde_json::json;

    use super::*;
    use crate::testing::{json, serve};

    fn dream_json(status: &str) -> serde_json::Value {
        json!({
            "type": "dream", "id": "drm_01", "status": status,
            "inputs": [{"type": "memory_store", "memory_store_id": "memstore_01"},
                       {"type": "sessions", "session_ids": ["sesn_01"]}],
            "output_behavior": {"type": "create_new"}, "outputs": [],
            "model": {"id": "claude-sonnet-4-6", "speed": "standard"}, "instructions": null,
            "session_id": null,
            "usage": {"input_tokens": 0, "output_tokens": 0, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
            "error": null, "created_at": "2026-12-01T10:00:00Z", "ended_at": null, "archived_at": null,
        })
    }

    fn request(update_existing: bool, instructions: Option<&str>) -> DreamRequest {
        DreamRequest {
            store: "memstore_01".parse::<MemoryStoreId>().unwrap(),
            sessions: vec!["sesn_02".parse::<SessionId>().unwrap(), "sesn_01".parse().unwrap()],
            model: "claude-sonnet-4-6".into(),
            instructions: instructions.map(str::to_owned),
            update_existing,
        }
    }

    #[test]
    fn the_create_body_leaves_optional_keys_out_as_the_reference_client_does() {
        let plain = serde_json::to_value(CreateBody::of(&request(false, None))).unwrap();
        assert_eq!(
            plain,
            json!({"inputs": [{"type": "memory_store", "memory_store_id": "memstore_01"},
                              {"type": "sessions", "session_ids": ["sesn_02", "sesn_01"]}],
                   "model": "claude-sonnet-4-6"})
        );
        let full = serde_json::to_value(CreateBody::of(&request(true, Some("keep deploy notes")))).unwrap();
        assert_eq!(full["instructions"], "keep deploy notes");
        assert_eq!(full["output_behavior"], json!({"type": "update_existing", "memory_store_id": "memstore_01"}));
        // What the client sends, the server's parser takes back unchanged.
        assert_eq!(DreamRequest::parse(&full).unwrap().instructions.as_deref(), Some("keep deploy notes"));
    }

    #[test]
    fn only_dream_paths_are_called_under_the_dreaming_beta() {
        for path in ["/v1/dreams", "/v1/dreams/drm_01", "/v1/dreams/drm_01/cancel", "/v1/dreams?limit=1"] {
            assert_eq!(crate::beta_for(path), Some(DREAMING_BETA), "{path}");
        }
        assert_eq!(crate::beta_for("/v1/dreamsX"), Some(crate::MANAGED_AGENTS_BETA));
        assert_eq!(crate::beta_for("/v1/sessions"), Some(crate::MANAGED_AGENTS_BETA));
    }

    #[test]
    fn statuses_go_in_the_bracket_form_once_each() {
        let query = |p: &ListDreamsParams| {
            let req = reqwest::Client::new().get("http://127.0.0.1/").query(&p.pairs()).build().unwrap();
            req.url().query().unwrap_or_default().to_owned()
        };
        assert_eq!(query(&ListDreamsParams::default()), "");
        let params = ListDreamsParams {
            statuses: vec![DreamStatus::Pending, DreamStatus::Running],
            include_archived: Some(true),
            limit: Some(100),
            page: Some("c2".into()),
            ..Default::default()
        };
        assert_eq!(
            query(&params),
            "statuses%5B%5D=pending&statuses%5B%5D=running&include_archived=true&limit=100&page=c2"
        );
    }

    #[tokio::test]
    async fn every_dream_call_names_the_dreaming_beta_and_a_retried_create_keeps_its_key() {
        let dream = dream_json("pending").to_string();
        let page = json!({"data": [dream_json("running")], "next_page": null}).to_string();
        let (base, seen) = serve(vec![
            json("503 Service Unavailable", "{}"),
            json("200 OK", &dream),
            json("200 OK", &dream),
            json("200 OK", &page),
            json("200 OK", &dream),
            json("200 OK", &dream),
        ])
        .await;
        let client = Client::new(&base, "k").unwrap();
        let id: DreamId = "drm_01".parse().unwrap();
        assert_eq!(client.create_dream(&request(false, None)).await.unwrap().status, DreamStatus::Pending);
        client.get_dream(&id).await.unwrap();
        let params = ListDreamsParams { statuses: vec![DreamStatus::Running], ..Default::default() };
        assert_eq!(client.list_dreams(&params).await.unwrap().data[0].status, DreamStatus::Running);
        client.cancel_dream(&id).await.unwrap();
        client.archive_dream(&id).await.unwrap();
        let seen = seen.lock().unwrap().clone();
        let firsts: Vec<&str> = seen.iter().map(|h| h.lines().next().unwrap()).collect();
        assert_eq!(
            firsts,
            [
                "post /v1/dreams http/1.1",
                "post /v1/dreams http/1.1",
                "get /v1/dreams/drm_01 http/1.1",
                "get /v1/dreams?statuses%5b%5d=running http/1.1",
                "post /v1/dreams/drm_01/cancel http/1.1",
                "post /v1/dreams/drm_01/archive http/1.1",
            ]
        );
        for head in &seen {
            assert!(head.contains("\r\nanthropic-beta: dreaming-2026-04-21\r\n"), "{head}");
        }
        let key = |head: &str| head.lines().find(|l| l.starts_with("idempotency-key:")).map(str::to_owned);
        assert!(key(&seen[0]).is_some(), "{}", seen[0]);
        assert_eq!(key(&seen[0]), key(&seen[1]), "the retry carries the first attempt's key");
        let again = serve(vec![json("200 OK", &dream)]).await;
        Client::new(&again.0, "k").unwrap().create_dream(&request(false, None)).await.unwrap();
        assert_ne!(key(&again.1.lock().unwrap()[0]), key(&seen[0]), "each create has its own key");
    }
}
