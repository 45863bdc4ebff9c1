"""Single sign-on with a real OpenID Provider (issue 33 items 3–4): the npm package
`oidc-provider` (browser/oidc/provider.mjs, installed by scripts/test into target/browser-oidc)
on `localhost` — another site than mnemo's 127.0.0.1, so the provider's redirect back is
cross-site as in production — and a `mnemo serve` of this module's own with `--oidc-*` flags.

Covered: signing in through the provider's own login page, the role from the group, a group
changed at the provider changing the role at the next sign-in, a person in no mapped group
refused (and losing what they had), sign-out; the callback used twice, a mismatched `state`, a
replayed authorization code; the API with the provider's tokens, and the hostile-token list,
each answered 401 `authentication_error` with the one message of an unknown key; the Admin API
with a person's token, judged by their role in the workspace each call is about. Screenshots
`oidc-*` at 1280 and 390 px.

Skipped (reported as a failure naming the reason) when MNEMO_OIDC_PROVIDER is not set.
"""

from __future__ import annotations

import atexit
import json
import os
import secrets
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Dict, Optional, Tuple
from urllib.parse import parse_qs, urlencode, urlsplit

from selenium.webdriver.common.by import By

from console import NARROW, WIDE, Console, requested_urls, wait_for

sys.path.append(str(Path(__file__).resolve().parent.parent / "compat"))
import mnemo_serve  # noqa: E402

CLIENT_ID = "mnemo-browser"
PROVIDER_NAME = "Test IdP"
UNKNOWN_KEY = "invalid x-api-key or bearer token"
USERS = {
    "alice": {"email": "alice@example.com", "name": "Alice Dev", "groups": ["mnemo-devs"]},
    "bob": {"email": "bob@example.com", "name": "Bob Stranger", "groups": ["strangers"]},
}

_env: Dict[str, Any] = {}


def post_json(url: str, body: dict) -> Any:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST")
    request.add_header("content-type", "application/json")
    with urllib.request.urlopen(request, timeout=15) as response:
        return json.loads(response.read() or b"null")


def env(c: Console) -> Dict[str, Any]:
    """The provider and a mnemo serve with single sign-on, started once for this module."""
    if _env:
        return _env
    script = os.environ.get("MNEMO_OIDC_PROVIDER", "")
    assert script and Path(script).exists(), "MNEMO_OIDC_PROVIDER does not name browser/oidc/provider.mjs installed"
    secret = secrets.token_hex(24)
    config = {
        "client_id": CLIENT_ID,
        "client_secret": secret,
        "redirect_uris": ["http://127.0.0.1:1/console/oidc/callback"],
        "users": USERS,
        "issuer_host": "localhost",
    }
    work = c.scratch / "oidc"
    work.mkdir(parents=True, exist_ok=True)
    log = open(work / "provider.log", "w", encoding="utf-8")
    provider = subprocess.Popen(["node", script, json.dumps(config)], stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=log, text=True, start_new_session=True)
    atexit.register(provider.kill)
    line = provider.stdout.readline() if provider.stdout else ""
    assert line.startswith("{"), f"the provider did not start: {line!r}; see {work / 'provider.log'}"
    issuer = json.loads(line)["issuer"]
    server_env = dict(os.environ, MNEMO_OIDC_CLIENT_SECRET=secret)
    server = mnemo_serve.MnemoServe(
        c.binary, work / "server", "sk-oidc-" + secrets.token_hex(16), name="oidc",
        admin_key="sk-mnemo-admin-oidc-" + secrets.token_hex(16), env=server_env,
        extra=[
            "--memory-mount-root", str(work / "mnt"),
            "--oidc-issuer", issuer, "--oidc-client-id", CLIENT_ID,
            "--oidc-provider-name", PROVIDER_NAME,
            "--oidc-role", "mnemo-devs=Default:workspace_developer",
            "--oidc-role", "mnemo-readers=Default:workspace_user",
            "--oidc-role", "mnemo-leads=Default:workspace_admin",
            "--oidc-role", "mnemo-admins=admin",
        ],
    )
    server.start()
    atexit.register(server.stop)
    log_text = server.log_path.read_text(encoding="utf-8")
    assert secret not in log_text, "the client secret is in the server's log"
    callback = server.base_url.rstrip("/") + "/console/oidc/callback"
    assert callback in log_text, "the callback URL to register is printed at start"
    post_json(issuer + "/test/client", {"redirect_uris": [callback]})
    _env.update(issuer=issuer, server=server, origin=server.base_url.rstrip("/"), callback=callback)
    return _env


