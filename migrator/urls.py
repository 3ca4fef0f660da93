"""Server URLs as they may be shown, and secrets expanded into them safely.

``mask`` is the one function that hides a password, for source (MySQL) and target (Redis)
URLs alike: everything between ``://`` and the *last* ``@`` that is not the user name
becomes ``***``, whether or not the URL parses and whether or not the password was
percent-encoded (a ``#``, ``/``, ``?`` or ``@`` in a raw password breaks every URL parser,
which then shows it as a path or fragment). Query parameters that carry secrets
(``password=``, ``ssl_password=``...) are hidden too.

``quote_userinfo`` percent-encodes a value expanded into the user-info part of a URL
(``mysql+pymysql://root:${MYSQL_PASSWORD}@host/db``), so any password works there.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote

MASK = "***"
_SECRET_PARAM = re.compile(
    r"(?i)([?&](?:[a-z_]*pass(?:word|wd)?|[a-z_]*secret|[a-z_]*token)=)[^&#]*"
)


def mask(url: Any) -> str:
    """The URL with its password replaced by ``***`` (the user name is kept).

    Works on text that does not parse as a URL too: everything after ``://`` up to the last
    ``@`` is user information; of it only what comes before the first ``:`` (the user
    name) is kept. Without ``://``, a leading ``user:password@`` is treated alike."""
    if url is None:
        return ""
    text = _as_text(url)
    scheme, sep, rest = text.partition("://")
    if not sep:
        scheme, rest = "", text
    at = rest.rfind("@")
    if at >= 0:
        userinfo = rest[:at]
        user, colon, _ = userinfo.partition(":")
        if not colon and any(c in userinfo for c in "/?#"):
            user = ""  # '@' seen past the authority, and no ':': show nothing of it
        shown = f"{user}:{MASK}" if colon else user or MASK
        rest = f"{shown}@{rest[at + 1 :]}"
    rest = _SECRET_PARAM.sub(lambda m: m.group(1) + MASK, rest)
    return f"{scheme}{sep}{rest}"


_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>()]+")


def mask_text(text: str) -> str:
    """``text`` (a message) with every URL in it masked, as a last line of defence."""
    return _URL_IN_TEXT.sub(lambda m: mask(m.group(0)), text)


def _as_text(url: Any) -> str:
    """A URL object (SQLAlchemy's ``URL``) as text with its password, for ``mask``."""
    render = getattr(url, "render_as_string", None)
    if render is not None:
        return str(render(hide_password=False))
    return str(url)


def scrub(text: str, *urls: Any) -> str:
    """``text`` (an error message) with every URL in ``urls`` replaced by its masked form
    and their passwords, raw or percent-encoded, replaced by ``***``."""
    from urllib.parse import unquote

    for url in urls:
        if not url:
            continue
        raw = _as_text(url)
        text = text.replace(raw, mask(raw))
        secret = password_of(raw)
        if secret:
            for s in {secret, unquote(secret), quote(unquote(secret), safe="")}:
                if len(s) >= 3:
                    text = text.replace(s, MASK)
    return text


def password_of(url: str) -> str:
    """The password as ``url`` writes it (between the user name's ``:`` and the last ``@``;
    "" when there is none)."""
    rest = url.partition("://")[2] or url
    at = rest.rfind("@")
    if at < 0:
        return ""
    return rest[:at].partition(":")[2]


def misread(url: str) -> bool:
    """Whether URL parsers would cut ``url`` in the wrong place: an ``@`` after the first
    ``/``, ``?`` or ``#`` that follows ``://`` (a password holding those characters without
    percent-encoding). Parsers then take part of the password for the host or the path."""
    head = url.find("://")
    if head < 0:
        return False
    rest = url[head + 3 :]
    cuts = [i for i in (rest.find(c) for c in "/?#") if i >= 0]
    return "@" in rest[min(cuts, default=len(rest)) :]


def refuse_misread(url: str, what: str) -> None:
    """Stop (exit 2) on a URL that parsers would misread (``misread``), before any part of
    it is parsed, connected to or printed other than masked."""
    if misread(url):
        from migrator.errors import MigratorError, docs

        raise MigratorError(
            f"cannot read the {what} URL {mask(url)}: an '@' comes after a '/', '?' or '#', "
            "so the user name or password is not percent-encoded",
            "write @ : / ? # % in the user name and password as %40 %3A %2F %3F %23 %25 "
            "(an '@' in a query value as %40), or put the password in ${VAR} inside the "
            f"mapping's URL, which is encoded for you ({docs('connections.md')})",
        )


def readable(url: str, what: str) -> str:
    """``url`` as every parser reads it alike: refused (exit 2) when parsers would misread it
    (``refuse_misread``); else with each ``@`` of its user information but the last written
    ``%40``. The user information ends at the last ``@`` before the host and the user name at
    its first ``:``, for source (MySQL) and target (Redis) URLs alike, as ``mask`` reads them:
    ``mysql+pymysql://u:Secr3t@Horse@host/db`` is user ``u``, password ``Secr3t@Horse``
    and host ``host`` (SQLAlchemy alone would end the password at the first ``@`` and take
    ``Horse@host`` for the host, and look it up)."""
    refuse_misread(url, what)
    head = url.find("://")
    if head < 0:
        return url
    rest = url[head + 3 :]
    at = rest.rfind("@")
    if at < 0:
        return url
    return url[: head + 3] + rest[:at].replace("@", "%40") + rest[at:]


def userinfo_spans(text: str) -> tuple[int, int] | None:
    """(start, end) of the user-info part of a URL template such as
    ``mysql+pymysql://root:${MYSQL_PASSWORD}@host/db``: between ``://`` and the last ``@``
    (None when the text has no user information)."""
    head = text.find("://")
    if head < 0:
        return None
    at = text.rfind("@")
    if at < head:
        return None
    return head + 3, at


def quote_userinfo(value: str) -> str:
    """A value for the user-info part of a URL: percent-encoded, so ``@ : / ? #`` and ``%``
    in a password are read as the password's own characters."""
    return quote(value, safe="")
