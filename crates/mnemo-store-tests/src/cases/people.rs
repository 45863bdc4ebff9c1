//! People (admin-api.md §4.3, §8.3, §8.6, §8.7): the setup link, invites, users and workspace
//! members.

use std::sync::Arc;
use std::time::Duration;

use mnemo_api::{
    AdminCursor, AdminErrorCode, AdminPageQuery, InviteStatus, MemberAdd, NewInvite, NewWorkspace, OrgRole, User,
    UserId, WorkspaceRole,
};
use mnemo_store::ops::people::{Joining, ListInvites, ListUsers};
use mnemo_store::rules::people::{DEFAULT_INVITE_TTL_SECS, SETUP_LINK_TTL_SECS, Via};
use mnemo_store::{ErrorCode, Limits, Signal, Store, StoreError};
use serde_json::json;
use tokio::sync::broadcast;

use super::hash;
use crate::StoreFactory;

fn first_page() -> AdminPageQuery {
    AdminPageQuery { limit: 20, cursor: AdminCursor::Start }
}

fn joining(name: &str) -> Joining {
    Joining { name: name.into(), password_hash: "$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA".into() }
}

fn invite(email: &str, role: OrgRole) -> NewInvite {
    NewInvite { email: email.into(), role }
}

fn coded(e: &StoreError) -> Option<AdminErrorCode> {
    match e {
        StoreError::Coded { code: ErrorCode::Admin(code), .. } => Some(*code),
        _ => None,
    }
}

/// Invites `email` as `role` (link secret `hash(n)`) and accepts the invite.
async fn join(s: &dyn Store, n: u8, email: &str, role: OrgRole) -> User {
    s.create_invite(invite(email, role), hash(n), DEFAULT_INVITE_TTL_SECS).await.unwrap();
    s.accept_invite(hash(n), joining(email)).await.unwrap()
}

/// The first admin, through a setup link (secret `hash(n)`).
async fn first_admin(s: &dyn Store, n: u8, email: &str) -> User {
    s.create_setup_link(hash(n), SETUP_LINK_TTL_SECS).await.unwrap();
    s.use_setup_link(hash(n), email.into(), joining("Admin")).await.unwrap()
}

pub async fn a_setup_link_makes_the_first_admin_once(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    assert!(s.setup_wanted().await.unwrap(), "an empty organization wants an admin");
    s.create_setup_link(hash(1), SETUP_LINK_TTL_SECS).await.unwrap();
    assert!(s.setup_link_usable(hash(1)).await.unwrap());
    assert!(!s.setup_link_usable(hash(2)).await.unwrap(), "an unknown link is not usable");
    let admin = s.use_setup_link(hash(1), " Ada@Example.com ".into(), joining("Ada")).await.unwrap();
    assert_eq!((admin.email.as_str(), admin.name.as_str(), admin.role), ("ada@example.com", "Ada", OrgRole::Admin));
    assert!(!s.setup_wanted().await.unwrap());
    let again = s.use_setup_link(hash(1), "eve@example.com".into(), joining("Eve")).await.unwrap_err();
    assert!(matches!(again, StoreError::Invalid(_)), "a link is used once: {again:?}");
    s.create_setup_link(hash(3), SETUP_LINK_TTL_SECS).await.unwrap();
    assert!(!s.setup_link_usable(hash(3)).await.unwrap(), "no link makes a second admin");
    s.create_setup_link(hash(4), 0).await.unwrap();
    let expired = s.use_setup_link(hash(4), "bob@example.com".into(), joining("Bob")).await.unwrap_err();
    assert!(matches!(expired, StoreError::Invalid(_)), "{expired:?}");
    let page = s.list_users(ListUsers { email: None, roles: vec![], page: first_page() }).await.unwrap();
    assert_eq!(page.data, [admin]);
}

