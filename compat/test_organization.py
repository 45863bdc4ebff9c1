"""The Admin API through the SDK's `client.organization.*`: the organization, workspaces, API keys,
rate limits, users, invites and workspace members, with the server's admin key (which the SDK sends as its `api_key`), and the
isolation a workspace's key gets (admin-api.md §5, §8)."""

from __future__ import annotations

import json

import anthropic

from compat_lib import (
    ANTHROPIC_VERSION,
    check,
    eq,
    expect_error,
    expect_not_found,
    expect_unauthenticated,
    has_prefix,
    http,
    is_utc,
    unique,
)


def mint_key(fx, workspace_id: str, name: str) -> dict:
    """Mints an API key of `workspace_id` (mnemo's extension `POST /v1/organizations/api_keys`,
    which the SDK has no method for); the answer holds the secret once."""
    res = http(
        "POST",
        f"{fx.base_url}/v1/organizations/api_keys",
        {
            "Authorization": f"Bearer {fx.admin_key}",
            "anthropic-version": ANTHROPIC_VERSION,
            "Content-Type": "application/json",
        },
        json.dumps({"name": name, "workspace_id": workspace_id}).encode(),
    )
    eq(res.status, 200, f"mint an API key ({res.body[:300]!r})")
    return res.json()


def expect_forbidden(call, what: str) -> anthropic.APIStatusError:
    return expect_error(call, 403, anthropic.PermissionDeniedError, "permission_error", what)


def test_organization_me_with_an_admin_key_and_an_api_key(fx):
    admin = fx.admin_client()
    me = admin.organization.retrieve()
    eq(me.type, "organization", "organization.type")
    check(isinstance(me.id, str) and len(me.id) > 0, f"organization.id: {me.id!r}")
    eq(me.name, "mnemo", "organization.name")
    # A workspace key may ask which organization it is in, and nothing else of the Admin API.
    eq(fx.client.organization.retrieve().id, me.id, "me with an API key")
    expect_forbidden(lambda: fx.client.organization.workspaces.list(), "workspaces.list with an API key")
    # An admin key reaches only the Admin API.
    expect_forbidden(lambda: admin.beta.memory_stores.list(), "memory_stores.list with an admin key")


def test_workspaces_create_retrieve_update_list_and_archive(fx):
    admin = fx.admin_client()
    name = unique("team")
    ws = admin.organization.workspaces.create(name=name, tags={"team": "compat"})
    eq(ws.type, "workspace", "workspace.type")
    has_prefix(ws.id, "wrkspc_", "workspace.id")
    eq(ws.name, name, "workspace.name")
    eq(ws.archived_at, None, "a new workspace is not archived")
    is_utc(ws.created_at, "workspace.created_at")
    check(isinstance(ws.display_color, str) and ws.display_color.startswith("#"), f"display_color {ws.display_color!r}")

    eq(admin.organization.workspaces.retrieve(ws.id).name, name, "retrieve")
    renamed = admin.organization.workspaces.update(ws.id, name=name + "-2")
    eq(renamed.name, name + "-2", "update renames")
    eq(admin.organization.workspaces.retrieve(ws.id).name, name + "-2", "the new name is kept")

    # Paged one at a time, the SDK's auto-pagination walks every workspace; Default only on request.
    listed = [w.id for w in admin.organization.workspaces.list(limit=1)]
    check(ws.id in listed, f"{ws.id} listed in {listed}")
    default = [w for w in admin.organization.workspaces.list(include_default=True) if w.name == "Default"]
    eq(len(default), 1, "the Default workspace, on request")
    check(default[0].id not in listed, "Default is not listed unless asked for")

    archived = admin.organization.workspaces.archive(ws.id)
    check(archived.archived_at is not None, "archive sets archived_at")
    eq(admin.organization.workspaces.archive(ws.id).archived_at, archived.archived_at, "archive is idempotent")
    check(ws.id not in [w.id for w in admin.organization.workspaces.list()], "archived ones are hidden by default")
    check(ws.id in [w.id for w in admin.organization.workspaces.list(include_archived=True)], "…and shown on request")
    expect_not_found(lambda: admin.organization.workspaces.retrieve("wrkspc_" + "0" * 22), "an unknown workspace")


