"""Schemathesis hooks for scripts/fuzz: credentials, the few inexpressible rules, and the run's tally.

Loaded by Schemathesis (the `hooks` key of the configuration scripts/fuzz writes); everything it needs comes from
environment variables that scripts/fuzz sets:

    STEPLEDGER_FUZZ_BASE_URL     http://127.0.0.1:<port> of the stepd serve under test
    STEPLEDGER_FUZZ_MODE         test-phase or production
    STEPLEDGER_FUZZ_KEY          the RSA key (PEM) that signs session JWTs and App Check tokens
    STEPLEDGER_FUZZ_SECRETS      a JSON file (mode 600): {"admin": <admin token>,
                                 "operators": {"viewer": <secret>, "reviewer": <secret>, "operator": <secret>}}
    STEPLEDGER_FUZZ_STATS        where the tally is written when Schemathesis exits (JSON)

What the hooks change, and why each change is honest:
- Authorization: every walker route gets a valid session JWT of one of a pool of walkers (round robin, so
  per-walker state such as live nonces stays small); /admin routes get, in turn, the admin token and the secret of
  the named operator of each role (viewer, reviewer, operator). Schemathesis's own auth checks (ignored_auth) still
  send requests without or with broken credentials. POST /admin/session's positive cases sign in with the turn's
  credential, so the sign-in's 200 is reached too.
- Roles (issue 26: a viewer cannot decide, a reviewer cannot touch jobs): every admin answer to a request made
  with a role's credential is checked against the operation's `x-permission` in openapi.yaml: a role without the
  permission must get 403 FORBIDDEN (or 429 while locked out), a role with it must never get 403 FORBIDDEN. The
  tally counts the checks and lists the answers that contradict the role; scripts/fuzz fails on any.
- X-Firebase-AppCheck (production, ingest routes): a generated string is schema-valid but can never verify, so a
  positive case, or a case without the header, gets a fresh token signed by the run's key. A negative case that
  carries a generated header keeps it (the 401 is then the expected rejection).
- Positive cases only, for rules a schema cannot state (each is also written in openapi.yaml's prose):
  `tz` (POST /step/ingest, GET /health/today) must name a zone of the server's tz database;
  POST /step/ingest and POST /step/reread need an idempotency key in the body or the header, equal when both
  are sent, and every sampleSpan.endUtc not before its startUtc; a re-read names each source bundle once;
  GET /step/days needs from ≤ to ≤ from + 91 days; GET /health/statistics needs startDate ≤ endDate ≤ startDate
  + 1 095 days (a missing one is today); POST /health needs a nonce fetched first from
  GET /health/attestation-nonce by the same walker; GET /walker/ledger's cursor must be the `next` of an earlier
  page, and GET /admin/audit's the `nextCursor` of one (the hooks send one of the server's form). The hooks
  adjust a positive case to meet the rule with
  another schema-valid value; negative cases are sent as generated.
- GET /walker/events?wait: a wait from 2 to 30 s is sent as 1 s, so a run is not spent sleeping (and stays
  within Schemathesis's response-time limit); values outside 0…30 are sent as generated.

Tokens are never printed or written anywhere but request headers.
"""
import atexit
import datetime
import itertools
import json
import os
import threading
import time

import requests
import schemathesis
from stepledger.keys import b64url
from stepledger_fuzz_tokens import app_check_token, session_token

BASE_URL = os.environ.get("STEPLEDGER_FUZZ_BASE_URL", "http://127.0.0.1:8080")
MODE = os.environ.get("STEPLEDGER_FUZZ_MODE", "test-phase")
STATS = os.environ.get("STEPLEDGER_FUZZ_STATS", "")
SECRETS = os.environ.get("STEPLEDGER_FUZZ_SECRETS", "")

WALKERS = 48
# Zone names every tz database has; a positive case's `tz` that is not one becomes one of these.
ZONES = ("UTC", "Europe/Warsaw", "America/New_York", "Asia/Tokyo", "Australia/Sydney", "Pacific/Kiritimati",
         "Pacific/Pago_Pago", "Asia/Kolkata")
INGEST_PATHS = ("/step/ingest", "/step/ingest:batch")