def admin(e: Dict[str, Any], path: str) -> Any:
    request = urllib.request.Request(e["origin"] + path)
    request.add_header("x-api-key", e["server"].admin_key)
    request.add_header("anthropic-version", "2023-06-01")
    with urllib.request.urlopen(request, timeout=15) as response:
        return json.loads(response.read())


def person(e: Dict[str, Any], email: str) -> Optional[dict]:
    users = admin(e, "/v1/organizations/users?limit=100")["data"]
    return next((u for u in users if u["email"] == email), None)


def member_role(e: Dict[str, Any], user_id: str) -> Optional[str]:
    ws = admin(e, "/v1/organizations/workspaces?include_default=true")["data"][0]["id"]
    members = admin(e, f"/v1/organizations/workspaces/{ws}/members?limit=100")["data"]
    return next((m["workspace_role"] for m in members if m["user_id"] == user_id), None)


def sign_in_with_provider(c: Console, e: Dict[str, Any], login: str, shots: str = "") -> None:
    """From a clean browser: mnemo's sign-in page, "Sign in with …", the provider's own login."""
    c.driver.get(e["origin"] + "/console")
    c.driver.delete_all_cookies()
    c.driver.get(e["issuer"] + "/.well-known/openid-configuration")
    c.driver.delete_all_cookies()
    c.driver.get(e["origin"] + "/console")
    c.expect_text(f"Sign in with {PROVIDER_NAME}")
    if shots:
        c.shot(f"oidc-{shots}-wide")
        c.resize(NARROW)
        c.driver.refresh()
        c.expect_text(f"Sign in with {PROVIDER_NAME}")
        c.shot(f"oidc-{shots}-narrow")
        c.resize(WIDE)
    c.click(f"Sign in with {PROVIDER_NAME}")
    login_field = wait_for(lambda: c.driver.find_elements(By.NAME, "login"), "the provider's login page", timeout=10)
    login_field[0].send_keys(login)
    c.driver.find_element(By.NAME, "password").send_keys("any password")
    c.driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait_for(lambda: c.driver.current_url.startswith(e["origin"]), "back at mnemo", timeout=15)


def raw_get(url: str, cookie: str = "") -> Tuple[int, Dict[str, str], str]:
    """A GET that does not follow redirects: (status, headers, body)."""

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any, **kwargs: Any) -> None:  # noqa: ARG002
            return None

    opener = urllib.request.build_opener(NoRedirect)
    request = urllib.request.Request(url)
    if cookie:
        request.add_header("cookie", cookie)
    try:
        with opener.open(request, timeout=15) as response:
            return response.status, {k.lower(): v for k, v in response.headers.items()}, response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, {k.lower(): v for k, v in err.headers.items()}, err.read().decode("utf-8", "replace")


def start_flow(e: Dict[str, Any]) -> Tuple[str, Dict[str, str]]:
    """`/console/oidc/start` outside the browser: the flow cookie and the authorization URL's query."""
    status, headers, _ = raw_get(e["origin"] + "/console/oidc/start?next=/console")
    assert status in (302, 303), status
    cookie = headers["set-cookie"].split(";")[0]
    assert "SameSite=Lax" in headers["set-cookie"] and "HttpOnly" in headers["set-cookie"], headers["set-cookie"]
    query = {k: v[0] for k, v in parse_qs(urlsplit(headers["location"]).query).items()}
    assert query["code_challenge_method"] == "S256" and query["state"] and query["nonce"], query
    return cookie, query


