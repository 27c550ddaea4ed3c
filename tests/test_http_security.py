"""The HTTP surface refuses what it should: no token, wrong token, foreign Host, huge bodies, open binds."""

from __future__ import annotations

import json

import pytest
from mcp.server import MCPServer
from starlette.testclient import TestClient

from adaexplore_mcp.http_security import (
    InsecureBindError,
    build_http_app,
    is_loopback,
    security_settings,
)

TOKEN = "s3cret-token-for-tests"
PORT = 8765
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "pytest", "version": "0"},
    },
}


def _server() -> MCPServer:
    server = MCPServer("http-security-test")

    @server.tool()
    def echo(text: str) -> str:
        """Return the text."""
        return text

    return server


def _client(host: str = "127.0.0.1", token: str | None = None, **kw) -> TestClient:
    app = build_http_app(_server(), host, PORT, token, **kw)
    return TestClient(app, base_url=f"http://127.0.0.1:{PORT}")


def _post(client: TestClient, body: object = INITIALIZE, headers: dict[str, str] | None = None, **kw):
    all_headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    all_headers.update(headers or {})
    content = body if isinstance(body, (bytes, str)) else json.dumps(body)
    return client.post("/mcp", content=content, headers=all_headers, **kw)


def test_a_request_without_a_token_gets_401_json_when_a_token_is_set():
    with _client(token=TOKEN) as client:
        response = _post(client)
    assert response.status_code == 401
    assert response.headers["content-type"].startswith("application/json")
    assert "token" in response.json()["error"]["message"]
    assert response.headers["www-authenticate"] == "Bearer"


def test_a_wrong_token_gets_401():
    with _client(token=TOKEN) as client:
        assert _post(client, headers={"authorization": "Bearer nope"}).status_code == 401
        assert _post(client, headers={"authorization": TOKEN}).status_code == 401
        assert _post(client, headers={"authorization": f"Basic {TOKEN}"}).status_code == 401


def test_the_right_token_reaches_mcp_and_initialize_works():
    with _client(token=TOKEN) as client:
        response = _post(client, headers={"authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 200, response.text
    assert "serverInfo" in response.text and "http-security-test" in response.text


def test_loopback_without_a_token_serves_initialize():
    with _client() as client:
        response = _post(client)
    assert response.status_code == 200, response.text
    assert "serverInfo" in response.text


def test_a_foreign_host_header_is_rejected_as_dns_rebinding():
    with _client(token=TOKEN) as client:
        auth = {"authorization": f"Bearer {TOKEN}"}
        assert _post(client, headers={**auth, "host": "evil.example.com"}).status_code == 421
        assert _post(client, headers={**auth, "host": f"evil.example.com:{PORT}"}).status_code == 421
        assert _post(client, headers={**auth, "origin": "http://evil.example.com"}).status_code == 403
        ok = _post(client, headers={**auth, "host": f"localhost:{PORT}", "origin": f"http://localhost:{PORT}"})
        assert ok.status_code == 200, ok.text


def test_dns_rebinding_protection_holds_without_a_token_on_loopback():
    with _client() as client:
        response = _post(client, headers={"host": "evil.example.com", "origin": "http://evil.example.com"})
    assert 400 <= response.status_code < 500


def test_an_oversized_body_gets_413():
    with _client(token=TOKEN, max_body_bytes=64 * 1024) as client:
        big = json.dumps({**INITIALIZE, "padding": "x" * (200 * 1024)})
        response = _post(client, body=big, headers={"authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 413


def test_the_default_body_limit_is_4_mib():
    with _client(token=TOKEN) as client:
        big = json.dumps({**INITIALIZE, "padding": "x" * (4 * 1024 * 1024 + 1)})
        response = _post(client, body=big, headers={"authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 413


@pytest.mark.parametrize("host", ["0.0.0.0", "10.1.2.3", "::", "gpu-box.example.com"])
def test_a_non_loopback_bind_without_a_token_refuses_to_start(host):
    with pytest.raises(InsecureBindError, match="ADAEXPLORE_TOKEN"):
        build_http_app(_server(), host, PORT, None)
    with pytest.raises(InsecureBindError):
        build_http_app(_server(), host, PORT, "")


def test_a_non_loopback_bind_with_a_token_starts_and_checks_the_token():
    app = build_http_app(_server(), "10.1.2.3", PORT, TOKEN)
    with TestClient(app, base_url=f"http://10.1.2.3:{PORT}") as client:
        assert _post(client).status_code == 401
        assert _post(client, headers={"authorization": f"Bearer {TOKEN}"}).status_code == 200


def test_allowed_hosts_derive_from_host_and_port():
    assert is_loopback("localhost") and is_loopback("127.0.0.1") and is_loopback("::1")
    assert not is_loopback("0.0.0.0") and not is_loopback("example.com")
    hosts = security_settings("127.0.0.1", 9000).allowed_hosts
    assert hosts == ["127.0.0.1:9000", "localhost:9000", "[::1]:9000"]
    settings = security_settings("10.0.0.5", 9000, ["gpu1.lan", "proxy:443"])
    assert settings.enable_dns_rebinding_protection
    assert "10.0.0.5:9000" in settings.allowed_hosts and "gpu1.lan:9000" in settings.allowed_hosts
    assert "proxy:443" in settings.allowed_hosts
    assert "http://localhost:9000" in settings.allowed_origins


def test_extra_host_names_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("ADAEXPLORE_ALLOWED_HOSTS", "gpu-box.lan, proxy.example.com:443")
    app = build_http_app(_server(), "0.0.0.0", PORT, TOKEN)
    auth = {"authorization": f"Bearer {TOKEN}"}
    with TestClient(app, base_url=f"http://gpu-box.lan:{PORT}") as client:
        assert _post(client, headers=auth).status_code == 200
        assert _post(client, headers={**auth, "host": "proxy.example.com:443"}).status_code == 200
        assert _post(client, headers={**auth, "host": f"other.lan:{PORT}"}).status_code == 421
