"""Who may reach an HTTP server: the one policy every mcpworld HTTP endpoint is built with.

On loopback (`--host` 127.0.0.1, localhost or ::1) nothing changes: the MCP SDK's DNS-rebinding protection accepts
only localhost Host/Origin headers, and no token is asked. Bound to anything else, `Exposure` keeps Host and Origin
checks (against an allow list: `--allow-host`, default the bound host and this machine's names) and, on every MCP
endpoint that can run code or change state (worlds, /swe/mcp, world models), requires the registry token as
`Authorization: Bearer <token>`. `Exposure.guard` wraps an ASGI app with that policy; the MCP endpoints are built
with it by `mcpworld.core.episode_server.endpoint`.
"""

from __future__ import annotations

import ipaddress
import json
import secrets
import socket
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp, Receive, Scope, Send

LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})  # exactly the hosts the MCP SDK protects by itself
WILDCARD = frozenset({"0.0.0.0", "::", ""})
TOKEN_HELP = ("send the registry token as 'Authorization: Bearer <token>'. The token is MCPWORLD_REGISTRY_TOKEN "
              "(or --token) of the serving `mcpworld`, else the file $MCPWORLD_HOME/registry.token on the serving "
              "machine (default ~/.mcpworld/registry.token); mcpworld's own clients send MCPWORLD_REGISTRY_TOKEN")


def is_loopback(host: str) -> bool:
    """Whether `host` is one the SDK already protects (anything else counts as exposed, 127.0.0.2 included)."""
    return host.strip("[]").lower() in LOOPBACK


def machine_names() -> list[str]:
    """The names other machines are likely to use for this one."""
    names = []
    for get in (socket.gethostname, socket.getfqdn):
        try:
            name = get()
        except OSError:  # pragma: no cover - no resolver
            continue
        if name and name not in names:
            names.append(name)
    return names


def public_host(host: str, allow_hosts: Sequence[str] = ()) -> str:
    """The name to put in URLs for a server bound to `host` (a wildcard bind is advertised by a real name)."""
    if host.strip("[]") not in WILDCARD:
        return host
    named = [h for h in allow_hosts if h != "*"]
    return named[0] if named else (machine_names() or ["127.0.0.1"])[0]


def _bare(name: str) -> str:
    """`Host`/`--allow-host` value without port or brackets, lower case."""
    name = name.strip().lower()
    if name.startswith("["):
        return name[1:].split("]", 1)[0]
    if name.count(":") == 1:  # host:port (a bare IPv6 address has several colons)
        return name.split(":", 1)[0]
    return name


def _url_host(name: str) -> str:
    try:
        return f"[{name}]" if ipaddress.ip_address(name).version == 6 else name
    except ValueError:
        return name