def test_sso_signs_in_with_the_groups_role_and_follows_group_changes(c: Console) -> None:
    e = env(c)
    sign_in_with_provider(c, e, "alice", shots="sign-in")
    c.expect_text("Sign out")
    c.shot("oidc-signed-in-wide")
    c.resize(NARROW)
    c.driver.refresh()
    c.shot("oidc-signed-in-narrow")
    c.resize(WIDE)
    alice = person(e, "alice@example.com")
    assert alice and alice["name"] == "Alice Dev" and alice["role"] == "user", alice
    assert member_role(e, alice["id"]) == "workspace_developer"
    session = next((k for k in c.driver.get_cookies() if k["name"] == "mnemo_console"), None)
    assert session and session.get("sameSite") == "Strict" and session.get("httpOnly"), session
    urls = requested_urls(c.driver)
    callbacks = [u for u in urls if u.startswith(e["callback"])]
    assert callbacks, "the browser came back through the callback"
    e["used_callback"] = callbacks[-1]
    c.click("Sign out")

    # The group changed at the provider: the next sign-in sets the new role, the old one goes.
    post_json(e["issuer"] + "/test/users", {"id": "alice", **USERS["alice"], "groups": ["mnemo-readers"]})
    sign_in_with_provider(c, e, "alice")
    c.expect_text("Sign out")
    assert member_role(e, alice["id"]) == "workspace_user"
    c.click("Sign out")

    # No mapped group any more: refused with a plain sentence, and the role is gone.
    post_json(e["issuer"] + "/test/users", {"id": "alice", **USERS["alice"], "groups": ["strangers"]})
    sign_in_with_provider(c, e, "alice")
    c.expect_text("no group that gives access to mnemo")
    assert member_role(e, alice["id"]) is None
    post_json(e["issuer"] + "/test/users", {"id": "alice", **USERS["alice"]})


def test_a_person_in_no_mapped_group_is_refused(c: Console) -> None:
    e = env(c)
    sign_in_with_provider(c, e, "bob", shots="")
    c.expect_text("no group that gives access to mnemo")
    c.shot("oidc-refused-wide")
    c.resize(NARROW)
    c.shot("oidc-refused-narrow")
    c.resize(WIDE)
    assert person(e, "bob@example.com") is None, "nobody is created for a refused sign-in"


def test_callbacks_are_used_once_and_match_their_sign_in(c: Console) -> None:
    e = env(c)
    # The callback the browser already used, again: its sign-in is gone.
    used = e.get("used_callback") or (e["callback"] + "?code=x&state=y")
    status, _, body = raw_get(used)
    assert status == 403 and "expired or was already used" in body, (status, body[:300])
    # A fresh sign-in whose callback carries another state: refused.
    cookie, _ = start_flow(e)
    status, headers, body = raw_get(e["callback"] + "?" + urlencode({"code": "x", "state": "forged"}), cookie)
    assert status == 403 and "does not match" in body, (status, body[:300])
    assert "Max-Age=0" in headers.get("set-cookie", ""), "the flow cookie is cleared"
    # A replayed code under a fresh sign-in's own state: the provider refuses to redeem it again.
    code = parse_qs(urlsplit(used).query).get("code", ["x"])[0]
    cookie, query = start_flow(e)
    status, _, body = raw_get(e["callback"] + "?" + urlencode({"code": code, "state": query["state"]}), cookie)
    assert status == 403 and "could not be verified" in body, (status, body[:300])


