"""Virtual environments of pinned Python tools (Schemathesis, Selenium), from PyPI, in the user's cache."""
import hashlib
import os
import subprocess
import sys


def pinned_venv(name, requirements, override=None):
    """A virtual environment holding exactly what `requirements` pins (every package, dependencies included, so a
    new release of one on PyPI changes no run), made from PyPI when missing or when it was left half made; its
    folder's path. The folder is `override` or ~/.cache/stepledger/NAME-DIGEST, DIGEST naming the file's text, so
    a change of the pins makes a new one."""
    with open(requirements, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:12]
    venv = override or os.path.join(os.path.expanduser("~"), ".cache", "stepledger", f"{name}-{digest}")
    marker = os.path.join(venv, ".stepledger-requirements")
    try:
        with open(marker) as f:
            if f.read().strip() == digest:
                return venv
    except OSError:
        pass
    print(f"==> installing {name} ({os.path.basename(requirements)}, pinned) into {venv}", flush=True)
    subprocess.run([sys.executable, "-m", "venv", "--clear", venv], check=True)
    subprocess.run([os.path.join(venv, "bin", "python"), "-m", "pip", "install", "--quiet",
                    "--disable-pip-version-check", "--no-deps", "-r", requirements], check=True)
    with open(marker, "w") as f:
        f.write(digest + "\n")
    return venv
