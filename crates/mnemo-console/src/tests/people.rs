//! People in the console: signing in with a password, the sign-in page's single sign-on slot,
//! person sessions acting with their roles, the people, invites, members and own pages.

use axum::http::StatusCode;
use mnemo_api::{OrgRole, Secret, User};
use mnemo_store::ops::people::Joining;

use super::*;

const PASSWORD: &str = "correct horse battery staple";

/// A person who joined by invite (link secret `link`) with [`PASSWORD`].
pub(super) async fn person(h: &Harness, link: &str, email: &str, role: OrgRole) -> User {
    let invite = mnemo_api::NewInvite { email: email.into(), role };
    h.store.create_invite(invite, crate::auth::hash(link), 3600).await.unwrap();
    let password_hash = crate::password::hash(Secret::new(PASSWORD)).await.unwrap();
    h.store
        .accept_invite(crate::auth::hash(link), Joining { name: format!("Person {email}"), password_hash })
        .await
        .unwrap()
}

impl Harness {
    /// Posts the password form of a fresh sign-in page.
    async fn password_sign_in(&self, email: &str, password: &str, next: &str) -> Answer {
        let form = self.get("/console/sign-in", "").await;
        let token = form.field("token");
        let cookie = format!("mnemo_console_sign_in={token}");
        let fields = [("email", email), ("password", password), ("token", token.as_str()), ("next", next)];
        self.post("/console/sign-in/password", &cookie, &fields, &[]).await
    }
}

fn session_cookie(answer: &Answer) -> Option<String> {
    answer.set_cookies().into_iter().find(|c| c.starts_with("mnemo_console=") && !c.starts_with("mnemo_console=;"))
}

#[tokio::test]
async fn the_sign_in_page_offers_a_password_form_and_the_providers_link_when_configured() {
    let h = harness().await;
    let page = h.get("/console/sign-in?next=/console/sessions", "").await;
    assert!(page.body.contains("<label for=\"email\">Email</label>") && page.body.contains("<label for=\"password\">"));
    assert!(page.body.contains("<label for=\"api_key\">API key</label>"), "the API-key form stays");
    assert!(!page.body.contains("/console/oidc/start"), "no provider configured, no link");

    let sso = harness_with(ConsoleConfig {
        oidc_provider_name: Some("Acme <SSO>".into()),
        password_sign_in: false,
        ..ConsoleConfig::default()
    })
    .await;
    let page = sso.get("/console/sign-in?next=/console/sessions", "").await;
    assert!(
        page.body.contains("href=\"/console/oidc/start?next=%2Fconsole%2Fsessions\"")
            && page.body.contains("Sign in with Acme &#60;SSO&#62;"),
        "{}",
        page.body
    );
    assert!(!page.body.contains("<label for=\"email\">"), "password sign-in off hides its form");
    let person = person(&sso, "link-a", "ada@example.com", OrgRole::Developer).await;
    let refused = sso.password_sign_in(&person.email, PASSWORD, "/console").await;
    assert!(session_cookie(&refused).is_none() && refused.body.contains("turned off"), "{}", refused.body);
}

#[tokio::test]
async fn a_password_signs_a_person_in_with_a_strict_cookie() {
    let h = harness().await;
    let ada = person(&h, "link-a", "ada@example.com", OrgRole::Developer).await;
    let answer = h.password_sign_in(" Ada@Example.com ", PASSWORD, "/console/sessions").await;
    assert_eq!((answer.status, answer.location()), (StatusCode::SEE_OTHER, "/console/sessions"), "{}", answer.body);
    let cookie = session_cookie(&answer).expect("a session cookie");
    for flag in ["HttpOnly", "SameSite=Strict", "Path=/console"] {
        assert!(cookie.contains(flag), "{cookie} lacks {flag}");
    }
    assert!(cookie.starts_with("mnemo_console=mps_") && !cookie.contains(PASSWORD));
    let log = h
        .store
        .list_audit_events(
            Default::default(),
            mnemo_api::AdminPageQuery { limit: 100, cursor: mnemo_api::AdminCursor::Start },
        )
        .await
        .unwrap();
    let sign_in = log.data.iter().find(|e| e.action == "sign_in").expect("the sign-in is audited");
    assert_eq!((sign_in.actor.kind, sign_in.actor.id.as_str()), (mnemo_api::AuditActorType::User, ada.id.as_str()));
}