def api(e: Dict[str, Any], method: str, path: str, token: str, body: Optional[dict] = None) -> Tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(e["origin"] + path, data=data, method=method)
    request.add_header("authorization", "Bearer " + token)
    request.add_header("anthropic-version", "2023-06-01")
    if data is not None:
        request.add_header("content-type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=15) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"null")


def mcp_call(e: Dict[str, Any], token: str, method: str, params: dict, session: Optional[str] = None) -> Tuple[Any, str]:
    """One JSON-RPC request to `/mcp` with the token: its result and the MCP session id."""
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
    request = urllib.request.Request(e["origin"] + "/mcp", data=body, method="POST")
    request.add_header("authorization", "Bearer " + token)
    request.add_header("content-type", "application/json")
    request.add_header("accept", "application/json, text/event-stream")
    if session:
        request.add_header("mcp-session-id", session)
        request.add_header("mcp-protocol-version", "2025-11-25")
    with urllib.request.urlopen(request, timeout=15) as response:
        session = response.headers.get("mcp-session-id") or session or ""
        text = response.read().decode()
    for line in text.splitlines():
        if line.startswith("data:") and line[5:].strip():
            message = json.loads(line[5:])
            if message.get("id") == 1:
                assert "error" not in message, message
                return message["result"], session
    raise AssertionError(f"no answer in {text!r}")


def mint(e: Dict[str, Any], **body: Any) -> str:
    return post_json(e["issuer"] + "/test/mint", body)["token"]


def test_the_api_takes_the_providers_tokens_and_refuses_hostile_ones(c: Console) -> None:
    e = env(c)
    now = int(time.time())
    alice = {"sub": "alice", "email": "alice@example.com", "name": "Alice Dev", "groups": ["mnemo-devs"]}
    token = mint(e, claims=alice)
    status, stores = api(e, "GET", "/v1/memory_stores", token)
    assert status == 200, (status, stores)
    status, made = api(e, "POST", "/v1/memory_stores", token, {"name": "made-by-alice"})
    assert status == 200, (status, made)
    # The MCP server at /mcp takes the same token, and writes as the person.
    _, session = mcp_call(e, token, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                                   "clientInfo": {"name": "sso-test", "version": "1"}})
    result, _ = mcp_call(e, token, "tools/call", {"name": "create", "arguments": {
        "path": "/memories/made-by-alice/from-mcp.md", "file_text": "alice via mcp\n"}}, session)
    assert not result.get("isError"), result
    status, versions = api(e, "GET", f"/v1/memory_stores/{made['id']}/memory_versions", token)
    assert status == 200, (status, versions)
    assert [v["created_by"]["type"] for v in versions["data"]] == ["user_actor"], versions
    # A reader's token reads through /mcp and is refused writes there, as on the API.
    reader = mint(e, claims={"sub": "rita", "email": "rita@example.com", "name": "Rita Reader",
                             "groups": ["mnemo-readers"]})
    _, reading = mcp_call(e, reader, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                                    "clientInfo": {"name": "sso-test", "version": "1"}})
    seen, _ = mcp_call(e, reader, "tools/call", {"name": "view", "arguments": {
        "path": "/memories/made-by-alice/from-mcp.md"}}, reading)
    assert not seen.get("isError") and "alice via mcp" in seen["content"][0]["text"], seen
    refused, _ = mcp_call(e, reader, "tools/call", {"name": "create", "arguments": {
        "path": "/memories/made-by-alice/rita.md", "file_text": "no\n"}}, reading)
    assert refused.get("isError"), refused
    # The API keys keep working beside the tokens.
    assert api(e, "GET", "/v1/memory_stores", e["server"].api_key)[0] == 200
    hostile = {
        "expired": mint(e, claims={**alice, "exp": now - 3600, "iat": now - 7200}),
        "not yet valid": mint(e, claims={**alice, "nbf": now + 3600}),
        "wrong audience": mint(e, claims={**alice, "aud": "another-client"}),
        "wrong issuer": mint(e, claims={**alice, "iss": "http://127.0.0.1:9/evil"}),
        "bad signature": mint(e, claims=alice, key="stranger", kid=json.loads(
            __import__("base64").urlsafe_b64decode(token.split(".")[0] + "==")
        )["kid"]),
        "alg none": mint(e, claims=alice, alg="none"),
        "HS256 with the public key": mint(e, claims=alice, alg="HS256-public"),
        "unknown kid": mint(e, claims=alice, key="stranger"),
        "opaque": "2YotnFZFEjr1zCsicMWpAA",
        "no mapped group": mint(e, claims={**alice, "groups": ["strangers"]}),
    }
    for why, bad in hostile.items():
        status, body = api(e, "GET", "/v1/memory_stores", bad)
        assert status == 401, f"{why}: {status} {body}"
        assert body["error"]["type"] == "authentication_error", f"{why}: {body}"
        assert body["error"]["message"] == UNKNOWN_KEY, f"{why}: {body}"
    # The key is rotated at the provider: the new key's tokens verify (the JWKS is refetched
    # once its minimum interval has passed), the rotated-out key's are refused.
    post_json(e["issuer"] + "/test/rotate", {})
    time.sleep(11)
    status, _ = api(e, "GET", "/v1/memory_stores", mint(e, claims=alice))
    assert status == 200, status
    status, body = api(e, "GET", "/v1/memory_stores", mint(e, claims=alice, key="retired"))
    assert status == 401 and body["error"]["message"] == UNKNOWN_KEY, (status, body)


