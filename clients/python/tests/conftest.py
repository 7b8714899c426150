"""Fixtures: a database with pqrun on the server PGHOST/PGPORT/PGUSER point
at (one for the session, dropped at its end), a connection to it, and a
queue of its own for each test.

With PQRUN_EXPECT_INSTALLED=DIR, the session first checks that ``pqrun``
is imported from DIR (an installed wheel) and not from a source tree.
"""

from __future__ import annotations

import itertools
import os
from typing import Any, Iterator

import psycopg
import pytest

import pqrun

DATABASE = f"pqrun_client_tests_{os.getpid()}"
_queues = itertools.count(1)


def pytest_sessionstart(session: Any) -> None:
    expected = os.environ.get("PQRUN_EXPECT_INSTALLED")
    if expected:
        where = os.path.realpath(pqrun.__file__)
        if not where.startswith(os.path.realpath(expected) + os.sep) or "site-packages" not in where:
            pytest.exit(f"pqrun is imported from {where}, not from a package installed in {expected}", returncode=1)


def pytest_report_header(config: Any) -> str:
    return f"pqrun {pqrun.__version__} from {os.path.dirname(pqrun.__file__)}"


@pytest.fixture(scope="session")
def dsn() -> Iterator[str]:
    """The conninfo of a database made for this run, with pqrun installed
    and retries 1 s apart."""
    with psycopg.connect(dbname="postgres", autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)")
        admin.execute(f"CREATE DATABASE {DATABASE}")
        admin.execute(f"ALTER DATABASE {DATABASE} SET pqrun.backoff = '1s'")
    with psycopg.connect(dbname=DATABASE, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION pqrun")
    yield f"dbname={DATABASE}"
    with psycopg.connect(dbname="postgres", autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)")


@pytest.fixture
def conn(dsn: str) -> Iterator[psycopg.Connection[Any]]:
    """An autocommit connection: each call commits at once, unless inside ``conn.transaction()``."""
    with psycopg.connect(dsn, autocommit=True) as c:
        yield c


@pytest.fixture
def queue() -> str:
    """A queue no other test uses."""
    return f"q{next(_queues)}"