pub async fn invites_are_made_listed_accepted_and_deleted(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let ttl = DEFAULT_INVITE_TTL_SECS;
    let made = s.create_invite(invite("dev@example.com", OrgRole::Developer), hash(1), ttl).await.unwrap();
    assert_eq!((made.status, made.role, made.accepted_at), (InviteStatus::Pending, OrgRole::Developer, None));
    assert_eq!((made.expires_at - made.invited_at).num_seconds(), 7 * 86_400);
    assert!(made.rbac_group_ids.is_empty());
    assert_eq!(s.get_invite(&made.id).await.unwrap(), made);
    assert_eq!(s.invite_by_link(hash(1)).await.unwrap(), Some(made.clone()));
    assert_eq!(s.invite_by_link(hash(9)).await.unwrap(), None);

    let twice = s.create_invite(invite("dev@example.com", OrgRole::User), hash(2), ttl).await.unwrap_err();
    assert_eq!(coded(&twice), Some(AdminErrorCode::InviteAlreadyExists), "{twice:?}");
    let admin = s.create_invite(invite("boss@example.com", OrgRole::Admin), hash(2), ttl).await.unwrap_err();
    assert!(matches!(admin, StoreError::Invalid(_)), "the API invites no admin: {admin:?}");

    let user = s.accept_invite(hash(1), joining("  Dev  ")).await.unwrap();
    assert_eq!((user.email.as_str(), user.name.as_str(), user.role), ("dev@example.com", "Dev", OrgRole::Developer));
    let accepted = s.get_invite(&made.id).await.unwrap();
    assert_eq!(accepted.status, InviteStatus::Accepted);
    assert!(accepted.accepted_at.is_some());
    let reused = s.accept_invite(hash(1), joining("Eve")).await.unwrap_err();
    assert!(matches!(reused, StoreError::Invalid(_)), "an invite is accepted once: {reused:?}");
    let member = s.create_invite(invite("dev@example.com", OrgRole::User), hash(3), ttl).await.unwrap_err();
    assert_eq!(coded(&member), Some(AdminErrorCode::AlreadyMember), "{member:?}");
    let not_pending = s.delete_invite(&made.id).await.unwrap_err();
    assert!(matches!(not_pending, StoreError::Invalid(_)), "{not_pending:?}");

    let other = s.create_invite(invite("ops@example.com", OrgRole::User), hash(4), ttl).await.unwrap();
    assert_eq!(s.delete_invite(&other.id).await.unwrap().id, other.id);
    assert_eq!(s.get_invite(&other.id).await.unwrap().status, InviteStatus::Deleted);
    let gone = s.accept_invite(hash(4), joining("Ops")).await.unwrap_err();
    assert!(matches!(gone, StoreError::Invalid(_)), "a deleted invite is not accepted: {gone:?}");

    let lapsed = s.create_invite(invite("late@example.com", OrgRole::Billing), hash(5), 0).await.unwrap();
    assert_eq!(lapsed.status, InviteStatus::Expired, "an invite past its expiry is expired");
    assert!(s.accept_invite(hash(5), joining("Late")).await.is_err());
    s.create_invite(invite("late@example.com", OrgRole::Billing), hash(6), ttl)
        .await
        .expect("an expired invite is no obstacle");

    let list = |email: Option<&str>, roles: Vec<OrgRole>, statuses: Vec<InviteStatus>| ListInvites {
        email: email.map(str::to_owned),
        roles,
        statuses,
        page: first_page(),
    };
    let ids = |p: mnemo_api::AdminPage<mnemo_api::Invite>| p.data.into_iter().map(|i| i.status).collect::<Vec<_>>();
    assert_eq!(
        ids(s.list_invites(list(None, vec![], vec![])).await.unwrap()),
        [InviteStatus::Accepted, InviteStatus::Expired, InviteStatus::Pending],
        "deleted invites are listed only when asked for"
    );
    assert_eq!(
        ids(s.list_invites(list(None, vec![], vec![InviteStatus::Deleted])).await.unwrap()),
        [InviteStatus::Deleted]
    );
    assert_eq!(ids(s.list_invites(list(Some("late@example.com"), vec![], vec![])).await.unwrap()).len(), 2);
    assert_eq!(
        ids(s.list_invites(list(None, vec![OrgRole::Developer], vec![])).await.unwrap()),
        [InviteStatus::Accepted]
    );
    let unknown: mnemo_api::InviteId = "invite_unknown".parse().unwrap();
    assert!(matches!(s.get_invite(&unknown).await, Err(StoreError::NotFound { .. })));
    assert!(matches!(s.delete_invite(&unknown).await, Err(StoreError::NotFound { .. })));
}

