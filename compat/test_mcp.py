"""The MCP server — `mnemo mcp` over stdio and `/mcp` on `mnemo serve` over streamable HTTP —
driven by the official MCP Python SDK (`mcp` on PyPI) as the client: initialize, list and call
every tool, read resources, subscriptions, refusals (read-only, a change made elsewhere since
the model viewed a file, paths outside the stores, unknown stores, a bad key, another
workspace's store), every write a memory version of the API key."""

from __future__ import annotations

import asyncio
import os
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, List

from compat_lib import check, eq, unique
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.client.subscriptions import ResourcesListChanged, ResourceUpdated, listen
from mcp_types import ResourceListChangedNotification, ResourceUpdatedNotification

TOOLS = {"view", "create", "str_replace", "insert", "delete", "rename", "history"}

# `mnemo mcp` serves the stores named on its command line; `/mcp` every store of the caller's
# workspace. Each `both_*` check runs over both (the `test_*` pairs at the end).


@asynccontextmanager
async def mcp_session(
    fx: Any,
    stores: List[str],
    *extra: str,
    on_message: Any = None,
    modern: bool = False,
    transport: str = "stdio",
    api_key: Any = None,
) -> AsyncIterator[ClientSession]:
    """A client session with the server: the `initialize` handshake (2025-11-25, what most
    clients speak today), or with `modern` the `server/discover` of 2026-07-28."""
    key = api_key or fx.api_key
    if transport == "http":
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {key}"})
        streams = streamable_http_client(fx.base_url.rstrip("/") + "/mcp", http_client=http)
    else:
        args = ["mcp"] + [a for s in stores for a in ("--store", s)] + list(extra)
        env = dict(os.environ, ANTHROPIC_BASE_URL=fx.base_url, ANTHROPIC_API_KEY=key)
        streams = stdio_client(StdioServerParameters(command=os.environ["MNEMO_BIN"], args=args, env=env))
    async with streams as (read, write, *_):
        async with ClientSession(read, write, message_handler=on_message) as session:
            if modern:
                await session.discover()
            else:
                await session.initialize()
            yield session


def run(coro: Any) -> None:
    """Runs a test's session; a failure inside the SDK's task group is raised as itself."""
    try:
        asyncio.run(coro)
    except BaseExceptionGroup as group:
        leaf: BaseException = group
        while isinstance(leaf, BaseExceptionGroup):
            leaf = leaf.exceptions[0]
        raise leaf from None


def text_of(result: Any) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


async def call(session: ClientSession, tool: str, **args: Any) -> str:
    result = await session.call_tool(tool, args)
    check(not result.is_error, f"{tool} {args} failed: {text_of(result)}")
    return text_of(result)


async def refused(session: ClientSession, tool: str, **args: Any) -> str:
    result = await session.call_tool(tool, args)
    check(result.is_error, f"{tool} {args} should be refused, answered: {text_of(result)}")
    return text_of(result)


