"""The signed-in workspace's own pages, used as a person uses them: its API keys (minted and
shown once with **Copy key**, deactivated, reactivated, archived behind a confirmation, each
checked against the API with the key itself), its rate limits, its audit log and its filters,
and the header naming the workspace; a key of a second workspace sees none of the first's keys
or log, and the organization's pages are refused to it. Each page is looked at 1280 px and
390 px wide (screenshots `workspace-*`), and must not be wider than a 390-px screen.
"""

from __future__ import annotations

import re

from console import NARROW, WIDE, Console, wait_for

KEY = re.compile(r"sk-mnemo-[A-Za-z0-9_-]{20,}")
KEY_NAME = "CI pipeline"
TEAM_B = "Team B"


def fits_a_narrow_screen(c: Console, where: str) -> None:
    """The page at 390 px: no sideways scrolling, and a screenshot to look at."""
    c.resize(NARROW)
    c.driver.refresh()
    c.control("Sign out")
    extra, wide = c.overflow()
    c.shot(f"workspace-{where}-narrow")
    assert extra <= 0, f"the {where} page is {extra}px wider than a 390px screen; too wide: {wide}"
    c.resize(WIDE)


def status_with(c: Console, key: str) -> int:
    """The API's answer to listing memory stores with `key`."""
    return c.http("GET", "/v1/memory_stores", bearer=key)[0]


def test_api_keys_mint_shown_once_deactivate_and_archive(c: Console) -> None:
    c.sign_in()
    c.open("/console")
    c.click("API keys")
    c.expect_text("Workspace Default")
    c.expect_text("The keys of workspace Default")
    c.fill("Key name", KEY_NAME)
    c.click("Mint key")
    c.expect_text("shown only this once")
    secrets = KEY.findall(c.text())
    assert len(secrets) == 1, f"the page shows {len(secrets)} API keys, not one: {c.excerpt()}"
    secret = secrets[0]
    c.click("Copy key")
    wait_for(
        lambda: c.find_control("Copied") is not None
        or c.driver.execute_script("return String(window.getSelection());").strip() == secret,
        "Copy key neither copied the key nor selected it",
    )
    c.shot("workspace-api-key-minted")
    assert status_with(c, secret) == 200, "the minted key does not reach its workspace"
    listed = [k for k in c.admin("GET", "/v1/organizations/api_keys?limit=100")["data"] if k["name"] == KEY_NAME]
    assert len(listed) == 1 and listed[0]["status"] == "active", listed
    assert secret not in str(listed)

    # Reloading shows the key's row but never its secret again, and mints nothing.
    c.driver.refresh()
    c.row(KEY_NAME)
    assert c.path() == "/console/api-keys", f"the reloaded page is {c.path()}"
    assert not KEY.search(c.text()), f"the reloaded page shows a key: {c.excerpt()}"
    assert len([k for k in c.admin("GET", "/v1/organizations/api_keys?limit=100")["data"] if k["name"] == KEY_NAME]) == 1

    c.click_in_row(KEY_NAME, "Deactivate")
    wait_for(lambda: "inactive" in c.row(KEY_NAME).text, f"the key's row reads {c.row(KEY_NAME).text!r}")
    assert status_with(c, secret) == 401, "a deactivated key still works"
    c.click_in_row(KEY_NAME, "Activate")
    wait_for(lambda: "active" in c.row(KEY_NAME).text.split(), f"the key's row reads {c.row(KEY_NAME).text!r}")
    assert status_with(c, secret) == 200, "a reactivated key does not work"

    c.click_in_row(KEY_NAME, "Archive")
    c.expect_text("Archive this API key?")
    c.expect_text("cannot be undone")
    assert status_with(c, secret) == 200, "the key was archived before the confirmation"
    c.shot("workspace-api-key-archive")
    c.click("Archive key")
    wait_for(lambda: c.path() == "/console/api-keys", f"Archive key led to {c.path()}")
    row = c.row(KEY_NAME)
    assert "archived" in row.text, f"the key's row reads {row.text!r}"
    for gone in ("Deactivate", "Activate", "Archive"):
        assert gone not in row.text.split(), f"an archived key still offers {gone}: {row.text!r}"
    assert status_with(c, secret) == 401, "an archived key still works"
    c.shot("workspace-api-keys")
    fits_a_narrow_screen(c, "api-keys")


