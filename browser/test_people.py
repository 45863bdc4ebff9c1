"""People in the console, used as people use it: the first admin made through the setup link
of `mnemo admin bootstrap`, an invite made on the People page with its link shown once, the
invited person joining with a password, signing in with it, seeing their workspace, editing a
memory and finding themselves named in its history, and signing out; a wrong password refused in
plain words; a `workspace_user` who sees no edit control; roles changed and people removed on
the People and Members pages; "Sign out everywhere" on one's own page. Pages are looked at
1280 px and 390 px wide (screenshots `people-*`) and must fit a 390-px screen.

The server is shared by the whole run, so the admin is made once (the first test that needs
it) and remembered here.
"""

from __future__ import annotations

import re
import subprocess
from typing import Dict

from console import NARROW, WIDE, Console, wait_for

PASSWORD = "a long browser password"
ADMIN_EMAIL = "root@people.test"
SETUP = re.compile(r"/console/setup/[A-Za-z0-9_-]+")
INVITE = re.compile(r"https?://\S+/console/invite/[A-Za-z0-9_-]+")

_made: Dict[str, str] = {}


def narrow_look(c: Console, where: str) -> None:
    """The page at 390 px: no sideways scrolling, and a screenshot to look at."""
    c.resize(NARROW)
    c.driver.refresh()
    c.control("Sign out")
    extra, wide = c.overflow()
    c.shot(f"people-{where}-narrow")
    assert extra <= 0, f"the {where} page is {extra}px wider than a 390px screen; too wide: {wide}"
    c.resize(WIDE)


def password_sign_in(c: Console, email: str, password: str) -> None:
    c.driver.delete_all_cookies()
    c.open("/console/sign-in")
    c.fill("Email", email)
    c.fill("Password", password)
    c.click("Sign in with password")


def signed_in_as(c: Console, email: str) -> None:
    password_sign_in(c, email, PASSWORD)
    wait_for(lambda: c.find_control("Sign out") is not None, f"{email} did not sign in; the page shows: {c.excerpt()}")


def admin(c: Console) -> None:
    """Signs the organization's admin person in, making them first if no test did yet."""
    if "admin" not in _made:
        # The run's server keeps its database in `<run>/server/` (browser/run.py).
        database = c.scratch.parent / "server" / "mnemo.sqlite"
        assert database.exists(), f"no server database at {database}"
        done = subprocess.run(
            [c.binary, "admin", "bootstrap", "--database", f"sqlite://{database}", "--public-url", c.origin],
            capture_output=True, text=True, timeout=120,
        )
        found = SETUP.search(done.stderr)
        assert found, f"`mnemo admin bootstrap` printed no setup link (exit {done.returncode}): {done.stderr[-500:]!r}"
        c.driver.delete_all_cookies()
        c.open(found.group(0))
        c.fill("Email", ADMIN_EMAIL)
        c.fill("Your name", "Root Admin")
        c.fill("Password", PASSWORD)
        c.fill("Password again", PASSWORD)
        c.click("Create the admin")
        c.expect_text("Welcome, Root Admin")
        _made["admin"] = ADMIN_EMAIL
    signed_in_as(c, ADMIN_EMAIL)


def invite(c: Console, email: str, role: str) -> str:
    """Invites `email` as `role` on the People page; answers the accept link it shows once."""
    c.open("/console/people")
    c.fill("Email", email)
    c.choose("Role", role)
    c.click("Invite")
    c.expect_text("shown only this once")
    links = INVITE.findall(c.text())
    assert len(links) == 1, f"the page shows {len(links)} invite links: {c.excerpt()}"
    return links[0]


def join(c: Console, link: str, name: str) -> None:
    c.driver.delete_all_cookies()
    c.driver.get(link)
    c.fill("Your name", name)
    c.fill("Password", PASSWORD)
    c.fill("Password again", PASSWORD)
    c.click("Join")
    c.expect_text(f"Welcome, {name}")


def add_member(c: Console, label: str, role: str) -> None:
    c.open("/console/members")
    c.choose("Person", label)
    c.choose("Workspace role", role)
    c.click("Add member")
    c.row(label.split(" (")[0])


