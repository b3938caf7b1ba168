"""The processes under test: which stepd binary, free ports, starting and stopping `stepd serve` and
`stepd worker`, waiting until a server answers, and the configurations the suites give them."""
import atexit
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time

from .checks import Failure
from .client import answers
from .keys import AUDIENCE, ISSUER, PROJECT_NUMBER


def stepd_argument(arguments=None):
    """The stepd a suite runs, as an absolute path: its first argument that is not an option, by default
    .build/debug/stepd (the path the test command builds)."""
    arguments = sys.argv[1:] if arguments is None else arguments
    return os.path.abspath(next((arg for arg in arguments if not arg.startswith("--")), ".build/debug/stepd"))


def require_stepd(stepd):
    """Ends the run with a hint when there is no binary to test, before anything is started."""
    if not os.access(stepd, os.X_OK):
        sys.exit(f"no stepd binary at {stepd}: build it first (swift build --product stepd)")


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on now (the OS picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def clean_environment(**variables):
    """This process's environment without any STEPLEDGER_ variable (so the caller's settings cannot leak into
    the server under test), plus `variables`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEPLEDGER_")}
    env.update(variables)
    return env


def write_json(path, value):
    """Writes `value` as JSON to `path` (a configuration file, a JWKS, a secrets file); returns the path."""
    with open(path, "w") as f:
        json.dump(value, f)
    return path


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


def migrate(stepd, *arguments, env=None):
    """`stepd migrate ARGUMENTS`; a failure is a Failure quoting stepd's error."""
    migrated = subprocess.run([stepd, "migrate", *arguments], env=env, capture_output=True, text=True)
    if migrated.returncode != 0:
        raise Failure(f"stepd migrate failed ({migrated.returncode}): {migrated.stderr.strip()}")


_STARTED = []


def _kill_left_running():
    """At exit, every process `start` or `track` was given that still runs is killed: a check that fails between
    starting a server and stopping it must not leave it running (and reconnecting to a database the next phase
    removes) on a machine that runs suites one after another."""
    for process in _STARTED:
        if process.poll() is None:
            process.kill()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass


atexit.register(_kill_left_running)


def track(process):
    """`process`, killed at exit should it still run then (see `_kill_left_running`)."""
    _STARTED.append(process)
    return process


def start(stepd, arguments, cwd, env=None, log=None, preexec_fn=None):
    """Starts `stepd ARGUMENTS` in `cwd`; its output is appended to the file `log`, or dropped without one. The
    process is killed at exit if it still runs then."""
    if log is None:
        return track(subprocess.Popen([stepd, *arguments], cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL, preexec_fn=preexec_fn))
    with open(log, "ab") as out:  # the child keeps its own descriptor
        return track(subprocess.Popen([stepd, *arguments], cwd=cwd, env=env, stdout=out, stderr=out,
                                      preexec_fn=preexec_fn))


def _wait_for(port, process, path, timeout, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if process.poll() is not None:
            raise Failure(f"{what} exited early with {process.returncode}")
        if answers(port, path):
            return
        time.sleep(0.05)
    raise Failure(f"{what} did not answer {path} within {timeout} s")


def wait_live(port, process, timeout=60, what="stepd serve"):
    """Waits until the server answers GET /livez with 200 (listening); fails if it exits or stays silent."""
    _wait_for(port, process, "/livez", timeout, what)


def wait_ready(port, process, timeout=60, what="stepd serve"):
    """Waits until the server answers GET /readyz with 200 (its database reachable too)."""
    _wait_for(port, process, "/readyz", timeout, what)


def stop(process, timeout=20):
    """SIGTERM, then SIGKILL if the process has not ended after `timeout` seconds; a no-op once it has ended."""
    if process is None or process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@contextlib.contextmanager
def serving(stepd, arguments, port, cwd, env=None, log=None, ready=False, preexec_fn=None):
    """`stepd ARGUMENTS` (a `serve`) started and answering /livez (/readyz with ready=True) for the block, then
    stopped, whatever the block raised."""
    process = start(stepd, arguments, cwd, env=env, log=log, preexec_fn=preexec_fn)
    try:
        (wait_ready if ready else wait_live)(port, process)
        yield process
    finally:
        stop(process)
