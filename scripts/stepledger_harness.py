"""What the real-process checks (scripts/refund-flow, scripts/crash-test) share: a signing key with its JWKS,
session and App Check tokens, HTTP calls to 127.0.0.1, waiting for a server, and a fresh PostgreSQL database.
Standard library only; needs openssl."""
import base64
import contextlib
import json
import os
import secrets
import shutil
import socket
import string
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request

PROJECT_NUMBER = "123456789012"
APP_ID = "1:123456789012:ios:stepledger"
ISSUER = "https://auth.example"
AUDIENCE = "stepledger-api"


class Failure(Exception):
    pass


def check(condition, what, expected, got):
    if not condition:
        raise Failure(f"{what}\n   expected: {expected}\n   got:      {got}")


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def random_text(length=40):
    alphabet = string.ascii_letters + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(length))


class Signer:
    """An RSA key made with openssl, its JWKS, and RS256 JWTs signed with it."""

    def __init__(self, work, kid="harness"):
        self.kid = kid
        self.key = os.path.join(work, "key.pem")
        subprocess.run(
            ["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", self.key],
            check=True, capture_output=True,
        )
        modulus = subprocess.run(
            ["openssl", "rsa", "-in", self.key, "-noout", "-modulus"], check=True, capture_output=True, text=True
        ).stdout.strip().split("=", 1)[1]
        self.jwks = {
            "keys": [{
                "kty": "RSA", "kid": kid, "alg": "RS256", "use": "sig",
                "n": b64url(bytes.fromhex(modulus)), "e": "AQAB",
            }]
        }

    def write_jwks(self, path):
        with open(path, "w") as f:
            json.dump(self.jwks, f)
        return path

    def sign(self, claims):
        header = b64url(json.dumps({"alg": "RS256", "typ": "JWT", "kid": self.kid}).encode())
        payload = b64url(json.dumps(claims).encode())
        signing_input = f"{header}.{payload}".encode()
        signature = subprocess.run(
            ["openssl", "dgst", "-sha256", "-sign", self.key], input=signing_input, check=True, capture_output=True
        ).stdout
        return f"{header}.{payload}.{b64url(signature)}"

    def session(self, walker, ttl=600):
        now = int(time.time())
        return self.sign({"sub": walker, "iss": ISSUER, "aud": [AUDIENCE], "exp": now + ttl})

    def app_check(self, jti="harness-app-check"):
        now = int(time.time())
        return self.sign({
            "iss": f"https://firebaseappcheck.googleapis.com/{PROJECT_NUMBER}",
            "aud": [f"projects/{PROJECT_NUMBER}", "projects/stepledger-harness"],
            "sub": APP_ID, "iat": now, "exp": now + 3600, "jti": jti,
        })


def production_settings(database_url, port, jwks):
    """A production configuration trusting `jwks` for session tokens and App Check, with limits out of the way."""
    return {
        "mode": "production",
        "database": {"url": database_url},
        "http": {"port": port},
        "jwt": {"jwksFile": jwks, "issuer": ISSUER, "audience": AUDIENCE},
        "appCheck": {"projectNumber": PROJECT_NUMBER, "jwksFile": jwks},
        "rateLimit": {"ingestPerMinute": 100000, "walkerPerMinute": 100000},
        "log": {"level": "error", "antiCheatSink": "off"},
    }


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request(port, method, path, token=None, app_check=None, payload=None, timeout=30, raw=False, headers=None):
    """(status, parsed JSON body, or the raw text when it is not JSON; the bytes themselves with raw=True).
    Connection errors propagate (OSError, urllib.error.URLError)."""
    sent = {"Content-Type": "application/json"}
    if token:
        sent["Authorization"] = f"Bearer {token}"
    if app_check:
        sent["X-Firebase-AppCheck"] = app_check
    sent.update(headers or {})
    data = json.dumps(payload).encode() if payload is not None else None
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, headers=sent, method=method)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as response:
            status, body = response.status, response.read()
    except urllib.error.HTTPError as error:
        status, body = error.code, error.read()
    if raw:
        return status, body
    try:
        return status, json.loads(body or b"null")
    except ValueError:
        return status, body.decode(errors="replace")


def wait_live(port, process, timeout=60, what="stepd serve"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if process.poll() is not None:
            raise Failure(f"{what} exited early with {process.returncode}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/livez", timeout=1) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, socket.timeout):
            pass
        time.sleep(0.05)
    raise Failure(f"{what} did not answer /livez within {timeout} s")


@contextlib.contextmanager
def fresh_postgres_database(prefix):
    """A new database on the server STEPLEDGER_TEST_POSTGRES_URL names, dropped afterwards; yields its URL, or
    None without that variable (then CI=true is a failure: CI runs both engines)."""
    url = os.environ.get("STEPLEDGER_TEST_POSTGRES_URL")
    if not url:
        if os.environ.get("CI"):
            raise Failure("CI must run the PostgreSQL half: set STEPLEDGER_TEST_POSTGRES_URL (scripts/with-postgres)")
        yield None
        return
    bindir = os.environ.get("STEPLEDGER_TEST_POSTGRES_BINDIR", "")
    psql = os.path.join(bindir, "psql") if bindir else shutil.which("psql")
    if not psql:
        raise Failure("no psql to create the PostgreSQL database with")
    name = f"{prefix}_{os.getpid()}_{secrets.token_hex(3)}"
    made = subprocess.run([psql, url, "-q", "-c", f"CREATE DATABASE {name}"], capture_output=True, text=True)
    if made.returncode != 0:
        raise Failure(f"CREATE DATABASE {name} failed: {made.stderr.strip()}")
    try:
        yield urllib.parse.urlunsplit(urllib.parse.urlsplit(url)._replace(path=f"/{name}"))
    finally:
        subprocess.run([psql, url, "-q", "-c", f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"], capture_output=True)
