"""What the real-process checks (scripts/refund-flow, scripts/crash-test) share: a signing key with its JWKS,
session and App Check tokens, HTTP calls to 127.0.0.1, waiting for a server, and a fresh PostgreSQL database.
Standard library only; needs openssl."""
import base64
import contextlib
import hashlib
import hmac
import json
import os
import random
import secrets
import shutil
import socket
import string
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime, timedelta, timezone

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


def development_token(secret, walker, ttl=3600):
    """A test-phase session token: HS256 with the development secret the server was given (`jwt.devSecret`), as
    `stepd token` signs it, without starting a process per token."""
    now = int(time.time())
    header = b64url(json.dumps({"alg": "HS256", "typ": "JWT", "kid": "stepledger-dev"}).encode())
    claims = b64url(json.dumps({"sub": walker, "iss": "stepledger-dev", "aud": ["stepledger"], "exp": now + ttl,
                                "iat": now}).encode())
    mac = hmac.new(secret.encode(), f"{header}.{claims}".encode(), hashlib.sha256).digest()
    return f"{header}.{claims}.{b64url(mac)}"


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


def request(port, method, path, token=None, app_check=None, payload=None, timeout=30, raw=False, headers=None,
            with_headers=False):
    """(status, parsed JSON body, or the raw text when it is not JSON; the bytes themselves with raw=True), and the
    response's headers third with with_headers=True. Connection errors propagate (OSError, urllib.error.URLError)."""
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
            status, body, received = response.status, response.read(), dict(response.headers)
    except urllib.error.HTTPError as error:
        status, body, received = error.code, error.read(), dict(error.headers)
    if not raw:
        try:
            body = json.loads(body or b"null")
        except ValueError:
            body = body.decode(errors="replace")
    return (status, body, received) if with_headers else (status, body)


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


class WalkerClient(threading.Thread):
    """One walker's app: sends its plan (days × rising counts, allocations among them) in order, each request
    until it is acknowledged (200, 201 or 422), sending it again with its key after no answer, 409 or 503."""

    def __init__(self, walker, signer, app_check, port, rng_seed, spread_seconds, days=5, submissions_per_day=3,
                 allocations=6, allocation_points=250):
        super().__init__(daemon=True)
        self.spread_seconds = spread_seconds
        self.days, self.submissions_per_day = days, submissions_per_day
        self.allocations, self.allocation_points = allocations, allocation_points
        self.retry_after_missing = 0
        self.walker, self.port = walker, port
        self.token = signer.session(walker, ttl=3600)
        self.app_check = app_check
        self.rng = random.Random(rng_seed)
        self.plan = self.make_plan()
        self.acknowledged = []  # (kind, path, payload, status, raw body)
        self.retries = 0
        self.statuses = []  # every answer that was not an acknowledgement (None: no answer)
        self.unexpected = []
        self.error = None

    def make_plan(self):
        today = datetime.now(timezone.utc).date()
        days = [(today - timedelta(days=offset)).isoformat() for offset in range(self.days)]
        self.rng.shuffle(days)
        plan = []
        for index, day in enumerate(days):
            for submission in range(self.submissions_per_day):
                count = 2100 + 400 * submission + 7 * index
                plan.append(("ingest", "/step/ingest", {
                    "day": day, "count": count, "source": "HealthKit", "tz": "UTC",
                    "sampleSpan": {"startUtc": f"{day}T00:00:00Z", "endUtc": f"{day}T08:00:00Z"},
                    "sourceBundleId": "com.apple.health", "gyroSamplesObserved": True,
                    "clientSubmittedAt": f"{day}T08:00:05Z", "appVersion": "1.0.0+1",
                    "idempotencyKey": f"{self.walker}-{day}-{submission}",
                }))
        for number in range(self.allocations):
            position = self.rng.randrange(3, len(plan) + 1)
            plan.insert(position, ("allocation", "/walker/allocations", {
                "kind": "tree" if number % 2 else "keystone", "nodeId": f"node-{number}",
                "points": self.allocation_points, "idempotencyKey": f"{self.walker}-spend-{number}",
            }))
        return plan

    def send(self, kind, path, payload):
        while True:
            try:
                status, body, headers = request(self.port, "POST", path, self.token,
                                                self.app_check if kind == "ingest" else None, payload, timeout=20,
                                                raw=True, with_headers=True)
            except (OSError, urllib.error.URLError):
                status, body, headers = None, b"", {}
            if status == 503 and not headers.get("Retry-After"):
                self.retry_after_missing += 1
            if status in (200, 201, 422):
                return status, body
            if status not in (None, 409, 503):
                self.unexpected.append((kind, status, body[:200]))
            self.retries += 1
            time.sleep(0.05 + self.rng.random() * 0.15)
            self.statuses.append(status)

    def run(self):
        try:
            for kind, path, payload in self.plan:
                status, body = self.send(kind, path, payload)
                self.acknowledged.append((kind, path, payload, status, body))
                # Spread over the time the kills take, so kills land while requests are in flight.
                time.sleep(self.rng.random() * 2 * self.spread_seconds / len(self.plan))
        except Exception as error:  # noqa: BLE001 - reported by the main thread
            self.error = error


