"""Model-file resolution shared by the backends: manifest name or GGUF path -> verified file.

Both ``LlamaCppBackend`` and ``HFBackend`` accept an embedded manifest name
(``"qwen2.5-coder-0.5b-instruct"``) or a path to a ``.gguf`` file and must resolve, verify and
name it identically, so the signatures of the two backends carry the same ``model`` and
``model_sha256`` for the same bytes. Hugging Face model ids and folders are resolved in
``localjudge.backends.hf``; downloading lives in ``scripts/fetch_models.py``, never here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from localjudge.errors import ConfigError, ModelFileError
from localjudge.models import file_sha256, load_manifest, model_path, verify_file

__all__ = ["ResolvedFile", "looks_like_manifest_name", "resolve_model_file"]


@dataclass(frozen=True)
class ResolvedFile:
    """A verified model file.

    Attributes:
        path: the file (GGUF) or, for an ``hf_dir`` manifest, the model folder.
        name: display name for signatures: the manifest name, or the file name for a path.
        sha256: sha256 hex digest of the file (the manifest's pinned digest for manifests).
        manifest_format: ``"gguf"`` / ``"hf_dir"`` for a manifest, None for a plain path.
    """

    path: Path
    name: str
    sha256: str
    manifest_format: str | None


def looks_like_manifest_name(model: str | os.PathLike[str]) -> bool:
    """True when ``model`` is to be read as a manifest name rather than a path.

    A manifest name has no ``.gguf`` suffix, no path separator and is not an existing path.
    """
    s = str(model)
    return not s.endswith(".gguf") and os.sep not in s and not Path(s).exists()


def resolve_model_file(model: str | os.PathLike[str], sha256: str | None) -> ResolvedFile:
    """Resolve a manifest name or a model-file path and verify its sha256.

    Args:
        model: embedded manifest name (see ``models/``) or a path to a model file.
        sha256: expected sha256 hex digest. For a manifest name it must equal the manifest's
            (or be None); for a path it is checked when given, else the file is only hashed.

    Returns:
        A ``ResolvedFile``; for manifests the file was verified against the manifest digest.

    Raises:
        ConfigError: unknown manifest name, or ``sha256`` differs from the manifest's.
        ModelFileError: missing file, or its sha256 differs from the expected digest (the
            message names the file and the expected digest).
    """
    s = str(model)
    if looks_like_manifest_name(s):
        m = load_manifest(s)  # ConfigError for an unknown name
        if sha256 is not None and sha256.lower() != m.sha256:
            raise ConfigError(f"sha256={sha256!r} differs from manifest {m.name!r} ({m.sha256})")
        return ResolvedFile(model_path(s), m.name, m.sha256, m.format)
    p = Path(s)
    if not p.is_file():
        raise ModelFileError(
            f"model file not found: {p}" + (f" (expected sha256 {sha256})" if sha256 else ""),
            path=str(p), expected_sha256=sha256,
        )
    digest = verify_file(p, sha256) if sha256 else file_sha256(p)
    return ResolvedFile(p, p.name, digest, None)