pub async fn roles_change_and_the_last_admin_stays(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let ada = first_admin(&*s, 1, "ada@example.com").await;
    let bob = join(&*s, 2, "bob@example.com", OrgRole::User).await;
    let cy = join(&*s, 3, "cy@example.com", OrgRole::Developer).await;

    assert_eq!(s.update_user(&bob.id, OrgRole::Billing, Via::Api).await.unwrap().role, OrgRole::Billing);
    let promote = s.update_user(&bob.id, OrgRole::Admin, Via::Api).await.unwrap_err();
    assert!(matches!(promote, StoreError::Invalid(_)), "the API makes no admin: {promote:?}");
    let demote = s.update_user(&ada.id, OrgRole::User, Via::Api).await.unwrap_err();
    assert!(matches!(demote, StoreError::Forbidden(_)), "the API touches no admin: {demote:?}");
    let last = s.update_user(&ada.id, OrgRole::User, Via::Console).await.unwrap_err();
    assert!(matches!(last, StoreError::Invalid(_)), "the last admin stays: {last:?}");
    let removed = s.remove_user(&ada.id, Via::Console).await.unwrap_err();
    assert!(matches!(removed, StoreError::Invalid(_)), "the last admin stays: {removed:?}");
    assert!(matches!(s.remove_user(&ada.id, Via::Api).await, Err(StoreError::Forbidden(_))));

    assert_eq!(s.update_user(&cy.id, OrgRole::Admin, Via::Console).await.unwrap().role, OrgRole::Admin);
    assert_eq!(s.update_user(&ada.id, OrgRole::Developer, Via::Console).await.unwrap().role, OrgRole::Developer);

    let by_role = |roles: Vec<OrgRole>| ListUsers { email: None, roles, page: first_page() };
    let emails = |p: mnemo_api::AdminPage<User>| p.data.into_iter().map(|u| u.email).collect::<Vec<_>>();
    assert_eq!(
        emails(s.list_users(by_role(vec![])).await.unwrap()),
        ["ada@example.com", "bob@example.com", "cy@example.com"],
        "in the order they joined"
    );
    assert_eq!(
        emails(s.list_users(by_role(vec![OrgRole::Admin, OrgRole::Billing])).await.unwrap()),
        ["bob@example.com", "cy@example.com"]
    );
    let by_email = ListUsers { email: Some("bob@example.com".into()), roles: vec![], page: first_page() };
    assert_eq!(emails(s.list_users(by_email).await.unwrap()), ["bob@example.com"]);

    assert_eq!(s.remove_user(&bob.id, Via::Api).await.unwrap().id, bob.id);
    assert!(matches!(s.get_user(&bob.id).await, Err(StoreError::NotFound { .. })));
    assert!(matches!(s.update_user(&bob.id, OrgRole::User, Via::Api).await, Err(StoreError::NotFound { .. })));
    assert_eq!(s.remove_user(&ada.id, Via::Api).await.unwrap().id, ada.id);
    let last = s.remove_user(&cy.id, Via::Console).await.unwrap_err();
    assert!(matches!(last, StoreError::Invalid(_)), "cy is the last admin now: {last:?}");
}