class Credentials:
    """Session tokens for the walker pool (made lazily, renewed before they expire) and a fresh App Check token
    (renewed every minute: the server wants one minted at most 5 minutes ago)."""

    LIFETIME = 3600

    def __init__(self):
        self.lock = threading.Lock()
        self.tokens = {}
        self.app_check = None
        self.app_check_made = 0.0
        self.turn = itertools.count()
        self.admin = None

    def session(self, walker):
        with self.lock:
            token, made = self.tokens.get(walker, (None, 0.0))
            if token is None or time.time() - made > self.LIFETIME / 2:
                token, made = session_token(walker, self.LIFETIME), time.time()
                self.tokens[walker] = (token, made)
            return token

    def next_walker(self):
        return f"fuzz-walker-{next(self.turn) % WALKERS}"

    def fresh_app_check(self):
        with self.lock:
            if self.app_check is None or time.time() - self.app_check_made > 60:
                self.app_check, self.app_check_made = app_check_token(), time.time()
            return self.app_check

    def admin_credentials(self):
        """[(role, credential)]: the bootstrap token (role operator) and each named operator's secret."""
        if self.admin is None and SECRETS:
            with open(SECRETS) as f:
                secrets = json.load(f)
            self.admin = [("operator", secrets["admin"])] + sorted(secrets.get("operators", {}).items())
        return self.admin or []

    def next_admin(self):
        credentials = self.admin_credentials()
        return credentials[next(self.turn) % len(credentials)][1] if credentials else None

    def role_of(self, credential):
        return next((role for role, secret in self.admin_credentials() if secret == credential), None)


CREDENTIALS = Credentials()


class Tally:
    """What scripts/fuzz counts itself: requests sent and their statuses (violations come from Schemathesis's
    JSON report)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.requests = 0
        self.statuses = {}
        self.server_errors = []
        self.role_checks = {}
        self.role_violations = []

    def response(self, case, status):
        with self.lock:
            self.requests += 1
            self.statuses[str(status)] = self.statuses.get(str(status), 0) + 1
            if status >= 500 and len(self.server_errors) < 50:
                self.server_errors.append(f"{case.method.upper()} {case.operation.path} → {status}")

    def role_checked(self, role, violation):
        with self.lock:
            self.role_checks[role] = self.role_checks.get(role, 0) + 1
            if violation and len(self.role_violations) < 50:
                self.role_violations.append(violation)

    def write(self):
        if not STATS:
            return
        with self.lock:
            data = {"requests": self.requests, "statuses": self.statuses,
                    "serverErrors": self.server_errors, "roleChecks": self.role_checks,
                    "roleViolations": self.role_violations}
        with open(STATS, "w") as f:
            json.dump(data, f, indent=1, sort_keys=True)


TALLY = Tally()
atexit.register(TALLY.write)


@schemathesis.auth(refresh_interval=None).apply_to(path_regex=r"^/(step|walker|health)")
class WalkerAuth:
    def get(self, case, ctx):
        return CREDENTIALS.session(CREDENTIALS.next_walker())

    def set(self, case, data, ctx):
        case.headers = case.headers or {}
        case.headers["Authorization"] = f"Bearer {data}"


@schemathesis.auth(refresh_interval=None).apply_to(path_regex=r"^/admin")
class AdminAuth:
    def get(self, case, ctx):
        return CREDENTIALS.next_admin()

    def set(self, case, data, ctx):
        case.headers = case.headers or {}
        case.headers["Authorization"] = f"Bearer {data}"


def is_positive(case):
    meta = case.meta
    return meta is not None and meta.generation.mode.is_positive


def parse_date(value):
    try:
        return datetime.date.fromisoformat(value) if isinstance(value, str) and len(value) == 10 else None
    except ValueError:
        return None


def instant(value):
    """An RFC 3339 date-time as an aware datetime (None when Python cannot read it: year 0, leap seconds)."""
    if not isinstance(value, str):
        return None
    try:
        return datetime.datetime.fromisoformat(value.upper().replace("Z", "+00:00"))
    except ValueError:
        return None


def unquoted_key(raw):
    """The Idempotency-Key header's key as the server reads it (a token or a quoted string)."""
    text = raw.strip(" \t")
    if text.startswith('"') and text.endswith('"') and len(text) >= 2:
        return text[1:-1].replace('\\"', '"').replace("\\\\", "\\")
    return text