def both_tools_read_and_write_a_store(fx, transport):
    store = fx.new_store(name="Team Notes" if transport == "stdio" else unique("Team Notes"))
    folder = "/memories/" + store.name.lower().replace(" ", "-")
    fx.new_memory(store.id, "/prefs.md", "tabs, not spaces\nshort answers\n")
    fx.new_memory(store.id, "/projects/a/deep/x.md", "deep")

    async def session() -> None:
        async with mcp_session(fx, [store.id], transport=transport) as s:
            names = {t.name for t in (await s.list_tools()).tools}
            check(TOOLS <= names, f"tools: {names}")
            root = await call(s, "view", path="/memories")
            check(f"{folder}\t({store.name}, read-write)" in root, root)
            listing = await call(s, "view", path=folder)
            check(f"{folder}/prefs.md" in listing, listing)
            check(f"{folder}/projects/a/ (deeper files" in listing, listing)
            eq(await call(s, "view", path=f"{folder}/prefs.md"),
               "     1\ttabs, not spaces\n     2\tshort answers\n", "a file with line numbers")
            eq(await call(s, "view", path=f"{folder}/prefs.md", view_range=[2, -1]),
               "     2\tshort answers\n", "a range")
            await call(s, "str_replace", path=f"{folder}/prefs.md", old_str="short", new_str="brief")
            await call(s, "insert", path=f"{folder}/prefs.md", insert_line=0, insert_text="# Prefs")
            await call(s, "create", path=f"{folder}/new/idea.md", file_text="ship it\n")
            await call(s, "rename", old_path=f"{folder}/new/idea.md",
                       new_path=f"{folder}/ideas/ship.md")
            history = await call(s, "history", path=f"{folder}/prefs.md")
            check(history.startswith("3 version(s)") and "API key" in history, history)
            await call(s, "delete", path=f"{folder}/projects")
            resources = (await s.list_resources()).resources
            uris = sorted(str(r.uri) for r in resources if str(r.uri).startswith(f"mnemo://{store.id}/"))
            eq(uris, [f"mnemo://{store.id}/ideas/ship.md", f"mnemo://{store.id}/prefs.md"], "resources")
            read = await s.read_resource(f"mnemo://{store.id}/prefs.md")
            eq(read.contents[0].text, "# Prefs\ntabs, not spaces\nbrief answers\n", "resource text")

    run(session())
    by_path = {m.path: m for m in fx.list_all_memories(store.id, view="full")}
    eq(sorted(by_path), ["/ideas/ship.md", "/prefs.md"], "the store after the tools")
    eq(by_path["/prefs.md"].content, "# Prefs\ntabs, not spaces\nbrief answers\n", "the edits landed")
    versions = fx.list_all_versions(store.id)
    check(all(v.created_by.type == "api_actor" for v in versions), "every version is the API key's")


def both_refuses_what_it_must(fx, transport):
    store = fx.new_store(name=unique("mcp"))
    other = fx.new_store(name=unique("other"))
    fx.new_memory(store.id, "/f.md", "one\n")
    folder = "/memories/" + store.name.lower()

    async def session() -> None:
        async with mcp_session(fx, [store.id, other.id], transport=transport) as s:
            e = await refused(s, "str_replace", path=f"{folder}/f.md", old_str="one", new_str="two")
            check("has not been viewed" in e, e)
            await call(s, "view", path=f"{folder}/f.md")
            fx.memories.update(fx.list_all_memories(store.id)[0].id, memory_store_id=store.id, content="changed\n")
            e = await refused(s, "str_replace", path=f"{folder}/f.md", old_str="one", new_str="two")
            check("changed since you last viewed it" in e, e)
            await call(s, "view", path=f"{folder}/f.md")
            e = await refused(s, "str_replace", path=f"{folder}/f.md", old_str="nope", new_str="x")
            check("does not occur" in e, e)
            for bad, why in [("/etc/passwd", "outside /memories"), (f"{folder}/../x", "`..`"),
                             (f"{folder}/a\u0000b", "U+0000"), ("/memories/nobody/x", "in no memory store"),
                             (f"{folder}/" + "x" * 1100, "the limit is")]:
                e = await refused(s, "create", path=bad, file_text="x")
                check(why in e, f"{bad!r}: {e}")
            e = await refused(s, "rename", old_path=f"{folder}/f.md", new_path="/memories/" + other.name.lower() + "/f.md")
            check("within its store" in e, e)
        if transport == "http":
            return  # `--read-only` is the stdio server's flag; over HTTP the caller's role decides
        async with mcp_session(fx, [store.id], "--read-only") as s:
            await call(s, "view", path=f"{folder}/f.md")
            e = await refused(s, "create", path=f"{folder}/g.md", file_text="x")
            check("read-only" in e, e)

    run(session())
    eq([m.path for m in fx.list_all_memories(store.id)], ["/f.md"], "nothing refused was written")


