#!/usr/bin/env python3
"""Keeps an SDK README's example code blocks identical to the files the tests run.

A block is tied to a file by an HTML comment on the line before its opening fence, which
renderers do not show:

    <!-- example: examples/quickstart/worker.py -->
    ```python
    ...the file's text, byte for byte...
    ```

`readme_examples.py check README...` fails, with a diff, when a tied block differs from its file
(the path is relative to the README's folder), and when a README ties no block at all.
`readme_examples.py write README...` copies each file into its block instead.
"""

from __future__ import annotations

import difflib
import pathlib
import re
import sys

MARK = re.compile(r"^<!-- example: (?P<path>\S+) -->\n(?P<fence>```[^\n]*)\n", re.M)


def blocks(text: str) -> list[tuple[str, int, int]]:
    """(path, start, end) of each tied block's body in text."""
    found = []
    for m in MARK.finditer(text):
        start = m.end()
        end = text.find("\n```\n", start - 1)
        if end < 0:
            raise SystemExit(f"unclosed code block after <!-- example: {m['path']} -->")
        found.append((m["path"], start, end + 1))
    return found


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] not in ("check", "write"):
        print(__doc__, file=sys.stderr)
        return 2
    failed = False
    for readme in map(pathlib.Path, argv[2:]):
        text = readme.read_text(encoding="utf-8")
        tied = blocks(text)
        if not tied:
            print(f"{readme}: no <!-- example: PATH --> block", file=sys.stderr)
            failed = True
        # Back to front, so the offsets of the blocks not yet written stay right.
        for path, start, end in reversed(tied):
            file_text = (readme.parent / path).read_text(encoding="utf-8")
            body = text[start:end]
            if argv[1] == "write":
                text = text[:start] + file_text + text[end:]
            elif body != file_text:
                failed = True
                print(f"{readme}: the block tied to {path} differs from the file:", file=sys.stderr)
                sys.stderr.writelines(
                    difflib.unified_diff(
                        file_text.splitlines(keepends=True),
                        body.splitlines(keepends=True),
                        fromfile=path,
                        tofile=f"{readme} block",
                    )
                )
            else:
                print(f"{readme}: block = {path}")
        if argv[1] == "write":
            readme.write_text(text, encoding="utf-8")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
