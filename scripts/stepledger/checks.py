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


def one_line_refusal(result, what, fragments):
    """`result` (a finished `stepd` run) refused to start with exactly one `stepd: …` line on stderr naming every
    one of `fragments`, and no usage text; prints the line."""
    lines = result.stderr.strip().splitlines()
    check(result.returncode != 0, f"{what}: stepd refuses to start", "a non-zero exit", result.returncode)
    check(len(lines) == 1 and lines[0].startswith("stepd: "), f"{what}: one line on stderr", "stepd: …",
          result.stderr)
    check("Usage:" not in result.stderr + result.stdout, f"{what}: no usage text", "none", result.stderr)
    for fragment in fragments:
        check(fragment in lines[0], f"{what}: the line names {fragment}", fragment, lines[0])
    print(f"ok: {what}: {lines[0]}")