def drain(port, admin_token, timeout=90):
    """Waits until no job is pending or running; returns the dead jobs."""
    deadline = time.time() + timeout
    while True:
        waiting = []
        for state in ("pending", "running"):
            status, body = request(port, "GET", f"/admin/jobs?state={state}", admin_token)
            check(status == 200, f"GET /admin/jobs?state={state}", 200, (status, body))
            waiting += body["items"]
        if not waiting:
            break
        if time.time() > deadline:
            raise Failure(f"{len(waiting)} jobs still pending or running after {timeout} s: {waiting[:3]}")
        time.sleep(0.3)
    status, body = request(port, "GET", "/admin/jobs?state=dead", admin_token)
    return body["items"]


def verify_walker(client, port):
    """(acknowledged, lost, doubled) for one walker, after the run."""
    lost = doubled = 0
    for kind, path, payload, status, body in client.acknowledged:
        replay_status, replay = request(port, "POST", path, client.token,
                                        client.app_check if kind == "ingest" else None, payload, raw=True)
        if (replay_status, replay) != (status, body):
            lost += 1
            print(f"   LOST {client.walker} {kind} {payload['idempotencyKey']}: acknowledged {status}, "
                  f"replayed {replay_status}", flush=True)
    acknowledged_allocations = {json.loads(body)["id"] for kind, _, _, status, body in client.acknowledged
                                if kind == "allocation" and status == 201}
    status, listed = request(port, "GET", "/walker/allocations", client.token)
    stored = [item["id"] for item in listed["items"]]
    doubled += len(stored) - len(set(stored) & acknowledged_allocations)
    lost += len(acknowledged_allocations - set(stored))

    highest = {}
    for kind, _, payload, status, _ in client.acknowledged:
        if kind == "ingest" and status == 200:
            highest[payload["day"]] = max(highest.get(payload["day"], 0), payload["count"])
    days = sorted(highest)
    status, listed = request(port, "GET", f"/step/days?from={days[0]}&to={days[-1]}", client.token)
    credited = 0
    for entry in listed["days"]:
        expected = highest[entry["day"]]
        got = (entry["reconciliationStatus"], entry["acceptedCount"], entry["energyCredited"])
        if got != ("ACCEPTED", expected, expected):
            doubled += 1 if entry["energyCredited"] > expected else 0
            lost += 1 if entry["energyCredited"] < expected else 0
            print(f"   WRONG DAY {client.walker} {entry['day']}: {got}, expected ACCEPTED at {expected}", flush=True)
        credited += entry["energyCredited"]
    check(len(listed["days"]) == len(highest), f"{client.walker}: days with a log", len(highest),
          len(listed["days"]))

    entries, cursor = [], None
    while True:
        status, page = request(port, "GET", "/walker/ledger?limit=200" + (f"&cursor={cursor}" if cursor else ""),
                               client.token)
        entries += page["entries"]
        cursor = page["next"]
        if not cursor:
            break
    status, overview = request(port, "GET", "/walker", client.token)
    confirmed = overview["energy"]["confirmed"]
    spent = client.allocation_points * len(acknowledged_allocations)
    check(confirmed == sum(entry["amount"] for entry in entries), f"{client.walker}: confirmed = sum of entries",
          sum(entry["amount"] for entry in entries), confirmed)
    check(confirmed == credited - spent, f"{client.walker}: confirmed = day credits − allocations",
          credited - spent, confirmed)
    per_day = {}
    for entry in entries:
        if entry["kind"] == "step_credit":
            per_day[entry["day"]] = per_day.get(entry["day"], 0) + entry["amount"]
    check(per_day == {day: count for day, count in highest.items()}, f"{client.walker}: credit per day",
          highest, per_day)
    return len(client.acknowledged), lost, doubled