def test_api_keys_of_a_workspace_see_only_that_workspace(fx):
    admin = fx.admin_client()
    ws = admin.organization.workspaces.create(name=unique("isolated"))
    minted = mint_key(fx, ws.id, "compat key")
    secret = minted["key"]
    has_prefix(minted["id"], "apikey_", "minted.id")
    team = fx.make_client(api_key=secret)

    # What the team makes, the Default workspace never sees, and the other way round.
    theirs = team.beta.memory_stores.create(name=unique("theirs"))
    ours = fx.new_store()
    expect_not_found(lambda: team.beta.memory_stores.retrieve(ours.id), "another workspace's store")
    expect_not_found(lambda: fx.stores.retrieve(theirs.id), "another workspace's store, the other way")
    check(theirs.id not in [s.id for s in fx.stores.list(limit=100)], "a list shows its own workspace only")
    eq([s.id for s in team.beta.memory_stores.list()], [theirs.id], "the team lists its own store only")

    # The key as the SDK's api_keys resource shows it.
    key = admin.organization.api_keys.retrieve(minted["id"])
    eq((key.id, key.type, key.name, key.status, key.workspace_id), (minted["id"], "api_key", "compat key", "active", ws.id), "key")
    listed = [k.id for k in admin.organization.api_keys.list(workspace_id=ws.id)]
    eq(listed, [minted["id"]], "api_keys.list(workspace_id=…)")
    check(secret not in key.to_json(), "a key's secret is shown once, at minting only")

    # Deactivated, it stops working; reactivated, it works again.
    off = admin.organization.api_keys.update(minted["id"], status="inactive", name="paused")
    eq((off.status, off.name), ("inactive", "paused"), "update status and name")
    expect_unauthenticated(lambda: team.beta.memory_stores.list(), "an inactive key")
    admin.organization.api_keys.update(minted["id"], status="active")
    eq([s.id for s in team.beta.memory_stores.list()], [theirs.id], "active again")

    # Archiving the workspace archives its keys.
    admin.organization.workspaces.archive(ws.id)
    eq(admin.organization.api_keys.retrieve(minted["id"]).status, "archived", "archived with its workspace")
    expect_unauthenticated(lambda: team.beta.memory_stores.list(), "a key of an archived workspace")


def test_rate_limits_of_the_organization_and_a_workspace(fx):
    admin = fx.admin_client()
    entries = list(admin.organization.rate_limits.list())
    ids = [e.id for e in entries]
    check("ratelimit_api" in ids, f"the Managed Agents entry is listed: {ids}")
    ws = admin.organization.workspaces.create(name=unique("limited"))
    set_ = admin.organization.workspaces.rate_limits.update(
        "ratelimit_api", workspace_id=ws.id, limits=[{"type": "requests_per_minute", "value": 600}]
    )
    eq(set_.type, "workspace_rate_limit", "update answers the workspace's entry")
    values = {v.type: v.value for v in set_.limits}
    eq(values.get("requests_per_minute"), 600, f"the override: {set_.limits}")
    own = list(admin.organization.workspaces.rate_limits.list(ws.id))
    eq(set_.rate_limit_id, "ratelimit_api", "update names its entry")
    eq(set_.workspace_id, ws.id, "update names its workspace")
    check(any(e.rate_limit_id == "ratelimit_api" for e in own), f"the override is listed: {own}")
    cleared = admin.organization.workspaces.rate_limits.update(
        "ratelimit_api", workspace_id=ws.id, limits=[{"type": "requests_per_minute", "value": None}]
    )
    check(all(v.type != "requests_per_minute" or v.value is None for v in cleared.limits), f"cleared: {cleared.limits}")
    expect_not_found(
        lambda: admin.organization.workspaces.rate_limits.list("wrkspc_" + "0" * 22), "an unknown workspace's limits"
    )


def join_through_the_console(accept_url: str, name: str, password: str) -> str:
    """What the invited person does: opens the invite's `accept_url` in the console and chooses
    a name and a password. Answers the page that welcomes them."""
    import re
    import urllib.parse

    page = http("GET", accept_url)
    eq(page.status, 200, f"the invite's page ({page.body[:300]!r})")
    token = re.search(rb'name="token" value="([^"]+)"', page.body)
    check(token is not None, "the invite's page carries its form token")
    cookie = page.headers.get("set-cookie", "").split(";")[0]
    form = urllib.parse.urlencode(
        {"token": token.group(1).decode(), "name": name, "password": password, "password_again": password}
    ).encode()
    headers = {"Content-Type": "application/x-www-form-urlencoded", "Cookie": cookie}
    joined = http("POST", accept_url, headers, form)
    eq(joined.status, 200, f"joining ({joined.body[:300]!r})")
    return joined.body.decode()


