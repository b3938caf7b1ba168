"""How a suite states an expectation and how a failed one ends the run."""
import sys


class Failure(Exception):
    """A broken expectation: the suite stops and prints it (see run_suite)."""


def check(condition, what, expected, got):
    """Raises Failure naming what was checked, what was expected and what was seen, when condition is false."""
    if not condition:
        raise Failure(f"{what}\n   expected: {expected}\n   got:      {got}")


def run_suite(main):
    """Runs a suite's main(); a Failure ends it with `FAILED: …` on stderr and exit status 1, so every suite
    reports the same way and scripts/test stops on it."""
    try:
        main()
    except Failure as failure:
        print(f"FAILED: {failure}", file=sys.stderr)
        sys.exit(1)
