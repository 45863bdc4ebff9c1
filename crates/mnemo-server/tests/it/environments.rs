use mnemo_api::{CreateEnvironment, UpdateEnvironment};
use mnemo_client::Client;
use serde_json::json;

use crate::common::{TestServer, error_type};

fn details_code(e: mnemo_client::ClientError) -> String {
    match e {
        mnemo_client::ClientError::Api { error, .. } => {
            error.extra["details"]["error_code"].as_str().unwrap_or("").to_owned()
        }
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test]
async fn environments_crud() {
    let s = TestServer::start().await;
    let env = s
        .client
        .create_environment(&CreateEnvironment { name: "self-hosted".into(), ..Default::default() })
        .await
        .unwrap();
    assert!(env.id.as_str().starts_with("env_"));
    assert!(env.is_self_hosted(), "self_hosted is the default config");
    assert_eq!(env.description, None);
    assert_eq!(env.scope.as_deref(), Some("organization"));
    assert_eq!(s.client.get_environment(&env.id).await.unwrap(), env);

    let cloud = s
        .client
        .create_environment(&CreateEnvironment {
            name: "cloud".into(),
            config: Some(json!({"type": "cloud", "networking": {"type": "unrestricted"}})),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(cloud.config["networking"]["type"], "unrestricted", "cloud configs are kept as data");
    let bad = CreateEnvironment { name: "x".into(), config: Some(json!({"type": "mainframe"})), ..Default::default() };
    assert_eq!(error_type(s.client.create_environment(&bad).await).0, 400);

    let patch: UpdateEnvironment =
        serde_json::from_value(json!({"description": "desc", "metadata": {"a": "1", "b": "2"}})).unwrap();
    let updated = s.client.update_environment(&env.id, &patch).await.unwrap();
    assert_eq!(updated.description.as_deref(), Some("desc"));
    let patch: UpdateEnvironment =
        serde_json::from_value(json!({"description": null, "metadata": {"a": null, "b": ""}})).unwrap();
    let cleared = s.client.update_environment(&env.id, &patch).await.unwrap();
    assert_eq!((cleared.description, cleared.metadata.len()), (None, 0), "null clears; null and \"\" remove keys");

    let change_type: UpdateEnvironment = serde_json::from_value(json!({"config": {"type": "cloud"}})).unwrap();
    let e = s.client.update_environment(&env.id, &change_type).await.unwrap_err();
    assert_eq!(details_code(e), "invalid_config_type_change");

    let page = s.client.list_environments(false, Some(1), None).await.unwrap();
    assert_eq!(page.data.len(), 1);
    assert!(page.next_page.is_some());

    let archived = s.client.archive_environment(&env.id).await.unwrap();
    assert!(archived.archived_at.is_some());
    assert_eq!(s.client.list_environments(false, None, None).await.unwrap().data.len(), 1);
    assert_eq!(s.client.list_environments(true, None, None).await.unwrap().data.len(), 2);
    let e = s
        .client
        .update_environment(&env.id, &UpdateEnvironment { name: Some("n".into()), ..Default::default() })
        .await
        .unwrap_err();
    assert_eq!(details_code(e), "environment_archived");

    let deleted = s.client.delete_environment(&env.id).await.unwrap();
    assert_eq!(deleted.id, env.id);
    let e = s.client.get_environment(&env.id).await.unwrap_err();
    assert_eq!(e.status(), Some(404));
    assert_eq!(details_code(e), "environment_not_found");
}

#[tokio::test]
async fn environment_keys_are_minted_once_scoped_and_revocable() {
    let s = TestServer::start().await;
    let env = s.client.create_environment(&CreateEnvironment { name: "e".into(), ..Default::default() }).await.unwrap();
    let key = s.client.create_environment_key(&env.id).await.unwrap();
    let secret = key.key.clone().expect("the secret is shown once").into_exposed();
    assert!(secret.starts_with("sk-mnemo-env-"));
    let listed = s.client.list_environment_keys(&env.id).await.unwrap().data;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].key, None, "listings never show secrets");

    // The environment key is refused by the memory endpoints and by administration.
    let as_env = Client::new(&s.base, &secret).unwrap().with_max_retries(0);
    let e = as_env.list_memory_stores(&Default::default()).await.unwrap_err();
    assert_eq!((e.status(), e.error_type()), (Some(403), Some("permission_error")));
    assert!(e.to_string().contains("environment key"), "{e}");
    assert_eq!(as_env.list_environments(false, None, None).await.unwrap_err().status(), Some(403));
    assert_eq!(as_env.create_environment_key(&env.id).await.unwrap_err().status(), Some(403));

    let revoked = s.client.revoke_environment_key(&env.id, &key.id).await.unwrap();
    assert!(revoked.revoked_at.is_some());
    assert_eq!(
        as_env.list_memory_stores(&Default::default()).await.unwrap_err().status(),
        Some(401),
        "revoked keys are unknown"
    );
    let again = s.client.revoke_environment_key(&env.id, &key.id).await.unwrap();
    assert_eq!(again.revoked_at, revoked.revoked_at, "revoking twice changes nothing");

    let other =
        s.client.create_environment(&CreateEnvironment { name: "o".into(), ..Default::default() }).await.unwrap();
    assert_eq!(s.client.revoke_environment_key(&other.id, &key.id).await.unwrap_err().status(), Some(404));
}
