"""Environments in the console: minting a key for an environment's workers (shown once, with a
copy button) and revoking it behind a confirmation, each checked against the API with the key
itself.
"""

from __future__ import annotations

import re

from console import Console, wait_for

ENVIRONMENT = "Build hosts"
KEY = re.compile(r"sk-mnemo-env-[A-Za-z0-9_-]+")


def poll(c: Console, env: str, key: str) -> tuple:
    """(status, body) of a worker's poll of `env`'s queue with `key` (empty queue: 200 null)."""
    return c.http("GET", f"/v1/environments/{env}/work/poll", bearer=key)


def open_environment(c: Console) -> None:
    c.open("/console")
    c.click("Environments")
    c.click(ENVIRONMENT)
    c.expect_text("Environment keys")


def test_mint_a_key_shown_once_and_revoke_it(c: Console) -> None:
    env = c.api("POST", "/v1/environments", {"name": ENVIRONMENT, "description": "The CI machines", "config": {"type": "self_hosted"}})
    c.sign_in()
    open_environment(c)
    c.expect_text(env["id"])
    c.expect_text("This environment has no keys yet.")
    c.click("Mint key")
    c.expect_text("shown only this once")
    secrets = KEY.findall(c.text())
    assert len(secrets) == 1, f"the page shows {len(secrets)} environment keys, not one: {c.excerpt()}"
    secret = secrets[0]
    ids = re.findall(r"New key (envkey_\w+)", c.text())
    assert ids, f"the page does not name the new key: {c.excerpt()}"
    key_id = ids[0]
    listed = c.api("GET", f"/v1/environments/{env['id']}/keys")["data"]
    assert [k["id"] for k in listed] == [key_id], f"the API lists {listed}, not the one key {key_id}"
    assert secret not in str(listed), "the API's key list carries the secret"
    # The copy button is there (the script shows it) and copies, or selects the key for copying.
    c.click("Copy key")
    wait_for(
        lambda: c.find_control("Copied") is not None
        or c.driver.execute_script("return String(window.getSelection());").strip() == secret,
        "Copy key neither copied the key nor selected it",
    )
    c.shot("environment-key")

    status, body = poll(c, env["id"], secret)
    assert status == 200 and body is None, f"the minted key cannot poll its environment: HTTP {status} {body}"
    status, _ = c.http("GET", "/v1/memory_stores", bearer=secret)
    assert status == 403, f"an environment key reached the memory stores: HTTP {status}"

    # Reloading the page does not show the secret again (nor mint another key), and neither
    # does coming back to the environment later: only the key's id is listed.
    c.driver.refresh()
    c.expect_text(key_id)
    assert not KEY.search(c.text()), f"the reloaded page shows a key: {c.excerpt()}"
    keys = c.api("GET", f"/v1/environments/{env['id']}/keys")["data"]
    assert len(keys) == 1, f"reloading the page minted another key: the API lists {[k['id'] for k in keys]}"
    assert c.path() == f"/console/environments/{env['id']}", f"the reloaded page is {c.path()}"
    open_environment(c)
    c.expect_text(key_id)
    assert not KEY.search(c.text()), f"the key is shown again: {c.excerpt()}"

    c.click_in_row(key_id, "Revoke")
    c.expect_text("Revoke this key?")
    c.expect_text(key_id)
    assert poll(c, env["id"], secret)[0] == 200, "the key was revoked before the confirmation"
    c.click("Revoke key")
    wait_for(lambda: c.path() == f"/console/environments/{env['id']}", f"Revoke key led to {c.path()}")
    row = c.row(key_id).text
    assert "revoked" in row, f"the key's row reads {row!r}"
    assert c.find_control("Revoke") is None, "a revoked key still offers Revoke"
    status, body = poll(c, env["id"], secret)
    assert status == 401, f"the revoked key still polls: HTTP {status} {body}"
    revoked = c.api("GET", f"/v1/environments/{env['id']}/keys")["data"]
    assert revoked and revoked[0]["id"] == key_id and revoked[0].get("revoked_at"), revoked


def test_form_addresses_opened_directly_answer_a_console_page(c: Console) -> None:
    """The addresses that only take a form's POST, opened with a GET (Enter in the address bar
    of the page a form answered, or a bookmark), lead to the page the form is on instead of
    the HTTP API's JSON error."""
    env = c.api("POST", "/v1/environments", {"name": "Form addresses", "config": {"type": "self_hosted"}})
    store = c.api("POST", "/v1/memory_stores", {"name": "Form addresses"})
    memory = c.api("POST", f"/v1/memory_stores/{store['id']}/memories", {"path": "/a.md", "content": "a\n"})
    c.sign_in()
    raw_json = []
    for path in (
        f"/console/environments/{env['id']}/keys",
        f"/console/stores/{store['id']}/memories",
        f"/console/stores/{store['id']}/versions/{memory['memory_version_id']}/restore",
        "/console/sign-out",
    ):
        c.open(path)
        if c.text().lstrip().startswith("{"):
            raw_json.append(f"{path}: {c.excerpt(120)}")
    assert not raw_json, "GET on a form's address answers the API's JSON, not a page: " + "; ".join(raw_json)
