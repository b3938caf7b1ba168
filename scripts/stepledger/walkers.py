"""Simulated walkers for the crash and outage suites, and the checks run on them afterwards: every request a
walker was acknowledged replays byte for byte, nothing is lost or doubled, and the ledger adds up."""
import http.client
import json
import random
import threading
import time
import urllib.error
from datetime import timedelta

from .checks import Failure, check
from .days import recent_day
from .client import request


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
        today = recent_day()
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
            except (OSError, urllib.error.URLError, http.client.HTTPException):
                # No answer, or one cut short (the server killed after its headers): the client retries, as an app
                # would, with the same key.
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
