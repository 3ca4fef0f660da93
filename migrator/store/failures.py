"""Why a Redis target failed us, as one line that names the cause and one hint that names the
fix (issue 10 item 7): not a Redis server at all (MySQL's port), TLS certificates, a TLS/plain
mismatch, ACL permissions, or simply nothing listening. Never with the password."""

from __future__ import annotations

import ssl

import redis
from redis.exceptions import InvalidResponse, NoPermissionError

from migrator.errors import ConnectError, docs
from migrator.urls import mask, password_of

ACL_HINT = (
    "the target URL's user lacks a permission: grant it the commands migrate and verify use, "
    "e.g. ACL SETUSER <user> on ~* -@all +@read +@write +@transaction +@scripting "
    f"+@connection +info ({docs('connections.md')})"
)
CA_HINT = (
    "give the CA that signed the server's certificate: "
    f"rediss://host:6380/0?ssl_ca_certs=/path/to/ca.pem ({docs('connections.md')})"
)


def _first_line(e: BaseException) -> str:
    text = str(e)
    return text.splitlines()[0] if text else type(e).__name__


def _causes(e: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    seen: BaseException | None = e
    while seen is not None and len(out) < 10:
        out.append(seen)
        seen = seen.__cause__ or seen.__context__
    return out


def connect_failure(url: str, e: BaseException) -> ConnectError:
    """The error for a target that could not be used at all (connecting, PING)."""
    shown = mask(url)
    text = _first_line(e)
    low = " ".join(str(c) for c in _causes(e)).lower()
    if any(isinstance(c, InvalidResponse) for c in _causes(e)) or "protocol error" in low:
        return ConnectError(
            f"{shown} is not a Redis server: it answered in another protocol ({text})",
            "check the port of the target URL: Redis listens on 6379 by default (3306 is MySQL's)",
        )
    if isinstance(e, NoPermissionError):
        return ConnectError(f"Redis at {shown} refused this user a command: {text}", ACL_HINT)
    verify = any(isinstance(c, ssl.SSLCertVerificationError) for c in _causes(e))
    if verify or "certificate verify failed" in low:
        return ConnectError(
            f"TLS: the certificate of Redis at {shown} could not be verified ({text})", CA_HINT
        )
    if any(isinstance(c, ssl.SSLError) for c in _causes(e)) or "ssl" in low:
        return ConnectError(
            f"TLS with Redis at {shown} failed: {text}",
            "is that port a TLS port? rediss:// talks TLS, redis:// plain text; a client "
            f"certificate goes in ?ssl_certfile=...&ssl_keyfile=... ({docs('connections.md')})",
        )
    if isinstance(e, redis.ResponseError) and "db index is out of range" in low:
        return ConnectError(
            f"Redis at {shown} has no database of the number the target URL ends with ({text})",
            "a server has 16 databases (0-15) unless its 'databases' setting says more (CONFIG "
            "GET databases); end the target URL with one of them, e.g. redis://host:6379/0 "
            "(a Redis Cluster has database 0 alone)",
        )
    if isinstance(e, redis.ResponseError):
        return ConnectError(f"Redis at {shown} refused us: {text}")
    hint = "is redis-server running, and the host/port right?"
    if url.lower().startswith("redis://") and ("closed" in low or "reset" in low):
        hint += " If the server only speaks TLS, write rediss://"
    return ConnectError(f"cannot reach Redis at {shown}: {text}", hint)


def refused_login(url: str, e: BaseException, what: str = "Redis") -> ConnectError:
    """The error for a login the target refused: no password given where one is required
    (``NOAUTH``), or a wrong user name or password (``WRONGPASS``)."""
    shown = mask(url)
    if not password_of(url) or "required" in _first_line(e).lower():
        return ConnectError(
            f"{what} at {shown} requires a password, and the target URL gives none",
            "write it in the target URL: redis://:<password>@host:6379/0, or "
            f"redis://<user>:<password>@host:6379/0 for an ACL user ({docs('connections.md')})",
        )
    return ConnectError(
        f"{what} at {shown} refused the password", "check the password in the target URL"
    )


def refused_permission(message: str) -> ConnectError | None:
    """A command refused for want of an ACL permission (``NOPERM ...``), or None."""
    if not message.startswith("NOPERM"):
        return None
    return ConnectError(f"Redis refused this user a command: {message}", ACL_HINT)
