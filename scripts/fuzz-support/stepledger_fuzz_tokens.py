"""Session JWTs and App Check tokens for scripts/fuzz and its Schemathesis hooks: RS256, signed by openssl with the
run's key (stepledger.keys, the scripts' shared package, which scripts/fuzz puts on the hooks' PYTHONPATH). Standard
library only, so scripts/fuzz can import it outside Schemathesis's virtual environment."""
import os
import time

from stepledger.keys import PROJECT_NUMBER, sign_rs256

KEY = os.environ.get("STEPLEDGER_FUZZ_KEY", "")

ISSUER = "https://auth.fuzz.example"
AUDIENCE = "stepledger-fuzz"
KEY_ID = "fuzz"
APP_ID = "1:123456789012:ios:stepledger-fuzz"


def session_token(walker, lifetime, key=KEY):
    now = int(time.time())
    return sign_rs256({"sub": walker, "iss": ISSUER, "aud": [AUDIENCE], "iat": now, "exp": now + lifetime}, key,
                      KEY_ID)


def app_check_token(key=KEY):
    now = int(time.time())
    return sign_rs256({
        "iss": f"https://firebaseappcheck.googleapis.com/{PROJECT_NUMBER}",
        "aud": [f"projects/{PROJECT_NUMBER}"],
        "sub": APP_ID, "iat": now, "exp": now + 3600, "jti": f"fuzz-{now}",
    }, key, KEY_ID)
