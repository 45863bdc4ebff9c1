//! The Admin API (`/v1/organizations/…`, admin-api.md §5, §8): shapes as the SDK parses them,
//! who may call what, and what key and workspace lifecycles do to requests.

use mnemo_server::hash_credential;
use reqwest::Method;
use serde_json::{Value, json};

use crate::common::{KEY, TestServer};

const ADMIN: &str = "sk-mnemo-admin-test-0123456789abcdefghijklmnopqrstuvwxyz";

async fn server() -> TestServer {
    let s = TestServer::start().await;
    s.store().ensure_admin_key(hash_credential(ADMIN), "test admin").await.unwrap();
    s
}

fn ok(answer: (u16, Value)) -> Value {
    assert_eq!(answer.0, 200, "{}", answer.1);
    answer.1
}

fn refused(answer: (u16, Value), status: u16, kind: &str) -> Value {
    assert_eq!(answer.0, status, "{}", answer.1);
    assert_eq!(answer.1["error"]["type"], kind, "{}", answer.1);
    answer.1
}

#[tokio::test]
async fn the_organization_answers_every_response_and_me() {
    let s = server().await;
    let me = ok(s.call(Method::GET, "/v1/organizations/me", ADMIN, None).await);
    assert_eq!(me["type"], "organization");
    assert_eq!(me["name"], "mnemo");
    let id = me["id"].as_str().unwrap();
    assert!(uuid_like(id), "a raw UUID: {id}");
    // An API key may ask which organization it is in.
    assert_eq!(ok(s.call(Method::GET, "/v1/organizations/me", KEY, None).await), me);
    for path in ["/v1/memory_stores", "/v1/organizations/me", "/healthz", "/v1/no-such-route"] {
        let resp = s.raw(Method::GET, path).bearer_auth(KEY).send().await.unwrap();
        assert_eq!(resp.headers()["anthropic-organization-id"], id, "{path}");
    }
}

fn uuid_like(s: &str) -> bool {
    let parts: Vec<usize> = s.split('-').map(str::len).collect();
    parts == [8, 4, 4, 4, 12] && s.chars().all(|c| c == '-' || c.is_ascii_hexdigit())
}

#[tokio::test]
async fn who_reaches_the_admin_api() {
    let s = server().await;
    // Environment keys and sessions tokens are refused too (the scope table's rows); on this
    // branch a new environment has no workspace yet, so they are judged there, not here.
    let routes: [(Method, &str, Option<Value>); 10] = [
        (Method::GET, "/v1/organizations/workspaces", None),
        (Method::POST, "/v1/organizations/workspaces", Some(json!({"name": "x"}))),
        (Method::GET, "/v1/organizations/api_keys", None),
        (Method::POST, "/v1/organizations/api_keys", Some(json!({"name": "x", "workspace_id": "wrkspc_x"}))),
        (Method::GET, "/v1/organizations/rate_limits", None),
        (Method::GET, "/v1/organizations/workspaces/wrkspc_x/rate_limits", None),
        (Method::GET, "/v1/organizations/users", None),
        (Method::POST, "/v1/organizations/invites", Some(json!({"email": "a@example.com", "role": "user"}))),
        (Method::GET, "/v1/organizations/workspaces/wrkspc_x/members", None),
        (Method::DELETE, "/v1/organizations/users/user_x", None),
    ];
    for (method, path, body) in routes {
        let e = refused(s.call(method.clone(), path, KEY, body.clone()).await, 403, "permission_error");
        assert!(e["error"]["message"].as_str().unwrap().contains("admin key"), "{e}");
    }
    // An admin key reaches no Managed Agents resource.
    refused(s.call(Method::GET, "/v1/memory_stores", ADMIN, None).await, 403, "permission_error");
    refused(
        s.call(Method::GET, "/v1/organizations/me", "sk-mnemo-admin-unknown", None).await,
        401,
        "authentication_error",
    );
    // Unimplemented Admin paths answer like any unknown route.
    refused(s.call(Method::GET, "/v1/organizations/service_accounts", ADMIN, None).await, 404, "not_found_error");
}

