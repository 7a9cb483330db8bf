#!/usr/bin/env python3
"""Builds the waymark-server wheel around a `waymark` binary, with the standard library only.

    build_server_wheel.py BINARY VERSION OUTDIR

The binary goes in as a script of the wheel (`waymark_server-V.data/scripts/waymark`), which
installers copy into the environment's bin folder, as they do a console script; the small
package `waymark_server` adds `waymark-server` (and `python -m waymark_server`), which runs it.
The platform tag is manylinux_X_Y_x86_64, X.Y the newest GLIBC_ symbol version the binary
needs (objdump -T), so pip installs it only where that glibc is.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import pathlib
import re
import subprocess
import sys
import time
import zipfile

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
NAME = "waymark_server"
# Zip entries carry this time (SOURCE_DATE_EPOCH when set), so a rebuild is the same bytes.
EPOCH = int(os.environ.get("SOURCE_DATE_EPOCH", "315532800"))  # 1980-01-01, zip's earliest


def glibc_needed(binary: pathlib.Path) -> tuple[int, int]:
    out = subprocess.run(["objdump", "-T", str(binary)], check=True, capture_output=True, text=True).stdout
    versions = {tuple(map(int, v.split("."))) for v in re.findall(r"GLIBC_(\d+\.\d+(?:\.\d+)?)", out)}
    if not versions:
        raise SystemExit(f"{binary}: no GLIBC_ symbol versions (not a dynamically linked glibc binary?)")
    newest = max(versions)
    return newest[0], newest[1]


def machine(binary: pathlib.Path) -> str:
    out = subprocess.run(["objdump", "-f", str(binary)], check=True, capture_output=True, text=True).stdout
    if "elf64-x86-64" not in out:
        raise SystemExit(f"{binary}: not an x86-64 ELF binary:\n{out}")
    return "x86_64"


def record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def main(argv: list[str]) -> int:
    if len(argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    binary, version, outdir = pathlib.Path(argv[1]), argv[2], pathlib.Path(argv[3])
    arch = machine(binary)
    major, minor = glibc_needed(binary)
    platform = f"manylinux_{major}_{minor}_{arch}"
    tag = f"py3-none-{platform}"
    dist_info = f"{NAME}-{version}.dist-info"
    data = f"{NAME}-{version}.data"
    readme = (HERE / "server-wheel" / "README.md").read_text(encoding="utf-8")
    metadata = "\n".join(
        [
            "Metadata-Version: 2.1",
            "Name: waymark-server",
            f"Version: {version}",
            "Summary: The Waymark durable-execution server (the waymark binary), no Rust toolchain needed",
            "Home-page: https://github.com/waymark-dev/waymark",
            "License: Apache-2.0",
            "Keywords: durable execution,workflows,grpc,waymark",
            "Classifier: Operating System :: POSIX :: Linux",
            "Classifier: Programming Language :: Rust",
            "Requires-Python: >=3.8",
            "Description-Content-Type: text/markdown",
            "",
            readme,
        ]
    )
    wheel = "\n".join(
        [
            "Wheel-Version: 1.0",
            "Generator: waymark packaging/build_server_wheel.py",
            "Root-Is-Purelib: false",
            f"Tag: {tag}",
            "",
        ]
    )
    init = (HERE / "server-wheel" / "__init__.py").read_text(encoding="utf-8").replace("@VERSION@", version)
    entries: list[tuple[str, bytes, int]] = [
        (f"{NAME}/__init__.py", init.encode(), 0o644),
        (f"{NAME}/__main__.py", (HERE / "server-wheel" / "__main__.py").read_bytes(), 0o644),
        (f"{data}/scripts/waymark", binary.read_bytes(), 0o755),
        (f"{dist_info}/METADATA", metadata.encode(), 0o644),
        (f"{dist_info}/WHEEL", wheel.encode(), 0o644),
        (f"{dist_info}/entry_points.txt", b"[console_scripts]\nwaymark-server = waymark_server.__main__:main\n", 0o644),
        (f"{dist_info}/LICENSE", (ROOT / "LICENSE").read_bytes(), 0o644),
    ]
    record = "\n".join([*(record_line(p, d) for p, d, _ in entries), f"{dist_info}/RECORD,,", ""])
    entries.append((f"{dist_info}/RECORD", record.encode(), 0o644))

    outdir.mkdir(parents=True, exist_ok=True)
    target = outdir / f"{NAME}-{version}-{tag}.whl"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for path, payload, mode in entries:
            info = zipfile.ZipInfo(path, date_time=_zip_time())
            info.external_attr = (0o100000 | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, payload)
    target.write_bytes(buf.getvalue())
    print(target)
    return 0


def _zip_time() -> tuple[int, int, int, int, int, int]:
    t = time.gmtime(max(EPOCH, 315532800))
    return (t.tm_year, t.tm_mon, t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
