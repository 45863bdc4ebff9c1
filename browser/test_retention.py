"""A store's version retention in the console (issue 35 item 3): the store page says how long
versions are kept and whose window that is; a person who may edit sets the store's own window in
"Manage this store", a malformed one is refused in plain words with the form as typed, and a
blank one follows the server again. The API answers what the console set. Screenshots
`retention-*` at 1280 and 390 px.
"""

from __future__ import annotations

from console import NARROW, WIDE, Console

STORE = "Retained"


def store(c: Console) -> str:
    if "retained" not in c.state:
        made = c.api("POST", "/v1/memory_stores", {"name": STORE})
        c.api("POST", f"/v1/memory_stores/{made['id']}/memories", {"path": "/a.md", "content": "a\n"})
        c.state["retained"] = made["id"]
    return c.state["retained"]


def test_set_a_stores_retention_refuse_a_malformed_one_and_follow_the_server_again(c: Console) -> None:
    sid = store(c)
    c.sign_in()
    c.open(f"/console/stores/{sid}")
    c.expect_text("Versions are kept forever (this server's default).")
    c.click("Manage this store")
    c.fill("Keep versions for", "3 weeks")
    c.click("Save retention")
    c.expect_text("(got `3 weeks`)")
    assert c.field("Keep versions for").get_attribute("value") == "3 weeks", "the form keeps what was typed"
    c.shot("retention-refused")
    c.fill("Keep versions for", "21d")
    c.click("Save retention")
    c.expect_text("Versions are kept for 21d (this store's own).")
    assert c.api("GET", f"/v1/memory_stores/{sid}/version_retention")["retention"] == "21d"
    c.click("Manage this store")
    c.shot("retention-set")
    c.fill("Keep versions for", "")
    c.click("Save retention")
    c.expect_text("Versions are kept forever (this server's default).")
    assert c.api("GET", f"/v1/memory_stores/{sid}/version_retention")["retention"] is None


def test_the_retention_form_fits_a_narrow_screen(c: Console) -> None:
    sid = store(c)
    c.sign_in()
    c.resize(NARROW)
    try:
        c.open(f"/console/stores/{sid}")
        c.click("Manage this store")
        extra, wide = c.overflow()
        assert extra <= 0, f"the store page is {extra}px wider than a 390px screen; too wide: {wide}"
        c.shot("retention-narrow")
    finally:
        c.resize(WIDE)