pub async fn members_are_added_changed_listed_and_removed(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let new_ws: NewWorkspace =
        serde_json::from_value::<mnemo_api::WorkspaceCreate>(json!({"name": "team"})).unwrap().validate().unwrap();
    let ws = s.create_workspace_with(new_ws, 10).await.unwrap().id;
    let ada = first_admin(&*s, 1, "ada@example.com").await;
    let dev = join(&*s, 2, "dev@example.com", OrgRole::Developer).await;
    let billing = join(&*s, 3, "pay@example.com", OrgRole::Billing).await;
    let add = |user: &User, role: &str| MemberAdd { user_id: user.id.to_string(), workspace_role: role.into() };
    let roles = |p: mnemo_api::AdminPage<mnemo_api::WorkspaceMember>| {
        p.data.into_iter().map(|m| (m.user_id, m.workspace_role)).collect::<Vec<_>>()
    };

    assert_eq!(
        roles(s.list_members(&ws, first_page()).await.unwrap()),
        [(ada.id.clone(), WorkspaceRole::WorkspaceAdmin), (billing.id.clone(), WorkspaceRole::WorkspaceBilling)],
        "org admins and billing members are implicit members"
    );
    assert!(matches!(s.get_member(&ws, &dev.id).await, Err(StoreError::NotFound { .. })));

    let added = s.add_member(&ws, add(&dev, "workspace_developer")).await.unwrap();
    assert_eq!((added.workspace_id.clone(), added.workspace_role), (ws.clone(), WorkspaceRole::WorkspaceDeveloper));
    assert_eq!(s.get_member(&ws, &dev.id).await.unwrap(), added);
    for (why, body) in [
        ("added twice", add(&dev, "workspace_user")),
        ("an org admin", add(&ada, "workspace_user")),
        ("as billing", add(&billing, "workspace_billing")),
        ("an unknown role", add(&billing, "workspace_owner")),
    ] {
        let e = s.add_member(&ws, body).await.unwrap_err();
        assert!(matches!(e, StoreError::Invalid(_)), "{why}: {e:?}");
    }
    let nobody = MemberAdd { user_id: "user_nobody".into(), workspace_role: "workspace_user".into() };
    assert!(matches!(s.add_member(&ws, nobody).await, Err(StoreError::NotFound { .. })));
    let malformed = MemberAdd { user_id: "not-a-user".into(), workspace_role: "workspace_user".into() };
    assert!(matches!(s.add_member(&ws, malformed).await, Err(StoreError::NotFound { .. })));

    let updated = s.update_member(&ws, &dev.id, "workspace_admin".into()).await.unwrap();
    assert_eq!(updated.workspace_role, WorkspaceRole::WorkspaceAdmin);
    assert!(matches!(s.update_member(&ws, &ada.id, "workspace_user".into()).await, Err(StoreError::Invalid(_))));
    assert!(matches!(s.remove_member(&ws, &billing.id).await, Err(StoreError::Invalid(_))));
    assert_eq!(
        roles(s.list_members(&ws, first_page()).await.unwrap()),
        [
            (ada.id.clone(), WorkspaceRole::WorkspaceAdmin),
            (dev.id.clone(), WorkspaceRole::WorkspaceAdmin),
            (billing.id.clone(), WorkspaceRole::WorkspaceBilling)
        ]
    );
    let default = s.default_workspace().await.unwrap();
    assert!(matches!(s.get_member(&default, &dev.id).await, Err(StoreError::NotFound { .. })), "one workspace only");

    let removed = s.remove_member(&ws, &dev.id).await.unwrap();
    assert_eq!((removed.user_id, removed.workspace_id), (dev.id.clone(), ws.clone()));
    assert!(matches!(s.remove_member(&ws, &dev.id).await, Err(StoreError::NotFound { .. })));

    s.add_member(&ws, add(&dev, "workspace_user")).await.unwrap();
    s.remove_user(&dev.id, Via::Api).await.unwrap();
    assert!(matches!(s.get_member(&ws, &dev.id).await, Err(StoreError::NotFound { .. })), "removal ends memberships");

    let unknown: mnemo_api::WorkspaceId = "wrkspc_unknown".parse().unwrap();
    assert!(matches!(s.list_members(&unknown, first_page()).await, Err(StoreError::NotFound { .. })));
    assert!(matches!(s.add_member(&unknown, add(&billing, "workspace_user")).await, Err(StoreError::NotFound { .. })));
    s.archive_workspace(&ws).await.unwrap();
    let frozen = s.add_member(&ws, add(&billing, "workspace_user")).await.unwrap_err();
    assert!(matches!(frozen, StoreError::Invalid(_)), "an archived workspace's members do not change: {frozen:?}");
}