def test_a_persons_token_on_the_admin_api_acts_by_their_role_in_each_workspace(c: Console) -> None:
    """Spec §8.4/§8.6: a developer mints their workspace's API keys, a workspace admin manages
    its members and rate limits, with their own token; a workspace they are not in is unknown to
    them, and the organization's own operations stay an org admin's."""
    e = env(c)
    default = admin(e, "/v1/organizations/workspaces?include_default=true")["data"][0]["id"]
    request = urllib.request.Request(e["origin"] + "/v1/organizations/workspaces", method="POST",
                                     data=json.dumps({"name": "Elsewhere"}).encode())
    request.add_header("x-api-key", e["server"].admin_key)
    request.add_header("content-type", "application/json")
    with urllib.request.urlopen(request, timeout=15) as response:
        elsewhere = json.loads(response.read())["id"]
    dev = mint(e, claims={"sub": "dana", "email": "dana@example.com", "name": "Dana Dev",
                          "groups": ["mnemo-devs"]})
    lead = mint(e, claims={"sub": "lee", "email": "lee@example.com", "name": "Lee Lead",
                           "groups": ["mnemo-leads"]})
    reader = mint(e, claims={"sub": "rae", "email": "rae@example.com", "name": "Rae Reader",
                             "groups": ["mnemo-readers"]})

    # A developer mints a key of their workspace, named as its maker; the key works.
    status, made = api(e, "GET", "/v1/organizations/me", dev)
    assert status == 200, (status, made)
    status, made = api(e, "POST", "/v1/organizations/api_keys", dev, {"name": "dana's script", "workspace_id": default})
    assert status == 200, (status, made)
    dana = person(e, "dana@example.com")
    assert made["created_by"] == {"id": dana["id"], "type": "user"}, made
    assert api(e, "GET", "/v1/memory_stores", made["key"])[0] == 200
    status, listed = api(e, "GET", f"/v1/organizations/api_keys?workspace_id={default}&limit=100", dev)
    assert status == 200 and made["id"] in [k["id"] for k in listed["data"]], (status, listed)
    status, renamed = api(e, "POST", f"/v1/organizations/api_keys/{made['id']}", dev, {"name": "renamed"})
    assert status == 200 and renamed["name"] == "renamed", (status, renamed)
    # All workspaces' keys at once, or a workspace they are not in: not theirs to see.
    status, body = api(e, "GET", "/v1/organizations/api_keys", dev)
    assert status == 403 and "workspace_id" in body["error"]["message"], (status, body)
    status, body = api(e, "POST", "/v1/organizations/api_keys", dev, {"name": "x", "workspace_id": elsewhere})
    assert status == 404 and body["error"]["type"] == "not_found_error", (status, body)
    assert elsewhere not in json.dumps(body) or "not found" in body["error"]["message"], body
    # A key of that workspace, minted by the admin key, is as unknown to them as a made-up one.
    request = urllib.request.Request(e["origin"] + "/v1/organizations/api_keys", method="POST",
                                     data=json.dumps({"name": "theirs", "workspace_id": elsewhere}).encode())
    request.add_header("x-api-key", e["server"].admin_key)
    request.add_header("content-type", "application/json")
    with urllib.request.urlopen(request, timeout=15) as response:
        theirs = json.loads(response.read())["id"]
    status, hidden = api(e, "GET", f"/v1/organizations/api_keys/{theirs}", dev)
    unknown = api(e, "GET", "/v1/organizations/api_keys/apikey_0AAAAAAAAAAAAAAAAAAAAA", dev)
    assert status == 404 and unknown[0] == 404, (status, hidden, unknown)
    assert hidden["error"]["message"].replace(theirs, "ID") == unknown[1]["error"]["message"].replace(
        "apikey_0AAAAAAAAAAAAAAAAAAAAA", "ID"), (hidden, unknown)
    # A developer does not manage members; the organization is an org admin's.
    status, body = api(e, "GET", f"/v1/organizations/workspaces/{default}/members", dev)
    assert status == 403 and "workspace_developer" in body["error"]["message"], (status, body)
    assert api(e, "POST", "/v1/organizations/workspaces", dev, {"name": "mine"})[0] == 403
    assert api(e, "GET", "/v1/organizations/users", dev)[0] == 403

    # A reader mints nothing.
    status, body = api(e, "POST", "/v1/organizations/api_keys", reader, {"name": "x", "workspace_id": default})
    assert status == 403 and "workspace_user" in body["error"]["message"], (status, body)

    # A workspace admin manages its members and rate limits, and nothing of another workspace.
    status, members = api(e, "GET", f"/v1/organizations/workspaces/{default}/members?limit=100", lead)
    assert status == 200 and dana["id"] in [m["user_id"] for m in members["data"]], (status, members)
    status, one = api(e, "GET", f"/v1/organizations/workspaces/{default}/members/{dana['id']}", lead)
    assert status == 200 and one["workspace_role"] == "workspace_developer", (status, one)
    status, limits = api(e, "GET", f"/v1/organizations/workspaces/{default}/rate_limits", lead)
    assert status == 200, (status, limits)
    status, body = api(e, "GET", f"/v1/organizations/workspaces/{elsewhere}/members", lead)
    assert status == 404 and body["error"]["type"] == "not_found_error", (status, body)
    status, body = api(e, "POST", f"/v1/organizations/workspaces/{elsewhere}/members", lead,
                       {"user_id": dana["id"], "workspace_role": "workspace_user"})
    assert status == 404, (status, body)
    assert api(e, "GET", "/v1/organizations/rate_limits", lead)[0] == 403


