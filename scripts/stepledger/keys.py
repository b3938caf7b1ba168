"""Keys and tokens the suites sign with: an RSA key made with openssl and the JWKS that publishes it, RS256
session and App Check tokens, HS256 development tokens, and random secrets. The server under test trusts the
JWKS file; nothing here talks to the network."""
import base64
import hashlib
import hmac
import json
import os
import secrets
import string
import subprocess
import time

# The identities a production configuration of production_settings() trusts (stepledger.server).
PROJECT_NUMBER = "123456789012"
APP_ID = "1:123456789012:ios:stepledger"
ISSUER = "https://auth.example"
AUDIENCE = "stepledger-api"


def b64url(data):
    """Unpadded base64url, as JWTs and JWKS write bytes."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def random_text(length=40):
    """Letters and digits from the secrets module: admin tokens, secrets and unique names."""
    alphabet = string.ascii_letters + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(length))


def generate_rsa_key(path):
    """A 2048-bit RSA private key (PEM, owner-only) written by openssl to `path`; returns the path."""
    subprocess.run(["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", path],
                   check=True, capture_output=True)
    os.chmod(path, 0o600)
    return path


def jwks_for(key, kid):
    """The JWKS publishing the public half of the RSA key file `key` under `kid`."""
    modulus = subprocess.run(["openssl", "rsa", "-in", key, "-noout", "-modulus"], check=True, capture_output=True,
                             text=True).stdout.strip().split("=", 1)[1]
    return {"keys": [{"kty": "RSA", "kid": kid, "alg": "RS256", "use": "sig", "n": b64url(bytes.fromhex(modulus)),
                      "e": "AQAB"}]}


def sign_rs256(claims, key, kid):
    """An RS256 JWT over `claims`, signed by openssl with the RSA key file `key`, its header naming `kid`."""
    header = b64url(json.dumps({"alg": "RS256", "typ": "JWT", "kid": kid}).encode())
    payload = b64url(json.dumps(claims).encode())
    signing_input = f"{header}.{payload}".encode()
    signature = subprocess.run(["openssl", "dgst", "-sha256", "-sign", key], input=signing_input, check=True,
                               capture_output=True).stdout
    return f"{header}.{payload}.{b64url(signature)}"


class Signer:
    """An RSA key made with openssl in `work`, its JWKS, and RS256 JWTs signed with it: session tokens and App
    Check tokens that a configuration from production_settings() accepts."""

    def __init__(self, work, kid="harness"):
        self.kid = kid
        self.key = generate_rsa_key(os.path.join(work, "key.pem"))
        self.jwks = jwks_for(self.key, kid)

    def write_jwks(self, path):
        with open(path, "w") as f:
            json.dump(self.jwks, f)
        return path

    def sign(self, claims):
        return sign_rs256(claims, self.key, self.kid)

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