#[tokio::test]
async fn a_wrong_password_and_an_unknown_email_get_the_same_answer() {
    let h = harness().await;
    person(&h, "link-a", "ada@example.com", OrgRole::Developer).await;
    let wrong = h.password_sign_in("ada@example.com", "not the password at all", "/console").await;
    let unknown = h.password_sign_in("nobody@example.com", PASSWORD, "/console").await;
    let malformed = h.password_sign_in("not an email", PASSWORD, "/console").await;
    for answer in [&wrong, &unknown, &malformed] {
        assert_eq!(answer.status, StatusCode::UNAUTHORIZED, "{}", answer.body);
        assert!(answer.body.contains(crate::auth::WRONG_PASSWORD), "{}", answer.body);
        assert!(session_cookie(answer).is_none());
        assert!(!answer.body.contains("not the password") && !answer.body.contains(PASSWORD));
    }
    let without_token = |a: &Answer| a.body.replace(&a.field("token"), "TOKEN");
    assert_eq!(without_token(&wrong), without_token(&unknown), "one page for both");
    let log = h
        .store
        .list_audit_events(
            Default::default(),
            mnemo_api::AdminPageQuery { limit: 100, cursor: mnemo_api::AdminCursor::Start },
        )
        .await
        .unwrap();
    let failures: Vec<_> = log.data.iter().filter(|e| e.action == "sign_in.failed").collect();
    assert_eq!(failures.len(), 3);
    let printed = serde_json::to_string(&failures).unwrap();
    assert!(
        !printed.contains("ada@") && !printed.contains("nobody@") && !printed.contains("password at all"),
        "{printed}"
    );
    assert!(failures.windows(2).all(|w| w[0].actor == w[1].actor && w[0].details == w[1].details), "{printed}");
}

/// Signs `email` in with [`PASSWORD`]: the cookie header to send and the forms' token.
pub(super) async fn person_session(h: &Harness, email: &str) -> (String, String) {
    let answer = h.password_sign_in(email, PASSWORD, "/console").await;
    let set = session_cookie(&answer).unwrap_or_else(|| panic!("{email} did not sign in: {}", answer.body));
    let cookie = set.split(';').next().unwrap().to_owned();
    let home = h.get("/console", &cookie).await;
    assert_eq!(home.status, StatusCode::OK, "{}", home.body);
    (cookie, home.field("csrf"))
}

pub(super) async fn add_member(h: &Harness, ws: &mnemo_api::WorkspaceId, who: &User, role: &str) {
    let body = mnemo_api::MemberAdd { user_id: who.id.to_string(), workspace_role: role.into() };
    h.store.add_member(ws, body).await.unwrap();
}

#[tokio::test]
async fn a_person_writes_as_themselves_and_the_history_names_them() {
    let h = harness().await;
    let ws = h.store.default_workspace().await.unwrap();
    let ada = person(&h, "link-a", "ada@example.com", OrgRole::Developer).await;
    add_member(&h, &ws, &ada, "workspace_developer").await;
    let (cookie, csrf) = person_session(&h, "ada@example.com").await;
    let store = h.memory_store("s").await;
    let created = h
        .post(
            &format!("/console/stores/{}/memories", store.id),
            &cookie,
            &[("csrf", &csrf), ("path", "/notes/a.md"), ("content", "hello")],
            &[],
        )
        .await;
    assert_eq!(created.status, StatusCode::SEE_OTHER, "{}", created.body);
    let versions = h.store.list_memory_versions(&ws, &store.id, ListMemoryVersions::newest(10)).await.unwrap();
    assert_eq!(versions.items[0].created_by, Some(Actor::UserActor { user_id: ada.id.to_string() }));
    let history = h.get(&format!("/console/stores/{}/history", store.id), &cookie).await;
    assert!(history.body.contains("Person ada@example.com (ada@example.com)"), "{}", history.body);
    let version = h.get(&format!("/console/stores/{}/versions/{}", store.id, versions.items[0].id), &cookie).await;
    assert!(version.body.contains("(ada@example.com)"), "{}", version.body);
    assert!(!history.body.contains(&format!("user {}", ada.id)), "named, not an id");
    // Their header names them and links their own page.
    assert!(history.body.contains("href=\"/console/me\""), "{}", history.body);
}

