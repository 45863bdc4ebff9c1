"""Searching memories in the console: the search box of a store's page, the workspace's search
page, highlighted snippets that open the memory, a malformed query's message, ranking by
meaning (the run's models file names `compat/fake_model.py`'s embeddings as the provider), and
both pages on a 390 px screen.

The module writes its own memories through the API (so it runs alone too): two stores, one
memory each naming `staging-db-02`, and one that does not.
"""

from __future__ import annotations

from console import NARROW, WIDE, Console, wait_for

STORE = "Infra notes"
OTHER = "Team wiki"


def memories(c: Console) -> dict:
    """The stores and memories under test, made through the API once per run."""
    if "search" in c.state:
        return c.state["search"]
    infra = c.api("POST", "/v1/memory_stores", {"name": STORE})
    wiki = c.api("POST", "/v1/memory_stores", {"name": OTHER})
    db = c.api(
        "POST",
        f"/v1/memory_stores/{infra['id']}/memories",
        {"path": "/ops/databases.md", "content": "# Databases\n\nThe staging database is staging-db-02 (Postgres 15).\n"},
    )
    c.api("POST", f"/v1/memory_stores/{infra['id']}/memories", {"path": "/ops/cache.md", "content": "Redis only.\n"})
    c.api(
        "POST",
        f"/v1/memory_stores/{wiki['id']}/memories",
        {"path": "/onboarding.md", "content": "Ask for access to staging-db-02 on your first day.\n"},
    )
    c.state["search"] = {"infra": infra["id"], "wiki": wiki["id"], "db": db["id"]}
    return c.state["search"]


def marks(c: Console) -> list:
    return [m.text for m in c.driver.find_elements("css selector", ".snippet mark")]


def test_a_stores_search_box_finds_its_memories_with_highlighted_snippets(c: Console) -> None:
    m = memories(c)
    c.sign_in()
    c.open(f"/console/stores/{m['infra']}")
    c.fill("Search this store", "staging-db-02")
    c.field("Search this store").submit()
    c.expect_text("Search " + STORE)
    c.expect_text("/ops/databases.md")
    assert marks(c) == ["staging-db-02"], marks(c)
    assert not c.sees("/onboarding.md"), "another store's memory shows in a store's search"
    assert not c.sees("/ops/cache.md")
    c.shot("search-store")
    c.click("/ops/databases.md")
    c.expect_text("The staging database is staging-db-02")
    assert f"/memories/{m['db']}" in c.path(), c.path()


def test_the_workspace_search_page_covers_every_store(c: Console) -> None:
    memories(c)
    c.sign_in()
    c.open("/console")
    c.click("Search")
    c.fill("Words to find", '"staging-db-02" -redis')
    c.field("Words to find").submit()
    c.expect_text("/onboarding.md")
    c.expect_text("/ops/databases.md")
    assert c.sees("in " + OTHER) and c.sees("in " + STORE), c.excerpt()
    assert marks(c) == ["staging-db-02", "staging-db-02"], marks(c)
    c.shot("search-workspace")


def test_a_malformed_query_says_how_to_fix_it(c: Console) -> None:
    c.sign_in()
    c.open("/console/search")
    c.fill("Words to find", '"unclosed')
    c.field("Words to find").submit()
    c.expect_text("add the closing")
    c.fill("Words to find", "nothing-like-this-anywhere")
    c.field("Words to find").submit()
    c.expect_text("No memory matches nothing-like-this-anywhere.")


def test_ranking_by_meaning_finds_what_no_word_matches(c: Console) -> None:
    m = memories(c)
    if "pg" not in c.state:
        note = {"path": "/ops/pg.md", "content": "We moved everything to postgres last spring.\n"}
        c.state["pg"] = c.api("POST", f"/v1/memory_stores/{m['infra']}/memories", note)
    c.sign_in()
    c.open("/console/search")
    c.fill("Words to find", "sqlite")
    c.choose("Rank by", "Words")
    c.field("Words to find").submit()
    c.expect_text("No memory matches sqlite.")

    # The embedder works after the write: search again until it has caught up.
    def found() -> bool:
        c.fill("Words to find", "sqlite")
        c.choose("Rank by", "Meaning")
        c.field("Words to find").submit()
        c.expect_text("Search memories")
        return c.sees("/ops/pg.md") or None

    wait_for(found, "the postgres note was never found by meaning", timeout=30)
    assert c.sees("/ops/databases.md"), c.excerpt()
    assert not c.sees("No memory matches"), c.excerpt()
    assert c.field("Rank by").get_attribute("value") == "semantic", "the choice is kept"
    c.shot("search-meaning")
    c.choose("Rank by", "Words and meaning")
    c.field("Words to find").submit()
    c.expect_text("/ops/pg.md")
    c.resize(NARROW)
    try:
        extra, wide = c.overflow()
        assert extra <= 0, f"the search page is {extra}px wider than a 390px screen; too wide: {wide}"
        c.shot("search-meaning-narrow")
    finally:
        c.resize(WIDE)


def test_search_pages_fit_a_narrow_screen(c: Console) -> None:
    m = memories(c)
    c.sign_in()
    c.resize(NARROW)
    try:
        for url in ("/console/search?q=staging-db-02", f"/console/stores/{m['infra']}"):
            c.open(url)
            extra, wide = c.overflow()
            assert extra <= 0, f"{url} is {extra}px wider than a 390px screen; too wide: {wide}"
        c.open("/console/search?q=staging-db-02")
        c.shot("search-narrow")
    finally:
        c.resize(WIDE)
