"""A real Waymark server process for the tests: a fresh SQLite database in a temp folder, a
free port, killed afterwards. The binary is `WAYMARK_BIN`, else <repo>/target/debug/waymark."""

from __future__ import annotations

import os
import pathlib
import socket
import subprocess
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[3]

# Short timings so recovery and dispatch happen within a test's patience.
FLAGS = [
    "--worker-lease", "3s",
    "--heartbeat-interval", "500ms",
    "--recovery-grace", "1s",
    "--recovery-interval", "200ms",
    "--dispatch-poll-interval", "100ms",
]  # fmt: skip


def binary() -> str:
    path = os.environ.get("WAYMARK_BIN") or str(REPO / "target" / "debug" / "waymark")
    if not os.access(path, os.X_OK):
        raise RuntimeError(f"no Waymark server binary at {path}: build it or set WAYMARK_BIN")
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    def __init__(self, port: int | None = None) -> None:
        self.dir = tempfile.TemporaryDirectory(prefix="waymark-py-")
        self.port = port or free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Server:
        db = pathlib.Path(self.dir.name, "waymark.db")
        log = open(pathlib.Path(self.dir.name, "server.log"), "ab")
        self.proc = subprocess.Popen(
            [
                binary(),
                "server",
                "--listen",
                self.address,
                "--database-url",
                f"sqlite:{db}",
                *FLAGS,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the server exited with {self.proc.returncode}: {self.log()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("the server did not listen within 30 s")

    def log(self) -> str:
        return pathlib.Path(self.dir.name, "server.log").read_text(errors="replace")[-4000:]

    def kill(self) -> None:
        """Kills the process, keeping its database for a `start()` again."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stop(self) -> None:
        self.kill()
        self.dir.cleanup()