@dataclass(frozen=True)
class Exposure:
    """How an HTTP server is reached: bound host, names clients may use for it (`*`: any), bearer token."""

    host: str = "127.0.0.1"
    token: str | None = None
    allowed_hosts: tuple[str, ...] = ()

    @classmethod
    def of(cls, host: str = "127.0.0.1", token: str | None = None, allow_hosts: Iterable[str] = ()) -> Exposure:
        """The policy for a server bound to `host`. Exposed: the token defaults to the registry token."""
        if is_loopback(host):
            return cls(host)
        if not token:
            from mcpworld.core.paths import registry_token

            token = registry_token(None)[0]
        given = [h.strip() for h in allow_hosts if h.strip()]
        # this machine's own names are never an attacker's: a rebinding page sends its own domain as Host
        names = [*given, host.strip("[]"), *machine_names(), *sorted(LOOPBACK)]
        return cls(host, token, tuple(dict.fromkeys(n if n == "*" else _bare(n) for n in names)))

    @property
    def exposed(self) -> bool:
        return not is_loopback(self.host)

    # -- the checks -------------------------------------------------------------------------------------------

    @property
    def names(self) -> frozenset[str] | tuple[str, ...]:
        """The Host names this server answers to: loopback's own on loopback (a DNS-rebinding page sends its own
        domain as Host, and would otherwise read every REST route), else the allowed ones."""
        return self.allowed_hosts if self.exposed else LOOPBACK

    def host_allowed(self, header: str | None) -> bool:
        if "*" in self.allowed_hosts:
            return True
        return bool(header) and _bare(header) in self.names  # type: ignore[arg-type]

    def origin_allowed(self, origin: str | None) -> bool:
        """No Origin (not a browser, or same-origin GET) passes; a browser's Origin must name an allowed host."""
        if not origin:
            return True
        parts = urlsplit(origin)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            return False
        return "*" in self.allowed_hosts or parts.hostname.lower() in self.names

    def token_ok(self, authorization: str | None) -> bool:
        if not self.exposed:
            return True
        scheme, _, given = (authorization or "").partition(" ")
        return (scheme.lower() == "bearer" and bool(self.token)
                and secrets.compare_digest(given.strip().encode(), (self.token or "").encode()))

    def refusal(self, headers: dict[str, str], *, auth: bool) -> tuple[int, str] | None:
        """(status, message) when a request with these (lower-case) headers must be refused, else None."""
        if not self.host_allowed(headers.get("host")):
            if not self.exposed:
                return 421, (f"Host {headers.get('host')!r} is not this loopback server's name: use 127.0.0.1 or "
                             "localhost (to serve other machines, start it with --host)")
            return 421, (f"Host {headers.get('host')!r} is not one this server answers to (allowed: "
                         f"{', '.join(self.allowed_hosts)}); start it with --allow-host NAME for the name you use")
        if not self.origin_allowed(headers.get("origin")):
            return 403, f"Origin {headers.get('origin')!r} is not allowed (cross-site requests are refused)"
        if auth and not self.token_ok(headers.get("authorization")):
            what = "wrong token" if headers.get("authorization") else "missing token"
            return 401, f"{what}: this endpoint can run code or change state; {TOKEN_HELP}"
        return None

    # -- applying them ----------------------------------------------------------------------------------------

    def guard(self, app: ASGIApp, *, auth: bool = True) -> ASGIApp:
        """`app` behind the policy: Host/Origin always (loopback names on loopback), the token when exposed and
        `auth`."""
        return ExposureMiddleware(app, exposure=self, auth=auth)

    def transport_security(self) -> TransportSecuritySettings | None:
        """Settings for the SDK's own Host/Origin checks (None on loopback: the SDK's localhost defaults)."""
        if not self.exposed:
            return None
        if "*" in self.allowed_hosts:
            return TransportSecuritySettings(enable_dns_rebinding_protection=False)  # the guard checks Origin
        hosts = [_url_host(n) for n in self.allowed_hosts]
        return TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=[*hosts, *(f"{h}:*" for h in hosts)],
            allowed_origins=[f"{s}://{h}{p}" for h in hosts for s in ("http", "https") for p in ("", ":*")])


class ExposureMiddleware:
    """ASGI middleware enforcing an `Exposure`: 421 bad Host, 403 bad Origin, 401 missing/wrong bearer token."""

    def __init__(self, app: ASGIApp, exposure: Exposure, auth: bool = True):
        self.app, self.exposure, self.auth = app, exposure, auth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers") or []}
        refused = self.exposure.refusal(headers, auth=self.auth)
        if refused is None:
            await self.app(scope, receive, send)
            return
        status, message = refused
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008, "reason": message[:120]})
            return
        body = json.dumps({"error": message, "status": status}).encode()  # the registry API's one error shape
        response_headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        if status == 401:
            response_headers.append((b"www-authenticate", b'Bearer realm="mcpworld"'))
        await send({"type": "http.response.start", "status": status, "headers": response_headers})
        await send({"type": "http.response.body", "body": body})