def test_invites_create_list_retrieve_and_delete(fx):
    admin = fx.admin_client()
    email = unique("invitee") + "@Example.com"
    invite = admin.organization.invites.create(email=email, role="developer")
    eq((invite.type, invite.email, invite.role, invite.status), ("invite", email.lower(), "developer", "pending"), "invite")
    has_prefix(invite.id, "invite_", "invite.id")
    eq(invite.rbac_group_ids, [], "rbac_group_ids")
    eq(invite.accepted_at, None, "accepted_at")
    is_utc(invite.invited_at, "invited_at")
    eq(round((invite.expires_at - invite.invited_at).total_seconds()), 7 * 86400, "an invite lasts 7 days")
    accept_url = getattr(invite, "accept_url", None)
    check(isinstance(accept_url, str) and "/console/invite/" in accept_url, f"accept_url (extension): {accept_url!r}")

    got = admin.organization.invites.retrieve(invite.id)
    eq((got.id, got.status), (invite.id, "pending"), "retrieve")
    check(getattr(got, "accept_url", None) is None, "the link is shown in the create answer only")
    listed = [i.id for i in admin.organization.invites.list(email=email.upper(), statuses=["pending"])]
    eq(listed, [invite.id], "list by email (case-insensitive) and status")
    eq([i.id for i in admin.organization.invites.list(email=email, roles=["user"])], [], "list by role")

    again = expect_error(
        lambda: admin.organization.invites.create(email=email, role="user"), 400, anthropic.BadRequestError,
        "invalid_request_error", "a second pending invite"
    )
    eq(json.loads(again.response.text)["error"]["details"]["error_code"], "invite_already_exists", "error_code")
    expect_error(
        lambda: admin.organization.invites.create(email=unique("boss") + "@example.com", role="admin"), 400,
        anthropic.BadRequestError, "invalid_request_error", "admin cannot be invited through the API"
    )
    expect_error(
        lambda: admin.organization.invites.create(email=unique("g") + "@example.com", role="user", rbac_group_ids=["g"]),
        400, anthropic.BadRequestError, "invalid_request_error", "rbac_group_ids"
    )
    expect_forbidden(lambda: fx.client.organization.invites.list(), "invites.list with an API key")

    deleted = admin.organization.invites.delete(invite.id)
    eq((deleted.type, deleted.id), ("invite_deleted", invite.id), "delete")
    eq(admin.organization.invites.retrieve(invite.id).status, "deleted", "a deleted invite is kept as deleted")
    check(invite.id not in [i.id for i in admin.organization.invites.list()], "deleted invites are not listed")
    expect_error(
        lambda: admin.organization.invites.delete(invite.id), 400, anthropic.BadRequestError, "invalid_request_error",
        "only a pending invite is deleted"
    )
    eq(http("GET", accept_url).status, 404, "a deleted invite's link no longer works")
    expect_not_found(lambda: admin.organization.invites.retrieve("invite_" + "0" * 22), "an unknown invite")


def test_users_and_workspace_members_after_an_invite_is_accepted(fx):
    admin = fx.admin_client()
    email = unique("person") + "@example.com"
    invite = admin.organization.invites.create(email=email, role="developer")
    welcome = join_through_the_console(invite.accept_url, "Grace Hopper", "a long enough password")
    check("Welcome, Grace Hopper" in welcome, "the welcome page")
    eq(admin.organization.invites.retrieve(invite.id).status, "accepted", "the invite is accepted")

    users = list(admin.organization.users.list(email=email.upper()))
    eq(len(users), 1, f"users.list(email=…): {users}")
    user = users[0]
    has_prefix(user.id, "user_", "user.id")
    eq((user.type, user.email, user.name, user.role), ("user", email, "Grace Hopper", "developer"), "user")
    is_utc(user.added_at, "added_at")
    eq(admin.organization.users.retrieve(user.id).email, email, "users.retrieve")
    check(user.id in [u.id for u in admin.organization.users.list(roles=["developer"])], "users.list(roles=…)")
    eq(admin.organization.users.update(user.id, role="user").role, "user", "users.update")
    expect_error(
        lambda: admin.organization.users.update(user.id, role="admin"), 400, anthropic.BadRequestError,
        "invalid_request_error", "admin cannot be given through the API"
    )
    expect_error(
        lambda: admin.organization.invites.create(email=email, role="user"), 400, anthropic.BadRequestError,
        "invalid_request_error", "an invite for a member"
    )

    ws = admin.organization.workspaces.create(name=unique("people"))
    member = admin.organization.workspaces.members.add(ws.id, user_id=user.id, workspace_role="workspace_developer")
    eq((member.type, member.user_id, member.workspace_id, member.workspace_role),
       ("workspace_member", user.id, ws.id, "workspace_developer"), "members.add")
    eq(admin.organization.workspaces.members.retrieve(user.id, workspace_id=ws.id).workspace_role,
       "workspace_developer", "members.retrieve")
    check(user.id in [m.user_id for m in admin.organization.workspaces.members.list(ws.id)], "members.list")
    updated = admin.organization.workspaces.members.update(user.id, workspace_id=ws.id, workspace_role="workspace_admin")
    eq(updated.workspace_role, "workspace_admin", "members.update")
    expect_error(
        lambda: admin.organization.workspaces.members.update(user.id, workspace_id=ws.id, workspace_role="workspace_billing"),
        400, anthropic.BadRequestError, "invalid_request_error", "workspace_billing is never assigned"
    )
    expect_not_found(
        lambda: admin.organization.workspaces.members.add(ws.id, user_id="user_" + "0" * 22, workspace_role="workspace_user"),
        "an unknown person"
    )
    removed = admin.organization.workspaces.members.remove(user.id, workspace_id=ws.id)
    eq((removed.type, removed.user_id, removed.workspace_id), ("workspace_member_deleted", user.id, ws.id), "members.remove")
    expect_not_found(lambda: admin.organization.workspaces.members.retrieve(user.id, workspace_id=ws.id), "a removed member")

    signed_out = admin.beta.organization.users.sign_out(user.id)
    eq(signed_out.id, user.id, "users.sign_out answers the person")
    gone = admin.organization.users.remove(user.id)
    eq((gone.type, gone.id), ("user_deleted", user.id), "users.remove")
    expect_not_found(lambda: admin.organization.users.retrieve(user.id), "a removed person")
    expect_forbidden(lambda: fx.client.organization.users.list(), "users.list with an API key")