pub async fn concurrent_invites_for_one_email_have_one_winner(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let tasks: Vec<_> = (0..8u8)
        .map(|n| {
            let s = Arc::clone(&s.store);
            tokio::spawn(async move {
                s.create_invite(invite("race@example.com", OrgRole::User), hash(10 + n), DEFAULT_INVITE_TTL_SECS).await
            })
        })
        .collect();
    let mut won = 0;
    for task in tasks {
        match task.await.unwrap() {
            Ok(_) => won += 1,
            Err(e) => assert_eq!(coded(&e), Some(AdminErrorCode::InviteAlreadyExists), "{e:?}"),
        }
    }
    assert_eq!(won, 1);
}

/// Whether a `Credentials` signal arrives within `wait`, skipping other signals.
async fn credentials_heard(rx: &mut broadcast::Receiver<Signal>, wait: Duration) -> bool {
    tokio::time::timeout(wait, async {
        loop {
            match rx.recv().await {
                Ok(Signal::Credentials) => return,
                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => panic!("the store stopped signalling"),
            }
        }
    })
    .await
    .is_ok()
}

pub async fn person_sessions_end_by_sign_out_everywhere_and_removal(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let admin = first_admin(&*s, 1, "root@example.com").await;
    let dev = join(&*s, 2, "dev@example.com", OrgRole::Developer).await;

    // Signing in finds the person by their email however it is typed, with their password's hash.
    let (found, phc) = s.sign_in_candidate(" DEV@example.com ".into()).await.unwrap().expect("a person");
    assert_eq!((found, phc.as_deref()), (dev.clone(), Some(joining("x").password_hash.as_str())));
    assert_eq!(s.sign_in_candidate("nobody@example.com".into()).await.unwrap(), None, "no such person");
    assert_eq!(s.sign_in_candidate("not an email".into()).await.unwrap(), None, "no email at all");

    let signed_in = s.create_person_session(hash(10), &dev.id, 3600).await.unwrap();
    assert_eq!(signed_in.user, dev);
    assert_eq!(signed_in.expires_at - signed_in.created_at, chrono::TimeDelta::seconds(3600));
    assert_eq!(s.find_person_session(hash(10)).await.unwrap(), Some(signed_in.clone()));
    assert_eq!(s.find_person_session(hash(11)).await.unwrap(), None, "another hash is no session");
    assert_eq!(s.find_console_session(hash(10)).await.unwrap(), None, "a person session is no API-key one");
    assert_eq!(s.resolve_credential(hash(10)).await.unwrap().map(|p| p.credential), None, "nor an API credential");

    // The session acts as the person is now: a role change shows at once.
    s.update_user(&dev.id, OrgRole::User, Via::Api).await.unwrap();
    let now = s.find_person_session(hash(10)).await.unwrap().expect("still signed in");
    assert_eq!(now.user.role, OrgRole::User);

    // Signing out ends one session; signing out everywhere ends every one of that person only.
    let second = s.create_person_session(hash(12), &dev.id, 3600).await.unwrap();
    s.revoke_person_session(hash(10)).await.unwrap();
    assert_eq!(s.find_person_session(hash(10)).await.unwrap(), None, "a signed-out session is gone");
    assert_eq!(s.find_person_session(hash(12)).await.unwrap(), Some(second));
    s.revoke_person_session(hash(10)).await.unwrap();
    s.revoke_person_session(hash(13)).await.unwrap();
    let root = s.create_person_session(hash(14), &admin.id, 3600).await.unwrap();
    s.create_person_session(hash(15), &dev.id, 3600).await.unwrap();
    assert_eq!(s.sign_out_user(&dev.id).await.unwrap().id, dev.id);
    for n in [12, 15] {
        assert_eq!(s.find_person_session(hash(n)).await.unwrap(), None, "session {n} ended everywhere");
    }
    assert_eq!(s.find_person_session(hash(14)).await.unwrap(), Some(root), "another person stays signed in");
    assert!(matches!(s.sign_out_user(&UserId::generate()).await, Err(StoreError::NotFound { kind: "user", .. })));

    // An unknown person gets no session, and the refusal leaves nothing behind.
    let stranger = UserId::generate();
    assert!(matches!(
        s.create_person_session(hash(16), &stranger, 3600).await,
        Err(StoreError::NotFound { kind: "user", .. })
    ));
    assert_eq!(s.find_person_session(hash(16)).await.unwrap(), None);

    // Removing a person ends their sessions with them.
    s.create_person_session(hash(17), &dev.id, 3600).await.unwrap();
    s.remove_user(&dev.id, Via::Api).await.unwrap();
    assert_eq!(s.find_person_session(hash(17)).await.unwrap(), None, "a removed person's session is gone");

    // Expiry, on the store's clock.
    s.create_person_session(hash(18), &admin.id, 1).await.unwrap();
    s.create_person_session(hash(19), &admin.id, 0).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(s.find_person_session(hash(18)).await.unwrap(), None, "an expired session is gone");
    assert_eq!(s.find_person_session(hash(19)).await.unwrap(), None, "a session without a lifetime is none");
    assert!(s.find_person_session(hash(14)).await.unwrap().is_some(), "a live one stays");
}

