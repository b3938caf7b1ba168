"""Swift source text for the files stepd compiles in (scripts/embed-console-assets, scripts/embed-openapi)."""


def raw_literal(text, name):
    """A Swift raw multi-line string literal whose value is exactly `text`, which must end with a newline and use
    \\n line ends (`name` says which file in the error). The number of `#` is chosen so that nothing in the text
    can end the literal or start an interpolation."""
    if not text.endswith("\n"):
        raise SystemExit(f"{name} must end with a newline")
    if "\r" in text:
        raise SystemExit(f"{name} must use \\n line ends only")
    hashes = 1
    while f'"""{"#" * hashes}' in text or f'\\{"#" * hashes}' in text:
        hashes += 1
    fence = "#" * hashes
    # The closing delimiter at column 0 strips no indentation; the newline before it is not part of the value.
    return f'{fence}"""\n{text}\n"""{fence}'
