"""`waymark-server ARGS` and `python -m waymark_server ARGS` run `waymark ARGS`."""

from __future__ import annotations

import os
import subprocess
import sys

from waymark_server import find_waymark_bin


def main() -> None:
    binary = find_waymark_bin()
    args = [binary, *sys.argv[1:]]
    if sys.platform == "win32":
        sys.exit(subprocess.call(args))
    os.execv(binary, args)  # replaces this process: signals and the exit code are the binary's


if __name__ == "__main__":
    main()