#[tokio::test]
async fn a_workspace_user_reads_but_changes_nothing() {
    let h = harness().await;
    let ws = h.store.default_workspace().await.unwrap();
    let eve = person(&h, "link-e", "eve@example.com", OrgRole::User).await;
    add_member(&h, &ws, &eve, "workspace_user").await;
    let (cookie, csrf) = person_session(&h, "eve@example.com").await;
    let store = h.memory_store("s").await;
    let memory = h.memory(&store, "/a.md", "original").await;

    let page = h.get(&format!("/console/stores/{}/memories/{}", store.id, memory.id), &cookie).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains("original"), "they read it");
    assert!(!page.body.contains("/edit\"") && !page.body.contains("/delete\""), "no edit control: {}", page.body);
    let stores = h.get("/console", &cookie).await;
    assert!(!stores.body.contains("Create store"), "{}", stores.body);

    let form = h.get(&format!("/console/stores/{}/memories/{}/edit", store.id, memory.id), &cookie).await;
    assert_eq!(form.status, StatusCode::FORBIDDEN);
    assert!(form.body.contains("workspace_user"), "the refusal names the role: {}", form.body);
    let save = h
        .post(
            &format!("/console/stores/{}/memories/{}/edit", store.id, memory.id),
            &cookie,
            &[("csrf", &csrf), ("content", "changed"), ("expected", &memory.content_sha256)],
            &[],
        )
        .await;
    assert_eq!(save.status, StatusCode::FORBIDDEN, "{}", save.body);
    assert_eq!(h.content_of(&store, &memory).await.as_deref(), Some("original"));
    let create = h.post("/console/stores", &cookie, &[("csrf", &csrf), ("name", "mine")], &[]).await;
    assert_eq!(create.status, StatusCode::FORBIDDEN);
    let keys = h.post("/console/api-keys", &cookie, &[("csrf", &csrf), ("name", "k")], &[]).await;
    assert_eq!(keys.status, StatusCode::FORBIDDEN);
    let log = h.get("/console/audit-log", &cookie).await;
    assert_eq!(log.status, StatusCode::FORBIDDEN, "the audit log is a workspace admin's");
}

#[tokio::test]
async fn a_person_in_several_workspaces_switches_between_theirs_only() {
    let h = harness().await;
    let default = h.store.default_workspace().await.unwrap();
    let team = h.store.create_workspace("Team").await.unwrap();
    let other = h.store.create_workspace("Other").await.unwrap();
    let dev = person(&h, "link-d", "dev@example.com", OrgRole::Developer).await;
    add_member(&h, &default, &dev, "workspace_user").await;
    add_member(&h, &team, &dev, "workspace_admin").await;
    let (cookie, csrf) = person_session(&h, "dev@example.com").await;
    let home = h.get("/console", &cookie).await;
    assert!(home.body.contains("<label for=\"workspace-switch\""), "a labelled switcher: {}", home.body);
    assert!(home.body.contains(team.as_str()) && !home.body.contains(other.as_str()));

    let switched = h.post("/console/workspace", &cookie, &[("csrf", &csrf), ("workspace", team.as_str())], &[]).await;
    assert_eq!(switched.status, StatusCode::SEE_OTHER, "{}", switched.body);
    let chosen = switched.set_cookies().into_iter().find(|c| c.starts_with("mnemo_console_workspace=")).unwrap();
    let both = format!("{cookie}; {}", chosen.split(';').next().unwrap());
    let there = h.get("/console", &both).await;
    assert!(there.body.contains(&format!("<option value=\"{team}\" selected>")), "{}", there.body);
    assert!(there.body.contains("href=\"/console/members\""), "a workspace admin there manages its members");

    let refused = h.post("/console/workspace", &cookie, &[("csrf", &csrf), ("workspace", other.as_str())], &[]).await;
    assert_eq!(refused.status, StatusCode::NOT_FOUND, "not theirs: as if unknown");
    // A chosen workspace they left is forgotten, not trusted.
    h.store.remove_member(&team, &dev.id).await.unwrap();
    let after = h.get("/console", &both).await;
    assert_eq!(after.status, StatusCode::OK);
    assert!(!after.body.contains("workspace-switch") && after.body.contains("Default"), "{}", after.body);
}

#[tokio::test]
async fn signing_out_and_removal_end_a_persons_session() {
    let h = harness().await;
    let ws = h.store.default_workspace().await.unwrap();
    let ada = person(&h, "link-a", "ada@example.com", OrgRole::Developer).await;
    add_member(&h, &ws, &ada, "workspace_developer").await;
    let (cookie, csrf) = person_session(&h, "ada@example.com").await;
    let out = h.post("/console/sign-out", &cookie, &[("csrf", &csrf)], &[]).await;
    assert_eq!((out.status, out.location()), (StatusCode::SEE_OTHER, "/console/sign-in"));
    assert_eq!(h.get("/console", &cookie).await.location(), "/console/sign-in", "the session is over");

    let (cookie, _) = person_session(&h, "ada@example.com").await;
    h.store.remove_user(&ada.id, mnemo_store::rules::people::Via::Api).await.unwrap();
    assert_eq!(h.get("/console", &cookie).await.location(), "/console/sign-in", "removal ends it at once");
    let again = h.password_sign_in("ada@example.com", PASSWORD, "/console").await;
    assert!(again.body.contains(crate::auth::WRONG_PASSWORD), "a removed person is nobody");
}

