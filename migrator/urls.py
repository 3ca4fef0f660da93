"""Connection URLs as they may be shown: never with a password."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from sqlalchemy.engine import URL, make_url


def mask_source(url: str | URL) -> str:
    """The URL as it may be shown: the password replaced by ***."""
    try:
        return make_url(url).render_as_string(hide_password=True) if url else ""
    except Exception:  # not a URL at all; show nothing that could be a secret
        return "<unparseable URL>"


def mask_target(url: str) -> str:
    """A Redis URL without its password."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparseable URL>"
    if parts.password is None:
        return url
    host = parts.hostname or ""
    try:
        if parts.port:
            host += f":{parts.port}"
    except ValueError:  # several host:port pairs (redis+cluster://): keep them as written
        host = parts.netloc.rsplit("@", 1)[1]
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))
