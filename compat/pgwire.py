"""A minimal PostgreSQL client (standard library only) for the suite's housekeeping.

The suite talks to mnemo through the SDK; in PostgreSQL mode the runner also needs to check
that the database answers and to drop the schemas it gave its servers.  This module speaks
just enough of the frontend/backend protocol (version 3) for that: a TCP connection without
TLS, trust / cleartext / MD5 / SCRAM-SHA-256 authentication, and simple queries whose rows come
back as text.  It is not used to inspect mnemo's tables: tests judge the server by its API.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
import socket
import struct
import urllib.parse
from typing import Dict, List, Optional, Tuple


class PgError(Exception):
    pass


def parse_url(url: str) -> Dict[str, str]:
    """`postgres[ql]://USER[:PASS]@HOST[:PORT]/DB[?…]` -> user, password, host, port, database."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("postgres", "postgresql"):
        raise PgError(f"not a postgres:// URL: {url!r}")
    return {
        "user": urllib.parse.unquote(parts.username or os.environ.get("USER", "postgres")),
        "password": urllib.parse.unquote(parts.password or ""),
        "host": parts.hostname or "127.0.0.1",
        "port": str(parts.port or 5432),
        "database": urllib.parse.unquote(parts.path.lstrip("/")) or urllib.parse.unquote(parts.username or "postgres"),
    }


def quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


_IDENT = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def is_plain_ident(name: str) -> bool:
    return _IDENT.match(name) is not None


class Connection:
    def __init__(self, url: str, timeout: float = 10.0) -> None:
        cfg = parse_url(url)
        self._password = cfg["password"]
        self._user = cfg["user"]
        self._sock = socket.create_connection((cfg["host"], int(cfg["port"])), timeout=timeout)
        self._buf = b""
        params = b"".join(
            k.encode() + b"\0" + v.encode() + b"\0"
            for k, v in (("user", cfg["user"]), ("database", cfg["database"]), ("application_name", "mnemo-compat"))
        ) + b"\0"
        body = struct.pack("!i", 196608) + params
        self._sock.sendall(struct.pack("!i", len(body) + 4) + body)
        self._authenticate()

    # -- framing ------------------------------------------------------------------------

    def _read_exact(self, n: int) -> bytes:
        while len(self._buf) < n:
            chunk = self._sock.recv(65536)
            if not chunk:
                raise PgError("the server closed the connection")
            self._buf += chunk
        out, self._buf = self._buf[:n], self._buf[n:]
        return out

    def _message(self) -> Tuple[bytes, bytes]:
        head = self._read_exact(5)
        kind, length = head[:1], struct.unpack("!i", head[1:])[0]
        return kind, self._read_exact(length - 4)

    def _send(self, kind: bytes, payload: bytes) -> None:
        self._sock.sendall(kind + struct.pack("!i", len(payload) + 4) + payload)

    @staticmethod
    def _error_text(payload: bytes) -> str:
        fields = {}
        for part in payload.split(b"\0"):
            if part:
                fields[part[:1].decode()] = part[1:].decode("utf-8", "replace")
        return f"{fields.get('S', 'ERROR')} {fields.get('C', '')}: {fields.get('M', '')}".strip()

    # -- authentication -----------------------------------------------------------------

    def _authenticate(self) -> None:
        scram: Optional[Dict[str, str]] = None
        while True:
            kind, payload = self._message()
            if kind == b"E":
                raise PgError(self._error_text(payload))
            if kind == b"R":
                code = struct.unpack("!i", payload[:4])[0]
                if code == 0:
                    continue
                if code == 3:  # cleartext
                    self._send(b"p", self._password.encode() + b"\0")
                elif code == 5:  # MD5
                    salt = payload[4:8]
                    inner = hashlib.md5((self._password + self._user).encode()).hexdigest()
                    outer = hashlib.md5(inner.encode() + salt).hexdigest()
                    self._send(b"p", b"md5" + outer.encode() + b"\0")
                elif code == 10:  # SASL
                    mechanisms = [m.decode() for m in payload[4:].split(b"\0") if m]
                    if "SCRAM-SHA-256" not in mechanisms:
                        raise PgError(f"unsupported SASL mechanisms {mechanisms}")
                    nonce = base64.b64encode(os.urandom(18)).decode()
                    first_bare = f"n=,r={nonce}"
                    scram = {"nonce": nonce, "first_bare": first_bare}
                    msg = ("n,," + first_bare).encode()
                    self._send(b"p", b"SCRAM-SHA-256\0" + struct.pack("!i", len(msg)) + msg)
                elif code == 11:  # SASL continue
                    assert scram is not None
                    server_first = payload[4:].decode()
                    attrs = dict(kv.split("=", 1) for kv in server_first.split(","))
                    if not attrs["r"].startswith(scram["nonce"]):
                        raise PgError("SCRAM: the server's nonce does not extend ours")
                    salted = hashlib.pbkdf2_hmac(
                        "sha256", self._password.encode(), base64.b64decode(attrs["s"]), int(attrs["i"])
                    )
                    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
                    stored_key = hashlib.sha256(client_key).digest()
                    final_bare = f"c=biws,r={attrs['r']}"
                    auth_msg = f"{scram['first_bare']},{server_first},{final_bare}".encode()
                    signature = hmac.new(stored_key, auth_msg, "sha256").digest()
                    proof = bytes(a ^ b for a, b in zip(client_key, signature))
                    self._send(b"p", f"{final_bare},p={base64.b64encode(proof).decode()}".encode())
                elif code == 12:  # SASL final
                    continue
                else:
                    raise PgError(f"unsupported authentication request {code}")
            elif kind == b"Z":
                return
            # S (parameter status), K (key data), N (notice): nothing to do

    # -- queries ------------------------------------------------------------------------

    def query(self, sql: str) -> List[List[Optional[str]]]:
        """Runs `sql` (one or more statements); returns the rows of the last result as text."""
        self._send(b"Q", sql.encode() + b"\0")
        rows: List[List[Optional[str]]] = []
        error: Optional[str] = None
        while True:
            kind, payload = self._message()
            if kind == b"T":
                rows = []
            elif kind == b"D":
                n = struct.unpack("!h", payload[:2])[0]
                pos, row = 2, []
                for _ in range(n):
                    size = struct.unpack("!i", payload[pos : pos + 4])[0]
                    pos += 4
                    if size < 0:
                        row.append(None)
                    else:
                        row.append(payload[pos : pos + size].decode("utf-8", "replace"))
                        pos += size
                rows.append(row)
            elif kind == b"E":
                error = self._error_text(payload)
            elif kind == b"Z":
                if error is not None:
                    raise PgError(error)
                return rows

    def close(self) -> None:
        try:
            self._send(b"X", b"")
        except OSError:
            pass
        self._sock.close()

    def __enter__(self) -> "Connection":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def query(url: str, sql: str, timeout: float = 10.0) -> List[List[Optional[str]]]:
    with Connection(url, timeout) as conn:
        return conn.query(sql)