/// A backend shared by replicas tells them all when person sessions end, so none keeps one
/// cached: signing out, signing out everywhere, removing the person.
pub async fn ending_person_sessions_is_signalled(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let Some(mut rx) = s.signals() else { return };
    let admin = first_admin(&*s, 1, "root@example.com").await;
    let dev = join(&*s, 2, "dev@example.com", OrgRole::Developer).await;
    // The listener may still be connecting: sign in and out until a sign-out is heard.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    for i in 0u8.. {
        let n = 100u8.wrapping_add(i);
        s.create_person_session(hash(n), &admin.id, 3600).await.unwrap();
        s.revoke_person_session(hash(n)).await.unwrap();
        if credentials_heard(&mut rx, Duration::from_secs(2)).await {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "no credentials signal within 60 s");
    }
    while rx.try_recv().is_ok() {}
    s.create_person_session(hash(10), &dev.id, 3600).await.unwrap();
    s.sign_out_user(&dev.id).await.unwrap();
    assert!(credentials_heard(&mut rx, Duration::from_secs(10)).await, "signing out everywhere is heard");
    s.create_person_session(hash(11), &dev.id, 3600).await.unwrap();
    s.remove_user(&dev.id, Via::Api).await.unwrap();
    assert!(credentials_heard(&mut rx, Duration::from_secs(10)).await, "removing a person is heard");
}

