"""Moves what `buf generate` wrote (STAGING/waymark/v1/*) into a flat package (DEST) and makes
its imports package-relative.

The generators import siblings by proto package (`from waymark.v1 import types_pb2`), which
would resolve against a top-level `waymark.v1` that does not exist; the stubs live in the private
subpackage `waymark._proto`, so `from . import types_pb2` is what they need.
"""

import pathlib
import re
import shutil
import sys

SIBLING = re.compile(r"^from waymark\.v1 import ", re.MULTILINE)
HEADER = '"""Generated from proto/waymark/v1 by `make proto`. Do not edit."""\n'


def main(staging: str, dest: str) -> None:
    src = pathlib.Path(staging, "waymark", "v1")
    out = pathlib.Path(dest)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    for path in sorted(src.iterdir()):
        text = SIBLING.sub("from . import ", path.read_text())
        if re.search(r"^\s*(import|from) waymark\.v1\b", text, re.MULTILINE):
            sys.exit(f"{path.name}: an import of waymark.v1 this script does not rewrite")
        (out / path.name).write_text(text)
    (out / "__init__.py").write_text(HEADER)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