def test_rate_limits_show_the_override_and_what_applies(c: Console) -> None:
    c.sign_in()
    c.open("/console")
    c.click("Rate limits")
    c.expect_text("Rate limits")
    row = c.row("Managed Agents API requests")
    assert "requests per minute" in row.text and "no limit" in row.text, row.text
    default = next(w for w in c.admin("GET", "/v1/organizations/workspaces?include_default=true")["data"] if w["name"] == "Default")
    c.admin("POST", f"/v1/organizations/workspaces/{default['id']}/rate_limits/ratelimit_api",
            {"limits": [{"type": "requests_per_minute", "value": 6000}]})
    c.driver.refresh()
    cells = c.table_rows()[0]
    assert cells[2:] == ["no limit", "6000", "6000"], f"the first row reads {cells}"
    c.shot("workspace-rate-limits")
    fits_a_narrow_screen(c, "rate-limits")
    c.admin("POST", f"/v1/organizations/workspaces/{default['id']}/rate_limits/ratelimit_api",
            {"limits": [{"type": "requests_per_minute", "value": None}]})


def test_audit_log_newest_first_with_filters(c: Console) -> None:
    c.sign_in()
    c.open("/console")
    c.click("Audit log")
    c.expect_text("newest first")
    rows = [r for r in c.table_rows() if r[1].startswith("api_key.")]
    actions = [r[1] for r in rows]
    # The first test's steps, newest first: archive, reactivate, deactivate, mint.
    assert actions[:4] == ["api_key.update", "api_key.update", "api_key.update", "api_key.create"], actions
    assert "status: archived" in rows[0][-1], rows[0]
    assert f"name: {KEY_NAME}" in rows[3][-1], rows[3]
    assert not KEY.search(c.text()), "the audit log shows a secret"
    c.choose("Action", "api_key.create")
    c.click("Apply filters")
    wait_for(lambda: "action=api_key.create" in c.path(), f"the filter did not apply: {c.path()}")
    actions = {r[1] for r in c.table_rows()}
    assert actions == {"api_key.create"}, actions
    c.shot("workspace-audit-log")
    c.choose("Actor type", "admin_key")
    c.click("Apply filters")
    c.expect_text("No entries match.")
    c.click("Clear filters")
    wait_for(lambda: c.path() == "/console/audit-log", f"Clear filters led to {c.path()}")
    assert len(c.table_rows()) >= 4
    fits_a_narrow_screen(c, "audit-log")


def test_a_key_of_another_workspace_sees_only_its_own(c: Console) -> None:
    team_b = c.admin("POST", "/v1/organizations/workspaces", {"name": TEAM_B})
    minted = c.admin("POST", "/v1/organizations/api_keys", {"name": "B's key", "workspace_id": team_b["id"]})
    c.sign_in(minted["key"])
    c.expect_text(f"Workspace {TEAM_B}")
    c.click("API keys")
    c.row("B's key")
    assert KEY_NAME not in c.text(), "B's key list shows the Default workspace's keys"
    assert len(c.table_rows()) == 1, c.table_rows()
    c.shot("workspace-b-api-keys")
    c.click("Audit log")
    c.expect_text(f"What was done in workspace {TEAM_B}")
    default_key = next(k for k in c.admin("GET", "/v1/organizations/api_keys?limit=100")["data"] if k["name"] == KEY_NAME)
    # Only B's own entries (its key's minting), none of the Default workspace's.
    assert KEY_NAME not in c.text() and default_key["id"] not in c.text(), c.excerpt()
    assert "api_key.create" in [r[1] for r in c.table_rows()], c.table_rows()
    # The Default workspace's key, by its id, is not found from B: as if it did not exist.
    c.open(f"/console/api-keys/{default_key['id']}/archive")
    c.expect_text("Not found")
    c.expect_text(f"API key `{default_key['id']}` not found")
    # The organization's pages are for an organization admin, as the API says.
    c.open("/console/workspaces")
    c.expect_text("Not allowed")
    c.expect_text("organization admin")
    c.shot("workspace-organization-refused")
    fits_a_narrow_screen(c, "organization-refused")


def test_an_admin_key_does_not_sign_in(c: Console) -> None:
    c.driver.delete_all_cookies()
    c.open("/console")
    c.fill("API key", c.admin_key)
    c.click("Sign in")
    c.expect_text("that is an admin key")
    assert c.find_field("API key") is not None, "an admin key signed in"