/// A person acting in a workspace (spec §8.2, §8.6): their roles there, the workspace chosen
/// for them when they have one, a refusal naming the header when they have several, and the
/// same not-found as an unknown workspace for one they are not a member of.
pub async fn a_person_acts_in_their_workspaces_with_their_roles(factory: &impl StoreFactory) {
    use mnemo_store::rules::scope::PersonRole;
    use mnemo_store::{Credential, Principal};
    let s = factory.open(Limits::default()).await;
    let default = s.default_workspace().await.unwrap();
    let new_ws = |name: &str| {
        serde_json::from_value::<mnemo_api::WorkspaceCreate>(json!({ "name": name })).unwrap().validate().unwrap()
    };
    let team = s.create_workspace_with(new_ws("team"), 10).await.unwrap().id;
    let other = s.create_workspace_with(new_ws("other"), 10).await.unwrap().id;
    let ada = first_admin(&*s, 1, "ada@example.com").await;
    let dev = join(&*s, 2, "dev@example.com", OrgRole::Developer).await;
    let user = join(&*s, 3, "user@example.com", OrgRole::User).await;
    let as_person = |who: &User, org: OrgRole, role: WorkspaceRole, ws: &mnemo_api::WorkspaceId| Principal {
        credential: Credential::Person { user: who.id.clone(), role: PersonRole { org, workspace: role } },
        workspace: Some(ws.clone()),
    };

    // An org admin: Default unless they name one; workspace_admin everywhere.
    assert_eq!(
        s.person_principal(&ada.id, None).await.unwrap(),
        as_person(&ada, OrgRole::Admin, WorkspaceRole::WorkspaceAdmin, &default)
    );
    assert_eq!(
        s.person_principal(&ada.id, Some(&other)).await.unwrap(),
        as_person(&ada, OrgRole::Admin, WorkspaceRole::WorkspaceAdmin, &other)
    );

    // A person in no workspace acts nowhere.
    assert!(matches!(s.person_principal(&dev.id, None).await, Err(StoreError::Forbidden(_))));
    // One workspace: theirs without naming it.
    s.add_member(&team, MemberAdd { user_id: dev.id.to_string(), workspace_role: "workspace_developer".into() })
        .await
        .unwrap();
    let in_team = as_person(&dev, OrgRole::Developer, WorkspaceRole::WorkspaceDeveloper, &team);
    assert_eq!(s.person_principal(&dev.id, None).await.unwrap(), in_team);
    assert_eq!(s.person_principal(&dev.id, Some(&team)).await.unwrap(), in_team);
    // A workspace they are not in answers like one that does not exist.
    let unknown: mnemo_api::WorkspaceId = "wrkspc_unknown".parse().unwrap();
    let not_member = s.person_principal(&dev.id, Some(&other)).await.unwrap_err();
    let no_such = s.person_principal(&dev.id, Some(&unknown)).await.unwrap_err();
    assert!(matches!(not_member, StoreError::NotFound { kind: "workspace", .. }), "{not_member:?}");
    assert!(matches!(no_such, StoreError::NotFound { kind: "workspace", .. }), "{no_such:?}");
    assert_eq!(
        not_member.to_string().replace(other.as_str(), "ID"),
        no_such.to_string().replace(unknown.as_str(), "ID"),
        "the same words"
    );

    // Two workspaces: they must choose.
    s.add_member(&other, MemberAdd { user_id: dev.id.to_string(), workspace_role: "workspace_user".into() })
        .await
        .unwrap();
    let e = s.person_principal(&dev.id, None).await.unwrap_err();
    assert!(matches!(e, StoreError::WorkspaceUnspecified { count: 2 }), "{e:?}");
    assert!(e.to_string().contains("anthropic-workspace-id"), "{e}");
    assert_eq!(
        s.person_principal(&dev.id, Some(&other)).await.unwrap(),
        as_person(&dev, OrgRole::Developer, WorkspaceRole::WorkspaceUser, &other)
    );
    let theirs: Vec<_> =
        s.person_workspaces(&dev.id).await.unwrap().into_iter().map(|(w, role)| (w.id, role)).collect();
    assert_eq!(
        theirs,
        [(team.clone(), WorkspaceRole::WorkspaceDeveloper), (other.clone(), WorkspaceRole::WorkspaceUser)]
    );
    // A role change shows at once.
    s.update_member(&other, &dev.id, "workspace_admin".into()).await.unwrap();
    assert_eq!(
        s.person_principal(&dev.id, Some(&other)).await.unwrap(),
        as_person(&dev, OrgRole::Developer, WorkspaceRole::WorkspaceAdmin, &other)
    );
    // An archived workspace is no longer chosen for them.
    s.archive_workspace(&other).await.unwrap();
    assert_eq!(s.person_principal(&dev.id, None).await.unwrap(), in_team);

    // A removed person is nobody.
    s.remove_user(&user.id, Via::Api).await.unwrap();
    assert!(matches!(s.person_principal(&user.id, None).await, Err(StoreError::Unauthenticated(_))));
    assert!(matches!(s.person_principal(&user.id, Some(&team)).await, Err(StoreError::Unauthenticated(_))));
    assert!(s.person_workspaces(&user.id).await.unwrap().is_empty());
}