def order_span(span):
    if isinstance(span, dict):
        start, end = instant(span.get("startUtc")), instant(span.get("endUtc"))
        if start is not None and end is not None and end < start:
            span["startUtc"], span["endUtc"] = span.get("endUtc"), span.get("startUtc")


def fix_ingest(case):
    """POST /step/ingest and POST /step/reread: spans in order, and an idempotency key in the body or the header,
    equal when both are sent."""
    body = case.body if isinstance(case.body, dict) else None
    if body is None:
        return
    order_span(body.get("sampleSpan"))
    counts = body.get("counts")
    if isinstance(counts, list):
        # A re-read names each source bundle once (openapi.yaml's prose): keep the first count of each bundle.
        seen, kept = set(), []
        for count in counts:
            bundle = count.get("sourceBundleId") if isinstance(count, dict) else None
            if isinstance(bundle, str) and bundle in seen:
                continue
            if isinstance(bundle, str):
                seen.add(bundle)
            if isinstance(count, dict):
                order_span(count.get("sampleSpan"))
            kept.append(count)
        body["counts"] = kept
    headers = case.headers or {}
    header = next((v for k, v in headers.items() if k.lower() == "idempotency-key"), None)
    if header is not None and isinstance(body.get("idempotencyKey"), str):
        body["idempotencyKey"] = unquoted_key(header)
    elif header is None and not isinstance(body.get("idempotencyKey"), str):
        body["idempotencyKey"] = f"fuzz-{time.time_ns()}"


def fix_range(query, first, last, max_days, default_today):
    start, end = parse_date(query.get(first)), parse_date(query.get(last))
    today = datetime.datetime.now(datetime.timezone.utc).date()
    if default_today:
        start = start or (today if first not in query else None)
        end = end or (today if last not in query else None)
    if start is None or end is None:
        return
    if end < start or (end - start).days > max_days:
        # Keep the earlier day and move the other within the range the server allows.
        low = min(start, end)
        if low + datetime.timedelta(days=max_days) > datetime.date.max - datetime.timedelta(days=1):
            low = datetime.date.max - datetime.timedelta(days=max_days + 1)
        query[first] = low.isoformat()
        query[last] = (low + datetime.timedelta(days=min(max_days, abs((end - start).days) % (max_days + 1)))).isoformat()


def known_zone(value):
    if value in ZONES:
        return value
    return ZONES[sum(str(value).encode()) % len(ZONES)]


def ledger_cursor(value, tag):
    """A cursor of the server's form for the list `tag` names (l1 the ledger, a1 the audit): base64url of
    "<tag>|<milliseconds since 1970>:<entry id>". The server's ids hold no control character, and it refuses a cursor
    whose id does (a NUL would reach PostgreSQL), so none is kept."""
    entry = "".join(ch for ch in str(value) if ord(ch) >= 0x20 and ord(ch) != 0x7F)
    text = f"{tag}|{int(time.time() * 1000)}:{entry}"
    return b64url(text.encode())


def attach_nonce(case):
    """A nonce of a walker of its own (so GET /health/attestation-nonce's cases never use up its live nonces)."""
    body = case.body if isinstance(case.body, dict) else None
    if body is None:
        return
    # A date after today in UTC+14 is refused ("Date must not be in the future"), which the schema cannot state.
    date = parse_date(body.get("date"))
    latest = (datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=14)).date()
    if date is not None and date > latest:
        body["date"] = latest.isoformat()
    # A walker whose live nonces are used up (cases refused before the nonce is spent leave theirs unused) gets
    # 429; try the next walker then.
    for _ in range(WALKERS):
        walker = f"fuzz-health-{next(CREDENTIALS.turn) % WALKERS}"
        token = CREDENTIALS.session(walker)
        answer = requests.get(f"{BASE_URL}/health/attestation-nonce", headers={"Authorization": f"Bearer {token}"},
                              timeout=30)
        if answer.status_code == 200:
            body["nonce"] = answer.json()["nonce"]
            case.headers = case.headers or {}
            case.headers["Authorization"] = f"Bearer {token}"
            return


