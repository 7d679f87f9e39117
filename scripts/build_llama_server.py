#!/usr/bin/env python3
"""Build llama.cpp's ``llama-server`` into the localjudge cache (``<cache>/bin/llama-server``).

No binary of ``llama-server`` comes from PyPI, but the llama-cpp-python sdist pinned in
``pyproject.toml`` vendors the llama.cpp sources it is built from. This script:

1. ``pip download --no-binary :all: --no-deps llama-cpp-python==<pin>`` (pip's cache serves
   it again), and checks its sha256 against the pin below;
2. configures llama.cpp's CMake project with the web UI, its download and OpenSSL off (there
   is no network at build time and the server only listens on 127.0.0.1);
3. builds the ``llama-server`` target (static libraries, about 15-25 min on 2 cores) and
   installs the binary atomically, with a JSON stamp naming the sdist sha256 and flags.

A binary whose stamp matches is kept; ``--force`` rebuilds. The server and the in-process
``LlamaCppBackend`` then run the same llama.cpp revision on the same GGUF files.

Usage: python scripts/build_llama_server.py [--force] [--jobs N]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from localjudge.models import cache_dir, hash_file

PACKAGE = "llama-cpp-python"
VERSION = "0.3.36"
SDIST = f"llama_cpp_python-{VERSION}.tar.gz"
SDIST_SHA256 = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
CMAKE_FLAGS = [
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DLLAMA_BUILD_SERVER=ON",
    "-DLLAMA_BUILD_TOOLS=ON",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_OPENSSL=OFF",
]


def _stamp() -> dict[str, object]:
    return {"package": PACKAGE, "version": VERSION, "sdist_sha256": SDIST_SHA256,
            "cmake_flags": CMAKE_FLAGS}


def _up_to_date(binary: Path, stamp_file: Path) -> bool:
    if not (binary.is_file() and stamp_file.is_file()):
        return False
    try:
        if json.loads(stamp_file.read_text()) != _stamp():
            return False
    except (OSError, ValueError):
        return False
    r = subprocess.run([str(binary), "--version"], check=False, capture_output=True, timeout=60)
    return r.returncode == 0


def build(force: bool = False, jobs: int = 2) -> Path:
    """Build (or keep) ``<cache>/bin/llama-server``; returns its path.

    Raises:
        SystemExit: download, checksum, configure or build failure (with the log's tail).
    """
    bin_dir = cache_dir() / "bin"
    binary = bin_dir / "llama-server"
    stamp_file = bin_dir / "llama-server.json"
    if not force and _up_to_date(binary, stamp_file):
        print(f"[llama-server] cached, stamp ok ({binary})")
        return binary
    bin_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=bin_dir, prefix=".build-") as tmp_s:
        tmp = Path(tmp_s)
        print(f"[llama-server] fetching the {PACKAGE}=={VERSION} sdist")
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                        "--no-binary", ":all:", f"{PACKAGE}=={VERSION}", "-d", str(tmp)],
                       check=True)
        sdist = tmp / SDIST
        if not sdist.is_file():
            raise SystemExit(f"pip download gave no {SDIST} in {tmp}: "
                             f"{sorted(p.name for p in tmp.iterdir())}")
        got = hash_file(sdist)
        if got != SDIST_SHA256:
            raise SystemExit(f"{SDIST}: sha256 {got} != pinned {SDIST_SHA256}")
        print("[llama-server] sha256 ok; extracting the vendored llama.cpp sources")
        prefix = f"llama_cpp_python-{VERSION}/vendor/llama.cpp/"
        with tarfile.open(sdist) as tf:
            members = [m for m in tf.getmembers() if m.name.startswith(prefix)]
            tf.extractall(tmp / "src", members=members, filter="data")
        src = tmp / "src" / prefix
        build_dir = tmp / "build"
        log = tmp / "build.log"
        env = {**os.environ, "CMAKE_BUILD_PARALLEL_LEVEL": str(jobs)}
        steps = [["cmake", "-S", str(src), "-B", str(build_dir), *CMAKE_FLAGS],
                 ["cmake", "--build", str(build_dir), "--target", "llama-server",
                  "-j", str(jobs)]]
        for cmd in steps:
            print(f"[llama-server] {' '.join(cmd[:4])} ... (log: {log})", flush=True)
            with log.open("ab") as fh:
                r = subprocess.run(cmd, check=False, stdout=fh, stderr=subprocess.STDOUT,
                                   env=env)
            if r.returncode != 0:
                tail = log.read_bytes()[-3000:].decode("utf-8", errors="replace")
                raise SystemExit(f"{' '.join(cmd[:3])} failed ({r.returncode}):\n{tail}")
        built = build_dir / "bin" / "llama-server"
        if not built.is_file():
            raise SystemExit(f"build finished but {built} is missing")
        tmp_bin = bin_dir / ".llama-server.tmp"
        shutil.copy2(built, tmp_bin)
        os.replace(tmp_bin, binary)
        stamp_file.write_text(json.dumps(_stamp(), indent=1))
    r = subprocess.run([str(binary), "--version"], check=False, capture_output=True,
                       text=True, timeout=60)
    print(f"[llama-server] built {binary}: {(r.stdout + r.stderr).strip().splitlines()[:2]}")
    return binary


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--force", action="store_true", help="rebuild even if the stamp matches")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    args = ap.parse_args()
    build(force=args.force, jobs=args.jobs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
