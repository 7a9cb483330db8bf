"""A real Waymark server process for the tests: a fresh SQLite database in a temp folder, a
free port, killed afterwards. The binary is `WAYMARK_BIN`, else <repo>/target/debug/waymark.

`Server(tls=certs)` serves TLS with the certificates `make_certs` wrote (`client_ca=True` also
asks clients for a certificate signed by `ca.pem`); `Server(auth=True)` turns API keys on and
has the server write an admin key (`server.admin_key`). `await server.cli(...)` runs the
`waymark` command against it."""

from __future__ import annotations

import asyncio
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


def make_certs(folder: pathlib.Path) -> pathlib.Path:
    """Writes a throwaway CA (`ca.pem`), a server certificate for localhost and 127.0.0.1
    (`server.pem`, `server.key`), a client certificate (`client.pem`, `client.key`) and an
    unrelated CA (`other-ca.pem`) into `folder`, with the `waymark-test-certs` built beside the
    server binary (`WAYMARK_TEST_CERTS_BIN` to name another)."""
    tool = os.environ.get("WAYMARK_TEST_CERTS_BIN") or str(
        pathlib.Path(binary()).with_name("waymark-test-certs")
    )
    if not os.access(tool, os.X_OK):
        raise RuntimeError(
            f"no waymark-test-certs at {tool}: build it or set WAYMARK_TEST_CERTS_BIN"
        )
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run([tool, str(folder)], check=True, capture_output=True)
    return folder


class Server:
    def __init__(
        self,
        port: int | None = None,
        *,
        tls: pathlib.Path | None = None,
        client_ca: bool = False,
        auth: bool = False,
    ) -> None:
        self.dir = tempfile.TemporaryDirectory(prefix="waymark-py-")
        self.port = port or free_port()
        self.address = f"127.0.0.1:{self.port}"
        # The certificates folder (see `make_certs`) when serving TLS.
        self.tls = tls
        self.client_ca = client_ca
        self.auth = auth
        # With `auth`: the admin key the server wrote at its first start.
        self.admin_key: str | None = None
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.address}"

    def _flags(self) -> list[str]:
        flags: list[str] = []
        if self.tls is not None:
            flags += ["--tls-cert", str(self.tls / "server.pem")]
            flags += ["--tls-key", str(self.tls / "server.key")]
            if self.client_ca:
                flags += ["--tls-client-ca", str(self.tls / "ca.pem")]
        if self.auth:
            flags += ["--auth", "--init-admin-key-file", str(self._admin_key_file)]
        return flags

    @property
    def _admin_key_file(self) -> pathlib.Path:
        return pathlib.Path(self.dir.name, "admin.key")

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
                # A free port for the console: the usual one, beside --listen, may be another
                # test server's.
                "--console-listen",
                "127.0.0.1:0",
                *FLAGS,
                *self._flags(),
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
            except OSError:
                time.sleep(0.05)
                continue
            if self.auth and self.admin_key is None:
                key = (
                    self._admin_key_file.read_text().strip()
                    if self._admin_key_file.exists()
                    else ""
                )
                if not key:
                    time.sleep(0.05)
                    continue
                self.admin_key = key
            return self
        raise RuntimeError(f"the server was not ready within 30 s: {self.log()}")

    def client_env(self, api_key: str | None = None) -> dict[str, str]:
        """The environment that points the `waymark` command (or an SDK) at this server, with
        `api_key` (the admin key by default, when auth is on)."""
        env = {"WAYMARK_SERVER": self.url}
        if self.tls is not None:
            env["WAYMARK_TLS_CA"] = str(self.tls / "ca.pem")
            if self.client_ca:
                env["WAYMARK_TLS_CERT"] = str(self.tls / "client.pem")
                env["WAYMARK_TLS_KEY"] = str(self.tls / "client.key")
        key = api_key or self.admin_key
        if key:
            env["WAYMARK_API_KEY"] = key
        return env

    async def cli(self, *args: str, api_key: str | None = None) -> str:
        """Runs `waymark ARGS...` against this server (as admin unless `api_key`); returns its
        stdout, raising with its stderr when it fails. Run as a subprocess of the event loop,
        so workers in the test keep serving meanwhile."""
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith("WAYMARK_") or k == "WAYMARK_BIN"
        }
        env.update(self.client_env(api_key))
        proc = await asyncio.create_subprocess_exec(
            binary(),
            *args,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(proc.communicate(), 60)
        if proc.returncode != 0:
            raise RuntimeError(
                f"waymark {' '.join(args)} exited with {proc.returncode}: {err.decode(errors='replace')}"
            )
        return out.decode()

    async def create_key(self, role: str, *args: str) -> str:
        """A new API key of `role`, made with `waymark key create` as admin."""
        out = await self.cli("key", "create", "--role", role, *args)
        return out.splitlines()[0].strip()

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