#[tokio::test]
async fn an_admin_invites_changes_roles_and_removes_people_in_the_console() {
    let h = harness().await;
    h.store.create_setup_link(crate::auth::hash("setup"), 3600).await.unwrap();
    let password_hash = crate::password::hash(Secret::new(PASSWORD)).await.unwrap();
    let root = h
        .store
        .use_setup_link(
            crate::auth::hash("setup"),
            "root@example.com".into(),
            Joining { name: "Root".into(), password_hash },
        )
        .await
        .unwrap();
    let (cookie, csrf) = person_session(&h, "root@example.com").await;
    let page = h.get("/console/people", &cookie).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(page.body.contains("<label for=\"invite-email\">Email</label>"), "labelled: {}", page.body);

    let invited = h
        .post(
            "/console/people/invites",
            &cookie,
            &[("csrf", &csrf), ("email", "Bo@Example.com"), ("role", "developer")],
            &[],
        )
        .await;
    assert_eq!(invited.status, StatusCode::OK, "{}", invited.body);
    let link = invited.body.split("<code id=\"invite-link\">").nth(1).unwrap().split('<').next().unwrap().to_owned();
    assert!(link.starts_with("http://console.test/console/invite/mnemo-invite-"), "{link}");
    let again = h
        .post(
            "/console/people/invites",
            &cookie,
            &[("csrf", &csrf), ("email", "bo@example.com"), ("role", "user")],
            &[],
        )
        .await;
    assert_eq!(again.status, StatusCode::BAD_REQUEST);
    assert!(again.body.contains("pending invite"), "the API's words: {}", again.body);

    // A new link replaces the old one.
    let invites = h.store.list_invites(ListInvitesAll::all()).await.unwrap().data;
    let pending = invites.iter().find(|i| i.status == mnemo_api::InviteStatus::Pending).unwrap();
    let resent =
        h.post(&format!("/console/people/invites/{}/resend", pending.id), &cookie, &[("csrf", &csrf)], &[]).await;
    let new_link = resent.body.split("<code id=\"invite-link\">").nth(1).unwrap().split('<').next().unwrap().to_owned();
    assert_ne!(new_link, link);
    let path = |l: &str| l.trim_start_matches("http://console.test").to_owned();
    assert_eq!(h.get(&path(&link), "").await.status, StatusCode::NOT_FOUND, "the old link died");
    assert_eq!(h.get(&path(&new_link), "").await.status, StatusCode::OK);

    let bo = person(&h, "link-b", "dev@example.com", OrgRole::User).await;
    let changed = h
        .post(&format!("/console/people/{}/role", bo.id), &cookie, &[("csrf", &csrf), ("role", "developer")], &[])
        .await;
    let back = format!("/console/people?changed={}", bo.id);
    assert_eq!((changed.status, changed.location()), (StatusCode::SEE_OTHER, back.as_str()), "{}", changed.body);
    assert_eq!(h.store.get_user(&bo.id).await.unwrap().role, OrgRole::Developer);
    let told = h.get(&back, &cookie).await;
    assert!(
        told.body.contains("<p class=\"notice\" role=\"status\">Person dev@example.com is now developer.</p>"),
        "{}",
        told.body
    );
    let bad = h.get("/console/people?changed=not-an-id", &cookie).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST, "{}", bad.body);
    let last =
        h.post(&format!("/console/people/{}/role", root.id), &cookie, &[("csrf", &csrf), ("role", "user")], &[]).await;
    assert!(last.body.contains("last admin"), "{}", last.body);

    // Members of the workspace shown.
    let members = h.get("/console/members", &cookie).await;
    assert!(members.body.contains("<label for=\"member-user\">Person</label>"), "{}", members.body);
    let added = h
        .post(
            "/console/members",
            &cookie,
            &[("csrf", &csrf), ("user", bo.id.as_str()), ("role", "workspace_user")],
            &[],
        )
        .await;
    assert_eq!(added.status, StatusCode::SEE_OTHER, "{}", added.body);
    let ws = h.store.default_workspace().await.unwrap();
    assert_eq!(h.store.get_member(&ws, &bo.id).await.unwrap().workspace_role, mnemo_api::WorkspaceRole::WorkspaceUser);
    let (bo_cookie, _) = person_session(&h, "dev@example.com").await;
    assert_eq!(h.get("/console/people", &bo_cookie).await.status, StatusCode::FORBIDDEN, "people are an org admin's");
    assert_eq!(
        h.get("/console/members", &bo_cookie).await.status,
        StatusCode::FORBIDDEN,
        "members a workspace admin's"
    );

    let removed = h.post(&format!("/console/people/{}/remove", bo.id), &cookie, &[("csrf", &csrf)], &[]).await;
    assert_eq!(removed.status, StatusCode::SEE_OTHER);
    assert_eq!(h.get("/console", &bo_cookie).await.location(), "/console/sign-in", "removed: signed out at once");
}