def test_invite_join_sign_in_edit_and_be_named_in_the_history(c: Console) -> None:
    admin(c)
    c.open("/console/people")
    c.shot("people-page")
    narrow_look(c, "people")
    link = invite(c, "dana@people.test", "developer")
    c.shot("people-invited")
    add_later = "Dana Developer (dana@people.test)"
    join(c, link, "Dana Developer")
    c.driver.get(link)
    c.expect_text("no longer valid")

    admin(c)
    add_member(c, add_later, "workspace_developer")
    c.shot("people-members")
    narrow_look(c, "members")

    store = c.api("POST", "/v1/memory_stores", {"name": "people-notes"})
    c.api("POST", f"/v1/memory_stores/{store['id']}/memories", {"path": "/team.md", "content": "first line\n"})

    signed_in_as(c, "dana@people.test")
    c.expect_text("Default")
    c.expect_text("Dana Developer")
    c.shot("people-signed-in")
    c.click("people-notes")
    c.click("team.md")
    c.click("Edit")
    c.fill("Content", "first line\nsecond line by Dana\n")
    c.click("Save")
    c.expect_text("second line by Dana")
    c.click("History")
    c.expect_text("Dana Developer (dana@people.test)")
    c.shot("people-history-names-the-person")
    versions = c.api("GET", f"/v1/memory_stores/{store['id']}/memory_versions?limit=5")["data"]
    actors = [v.get("created_by") or {} for v in versions]
    assert any(a.get("type") == "user_actor" and str(a.get("user_id", "")).startswith("user_") for a in actors), actors

    c.click("Sign out")
    wait_for(lambda: c.find_field("Email") is not None, f"not back on the sign-in page: {c.excerpt()}")
    c.open("/console")
    c.field("Email")


def test_a_wrong_password_is_refused_in_plain_words(c: Console) -> None:
    admin(c)
    for email in (ADMIN_EMAIL, "nobody@people.test"):
        password_sign_in(c, email, "not the right password")
        c.field("Email")
        text = c.text()
        assert "do not match" in text, f"no plain refusal for {email}: {c.excerpt()}"
        assert "not the right password" not in text
        assert c.find_control("Sign out") is None
    c.shot("people-wrong-password")
    c.resize(NARROW)
    c.shot("people-wrong-password-narrow")
    extra, wide = c.overflow()
    c.resize(WIDE)
    assert extra <= 0, f"the sign-in page is {extra}px too wide at 390px: {wide}"


def test_a_workspace_user_sees_no_edit_control(c: Console) -> None:
    admin(c)
    link = invite(c, "wes@people.test", "user")
    join(c, link, "Wes Watcher")
    admin(c)
    add_member(c, "Wes Watcher (wes@people.test)", "workspace_user")
    store = c.api("POST", "/v1/memory_stores", {"name": "read-only-notes"})
    c.api("POST", f"/v1/memory_stores/{store['id']}/memories", {"path": "/look.md", "content": "look, do not touch\n"})

    signed_in_as(c, "wes@people.test")
    c.click("read-only-notes")
    c.click("look.md")
    c.expect_text("look, do not touch")
    for control in ("Edit", "Rename", "Delete"):
        assert c.find_control(control) is None, f"a workspace_user sees {control!r}: {c.excerpt()}"
    c.shot("people-workspace-user-reads")
    c.open("/console")
    assert c.find_control("Create store") is None, "a workspace_user is offered Create store"
    assert c.find_control("People") is None and c.find_control("Members") is None
    c.open(f"/console/stores/{store['id']}")
    path = c.path()
    c.driver.get(c.origin + path + "/memories/new")
    c.expect_text("does not let you")


def test_roles_change_people_leave_and_sign_out_everywhere(c: Console) -> None:
    admin(c)
    link = invite(c, "rita@people.test", "user")
    join(c, link, "Rita Role")
    admin(c)
    c.open("/console/people")
    c.choose("Role of Rita Role", "developer")
    c.click_in_row("Rita Role", "Change")
    c.expect_text("Rita Role is now developer.")
    assert c.path().startswith("/console/people?"), f"changing a role led to {c.path()}"
    c.shot("people-role-changed")
    narrow_look(c, "role-changed")
    users = c.admin("GET", "/v1/organizations/users?limit=100")["data"]
    assert [u["role"] for u in users if u["email"] == "rita@people.test"] == ["developer"], users

    # Revoking an open invite, and a new link for another.
    first = invite(c, "olive@people.test", "user")
    c.click_in_row("olive@people.test", "New link")
    c.expect_text("shown only this once")
    second = INVITE.findall(c.text())[0]
    assert second != first
    c.driver.get(first)
    c.expect_text("no longer valid")
    c.open("/console/people")
    c.click_in_row("olive@people.test", "Revoke")
    wait_for(lambda: "olive@people.test" not in c.text(), "the revoked invite is still listed")

    # Their own page: sign out everywhere.
    add_member(c, "Rita Role (rita@people.test)", "workspace_user")
    signed_in_as(c, "rita@people.test")
    c.click("Rita Role (rita@people.test)")
    c.expect_text("Your workspaces")
    c.shot("people-own-page")
    narrow_look(c, "own-page")
    c.click("Sign out everywhere")
    wait_for(lambda: c.find_field("Email") is not None, f"not signed out: {c.excerpt()}")

    # Removed: signed in nowhere, and refused like a wrong password.
    admin(c)
    c.open("/console/people")
    c.click_in_row("Rita Role", "Remove")
    wait_for(lambda: "rita@people.test" not in c.text(), "the removed person is still listed")
    password_sign_in(c, "rita@people.test", PASSWORD)
    c.expect_text("do not match")
