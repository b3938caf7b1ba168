"""Session JWTs and App Check tokens for scripts/fuzz and its Schemathesis hooks: RS256, signed by openssl with the
run's key. Standard library only, so scripts/fuzz can import it outside Schemathesis's virtual environment."""
import base64
import json
import os
import subprocess
import time

KEY = os.environ.get("STEPLEDGER_FUZZ_KEY", "")

ISSUER = "https://auth.fuzz.example"
AUDIENCE = "stepledger-fuzz"
KEY_ID = "fuzz"
PROJECT_NUMBER = "123456789012"
APP_ID = "1:123456789012:ios:stepledger-fuzz"


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def sign(claims, key=KEY):
    """An RS256 JWT over `claims`, signed by openssl with the run's key."""
    header = b64url(json.dumps({"alg": "RS256", "typ": "JWT", "kid": KEY_ID}).encode())
    payload = b64url(json.dumps(claims).encode())
    signing_input = f"{header}.{payload}".encode()
    signature = subprocess.run(
        ["openssl", "dgst", "-sha256", "-sign", key], input=signing_input, check=True, capture_output=True
    ).stdout
    return f"{header}.{payload}.{b64url(signature)}"


def session_token(walker, lifetime, key=KEY):
    now = int(time.time())
    return sign({"sub": walker, "iss": ISSUER, "aud": [AUDIENCE], "iat": now, "exp": now + lifetime}, key)


def app_check_token(key=KEY):
    now = int(time.time())
    return sign({
        "iss": f"https://firebaseappcheck.googleapis.com/{PROJECT_NUMBER}",
        "aud": [f"projects/{PROJECT_NUMBER}"],
        "sub": APP_ID, "iat": now, "exp": now + 3600, "jti": f"fuzz-{now}",
    }, key)