#[tokio::test]
async fn a_person_signs_out_everywhere_from_their_own_page() {
    let h = harness().await;
    let ws = h.store.default_workspace().await.unwrap();
    let ada = person(&h, "link-a", "ada@example.com", OrgRole::Developer).await;
    add_member(&h, &ws, &ada, "workspace_developer").await;
    let (first, _) = person_session(&h, "ada@example.com").await;
    let (second, csrf) = person_session(&h, "ada@example.com").await;
    let me = h.get("/console/me", &second).await;
    assert!(me.body.contains("ada@example.com") && me.body.contains("Default: workspace_developer"), "{}", me.body);
    assert_eq!(me.body.matches("<li>Signed in ").count(), 2, "both sessions listed: {}", me.body);
    assert_eq!(me.body.matches("<span class=\"badge\">this one</span>").count(), 1, "{}", me.body);
    let out = h.post("/console/me/sign-out-everywhere", &second, &[("csrf", &csrf)], &[]).await;
    assert_eq!(out.location(), "/console/sign-in");
    for cookie in [first, second] {
        assert_eq!(h.get("/console", &cookie).await.location(), "/console/sign-in");
    }
    let key_page = h.signed_in().await;
    assert_eq!(h.get("/console/me", &key_page.0).await.status, StatusCode::NOT_FOUND, "an API key has no account page");
}

struct ListInvitesAll;

impl ListInvitesAll {
    fn all() -> mnemo_store::ops::people::ListInvites {
        mnemo_store::ops::people::ListInvites {
            email: None,
            roles: vec![],
            statuses: vec![],
            page: mnemo_api::AdminPageQuery { limit: 100, cursor: mnemo_api::AdminCursor::Start },
        }
    }
}

/// Hooks whose account budget is one failure: the second is over it.
#[derive(Default)]
struct OneFailurePerAccount {
    failed: std::sync::Mutex<std::collections::HashSet<mnemo_store::CredentialHash>>,
}

#[async_trait]
impl Hooks for OneFailurePerAccount {
    fn credentials_changed(&self) {}

    async fn subscribe(
        &self,
        _: &mnemo_api::WorkspaceId,
        _: &SessionId,
    ) -> Result<broadcast::Receiver<Streamed>, StoreError> {
        Ok(broadcast::channel(4).1)
    }

    fn account_sign_in_allowed(&self, account: &mnemo_store::CredentialHash) -> Result<(), std::time::Duration> {
        if self.failed.lock().unwrap().contains(account) { Err(std::time::Duration::from_secs(42)) } else { Ok(()) }
    }

    fn account_sign_in_failed(&self, account: &mnemo_store::CredentialHash) -> Result<(), std::time::Duration> {
        self.failed.lock().unwrap().insert(*account);
        Ok(())
    }
}

#[tokio::test]
async fn failed_passwords_count_against_the_account_whoever_it_is() {
    let mut h = harness().await;
    let console =
        Console::new(Arc::clone(&h.store.store), Arc::new(OneFailurePerAccount::default()), ConsoleConfig::default());
    h.app = crate::router(console);
    person(&h, "link-a", "ada@example.com", OrgRole::Developer).await;
    for email in ["ada@example.com", "nobody@example.com"] {
        let first = h.password_sign_in(email, "wrong password here", "/console").await;
        assert_eq!(first.status, StatusCode::UNAUTHORIZED, "{email}");
        // However it is spelled, the account is the same; even the right password waits.
        let spelled = email.to_uppercase();
        let second = h.password_sign_in(&spelled, PASSWORD, "/console").await;
        assert_eq!(second.status, StatusCode::TOO_MANY_REQUESTS, "{email}: {}", second.body);
        assert_eq!(second.headers.get(header::RETRY_AFTER).unwrap(), "42");
        assert!(second.body.contains("too many failed sign-ins for this email"), "{}", second.body);
        assert!(session_cookie(&second).is_none());
    }
    let other = h.password_sign_in("eve@example.com", "wrong password here", "/console").await;
    assert_eq!(other.status, StatusCode::UNAUTHORIZED, "other accounts are not throttled");
}
