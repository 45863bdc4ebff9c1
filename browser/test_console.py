"""The web console, used the way a person uses it: sign in, stores, memories, editing (and its
conflict path), inert hostile text, no foreign origin, signing out.

Tests run in source order against one server; later ones build on the store and memory the
earlier ones create (`STORE`, `MEMORY_PATH`), but each signs in afresh so one failure does not
cascade further than the state it leaves.
"""

from __future__ import annotations

from console import NARROW, Console, wait_for

STORE = "Team notes"
STORE_DESCRIPTION = "What the team agreed on"
MEMORY_PATH = "/notes/standup.md"
MEMORY_CONTENT = "Stand-up moves to 09:30 on Mondays."
EDITED_CONTENT = "Stand-up moves to 10:00 on Mondays."

SCRIPT_PAYLOAD = "<script>window.__pwned=1</script>"
IMG_PAYLOAD = '<img src=x onerror="window.__pwned=1">'
PAYLOAD = SCRIPT_PAYLOAD + " " + IMG_PAYLOAD


# ---- helpers ---------------------------------------------------------------------------------


def open_store(c: Console, name: str) -> None:
    """From the console's home, follow the store's link (its name)."""
    c.open("/console")
    c.click(name)
    c.expect_text(name)


def create_store(c: Console, name: str, description: str) -> None:
    c.open("/console")
    if c.find_field("Name") is None:
        c.click("Create store")  # a link or button that opens the form
    c.fill("Name", name)
    c.fill("Description", description)
    c.click("Create store")
    wait_for(lambda: c.find_field("Name") is None or c.sees(name), f"the store form did not go through: {c.excerpt()}")


def create_memory(c: Console, store: str, path: str, content: str) -> None:
    open_store(c, store)
    c.click("New memory")
    c.fill("Path", path)
    c.fill("Content", content)
    c.click("Create memory")
    wait_for(lambda: c.find_control("Create memory") is None, f"the memory form is still shown after Create memory: {c.excerpt()}")


def open_folder(c: Console, store: str, folder: str) -> None:
    """Opens a store and browses down to `folder` (e.g. "/notes/") level by level, clicking
    each sub-folder's name as a person would."""
    open_store(c, store)
    for segment in [s for s in folder.split("/") if s]:
        c.click(segment + "/")


def open_memory(c: Console, store: str, path: str) -> None:
    folder, name = path.rsplit("/", 1)
    open_folder(c, store, folder + "/")
    c.click(name)
    c.expect_text(path)


def assert_inert(c: Console, where: str) -> None:
    alert = c.alert_text()
    assert alert is None, f"{where}: an alert opened ({alert!r})"
    pwned = c.pwned()
    assert pwned is None, f"{where}: the payload ran (window.__pwned = {pwned})"


# ---- signing in ------------------------------------------------------------------------------


def test_sign_in_form(c: Console) -> None:
    c.driver.delete_all_cookies()
    c.open("/console")
    c.field("API key")
    c.control("Sign in")
    c.shot("sign-in")


def test_wrong_key_is_refused_in_plain_words(c: Console) -> None:
    c.driver.delete_all_cookies()
    c.open("/console")
    before = c.text()
    c.fill("API key", "sk-not-a-key-" + "0" * 24)
    c.click("Sign in")
    c.field("API key")  # still (or again) on the sign-in form
    after = c.text()
    new_lines = [line for line in after.splitlines() if line.strip() and line not in before]
    assert new_lines, f"no message after a wrong key; the page shows: {c.excerpt()}"
    message = " ".join(new_lines)
    assert not message.lstrip().startswith("{"), f"the refusal is raw JSON: {message!r}"
    assert "key" in message.lower(), f"the refusal does not say what was wrong with the key: {message!r}"
    assert c.find_control("Sign out") is None, "a wrong key shows a Sign out button"
    c.shot("sign-in-refused")
    # The browser holds no cookie that opens the console.
    status, location, body = c.get_with_cookies("/console", c.driver.get_cookies())
    assert status != 200 or "API key" in body, f"a wrong key's cookies open the console (HTTP {status})"


def test_environment_key_cannot_sign_in(c: Console) -> None:
    env = c.api("POST", "/v1/environments", {"name": "browser-env", "config": {"type": "self_hosted"}})
    key = c.api("POST", f"/v1/environments/{env['id']}/keys", {})
    assert key["key"].startswith("sk-"), key
    c.driver.delete_all_cookies()
    c.open("/console")
    c.fill("API key", key["key"])
    c.click("Sign in")
    c.field("API key")
    assert c.find_control("Sign out") is None, f"an environment key signed in: {c.excerpt()}"
    assert "key" in c.text().lower(), f"no word about the key: {c.excerpt()}"


def test_sign_in(c: Console) -> None:
    c.sign_in()
    c.control("Sign out")


# ---- stores and memories ---------------------------------------------------------------------


def test_create_store(c: Console) -> None:
    c.sign_in()
    create_store(c, STORE, STORE_DESCRIPTION)
    c.expect_text(STORE)
    store = c.store_by_name(STORE)
    assert store.get("description") == STORE_DESCRIPTION, store
    c.open("/console")
    c.expect_text(STORE)
    c.shot("stores")


