//! `mnemo serve`'s single sign-on flags (issue 33 items 3–4, docs/SSO.md).

use std::sync::Arc;

use anyhow::{Context, bail};
use clap::Args;
use mnemo_api::{Secret, WorkspaceId};
use mnemo_store::Store;
use mnemo_store::rules::sso::{self, Grant, RoleMapping};

/// Where the provider sends people back to: register it at the provider as a redirect URI.
pub(crate) const CALLBACK_PATH: &str = "/console/oidc/callback";

/// People sign in with the organization's OpenID Provider and use its tokens on the API.
#[derive(Debug, Args)]
#[command(
    next_help_heading = "Single sign-on (OpenID Connect; register <public url>/console/oidc/callback at the provider)"
)]
pub(crate) struct OidcArgs {
    /// The provider's issuer URL, exactly as in its tokens (its discovery document is read from
    /// `<issuer>/.well-known/openid-configuration`). Turns single sign-on on.
    #[arg(long, value_name = "URL", env = "MNEMO_OIDC_ISSUER", requires_all = ["oidc_client_id", "oidc_client_secret"])]
    oidc_issuer: Option<String>,

    /// mnemo's client id at the provider.
    #[arg(long, value_name = "ID", env = "MNEMO_OIDC_CLIENT_ID")]
    oidc_client_id: Option<String>,

    /// mnemo's client secret at the provider (better given in the variable; never logged).
    #[arg(long, value_name = "SECRET", env = "MNEMO_OIDC_CLIENT_SECRET", hide_env_values = true)]
    oidc_client_secret: Option<Secret>,

    /// The name on the console's "Sign in with …" button (default: the issuer's host).
    #[arg(long, value_name = "NAME", env = "MNEMO_OIDC_PROVIDER_NAME")]
    oidc_provider_name: Option<String>,

    /// The claim of the ID token (or userinfo answer) that lists a person's groups.
    #[arg(long, value_name = "CLAIM", default_value = "groups", env = "MNEMO_OIDC_GROUPS_CLAIM")]
    oidc_groups_claim: String,

    /// A group's role (repeatable, or comma-separated in the variable): `GROUP=admin` for the org
    /// admin role, or `GROUP=WORKSPACE:ROLE` with WORKSPACE a workspace id (`wrkspc_…`) or the
    /// name of exactly one open workspace, and ROLE one of workspace_user,
    /// workspace_restricted_developer, workspace_developer, workspace_admin. Set at every
    /// sign-in; a person whose groups map to nothing is refused.
    #[arg(long = "oidc-role", value_name = "GROUP=WORKSPACE:ROLE", env = "MNEMO_OIDC_ROLE", value_delimiter = ',')]
    oidc_roles: Vec<String>,

    /// Turn off signing in with an email and password (only with --oidc-issuer).
    #[arg(long, env = "MNEMO_NO_PASSWORD_SIGN_IN", requires = "oidc_issuer")]
    no_password_sign_in: bool,
}

impl OidcArgs {
    pub(crate) fn password_sign_in(&self) -> bool {
        !self.no_password_sign_in
    }

    /// Checks the flags before anything is opened (the mappings' syntax).
    pub(crate) fn parsed_mappings(&self) -> anyhow::Result<Vec<RoleMapping<String>>> {
        if self.oidc_issuer.is_none() {
            if !self.oidc_roles.is_empty() {
                bail!("--oidc-role needs --oidc-issuer");
            }
            return Ok(Vec::new());
        }
        if self.oidc_roles.is_empty() {
            bail!(
                "--oidc-issuer needs at least one --oidc-role GROUP=WORKSPACE:ROLE (or GROUP=admin): without one, nobody could sign in"
            );
        }
        self.oidc_roles.iter().map(|r| sso::parse_mapping(r).map_err(anyhow::Error::msg)).collect()
    }

    /// Discovers the provider and resolves the mappings' workspaces: the single sign-on of the
    /// console and the API, or `None` when it is off.
    pub(crate) async fn build(
        &self,
        store: &dyn Store,
        public_url: &str,
    ) -> anyhow::Result<Option<Arc<mnemo_console::oidc::Sso>>> {
        let Some(issuer) = self.oidc_issuer.clone() else { return Ok(None) };
        let mappings = resolve(store, self.parsed_mappings()?).await?;
        let (Some(client_id), Some(secret)) = (self.oidc_client_id.clone(), self.oidc_client_secret.clone()) else {
            bail!("--oidc-issuer needs --oidc-client-id and --oidc-client-secret (or MNEMO_OIDC_CLIENT_SECRET)");
        };
        let config = mnemo_oidc::OidcConfig::new(issuer.clone(), client_id, secret);
        let provider = mnemo_oidc::Provider::discover(config)
            .await
            .with_context(|| format!("single sign-on: the OpenID Provider at {issuer}"))?;
        let name = self.oidc_provider_name.clone().unwrap_or_else(|| mnemo_oidc::issuer_host(&issuer));
        let callback = format!("{}{CALLBACK_PATH}", public_url.trim_end_matches('/'));
        Ok(Some(Arc::new(mnemo_console::oidc::Sso::new(
            provider,
            mappings,
            self.oidc_groups_claim.clone(),
            name,
            callback,
        ))))
    }
}

/// Each mapping's workspace by id, or by the name of exactly one open workspace.
async fn resolve(
    store: &dyn Store,
    mappings: Vec<RoleMapping<String>>,
) -> anyhow::Result<Vec<RoleMapping<WorkspaceId>>> {
    let query = mnemo_store::ops::workspaces::ListWorkspaces {
        ids: None,
        include_archived: false,
        include_default: true,
        page: mnemo_api::AdminPageQuery { limit: 1000, cursor: mnemo_api::AdminCursor::Start },
    };
    let workspaces = store.list_workspaces(query).await?.data;
    let mut out = Vec::new();
    for m in mappings {
        let grant = match m.grant {
            Grant::OrgAdmin => Grant::OrgAdmin,
            Grant::Workspace(named, role) => {
                let found: Vec<_> = workspaces.iter().filter(|w| w.id.as_str() == named || w.name == named).collect();
                match found.as_slice() {
                    [one] => Grant::Workspace(one.id.clone(), role),
                    [] => bail!("--oidc-role {}: no open workspace has the id or name `{named}`", m.group),
                    _ => {
                        bail!("--oidc-role {}: several workspaces are named `{named}`; use the workspace's id", m.group)
                    }
                }
            }
        };
        out.push(RoleMapping { group: m.group, grant });
    }
    Ok(out)
}
