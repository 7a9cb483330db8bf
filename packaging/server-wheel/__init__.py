"""The Waymark server, packaged as a wheel: installing it puts the `waymark` binary on PATH
(as a script of the environment, like any console script) and adds `waymark-server`, which runs
the same binary (`pipx run waymark-server server`)."""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig

__version__ = "@VERSION@"


def find_waymark_bin() -> str:
    """The path of the `waymark` binary this package installed."""
    name = "waymark.exe" if sys.platform == "win32" else "waymark"
    folders = [sysconfig.get_path("scripts")]
    folders.append(sysconfig.get_path("scripts", f"{os.name}_user"))  # pip install --user
    # `pip install --target DIR` puts scripts in DIR/bin, beside this package's folder.
    folders.append(os.path.join(os.path.dirname(os.path.dirname(__file__)), "bin"))
    for folder in folders:
        path = os.path.join(folder, name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    found = shutil.which(name)
    if found:
        return found
    raise FileNotFoundError(f"no {name} binary in {', '.join(folders)} nor on PATH")