def test_create_memory(c: Console) -> None:
    c.sign_in()
    create_memory(c, STORE, MEMORY_PATH, MEMORY_CONTENT)
    c.expect_text(MEMORY_CONTENT)
    store = c.store_by_name(STORE)
    memory = c.memory_by_path(store["id"], MEMORY_PATH)
    assert memory["content"] == MEMORY_CONTENT, memory
    open_store(c, STORE)
    c.expect_text("notes/")  # the store's top level shows the folder, not what is inside it
    open_folder(c, STORE, "/notes/")
    c.expect_text("standup.md")
    c.shot("store")


def test_edit_memory(c: Console) -> None:
    c.sign_in()
    open_memory(c, STORE, MEMORY_PATH)
    c.expect_text(MEMORY_CONTENT)
    c.shot("memory")
    c.click("Edit")
    c.field("Content")
    c.shot("memory-edit")
    c.fill("Content", EDITED_CONTENT)
    c.click("Save")
    wait_for(lambda: c.find_control("Save") is None, f"still on the edit form after Save: {c.excerpt()}")
    c.expect_text(EDITED_CONTENT)
    store = c.store_by_name(STORE)
    assert c.memory_by_path(store["id"], MEMORY_PATH)["content"] == EDITED_CONTENT


def test_edit_conflict_shows_both_versions(c: Console) -> None:
    c.sign_in()
    open_memory(c, STORE, MEMORY_PATH)
    c.click("Edit")
    c.field("Content")
    # Someone else changes the memory between loading the form and saving it.
    store = c.store_by_name(STORE)
    memory = c.memory_by_path(store["id"], MEMORY_PATH)
    theirs = "Stand-up is cancelled (changed through the API)."
    c.api("POST", f"/v1/memory_stores/{store['id']}/memories/{memory['id']}", {"content": theirs})
    mine = "Stand-up moves to 11:00 (typed in the browser)."
    c.fill("Content", mine)
    c.click("Save")
    c.expect_text(theirs)
    c.expect_text(mine)
    c.shot("memory-conflict")
    current = c.memory_by_path(store["id"], MEMORY_PATH)["content"]
    assert current == theirs, f"the save overwrote the other change: the memory now holds {current!r}"


# ---- hostile text ----------------------------------------------------------------------------


def test_payload_in_memory_content_is_inert(c: Console) -> None:
    c.sign_in()
    path = "/notes/hostile.md"
    create_memory(c, STORE, path, PAYLOAD)
    assert_inert(c, "after creating the memory")
    open_memory(c, STORE, path)
    assert_inert(c, "the memory's page")
    c.expect_text(SCRIPT_PAYLOAD)
    c.expect_text(IMG_PAYLOAD)
    c.click("Edit")
    assert_inert(c, "the memory's edit form")
    assert c.sees(SCRIPT_PAYLOAD), f"the edit form does not show the text: {c.excerpt()}"


def test_payload_as_store_name_is_inert(c: Console) -> None:
    c.sign_in()
    create_store(c, PAYLOAD, IMG_PAYLOAD)
    assert_inert(c, "after creating the store")
    c.open("/console")
    assert_inert(c, "the store list")
    c.expect_text(PAYLOAD)
    c.click(PAYLOAD)
    assert_inert(c, "the store's page")
    c.expect_text(PAYLOAD)
    c.expect_text(IMG_PAYLOAD)


# ---- layout, origins, signing out ------------------------------------------------------------


def test_narrow_screen(c: Console) -> None:
    c.sign_in()
    c.resize(NARROW)
    for where in ("store list", "store"):
        if where == "store list":
            c.open("/console")
        else:
            open_store(c, STORE)
            c.shot("store-narrow")
        overflow = c.driver.execute_script("return document.documentElement.scrollWidth - window.innerWidth;")
        if overflow > 0:
            wide = c.driver.execute_script(
                "return Array.from(document.querySelectorAll('body *'))"
                ".filter(e => e.getBoundingClientRect().right > window.innerWidth + 1)"
                ".slice(0, 5).map(e => e.tagName.toLowerCase() + (e.className ? '.' + e.className : ''));"
            )
            raise AssertionError(f"the {where} page is {overflow}px wider than a 390px screen; too wide: {wide}")
        c.control("Sign out")


def test_nothing_loaded_from_another_origin(c: Console) -> None:
    c.sign_in()
    for step in (STORE, "notes/", "standup.md"):  # the home page, a store's, a folder's, a memory's
        foreign = c.foreign_resources()
        assert not foreign, f"the page at {c.path()} loaded {foreign}"
        if c.find_control(step) is None:
            break
        c.click(step)
    c.requested_now()
    requested = c.requested
    assert requested, "the performance log recorded no request at all"
    foreign = sorted({url for url in requested if not c.same_origin(url)})
    assert not foreign, f"the console asked for resources of another origin: {foreign[:5]}"


def test_sign_out_ends_the_session(c: Console) -> None:
    c.sign_in()
    old = c.driver.get_cookies()
    assert old, "signing in set no cookie"
    c.click("Sign out")
    c.field("API key")
    # The old cookie no longer opens the console, in the browser or outside it.
    c.driver.delete_all_cookies()
    for cookie in old:
        c.driver.add_cookie({k: v for k, v in cookie.items() if k in ("name", "value", "path", "httpOnly", "secure", "sameSite")})
    c.open("/console")
    c.field("API key")
    assert c.find_control("Sign out") is None, "the old cookie still opens the console"
    status, _, body = c.get_with_cookies("/console", old)
    assert status != 200 or "Sign out" not in body, f"the old cookie still opens the console over HTTP (HTTP {status})"
