"""Who may use the console: a token when it listens beyond this machine, CSRF-safe POSTs.

* **Token.** Bound to a loopback address the console needs none (whoever can reach it is on
  this machine). Bound elsewhere, ``pyfsm web`` refuses to start without ``--token``; every
  request must then carry it, as ``Authorization: Bearer <token>`` (scripts, Prometheus) or
  as the session cookie the login page sets (a browser). The cookie holds an HMAC of the
  token, never the token, and is HttpOnly and SameSite=Strict.
* **CSRF.** Every form carries a random token that must equal the ``pyfsm_csrf`` cookie
  (double submit; SameSite=Strict), and a POST whose Origin header names another site is
  refused. Actions are POSTs only; a GET never changes anything.
* **Headers.** A Content-Security-Policy that allows no script at all and no framing: the
  console has no JavaScript, so a value that slipped past the template's escaping could
  still not run.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
from urllib.parse import urlsplit

from starlette.requests import Request

SESSION_COOKIE = "pyfsm_session"
CSRF_COOKIE = "pyfsm_csrf"
CSP = (
    "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def session_value(token: str) -> str:
    return hmac.new(token.encode(), b"pyfsm web session", hashlib.sha256).hexdigest()


def authorised(request: Request, token: str | None) -> bool:
    if token is None:
        return True
    header = request.headers.get("authorization", "")
    if header.lower().startswith("bearer ") and hmac.compare_digest(header[7:].strip().encode(), token.encode()):
        return True
    cookie = request.cookies.get(SESSION_COOKIE, "")
    return hmac.compare_digest(cookie.encode(), session_value(token).encode())


def token_matches(given: str, token: str) -> bool:
    return hmac.compare_digest(given.encode(), token.encode())


def new_csrf_token() -> str:
    return secrets.token_urlsafe(32)


def csrf_ok(request: Request, submitted: str | None) -> bool:
    cookie = request.cookies.get(CSRF_COOKIE)
    if not cookie or not submitted or not hmac.compare_digest(cookie.encode(), submitted.encode()):
        return False
    origin = request.headers.get("origin")
    if origin and origin != "null":
        return urlsplit(origin).netloc == request.headers.get("host", "")
    return True