#[tokio::test]
async fn workspaces_are_created_listed_updated_and_archived() {
    let s = server().await;
    let default = s.store().default_workspace().await.unwrap().to_string();
    let created = ok(s
        .call(
            Method::POST,
            "/v1/organizations/workspaces",
            ADMIN,
            Some(json!({"name": "Team A", "tags": {"team": "a"}})),
        )
        .await);
    assert_eq!(created["type"], "workspace");
    assert_eq!(created["display_color"], "#6C5BB9");
    assert_eq!(created["tags"], json!({"team": "a"}));
    assert_eq!(created["archived_at"], Value::Null);
    assert_eq!(
        created["data_residency"],
        json!({"workspace_geo": "us", "allowed_inference_geos": "unrestricted", "default_inference_geo": "global"})
    );
    let id = created["id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("wrkspc_"));
    assert_eq!(created["compartment_id"], id.as_str());
    assert_eq!(ok(s.call(Method::GET, &format!("/v1/organizations/workspaces/{id}"), ADMIN, None).await), created);

    let updated = ok(s
        .call(
            Method::POST,
            &format!("/v1/organizations/workspaces/{id}"),
            ADMIN,
            Some(json!({"name": "Team B", "tags": {"team": null, "env": "prod"}})),
        )
        .await);
    assert_eq!((updated["name"].as_str(), &updated["tags"]), (Some("Team B"), &json!({"env": "prod"})));

    let listed = ok(s.call(Method::GET, "/v1/organizations/workspaces", ADMIN, None).await);
    let ids: Vec<&str> = listed["data"].as_array().unwrap().iter().map(|w| w["id"].as_str().unwrap()).collect();
    assert_eq!(ids, [id.as_str()], "Default only when asked for");
    assert_eq!((listed["has_more"].as_bool(), listed["first_id"].as_str()), (Some(false), Some(id.as_str())));
    let with_default =
        ok(s.call(Method::GET, "/v1/organizations/workspaces?include_default=true&limit=1", ADMIN, None).await);
    assert_eq!(
        (with_default["data"][0]["id"].as_str(), with_default["has_more"].as_bool()),
        (Some(default.as_str()), Some(true))
    );
    let next = ok(s
        .call(
            Method::GET,
            &format!("/v1/organizations/workspaces?include_default=true&limit=1&after_id={default}"),
            ADMIN,
            None,
        )
        .await);
    assert_eq!(next["data"][0]["id"], id.as_str());
    let filtered = ok(s
        .call(
            Method::GET,
            &format!("/v1/organizations/workspaces?ids[]={id}&ids[]=wrkspc_nope&include_default=true"),
            ADMIN,
            None,
        )
        .await);
    assert_eq!(filtered["data"].as_array().unwrap().len(), 1);

    // The Default workspace keeps its name and cannot be archived.
    let e = refused(
        s.call(Method::POST, &format!("/v1/organizations/workspaces/{default}"), ADMIN, Some(json!({"name": "Prod"})))
            .await,
        400,
        "invalid_request_error",
    );
    assert_eq!(e["error"]["message"], "the Default workspace cannot be renamed");
    let e = refused(
        s.call(Method::POST, &format!("/v1/organizations/workspaces/{default}/archive"), ADMIN, None).await,
        400,
        "invalid_request_error",
    );
    assert_eq!(e["error"]["message"], "the Default workspace cannot be archived");
    refused(
        s.call(Method::POST, "/v1/organizations/workspaces", ADMIN, Some(json!({"name": "x", "external_key_id": "k"})))
            .await,
        400,
        "invalid_request_error",
    );

    let archived = ok(s.call(Method::POST, &format!("/v1/organizations/workspaces/{id}/archive"), ADMIN, None).await);
    assert!(archived["archived_at"].is_string());
    let again = ok(s.call(Method::POST, &format!("/v1/organizations/workspaces/{id}/archive"), ADMIN, None).await);
    assert_eq!(again["archived_at"], archived["archived_at"], "idempotent");
    let listed = ok(s.call(Method::GET, "/v1/organizations/workspaces", ADMIN, None).await);
    assert_eq!(listed["data"], json!([]));
    let listed = ok(s.call(Method::GET, "/v1/organizations/workspaces?include_archived=true", ADMIN, None).await);
    assert_eq!(listed["data"][0]["id"], id.as_str());
    let missing = refused(
        s.call(Method::GET, "/v1/organizations/workspaces/wrkspc_nope", ADMIN, None).await,
        404,
        "not_found_error",
    );
    assert_eq!(missing["error"]["message"], "workspace `wrkspc_nope` not found");
}

#[tokio::test]
async fn a_minted_key_works_in_its_workspace_until_its_status_or_workspace_ends_it() {
    let s = server().await;
    let default = s.store().default_workspace().await.unwrap().to_string();
    let ws = ok(s.call(Method::POST, "/v1/organizations/workspaces", ADMIN, Some(json!({"name": "ci"}))).await);
    let ws = ws["id"].as_str().unwrap().to_owned();
    let minted = ok(s
        .call(Method::POST, "/v1/organizations/api_keys", ADMIN, Some(json!({"name": "ci key", "workspace_id": ws})))
        .await);
    let secret = minted["key"].as_str().unwrap().to_owned();
    assert!(secret.starts_with("sk-mnemo-"));
    assert_eq!(minted["type"], "api_key");
    assert_eq!(minted["status"], "active");
    assert_eq!(minted["scope"], json!({"type": "workspace", "workspace_id": ws}));
    assert_eq!(minted["workspace_id"], ws.as_str(), "the legacy field names a non-Default workspace");
    assert_eq!(
        (&minted["principal"], &minted["created_by"], &minted["expires_at"]),
        (&Value::Null, &Value::Null, &Value::Null)
    );
    let hint = minted["partial_key_hint"].as_str().unwrap();
    assert!(hint.starts_with(&secret[..12]) && hint.ends_with(&secret[secret.len() - 4..]) && hint.contains('…'));
    let key_id = minted["id"].as_str().unwrap().to_owned();

    // It works in its own workspace, and the response says which.
    let resp = s.raw(Method::GET, "/v1/memory_stores").bearer_auth(&secret).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["anthropic-workspace-id"], ws.as_str());
    let resp = s
        .raw(Method::GET, "/v1/memory_stores")
        .bearer_auth(&secret)
        .header("anthropic-workspace-id", &default)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 403);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["details"]["error_code"], "workspace_mismatch");

    // Read back: never the secret; the legacy Default key keeps `workspace_id: null`.
    let got = ok(s.call(Method::GET, &format!("/v1/organizations/api_keys/{key_id}"), ADMIN, None).await);
    assert!(got.get("key").is_none() && !got.to_string().contains(&secret));
    let listed = ok(s.call(Method::GET, &format!("/v1/organizations/api_keys?workspace_id={ws}"), ADMIN, None).await);
    assert_eq!(listed["data"].as_array().unwrap().len(), 1);
    let all = ok(s.call(Method::GET, "/v1/organizations/api_keys", ADMIN, None).await);
    let legacy = &all["data"][0];
    assert_eq!(
        (legacy["workspace_id"].clone(), legacy["scope"]["workspace_id"].as_str()),
        (Value::Null, Some(default.as_str()))
    );
    let inactive_list = ok(s.call(Method::GET, "/v1/organizations/api_keys?status=inactive", ADMIN, None).await);
    assert_eq!(inactive_list["data"], json!([]));

    // Deactivate: refused at once; reactivate: works again.
    let path = format!("/v1/organizations/api_keys/{key_id}");
    let off = ok(s.call(Method::POST, &path, ADMIN, Some(json!({"status": "inactive", "name": "paused"}))).await);
    assert_eq!((off["status"].as_str(), off["name"].as_str()), (Some("inactive"), Some("paused")));
    refused(s.call(Method::GET, "/v1/memory_stores", &secret, None).await, 401, "authentication_error");
    ok(s.call(Method::POST, &path, ADMIN, Some(json!({"status": "active"}))).await);
    ok(s.call(Method::GET, "/v1/memory_stores", &secret, None).await);

    // Archiving its workspace archives it; an archived key is final.
    ok(s.call(Method::POST, &format!("/v1/organizations/workspaces/{ws}/archive"), ADMIN, None).await);
    refused(s.call(Method::GET, "/v1/memory_stores", &secret, None).await, 401, "authentication_error");
    assert_eq!(ok(s.call(Method::GET, &path, ADMIN, None).await)["status"], "archived");
    let e = refused(
        s.call(Method::POST, &path, ADMIN, Some(json!({"status": "active"}))).await,
        400,
        "invalid_request_error",
    );
    assert_eq!(e["error"]["message"], format!("API key `{key_id}` is archived; an archived key cannot be changed"));
    let e = refused(
        s.call(Method::POST, "/v1/organizations/api_keys", ADMIN, Some(json!({"name": "late", "workspace_id": ws})))
            .await,
        400,
        "invalid_request_error",
    );
    assert_eq!(e["error"]["message"], format!("workspace `{ws}` is archived; no API key can be created in it"));
    refused(s.call(Method::POST, &path, ADMIN, Some(json!({"status": "expired"}))).await, 400, "invalid_request_error");
    refused(
        s.call(Method::POST, "/v1/organizations/api_keys", ADMIN, Some(json!({"name": "", "workspace_id": default})))
            .await,
        400,
        "invalid_request_error",
    );
    refused(
        s.call(
            Method::POST,
            "/v1/organizations/api_keys",
            ADMIN,
            Some(json!({"name": "old", "workspace_id": default, "expires_at": "2001-01-01T00:00:00Z"})),
        )
        .await,
        400,
        "invalid_request_error",
    );
}

