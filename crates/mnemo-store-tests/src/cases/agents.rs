//! Agents and their versions.

use mnemo_api::{Agent, AgentId, AgentParams};
use mnemo_store::{Limits, StoreError};

use super::fixtures::{agent, map};
use crate::StoreFactory;

fn system(text: &str) -> AgentParams {
    AgentParams { system: Some(Some(text.into())), ..Default::default() }
}

fn ids(agents: &[Agent]) -> Vec<(&AgentId, u32)> {
    agents.iter().map(|a| (&a.id, a.version)).collect()
}

pub async fn agents_are_versioned_and_updates_build_on_the_latest(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let ws = s.default_workspace().await.unwrap();
    let first = agent(&*s).await;
    assert_eq!(first.version, 1);
    assert_eq!(first.archived_at, None);
    assert_eq!(s.get_agent(&ws, &first.id, None).await.unwrap(), first);
    assert_eq!(s.get_agent(&ws, &first.id, Some(1)).await.unwrap(), first);

    let change = AgentParams {
        system: Some(Some("be brief".into())),
        metadata: Some([("team".to_owned(), Some("a".to_owned()))].into()),
        ..Default::default()
    };
    let second = s.update_agent(&ws, &first.id, 1, change).await.unwrap();
    assert_eq!(second.version, 2);
    assert_eq!(second.spec.system.as_deref(), Some("be brief"));
    assert_eq!(second.spec.metadata, map(&[("team", "a")]));
    assert_eq!(second.spec.name, first.spec.name, "an update keeps what it does not name");
    assert_eq!(s.get_agent(&ws, &first.id, None).await.unwrap(), second);
    assert_eq!(s.get_agent(&ws, &first.id, Some(1)).await.unwrap().spec, first.spec, "old versions stay readable");

    assert_err!(s.update_agent(&ws, &first.id, 1, system("stale")).await, StoreError::Conflict(_));
    assert_err!(s.update_agent(&ws, &first.id, 3, system("ahead")).await, StoreError::Conflict(_));
    assert_eq!(s.get_agent(&ws, &first.id, None).await.unwrap().version, 2, "a refused update writes nothing");

    let same = s.update_agent(&ws, &first.id, 2, system("be brief")).await.unwrap();
    assert_eq!(same.version, 2, "an update that changes nothing writes no version");
    assert_err!(s.get_agent(&ws, &first.id, Some(3)).await, StoreError::NotFound { .. });

    let nameless = AgentParams { name: Some(String::new()), ..Default::default() };
    assert_err!(s.update_agent(&ws, &first.id, 2, nameless).await, StoreError::Invalid(_));

    let unknown = AgentId::generate();
    assert_err!(s.get_agent(&ws, &unknown, None).await, StoreError::NotFound { .. });
    assert_err!(s.update_agent(&ws, &unknown, 1, system("x")).await, StoreError::NotFound { .. });
    assert_err!(s.archive_agent(&ws, &unknown).await, StoreError::NotFound { .. });
}

pub async fn agents_are_listed_and_archived(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let ws = s.default_workspace().await.unwrap();
    let a1 = agent(&*s).await;
    let a2 = agent(&*s).await;
    let a3 = agent(&*s).await;
    s.update_agent(&ws, &a1.id, 1, system("v2")).await.unwrap();

    let page = s.list_agents(&ws, false, 2, None).await.unwrap();
    assert_eq!(ids(&page.items), [(&a3.id, 1), (&a2.id, 1)], "newest first");
    let rest = s.list_agents(&ws, false, 2, page.next).await.unwrap();
    assert_eq!(ids(&rest.items), [(&a1.id, 2)], "each at its latest version");
    assert!(rest.next.is_none());

    let archived = s.archive_agent(&ws, &a2.id).await.unwrap();
    assert!(archived.archived_at.is_some());
    assert_eq!(s.archive_agent(&ws, &a2.id).await.unwrap().archived_at, archived.archived_at, "archiving twice");
    assert_eq!(ids(&s.list_agents(&ws, false, 10, None).await.unwrap().items), [(&a3.id, 1), (&a1.id, 2)]);
    assert_eq!(ids(&s.list_agents(&ws, true, 10, None).await.unwrap().items), [(&a3.id, 1), (&a2.id, 1), (&a1.id, 2)]);
    assert_eq!(s.get_agent(&ws, &a2.id, None).await.unwrap().archived_at, archived.archived_at);
    assert_err!(s.update_agent(&ws, &a2.id, 1, system("late")).await, StoreError::Invalid(_));
}
