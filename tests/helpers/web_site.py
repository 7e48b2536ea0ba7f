"""The console tests' site: a database with accounts per role (the fixture of each test
module), read through the console as a reporting account, and checked with root's rows."""

from __future__ import annotations

from typing import Any

import pymysql
from starlette.testclient import TestClient

from helpers.common import fetch
from pyfsm.web import ConsoleConfig, create_app


def client(site: dict[str, Any], **config: Any) -> TestClient:
    """The console in-process, as the site's reporting account (``config``: ConsoleConfig's)."""
    return TestClient(create_app(ConsoleConfig(dsn=site["reporting"], **config)))


def rows(site: dict[str, Any], sql: str, args: Any = None) -> list[dict[str, Any]]:
    """``sql``'s rows, read as root (what the console must show, or must have written)."""
    conn = pymysql.connect(**site["root"].connect_kwargs())
    try:
        return fetch(conn, sql, args)
    finally:
        conn.close()
