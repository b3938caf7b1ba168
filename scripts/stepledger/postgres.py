"""A database of its own for each run on the PostgreSQL server that scripts/with-postgres starts."""
import contextlib
import os
import secrets
import shutil
import subprocess
import urllib.parse

from .checks import Failure


def postgres_url():
    """STEPLEDGER_TEST_POSTGRES_URL, or None; with CI set its absence is a Failure (CI runs both engines)."""
    url = os.environ.get("STEPLEDGER_TEST_POSTGRES_URL")
    if not url and os.environ.get("CI"):
        raise Failure("CI must run the PostgreSQL half: set STEPLEDGER_TEST_POSTGRES_URL (scripts/with-postgres)")
    return url


def psql():
    """The psql of the server's own installation (STEPLEDGER_TEST_POSTGRES_BINDIR), else the one on PATH."""
    bindir = os.environ.get("STEPLEDGER_TEST_POSTGRES_BINDIR", "")
    found = os.path.join(bindir, "psql") if bindir else shutil.which("psql")
    if not found:
        raise Failure("no psql to create the PostgreSQL database with")
    return found


@contextlib.contextmanager
def fresh_postgres_database(prefix):
    """A new database on the server STEPLEDGER_TEST_POSTGRES_URL names, dropped afterwards; yields its URL, or
    None without that variable (then CI=true is a failure: CI runs both engines)."""
    url = postgres_url()
    if not url:
        yield None
        return
    client = psql()
    name = f"{prefix}_{os.getpid()}_{secrets.token_hex(3)}"
    made = subprocess.run([client, url, "-q", "-c", f"CREATE DATABASE {name}"], capture_output=True, text=True)
    if made.returncode != 0:
        raise Failure(f"CREATE DATABASE {name} failed: {made.stderr.strip()}")
    try:
        yield urllib.parse.urlunsplit(urllib.parse.urlsplit(url)._replace(path=f"/{name}"))
    finally:
        subprocess.run([client, url, "-q", "-c", f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"], capture_output=True)
