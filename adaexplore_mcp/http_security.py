"""Streamable HTTP with the safety catches on: bearer token, DNS-rebinding protection, body limit.

What the SDK already does, and is reused here rather than re-implemented:
- `TransportSecuritySettings` (mcp.server.transport_security): Host/Origin validation inside the
  /mcp handler (421 for a foreign Host, 403 for a foreign Origin). The SDK only switches it on by
  itself for a loopback host; here it is always on, with the allowed values derived from host:port.
- `max_request_body_size` of `MCPServer.streamable_http_app`: bodies over the limit get 413.

What this module adds:
- a static bearer token (`ADAEXPLORE_TOKEN` or `--token`), compared with `hmac.compare_digest`,
  checked before the request reaches the MCP transport (401 JSON otherwise);
- a refusal to start on a non-loopback address without a token.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import os
import re
import socket
from collections.abc import Iterable
from typing import Any

from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp, Receive, Scope, Send

MAX_REQUEST_BODY_BYTES = 4 * 1024 * 1024
# Further Host names clients use (comma-separated), e.g. "gpu-box.lan,gpu-box.lan:443" behind a proxy.
ALLOWED_HOSTS_ENV = "ADAEXPLORE_ALLOWED_HOSTS"
MCP_PATH = "/mcp"
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


class InsecureBindError(RuntimeError):
    """Serving HTTP on a non-loopback address without a token; the message says how to fix it."""


def is_loopback(host: str) -> bool:
    """True for localhost and any loopback address (127.0.0.0/8, ::1)."""
    name = host.strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


_WITH_PORT = re.compile(r"^(\[[^\]]+\]|[^:\[\]]+):(\d+|\*)$")


def _host_port(host: str, port: int) -> str:
    """"name:port" as a Host header carries it (IPv6 in brackets; port 0 means any port)."""
    name = host.strip("[]")
    shown = f"[{name}]" if ":" in name else name
    return f"{shown}:{port}" if port else f"{shown}:*"


def security_settings(host: str, port: int, extra_hosts: Iterable[str] = ()) -> TransportSecuritySettings:
    """DNS-rebinding protection on, allowing the bind address and the localhost names at this port.

    `extra_hosts` are further names clients use to reach the server (e.g. the machine's name when
    bound to 0.0.0.0), as "name" (this port) or "name:port".
    """
    wildcard = host.strip("[]") in ("0.0.0.0", "::", "")
    names = ([] if wildcard else [host]) + list(LOOPBACK_NAMES)
    if wildcard:
        names += [socket.gethostname(), socket.getfqdn()]
    allowed_hosts: list[str] = []
    for name in [*names, *extra_hosts]:
        value = name if _WITH_PORT.match(name) else _host_port(name, port)
        if value not in allowed_hosts:
            allowed_hosts.append(value)
    allowed_origins = [f"{scheme}://{h}" for h in allowed_hosts for scheme in ("http", "https")]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=allowed_hosts,
        allowed_origins=allowed_origins,
    )


class BearerTokenMiddleware:
    """Every HTTP request must carry `Authorization: Bearer <token>`; otherwise 401 JSON."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        if not token:
            raise ValueError("the bearer token must not be empty")
        self.app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # lifespan (and websocket, unused) pass through
            await self.app(scope, receive, send)
            return
        given = b""
        for key, value in scope.get("headers", []):
            if key == b"authorization":
                given = value
                break
        if not hmac.compare_digest(given, self._expected):
            await _json_error(send, 401, "missing or wrong bearer token", {"www-authenticate": "Bearer"})
            return
        await self.app(scope, receive, send)


async def _json_error(send: Send, status: int, message: str, headers: dict[str, str] | None = None) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32001, "message": message}}).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


def check_bind(host: str, token: str | None) -> None:
    """Raise InsecureBindError for a non-loopback host without a token."""
    if not token and not is_loopback(host):
        raise InsecureBindError(
            f"refusing to serve HTTP on {host!r} without a token: anyone who can reach this address could "
            "run code on this machine's GPU. Set ADAEXPLORE_TOKEN (or pass --token) to a long random secret, "
            "e.g. `export ADAEXPLORE_TOKEN=$(python -c 'import secrets; print(secrets.token_urlsafe(32))')`, "
            "and have clients send `Authorization: Bearer $ADAEXPLORE_TOKEN`; or bind to 127.0.0.1."
        )


def build_http_app(
    server: Any,
    host: str,
    port: int,
    token: str | None,
    *,
    extra_hosts: Iterable[str] | None = None,
    max_body_bytes: int = MAX_REQUEST_BODY_BYTES,
) -> ASGIApp:
    """The streamable HTTP app of `server` (an MCPServer) at /mcp, with token, Host/Origin and size checks.

    `extra_hosts` (default: $ADAEXPLORE_ALLOWED_HOSTS, comma-separated) are further Host names
    clients may use. Raises InsecureBindError when `host` is not loopback and no token is given.
    """
    check_bind(host, token)
    if extra_hosts is None:
        extra_hosts = [h.strip() for h in os.environ.get(ALLOWED_HOSTS_ENV, "").split(",") if h.strip()]
    app: ASGIApp = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        max_request_body_size=max_body_bytes,
        transport_security=security_settings(host, port, extra_hosts),
        host=host,
    )
    if token:
        app = BearerTokenMiddleware(app, token)
    return app


async def serve_http(server: Any, host: str, port: int, token: str | None, *, log_level: str = "info") -> None:
    """Serve `server` over streamable HTTP at http://host:port/mcp until cancelled (uses uvicorn)."""
    import sys

    import uvicorn

    app = build_http_app(server, host, port, token)
    config = uvicorn.Config(app, host=host.strip("[]"), port=port, log_level=log_level, server_header=False)
    auth = "bearer token required" if token else "no token (loopback only)"
    print(f"adaexplore-mcp: serving streamable HTTP at http://{_host_port(host, port)}{MCP_PATH} ({auth})",
          file=sys.stderr, flush=True)
    await uvicorn.Server(config).serve()
