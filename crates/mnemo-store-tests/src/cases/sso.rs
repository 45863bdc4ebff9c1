//! People who sign in through the identity provider (issue 33 item 3): created at the first
//! sign-in, linked by subject, their roles set from their groups at every sign-in.

use mnemo_api::{NewWorkspace, OrgRole, WorkspaceId, WorkspaceRole};
use mnemo_store::ops::sso::{EMAIL_TAKEN, NO_EMAIL, RoleChange, SsoIdentity};
use mnemo_store::rules::people::{SETUP_LINK_TTL_SECS, Via};
use mnemo_store::rules::sso::Grants;
use mnemo_store::{Limits, Store, StoreError};
use serde_json::json;

use super::hash;
use crate::StoreFactory;

const ISSUER: &str = "https://idp.example.com";

fn who(subject: &str, email: &str) -> SsoIdentity {
    SsoIdentity {
        issuer: ISSUER.into(),
        subject: subject.into(),
        email: Some(email.into()),
        name: Some("Ada L".into()),
    }
}

fn grants(org_role: OrgRole, workspaces: &[(&WorkspaceId, WorkspaceRole)]) -> Grants<WorkspaceId> {
    Grants { org_role, workspaces: workspaces.iter().map(|(w, r)| ((*w).clone(), *r)).collect() }
}

async fn workspace(s: &dyn Store, name: &str) -> WorkspaceId {
    let new: NewWorkspace =
        serde_json::from_value::<mnemo_api::WorkspaceCreate>(json!({"name": name})).unwrap().validate().unwrap();
    s.create_workspace_with(new, 10).await.unwrap().id
}

pub async fn sso_people_are_created_once_and_get_their_groups_roles_at_every_sign_in(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let (a, b) = (workspace(&*s, "a").await, workspace(&*s, "b").await);
    assert!(s.sso_person(ISSUER.into(), "sub-ada".into()).await.unwrap().is_none());

    let first = s
        .sso_sign_in(
            who("sub-ada", "Ada@Example.com"),
            grants(OrgRole::User, &[(&a, WorkspaceRole::WorkspaceDeveloper)]),
        )
        .await
        .unwrap();
    assert!(first.created);
    assert_eq!(
        (first.user.email.as_str(), first.user.name.as_str(), first.user.role),
        ("ada@example.com", "Ada L", OrgRole::User)
    );
    assert_eq!(s.get_member(&a, &first.user.id).await.unwrap().workspace_role, WorkspaceRole::WorkspaceDeveloper);
    assert_eq!(
        first.changes,
        [RoleChange::Member { workspace: a.clone(), from: None, to: Some(WorkspaceRole::WorkspaceDeveloper) }]
    );

    // The same subject, whatever its email now: the same person; memberships SET, not added to.
    let second = s
        .sso_sign_in(
            who("sub-ada", "ada@new.example.com"),
            grants(OrgRole::User, &[(&b, WorkspaceRole::WorkspaceUser)]),
        )
        .await
        .unwrap();
    assert!(!second.created);
    assert_eq!(second.user.id, first.user.id);
    // The provider is the source of truth for who they are: a changed address or name is taken.
    assert_eq!(second.user.email, "ada@new.example.com", "the address the provider sends now");
    let renamed = s
        .sso_sign_in(
            SsoIdentity { name: Some("Ada Lovelace".into()), ..who("sub-ada", "ada@new.example.com") },
            grants(OrgRole::User, &[(&b, WorkspaceRole::WorkspaceUser)]),
        )
        .await
        .unwrap();
    assert_eq!((renamed.user.name.as_str(), renamed.changes.len()), ("Ada Lovelace", 0));
    assert_eq!(s.get_user(&first.user.id).await.unwrap().name, "Ada Lovelace");
    assert!(
        matches!(s.get_member(&a, &first.user.id).await, Err(StoreError::NotFound { .. })),
        "group removed: role lost"
    );
    assert_eq!(s.get_member(&b, &first.user.id).await.unwrap().workspace_role, WorkspaceRole::WorkspaceUser);
    assert_eq!(second.changes.len(), 2);
    let (user, held) = s.sso_person(ISSUER.into(), "sub-ada".into()).await.unwrap().unwrap();
    assert_eq!((user.id, held), (first.user.id.clone(), grants(OrgRole::User, &[(&b, WorkspaceRole::WorkspaceUser)])));

    // Nothing changed: nothing written.
    let again = s
        .sso_sign_in(who("sub-ada", "ada@example.com"), grants(OrgRole::User, &[(&b, WorkspaceRole::WorkspaceUser)]))
        .await
        .unwrap();
    assert!(again.changes.is_empty());
    assert_eq!(again.user.email, "ada@example.com");
    // An address another person holds stays theirs: this person keeps the one they had.
    let bea = s.sso_sign_in(who("sub-bea", "bea@example.com"), grants(OrgRole::User, &[])).await.unwrap();
    let taken = s.sso_sign_in(who("sub-bea", "ada@example.com"), grants(OrgRole::User, &[])).await.unwrap();
    assert_eq!((taken.user.id, taken.user.email.as_str()), (bea.user.id, "bea@example.com"));

    // An admin group: org admin, no explicit memberships; taken away, the role goes too.
    let admin = s.sso_sign_in(who("sub-ada", "ada@example.com"), grants(OrgRole::Admin, &[])).await.unwrap();
    assert_eq!(admin.user.role, OrgRole::Admin);
    assert!(admin.changes.contains(&RoleChange::Org { from: OrgRole::User, to: OrgRole::Admin }));
    assert_eq!(s.get_member(&a, &first.user.id).await.unwrap().workspace_role, WorkspaceRole::WorkspaceAdmin);
    let demoted = s
        .sso_sign_in(who("sub-ada", "ada@example.com"), grants(OrgRole::User, &[(&a, WorkspaceRole::WorkspaceUser)]))
        .await
        .unwrap();
    assert_eq!(demoted.user.role, OrgRole::User);

    // Another subject with a taken email, or with none: refused, nothing made.
    for (identity, why) in [
        (who("sub-other", "ada@example.com"), EMAIL_TAKEN),
        (SsoIdentity { email: None, ..who("sub-other", "x@example.com") }, NO_EMAIL),
        (who("sub-other", "not an email"), NO_EMAIL),
    ] {
        match s.sso_sign_in(identity, grants(OrgRole::User, &[])).await {
            Err(StoreError::Forbidden(m)) => assert_eq!(m, why),
            other => panic!("{other:?}"),
        }
    }
    assert!(s.sso_person(ISSUER.into(), "sub-other".into()).await.unwrap().is_none());

    // Removed in mnemo: unlinked; the next sign-in makes a new person.
    s.create_setup_link(hash(9), SETUP_LINK_TTL_SECS).await.unwrap();
    let joining = mnemo_store::ops::people::Joining { name: "Root".into(), password_hash: "$argon2id$x".into() };
    s.use_setup_link(hash(9), "root@example.com".into(), joining).await.unwrap();
    s.remove_user(&first.user.id, Via::Console).await.unwrap();
    assert!(s.sso_person(ISSUER.into(), "sub-ada".into()).await.unwrap().is_none());
    let back = s.sso_sign_in(who("sub-ada", "ada@example.com"), grants(OrgRole::User, &[])).await.unwrap();
    assert!(back.created && back.user.id != first.user.id);
}