@schemathesis.hook
def before_call(context, case, kwargs):
    path = case.operation.path
    method = case.method.upper()
    positive = is_positive(case)
    if MODE == "production" and method == "POST" and path in INGEST_PATHS:
        case.headers = case.headers or {}
        if positive or "X-Firebase-AppCheck" not in case.headers:
            case.headers["X-Firebase-AppCheck"] = CREDENTIALS.fresh_app_check()
    if method == "GET" and path == "/walker/events" and isinstance(case.query, dict):
        wait = case.query.get("wait")
        if isinstance(wait, (int, str)) and str(wait).isdigit() and int(wait) > 1:
            case.query["wait"] = 1
    if not positive:
        return
    if method == "POST" and path in ("/step/ingest", "/step/reread"):
        fix_ingest(case)
        if isinstance(case.body, dict) and "tz" in case.body:
            case.body["tz"] = known_zone(case.body["tz"])
    elif method == "GET" and path == "/health/today" and isinstance(case.query, dict) and "tz" in case.query:
        case.query["tz"] = known_zone(case.query["tz"])
    elif (method == "GET" and path in ("/walker/ledger", "/admin/audit") and isinstance(case.query, dict)
          and "cursor" in case.query):
        case.query["cursor"] = ledger_cursor(case.query["cursor"], "l1" if path == "/walker/ledger" else "a1")
    elif method == "GET" and path == "/step/days" and isinstance(case.query, dict):
        fix_range(case.query, "from", "to", 91, default_today=False)
    elif method == "GET" and path == "/health/statistics":
        case.query = case.query if isinstance(case.query, dict) else {}
        fix_range(case.query, "startDate", "endDate", 1095, default_today=True)
    elif method == "POST" and path == "/health":
        attach_nonce(case)
    elif method == "POST" and path == "/admin/session" and isinstance(case.body, dict):
        # A generated credential never signs in; the turn's real one reaches the 200 and the cookie.
        credential = bearer(case) or CREDENTIALS.next_admin()
        if credential:
            case.body["credential"] = credential


# What each role may do (AdminPermission in the code; the bootstrap token is an operator).
ROLE_PERMITS = {
    "viewer": {"read"},
    "reviewer": {"read", "decide"},
    "operator": {"read", "decide", "bulkDecide", "manageJobs"},
}


def required_permission(case):
    """The operation's x-permission in openapi.yaml (None for walker routes and for `none`)."""
    definition = getattr(case.operation, "definition", None)
    raw = getattr(definition, "raw", None)
    permission = raw.get("x-permission") if isinstance(raw, dict) else None
    return None if permission in (None, "none") else permission


def bearer(case):
    headers = case.headers or {}
    value = next((v for k, v in headers.items() if k.lower() == "authorization"), None)
    return value[7:] if isinstance(value, str) and value.startswith("Bearer ") else None


def check_role(case, response):
    # Schemathesis also sends other methods to a path (405 for everyone); only the operation's own is checked.
    if not case.operation.path.startswith("/admin/") or case.method.upper() != case.operation.method.upper():
        return
    permission = required_permission(case)
    role = CREDENTIALS.role_of(bearer(case))
    if permission is None or role is None:
        return
    try:
        code = response.json().get("error") if response.status_code == 403 else None
    except ValueError:
        code = None
    forbidden = response.status_code == 403 and code == "FORBIDDEN"
    permitted = permission in ROLE_PERMITS[role]
    violation = None
    if permitted and forbidden:
        violation = f"{case.method.upper()} {case.operation.path} as {role}: 403 FORBIDDEN though it holds {permission}"
    elif not permitted and not forbidden and response.status_code != 429:
        violation = (f"{case.method.upper()} {case.operation.path} as {role}: {response.status_code} "
                     f"though it lacks {permission}")
    TALLY.role_checked(role, violation)


@schemathesis.hook
def after_call(context, case, response):
    TALLY.response(case, response.status_code)
    check_role(case, response)