#[tokio::test]
async fn rate_limits_list_the_catalogue_and_keep_workspace_overrides() {
    let s = server().await;
    let org = ok(s.call(Method::GET, "/v1/organizations/rate_limits", ADMIN, None).await);
    assert_eq!(org["next_page"], Value::Null);
    let entry = &org["data"][0];
    assert_eq!((entry["type"].as_str(), entry["id"].as_str()), (Some("rate_limit"), Some("ratelimit_api")));
    assert_eq!(entry["group"]["type"], "managed_agents");
    refused(
        s.call(Method::GET, "/v1/organizations/rate_limits?model=no-such-model", ADMIN, None).await,
        404,
        "not_found_error",
    );

    let ws = ok(s.call(Method::POST, "/v1/organizations/workspaces", ADMIN, Some(json!({"name": "w"}))).await);
    let ws = ws["id"].as_str().unwrap().to_owned();
    let base = format!("/v1/organizations/workspaces/{ws}/rate_limits");
    assert_eq!(ok(s.call(Method::GET, &base, ADMIN, None).await)["data"], json!([]), "nothing overridden yet");
    let inherited = ok(s.call(Method::GET, &format!("{base}?include_inherited=true"), ADMIN, None).await);
    assert_eq!(inherited["data"][0]["limits"][0]["source"], json!({"type": "organization"}));

    let body = json!({"limits": [{"type": "requests_per_minute", "value": 60}]});
    let set = ok(s.call(Method::POST, &format!("{base}/ratelimit_api"), ADMIN, Some(body)).await);
    assert_eq!(set["type"], "workspace_rate_limit");
    assert_eq!(
        set["limits"],
        json!([{"type": "requests_per_minute", "value": 60, "org_limit": null, "source": {"type": "workspace"}}])
    );
    assert_eq!(ok(s.call(Method::GET, &base, ADMIN, None).await)["data"][0], set);
    let cleared = ok(s
        .call(
            Method::POST,
            &format!("{base}/ratelimit_api"),
            ADMIN,
            Some(json!({"limits": [{"type": "requests_per_minute", "value": null}]})),
        )
        .await);
    assert_eq!(cleared["limits"], json!([]));
    refused(
        s.call(Method::POST, &format!("{base}/ratelimit_nope"), ADMIN, Some(json!({"limits": []}))).await,
        404,
        "not_found_error",
    );
    refused(
        s.call(
            Method::POST,
            &format!("{base}/ratelimit_api"),
            ADMIN,
            Some(json!({"limits": [{"type": "tokens_per_day", "value": 5}]})),
        )
        .await,
        400,
        "invalid_request_error",
    );
    ok(s.call(Method::POST, &format!("/v1/organizations/workspaces/{ws}/archive"), ADMIN, None).await);
    refused(
        s.call(
            Method::POST,
            &format!("{base}/ratelimit_api"),
            ADMIN,
            Some(json!({"limits": [{"type": "requests_per_minute", "value": 5}]})),
        )
        .await,
        400,
        "invalid_request_error",
    );
}