def test_mcp_names_an_unknown_store_and_a_bad_key(fx):
    import subprocess

    for args, env_key, why in [
        (["--store", "memstore_nobody"], fx.api_key, "memory store memstore_nobody"),
        (["--store", fx.new_store().id], "sk-wrong-key-0123456789", "memory store"),
    ]:
        env = dict(os.environ, ANTHROPIC_BASE_URL=fx.base_url, ANTHROPIC_API_KEY=env_key)
        out = subprocess.run([os.environ["MNEMO_BIN"], "mcp", *args], env=env, capture_output=True, text=True,
                             stdin=subprocess.DEVNULL, timeout=30)
        check(out.returncode != 0, f"{args}: exit {out.returncode}")
        check(why in out.stderr, f"{args}: {out.stderr}")
        check(env_key not in out.stderr, "the key is not printed")


def both_subscribers_hear_of_changes_made_elsewhere(fx, transport):
    """`resources/subscribe` (what clients on 2025-11-25 send): a change made through the API by
    another client reaches the subscriber as `notifications/resources/updated`; a new or deleted
    memory as `notifications/resources/list_changed`; an unsubscribed or foreign URI tells nothing."""
    store = fx.new_store(name=unique("subs"))
    watched = fx.new_memory(store.id, "/watched.md", "v1\n")
    other = fx.new_memory(store.id, "/other.md", "x\n")
    uri = f"mnemo://{store.id}/watched.md"
    heard: "asyncio.Queue[Any]" = asyncio.Queue()

    async def on_message(message: Any) -> None:
        if isinstance(message, (ResourceUpdatedNotification, ResourceListChangedNotification)):
            await heard.put(message)

    async def next_note() -> Any:
        return await asyncio.wait_for(heard.get(), timeout=15)

    async def session() -> None:
        async with mcp_session(fx, [store.id], on_message=on_message, transport=transport) as s:
            await s.subscribe_resource(uri)
            fx.memories.update(other.id, memory_store_id=store.id, content="y\n")
            fx.memories.update(watched.id, memory_store_id=store.id, content="v2\n")
            note = await next_note()
            check(isinstance(note, ResourceUpdatedNotification), f"first the update, not {note}")
            eq(str(note.params.uri), uri, "only the watched memory's change is told")
            fx.new_memory(store.id, "/new.md", "n\n")
            check(isinstance(await next_note(), ResourceListChangedNotification), "a new memory changes the list")
            await s.unsubscribe_resource(uri)
            fx.memories.update(watched.id, memory_store_id=store.id, content="v3\n")
            fx.memories.delete(other.id, memory_store_id=store.id)
            note = await next_note()
            check(isinstance(note, ResourceListChangedNotification), f"after unsubscribing only the list: {note}")
            e = None
            try:
                await s.subscribe_resource("mnemo://memstore_nobody/x.md")
            except Exception as err:  # noqa: BLE001 - the SDK raises its error type for the JSON-RPC error
                e = err
            check(e is not None, "a URI of no served store is refused")

    run(session())


def both_listen_streams_changes_on_the_2026_protocol(fx, transport):
    """`subscriptions/listen` (2026-07-28): the stream is told of a subscribed resource's update
    and deletion, and of the list changing; a URI of no served store is left out of the filter."""
    store = fx.new_store(name=unique("listen"))
    watched = fx.new_memory(store.id, "/watched.md", "v1\n")
    other = fx.new_memory(store.id, "/other.md", "x\n")
    uri = f"mnemo://{store.id}/watched.md"

    async def session() -> None:
        async with mcp_session(fx, [store.id], modern=True, transport=transport) as s:
            eq(s.protocol_version, "2026-07-28", "the modern protocol")
            eq(await call(s, "view", path=f"/memories/{store.name.lower()}/watched.md"), "     1\tv1\n", "tools too")
            async with listen(s, resource_subscriptions=[uri, "mnemo://memstore_nobody/x"],
                              resources_list_changed=True) as events:
                async def next_event() -> Any:
                    return await asyncio.wait_for(events.__anext__(), timeout=15)

                fx.memories.update(other.id, memory_store_id=store.id, content="y\n")
                fx.memories.update(watched.id, memory_store_id=store.id, content="v2\n")
                eq(await next_event(), ResourceUpdated(uri=uri), "only the subscribed memory's update")
                fx.memories.delete(watched.id, memory_store_id=store.id)
                eq(await next_event(), ResourceUpdated(uri=uri), "its deletion")
                eq(await next_event(), ResourcesListChanged(), "which changes the list")

    run(session())


