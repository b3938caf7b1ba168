"""What the real-process suites under scripts/ share, so each script holds only its own scenario.

- checks:   Failure, check() and run_suite(), the one way a suite states an expectation and fails, and
            one_line_refusal() for a stepd that must refuse to start with one line.
- keys:     an RSA key made with openssl, its JWKS, RS256 and HS256 tokens, random secrets.
- client:   HTTP calls to 127.0.0.1 (urllib, no dependencies).
- server:   the stepd binary, free ports, starting, waiting for and stopping processes, configurations.
- postgres: a fresh database on the throwaway server of scripts/with-postgres.
- walkers:  simulated walkers that retry until acknowledged, and the checks that nothing they were
            acknowledged was lost or doubled (the crash and outage suites).

Standard library only: scripts/fuzz's Schemathesis hooks import it from another virtual environment.
A script puts its own folder on sys.path and imports the modules it needs, e.g.
`from stepledger.server import free_port`.
"""
