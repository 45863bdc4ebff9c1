//! People in the console: signing in with a password, the sign-in page's single sign-on slot,
//! person sessions acting with their roles, the people, invites, members and own pages.

use axum::http::StatusCode;
use mnemo_api::{OrgRole, Secret, User};
use mnemo_store::ops::people::Joining;

use super::*;

const PASSWORD: &str = "correct horse battery staple";

/// A person who joined by invite (link secret `link`) with [`PASSWORD`].
async fn person(h: &Harness, link: &str, email: &str, role: OrgRole) -> User {
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
