"""HTTP calls to the server under test on 127.0.0.1, with urllib (no dependencies, no proxies)."""
import http.client
import json
import urllib.error
import urllib.request

# Never through a proxy from the environment: every suite talks to 127.0.0.1 only.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def request(port, method, path, token=None, app_check=None, payload=None, timeout=30, raw=False, headers=None,
            with_headers=False):
    """(status, parsed JSON body, or the raw text when it is not JSON; the bytes themselves with raw=True), and the
    response's headers third with with_headers=True (a mapping whose get() ignores case). Error statuses are
    answers, not exceptions; connection errors propagate (OSError, urllib.error.URLError)."""
    sent = {"Content-Type": "application/json"}
    if token:
        sent["Authorization"] = f"Bearer {token}"
    if app_check:
        sent["X-Firebase-AppCheck"] = app_check
    sent.update(headers or {})
    data = json.dumps(payload).encode() if payload is not None else None
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, headers=sent, method=method)
    try:
        with _OPENER.open(req, timeout=timeout) as response:
            status, body, received = response.status, response.read(), response.headers
    except urllib.error.HTTPError as error:
        status, body, received = error.code, error.read(), error.headers
    if not raw:
        try:
            body = json.loads(body or b"null")
        except ValueError:
            body = body.decode(errors="replace")
    return (status, body, received) if with_headers else (status, body)


def answers(port, path, timeout=1):
    """True when GET `path` answers 200 now; False on any other status or no answer."""
    try:
        with _OPENER.open(f"http://127.0.0.1:{port}{path}", timeout=timeout) as response:
            return response.status == 200
    except (OSError, http.client.HTTPException):
        return False