def test_mcp_over_http_serves_the_callers_workspace_only(fx):
    """`/mcp` acts as the key it is given: without one, or with an unknown one, nothing starts
    (401); a key of another workspace sees that workspace's stores and never this one's, not
    even by URI; every write is a version of the key that made it."""
    import json
    import urllib.error
    import urllib.request

    url = fx.base_url.rstrip("/") + "/mcp"
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "compat", "version": "1"}}}
    accept = {"Accept": "application/json, text/event-stream"}
    for headers, why in [({}, "no key"), ({"Authorization": "Bearer sk-mnemo-nobody-0123456789abcdef0123"}, "a bad key")]:
        request = urllib.request.Request(url, data=json.dumps(init).encode(), method="POST",
                                         headers={**accept, "Content-Type": "application/json", **headers})
        try:
            urllib.request.urlopen(request, timeout=30)
            check(False, f"{why}: answered 2xx")
        except urllib.error.HTTPError as answer:
            eq(answer.code, 401, why)
            eq(answer.headers.get("www-authenticate"), "Bearer", f"{why}: MCP clients learn to authenticate")
            eq(json.loads(answer.read())["error"]["type"], "authentication_error", why)

    from test_organization import mint_key

    ours = fx.new_store(name=unique("ours"))
    fx.new_memory(ours.id, "/secret.md", "ours only\n")
    ws = fx.admin_client().organization.workspaces.create(name=unique("mcp-team"))
    team_key = mint_key(fx, ws.id, "mcp compat")["key"]
    team = fx.make_client(api_key=team_key)
    theirs = team.beta.memory_stores.create(name=unique("theirs"))

    async def session() -> None:
        async with mcp_session(fx, [], transport="http", api_key=team_key) as s:
            root = await call(s, "view", path="/memories")
            check(theirs.name in root and ours.name not in root, f"only the team's stores: {root}")
            e = await refused(s, "view", path=f"/memories/{ours.name}/secret.md")
            check("in no memory store" in e, e)
            uris = [str(r.uri) for r in (await s.list_resources()).resources]
            check(not any(ours.id in u for u in uris), f"no resource of another workspace: {uris}")
            failed = None
            try:
                await s.read_resource(f"mnemo://{ours.id}/secret.md")
            except Exception as err:  # noqa: BLE001 - the SDK raises its error type for the JSON-RPC error
                failed = err
            check(failed is not None and ours.id in str(failed), f"another workspace's memory is unknown: {failed}")
            await call(s, "create", path=f"/memories/{theirs.name}/note.md", file_text="team note\n")

    run(session())
    versions = list(team.beta.memory_stores.memory_versions.list(theirs.id))
    eq([v.created_by.type for v in versions], ["api_actor"], "written as the team's key")


def test_mcp_tools_read_and_write_a_store(fx):
    both_tools_read_and_write_a_store(fx, "stdio")


def test_mcp_http_tools_read_and_write_a_store(fx):
    both_tools_read_and_write_a_store(fx, "http")

def test_mcp_refuses_what_it_must(fx):
    both_refuses_what_it_must(fx, "stdio")


def test_mcp_http_refuses_what_it_must(fx):
    both_refuses_what_it_must(fx, "http")

def test_mcp_subscribers_hear_of_changes_made_elsewhere(fx):
    both_subscribers_hear_of_changes_made_elsewhere(fx, "stdio")


def test_mcp_http_subscribers_hear_of_changes_made_elsewhere(fx):
    both_subscribers_hear_of_changes_made_elsewhere(fx, "http")

def test_mcp_listen_streams_changes_on_the_2026_protocol(fx):
    both_listen_streams_changes_on_the_2026_protocol(fx, "stdio")


def test_mcp_http_listen_streams_changes_on_the_2026_protocol(fx):
    both_listen_streams_changes_on_the_2026_protocol(fx, "http")
