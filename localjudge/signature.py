"""Provenance signatures and hashing helpers.

A ``Signature`` records everything that produced a stored score: backend and library versions,
model file sha256, chat-template sha256, the label -> token-id map (and its sha256) and the
parameters that were applied. It is built from explicit arguments only.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Signature", "sha256_json", "sha256_text"]


def sha256_text(text: str) -> str:
    """sha256 hex digest of ``text`` encoded as UTF-8."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sha256_json(obj: Any) -> str:
    """sha256 hex digest of the canonical JSON of ``obj`` (sorted keys, no spaces)."""
    return sha256_text(json.dumps(obj, sort_keys=True, separators=(",", ":")))


@dataclass(frozen=True, slots=True)
class Signature:
    """What produced a distribution or a score.

    Attributes:
        backend: backend name, ``"llama_cpp"``, ``"hf"`` or ``"fake"``.
        backend_version: version of the inference library (llama-cpp-python, transformers).
        model: model name (manifest name, file name or Hugging Face id).
        model_sha256: sha256 of the model file (GGUF) or of its weight files; ``""`` if unknown.
        template_sha256: sha256 of the chat template that was rendered, or ``"raw"`` when the
            caller supplied the prompt format (raw completion).
        label_map: label -> list of token-id sequences, exactly as used.
        label_map_sha256: sha256 of ``label_map`` as canonical JSON.
        params: the parameters that were applied (min_mass, prefill, prune threshold, ...).
        versions: package versions (localjudge, numpy, torch, ...).
    """

    backend: str
    backend_version: str
    model: str
    model_sha256: str
    template_sha256: str
    label_map: dict[str, list[list[int]]]
    label_map_sha256: str
    params: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)

    def format(self, short: bool = False) -> str:
        """A stable one-line form.

        Example: ``backend:llama_cpp-0.3.36|model:smollm2@b179c952|tmpl:8c1d02aa|labels:1-5|...``
        """
        labels = list(self.label_map)
        if labels and all(_is_int(x) for x in labels) and len(labels) > 2:
            lab = f"{labels[0]}-{labels[-1]}"
        else:
            lab = ",".join(labels)
        parts = [
            f"backend:{self.backend}-{self.backend_version}",
            f"model:{self.model}@{self.model_sha256[:8]}",
            f"tmpl:{self.template_sha256[:8]}",
            f"labels:{lab}@{self.label_map_sha256[:8]}",
        ]
        if not short:
            parts += [f"{k}:{self.params[k]}" for k in sorted(self.params)]
        parts.append(f"v:{self.versions.get('localjudge', '?')}")
        return "|".join(parts)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable dict; ``Signature.from_dict`` inverts it."""
        return {
            "backend": self.backend,
            "backend_version": self.backend_version,
            "model": self.model,
            "model_sha256": self.model_sha256,
            "template_sha256": self.template_sha256,
            "label_map": {k: [list(s) for s in v] for k, v in self.label_map.items()},
            "label_map_sha256": self.label_map_sha256,
            "params": dict(self.params),
            "versions": dict(self.versions),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Signature:
        """Inverse of ``to_dict``."""
        return cls(
            backend=d["backend"],
            backend_version=d["backend_version"],
            model=d["model"],
            model_sha256=d["model_sha256"],
            template_sha256=d["template_sha256"],
            label_map={k: [list(s) for s in v] for k, v in d["label_map"].items()},
            label_map_sha256=d["label_map_sha256"],
            params=dict(d.get("params", {})),
            versions=dict(d.get("versions", {})),
        )


def _is_int(x: str) -> bool:
    try:
        int(x)
    except ValueError:
        return False
    return True