def test_a_person_posts_the_users_side_of_a_session_with_their_token(c: Console) -> None:
    """A developer's token sends a message to a session and is named as its poster; the agent's
    side stays an API key's or the server's."""
    e = env(c)
    key = e["server"].api_key
    environment = api(e, "POST", "/v1/environments", key, {"name": "people", "config": {"type": "self_hosted"}})[1]
    agent = api(e, "POST", "/v1/agents", key, {"name": "helper", "model": "none"})[1]
    status, session = api(e, "POST", "/v1/sessions", key, {"agent": agent["id"], "environment_id": environment["id"]})
    assert status == 200, (status, session)
    dev = mint(e, claims={"sub": "dana", "email": "dana@example.com", "name": "Dana Dev", "groups": ["mnemo-devs"]})
    message = {"type": "user.message", "content": [{"type": "text", "text": "hello from dana"}]}
    status, sent = api(e, "POST", f"/v1/sessions/{session['id']}/events", dev, {"events": [message]})
    assert status == 200, (status, sent)
    dana = person(e, "dana@example.com")
    status, log = api(e, "GET", f"/v1/sessions/{session['id']}/events?limit=100", dev)
    assert status == 200, (status, log)
    posted = [ev for ev in log["data"] if ev["type"] == "user.message"]
    assert posted and posted[0].get("posted_by") == {"type": "user_actor", "user_id": dana["id"]}, posted
    status, body = api(e, "POST", f"/v1/sessions/{session['id']}/events", dev,
                       {"events": [{"type": "agent.message", "content": []}]})
    assert status == 403 and "user's side" in body["error"]["message"], (status, body)
    # A reader sees no transcripts, so posts none either.
    reader = mint(e, claims={"sub": "rae", "email": "rae@example.com", "name": "Rae Reader", "groups": ["mnemo-readers"]})
    assert api(e, "POST", f"/v1/sessions/{session['id']}/events", reader, {"events": [message]})[0] == 403
