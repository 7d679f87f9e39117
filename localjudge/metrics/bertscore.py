"""BERTScore (Zhang et al. 2019, arXiv 1904.09675, section 3) with the embedded MiniLM encoder.

What lives here: ``BERTScorer`` (the class that holds a loaded encoder; the name is kept from
the ``bert_score`` package), its result types ``BERTScoreResult`` and ``TokenAlignment``, the
rescale baseline ``BERTScoreBaseline`` (loads ``bert_score``'s ``LAYER,P,R,F`` files and the
JSON files written by ``python -m bench.floor``), ``rescale`` and the thin one-shot function
``bertscore``. What does not: lexical metrics (``localjudge.metrics.lexical``), the floor and
ranking experiments (``bench.floor``, ``bench.ranking``), and ``bert_score`` itself (a test
dependency only, used to check agreement).

torch and transformers are imported inside the functions that need them, never at import time,
so ``import localjudge.metrics`` stays light.

Formula (paper section 3, "Similarity Measure", "BERTScore", "Importance Weighting", and
"Baseline Rescaling"): with L2-normalised token embeddings ``x_i`` (response) and ``y_j``
(reference) taken from one encoder layer and weights ``w`` (1, or idf)::

    P = sum_i w(x_i) max_j x_i.y_j / sum_i w(x_i)
    R = sum_j w(y_j) max_i x_i.y_j / sum_j w(y_j)
    F = 2 P R / (P + R)
    idf(t) = log((M + 1) / (c_t + 1))       # bert_score's smoothed form of the paper's -log(c_t/M)
    rescaled = (score - b) / (1 - b)        # b: average score of unrelated text, per layer

Special tokens (``[CLS]``/``[SEP]``, ``<s>``/``</s>``) get weight 0, so they contribute no
term to P or R. As in ``bert_score`` they stay in the embedding matrices, so a content token's
best match *can* be a special token (the alignment listing then shows it); this keeps the
scores identical to ``bert_score`` (mirrors ``bert_score/utils.py`` ``greedy_cos_idf`` and
``bert_cos_score_idf`` of ``Tiiiger/bert_score`` release 0.3.13 as published on PyPI as
``bert-score==0.3.13``; the git commit of that release was not checked).

Unlike ``bert_score``, nothing is truncated silently and empty texts are refused: a text longer
than the encoder's limit raises ``TextTooLongError``, an empty one ``EmptyTextError``. One
deliberate difference: ``bert_score`` multiplies padded similarities by 0 before the max, so
when a token's best cosine is negative (near-orthogonal embeddings, e.g. MiniLM layer 6 on
unrelated text) and its pair shares a batch with a longer text, it gets 0 instead: its score
depends on the batch. Here the max is over real tokens only (the paper's formula), which
equals ``bert_score`` run with ``batch_size=1``.
"""

from __future__ import annotations

import csv
import hashlib
import json
import logging
import math
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from localjudge.errors import ConfigError, ModelFileError
from localjudge.models import file_sha256, list_manifests, load_manifest, model_path
from localjudge.signature import Signature, sha256_json
from localjudge.version import package_versions

if TYPE_CHECKING:  # pragma: no cover
    import torch

__all__ = [
    "DEFAULT_LAYERS",
    "DEFAULT_MODEL",
    "BERTScoreBaseline",
    "BERTScoreResult",
    "BERTScorer",
    "BaselineError",
    "EmptyTextError",
    "TextTooLongError",
    "TokenAlignment",
    "UnknownTextError",
    "bertscore",
    "load_baseline",
    "rescale",
]

logger = logging.getLogger(__name__)

DEFAULT_MODEL = "all-minilm-l6-v2"
"""Manifest name of the embedded encoder (sentence-transformers/all-MiniLM-L6-v2, 6 layers)."""

DEFAULT_LAYERS: dict[str, int] = {
    # bert_score's model2layers (bert_score/utils.py), chosen there by WMT16 correlation.
    "roberta-large": 17,
    "distilbert-base-uncased": 5,
    "microsoft/deberta-large-mnli": 18,
    "microsoft/deberta-xlarge-mnli": 40,
    # Embedded encoder: the last layer (the one sentence-transformers trained for similarity).
    # Chosen by bench.floor (run 20261129T191830Z-ea850d06, 1000 SummEval pairs, seed 0): it
    # has by far the lowest floor, F = 0.159 [0.155, 0.163] vs 0.31-0.49 at layers 0-5, so the
    # widest raw range. bench.ranking (run 20261129T192244Z-3c164e0c) found no layer that
    # orders A > C > B on any item, so ranking does not favour another layer. Not tuned on
    # human judgments.
    "all-minilm-l6-v2": 6,
}
"""Layer used when ``layer=None``: model name -> hidden-state index (0 = embedding output)."""

_SPECIAL_ATTRS = ("cls_token_id", "sep_token_id")


class EmptyTextError(ConfigError):
    """A response or reference is empty (or only whitespace); BERTScore is undefined for it.

    Attributes:
        argument: ``"responses"``, ``"references"`` or ``"idf_references"``.
        index: position of the text in that argument.
    """

    code = "empty_text"

    def __init__(self, argument: str, index: int) -> None:
        super().__init__(
            f"{argument}[{index}] is empty (after stripping whitespace); BERTScore has no tokens "
            "to match, so no score is defined: drop the item or record it as an error"
        )
        self.argument = argument
        self.index = index


class UnknownTextError(ConfigError):
    """Every content token of a text is the encoder's unknown token (e.g. emoji-only text for
    a WordPiece vocabulary); BERTScore would compare nothing and report a perfect match."""

    code = "unknown_text"

    def __init__(self, argument: str, index: int, unk: str) -> None:
        super().__init__(
            f"{argument}[{index}] consists only of unknown tokens ({unk!r}) for this encoder; "
            "BERTScore would compare nothing. Use an encoder whose vocabulary covers the text, "
            "or record the item as an error"
        )
        self.argument = argument
        self.index = index


class TextTooLongError(ConfigError):
    """A text has more tokens (special tokens included) than the encoder accepts.

    ``bert_score`` truncates such texts silently; localjudge refuses them.

    Attributes:
        argument: ``"responses"``, ``"references"`` or ``"idf_references"``.
        index: position of the text in that argument.
        n_tokens: tokens of the text, special tokens included.
        max_tokens: the encoder's limit.
    """

    code = "text_too_long"

    def __init__(self, argument: str, index: int, n_tokens: int, max_tokens: int) -> None:
        super().__init__(
            f"{argument}[{index}] has {n_tokens} tokens (special tokens included) but the "
            f"encoder accepts at most {max_tokens}; localjudge never truncates silently: split "
            "or shorten the text"
        )
        self.argument = argument
        self.index = index
        self.n_tokens = n_tokens
        self.max_tokens = max_tokens


class BaselineError(ConfigError):
    """A rescale baseline cannot be applied: missing or malformed file, layer absent, values
    out of range, or a baseline computed for another encoder."""

    code = "baseline"


# --------------------------------------------------------------------------------------------
# Baselines
# --------------------------------------------------------------------------------------------


def rescale(value: float, baseline: float) -> float:
    """Baseline rescaling ``(value - baseline) / (1 - baseline)``.

    Zhang et al. 2019 (arXiv 1904.09675), section 3 "Baseline Rescaling" (ICLR 2020 version).
    Monotone increasing in ``value``, so rankings never change; it maps ``baseline`` to 0 and 1
    to 1, and unrelated text lands near 0 (it can be negative).

    Args:
        value: a raw BERTScore P, R or F, in [-1, 1].
        baseline: the baseline for the same model, layer and component, in [-1, 1).

    Returns:
        The rescaled value (unbounded below, at most 1 for ``value <= 1``).

    Raises:
        ConfigError: ``baseline`` is not finite or not below 1 (division by ``1 - b``).

    Example:
        >>> round(rescale(0.9, 0.8), 6)
        0.5
    """
    if not (math.isfinite(baseline) and baseline < 1.0):
        raise ConfigError(f"baseline must be finite and < 1, got {baseline!r}")
    return (value - baseline) / (1.0 - baseline)


@dataclass(frozen=True, slots=True)
class BERTScoreBaseline:
    """Per-layer rescale baselines ``b`` for P, R and F of one encoder.

    Attributes:
        values: layer -> ``(b_P, b_R, b_F)``, each in [-1, 1); layer 0 is the embedding output.
        model: model the baseline was computed with (``""`` when the file does not say, as in
            ``bert_score``'s TSV files).
        model_sha256: sha256 of that model's weights (``""`` when unknown).
        source: where it was loaded from (file path), or ``""``.
        sha256: sha256 of the source file bytes, or of ``values`` as canonical JSON.
        meta: provenance written by ``bench.floor`` (n_pairs, seed, data file, ...).
    """

    values: dict[int, tuple[float, float, float]]
    """layer -> (b_P, b_R, b_F); floats in [-1, 1)."""
    model: str = ""
    """Model name the baseline belongs to; ``""`` if the file does not record it."""
    model_sha256: str = ""
    """sha256 of the model weights; ``""`` if unknown."""
    source: str = ""
    """File it was read from, or ``""``."""
    sha256: str = ""
    """Digest of the file bytes (or of ``values`` as canonical JSON)."""
    meta: dict[str, Any] = field(default_factory=dict)
    """Free-form provenance (n_pairs, seed, data path, ...)."""

    def for_layer(self, layer: int) -> tuple[float, float, float]:
        """The ``(b_P, b_R, b_F)`` row of ``layer``.

        Raises:
            BaselineError: the layer is not in the file.
        """
        if layer not in self.values:
            raise BaselineError(
                f"baseline {self.source or '(in memory)'} has no row for layer {layer}; it has "
                f"layers {sorted(self.values)}"
            )
        return self.values[layer]

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable dict (the format ``bench.floor`` writes); inverse of ``from_dict``."""
        return {
            "format": "localjudge-bertscore-baseline-v1",
            "model": self.model,
            "model_sha256": self.model_sha256,
            "layers": {
                str(k): {"P": v[0], "R": v[1], "F": v[2]} for k, v in sorted(self.values.items())
            },
            "source": self.source,
            "sha256": self.sha256,
            "meta": dict(self.meta),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> BERTScoreBaseline:
        """Inverse of ``to_dict``.

        Raises:
            BaselineError: missing keys or values out of range.
        """
        try:
            layers = d["layers"]
            values = {
                int(k): (float(v["P"]), float(v["R"]), float(v["F"])) for k, v in layers.items()
            }
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise BaselineError(
                f"malformed baseline dict ({err!r}); expected "
                "{'layers': {'<k>': {'P', 'R', 'F'}}, ...}"
            ) from err
        _check_values(values, str(d.get("source", "")))
        return cls(
            values=values,
            model=str(d.get("model", "")),
            model_sha256=str(d.get("model_sha256", "")),
            source=str(d.get("source", "")),
            sha256=str(d.get("sha256", ""))
            or sha256_json({str(k): list(v) for k, v in sorted(values.items())}),
            meta=dict(d.get("meta", {})),
        )

    def write_json(self, path: str | os.PathLike[str]) -> Path:
        """Write the JSON form (loadable by ``load_baseline``); returns the path."""
        p = Path(path)
        p.write_text(json.dumps(self.to_dict(), indent=1, sort_keys=True) + "\n")
        return p

    def write_tsv(self, path: str | os.PathLike[str]) -> Path:
        """Write ``bert_score``'s format: comma-separated ``LAYER,P,R,F``, one row per layer.

        The file carries no model name: keep it next to its JSON twin.
        """
        p = Path(path)
        lines = ["LAYER,P,R,F"]
        lines += [f"{k},{v[0]!r},{v[1]!r},{v[2]!r}" for k, v in sorted(self.values.items())]
        p.write_text("\n".join(lines) + "\n")
        return p


def _check_values(values: Mapping[int, tuple[float, float, float]], source: str) -> None:
    if not values:
        raise BaselineError(f"baseline {source or '(in memory)'} has no layers")
    for k, row in values.items():
        for name, b in zip("PRF", row):
            if not (math.isfinite(b) and -1.0 <= b < 1.0):
                raise BaselineError(
                    f"baseline {source or '(in memory)'} layer {k} {name}={b!r} is outside "
                    "[-1, 1); (x - b)/(1 - b) would be undefined"
                )


def load_baseline(path: str | os.PathLike[str]) -> BERTScoreBaseline:
    """Load a rescale baseline file.

    Two formats:

    * ``bert_score``'s ``rescale_baseline/<lang>/<model>.tsv`` (comma-separated despite the
      name): header ``LAYER,P,R,F``, one row per layer. It records no model, so the caller
      must make sure it belongs to the encoder in use.
    * the JSON written by ``python -m bench.floor`` (``BERTScoreBaseline.to_dict``), which
      records the model and its weight sha256 so ``BERTScorer`` can refuse a mismatch.

    Args:
        path: the file; ``.json`` is read as JSON, anything else as ``LAYER,P,R,F`` text.

    Returns:
        The baseline, with ``source`` = the path and ``sha256`` = the file's digest.

    Raises:
        BaselineError: missing file, bad header, unparsable row, duplicate layer, or a value
            outside [-1, 1).
    """
    p = Path(path)
    if not p.is_file():
        raise BaselineError(f"baseline file not found: {p}")
    raw = p.read_bytes()
    digest = hashlib.sha256(raw).hexdigest()
    text = raw.decode("utf-8")
    if p.suffix.lower() == ".json":
        try:
            d = json.loads(text)
        except ValueError as err:
            raise BaselineError(f"baseline {p} is not valid JSON: {err}") from err
        base = BERTScoreBaseline.from_dict(d)
        return BERTScoreBaseline(
            values=base.values,
            model=base.model,
            model_sha256=base.model_sha256,
            source=str(p),
            sha256=digest,
            meta=base.meta,
        )
    rows = list(csv.reader(line for line in text.splitlines() if line.strip()))
    if not rows or [c.strip() for c in rows[0]] != ["LAYER", "P", "R", "F"]:
        raise BaselineError(f"baseline {p}: header must be 'LAYER,P,R,F', got {rows[:1]}")
    values: dict[int, tuple[float, float, float]] = {}
    for i, row in enumerate(rows[1:], start=2):
        try:
            layer = int(row[0])
            vals = (float(row[1]), float(row[2]), float(row[3]))
        except (ValueError, IndexError) as err:
            raise BaselineError(f"baseline {p} line {i}: cannot parse {row!r}") from err
        if layer in values:
            raise BaselineError(f"baseline {p}: layer {layer} appears twice")
        values[layer] = vals
    _check_values(values, str(p))
    return BERTScoreBaseline(values=values, source=str(p), sha256=digest)


# --------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TokenAlignment:
    """One greedy match: a token, its most similar token on the other side, and the cosine.

    Attributes:
        token: the token's text (decoded wordpiece, whitespace stripped).
        matched_token: text of the best-matching token on the other side (may be a special
            token such as ``[SEP]``, see the module docstring).
        cos: cosine similarity of the two L2-normalised embeddings, in [-1, 1].
        weight: the token's normalised weight in the average (sums to 1 over the text; 0 for
            special tokens).
    """

    token: str
    """Decoded token text."""
    matched_token: str
    """Decoded text of its best match on the other side."""
    cos: float
    """Cosine similarity in [-1, 1]."""
    weight: float
    """Normalised weight in [0, 1] (1/n without idf; 0 for special tokens)."""

    def format(self) -> str:
        """``'not' -> 'The' cos=0.8818``."""
        return f"{self.token!r} -> {self.matched_token!r} cos={self.cos:.4f}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable dict; inverse of ``from_dict``."""
        return {
            "token": self.token,
            "matched_token": self.matched_token,
            "cos": self.cos,
            "weight": self.weight,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TokenAlignment:
        """Inverse of ``to_dict``."""
        return cls(str(d["token"]), str(d["matched_token"]), float(d["cos"]), float(d["weight"]))


@dataclass(frozen=True, slots=True)
class BERTScoreResult:
    """BERTScore of one (response, reference) pair.

    Attributes:
        precision: raw P, in [-1, 1] (in practice about [0.2, 1] for MiniLM).
        recall: raw R, in [-1, 1].
        f1: raw F = 2PR/(P+R), in [-1, 1].
        precision_rescaled: (P - b_P)/(1 - b_P), or None without a baseline.
        recall_rescaled: (R - b_R)/(1 - b_R), or None.
        f1_rescaled: (F - b_F)/(1 - b_F), or None.
        n_response_tokens: response tokens, special tokens included.
        n_reference_tokens: reference tokens, special tokens included.
        alignment: response side, one entry per non-special response token, in order
            (empty when alignment was not requested).
        reference_alignment: reference side, one entry per non-special reference token.
        signature: model, layer, idf, baseline and library versions that produced it.
    """

    precision: float
    """Raw precision, cosine units, in [-1, 1]."""
    recall: float
    """Raw recall, in [-1, 1]."""
    f1: float
    """Raw F1, in [-1, 1]."""
    precision_rescaled: float | None
    """Baseline-rescaled precision (unbounded below, <= 1), None without a baseline."""
    recall_rescaled: float | None
    """Baseline-rescaled recall, None without a baseline."""
    f1_rescaled: float | None
    """Baseline-rescaled F1, None without a baseline."""
    n_response_tokens: int
    """Response length in tokens, special tokens included."""
    n_reference_tokens: int
    """Reference length in tokens, special tokens included."""
    alignment: tuple[TokenAlignment, ...]
    """Response token -> best reference token, in response order; () if not requested."""
    reference_alignment: tuple[TokenAlignment, ...]
    """Reference token -> best response token, in reference order; () if not requested."""
    signature: Signature
    """Provenance: model + weights sha256, layer, idf, baseline, versions."""

    @property
    def score(self) -> float:
        """The headline number: rescaled F1 when a baseline was applied, else raw F1."""
        return self.f1_rescaled if self.f1_rescaled is not None else self.f1

    def format_alignment(self) -> str:
        """The response-side alignment, one ``'tok' -> 'ref' cos=0.xxxx`` per line."""
        return "\n".join(a.format() for a in self.alignment)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable dict; inverse of ``from_dict``."""
        return {
            "precision": self.precision,
            "recall": self.recall,
            "f1": self.f1,
            "precision_rescaled": self.precision_rescaled,
            "recall_rescaled": self.recall_rescaled,
            "f1_rescaled": self.f1_rescaled,
            "n_response_tokens": self.n_response_tokens,
            "n_reference_tokens": self.n_reference_tokens,
            "alignment": [a.to_dict() for a in self.alignment],
            "reference_alignment": [a.to_dict() for a in self.reference_alignment],
            "signature": self.signature.to_dict(),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> BERTScoreResult:
        """Inverse of ``to_dict``."""

        def opt(x: Any) -> float | None:
            return None if x is None else float(x)

        return cls(
            precision=float(d["precision"]),
            recall=float(d["recall"]),
            f1=float(d["f1"]),
            precision_rescaled=opt(d.get("precision_rescaled")),
            recall_rescaled=opt(d.get("recall_rescaled")),
            f1_rescaled=opt(d.get("f1_rescaled")),
            n_response_tokens=int(d["n_response_tokens"]),
            n_reference_tokens=int(d["n_reference_tokens"]),
            alignment=tuple(TokenAlignment.from_dict(a) for a in d.get("alignment", [])),
            reference_alignment=tuple(
                TokenAlignment.from_dict(a) for a in d.get("reference_alignment", [])
            ),
            signature=Signature.from_dict(d["signature"]),
        )


# --------------------------------------------------------------------------------------------
# Scorer
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Encoded:
    ids: tuple[int, ...]
    special: tuple[bool, ...]


def _resolve_model(model: str | os.PathLike[str]) -> tuple[str, str, str]:
    """(load location, display name, weights sha256) for a manifest name, folder or HF id.

    A folder whose weights match an embedded encoder's manifest sha256 is named after it.
    """
    s = str(model)
    manifest = None
    if os.sep not in s and not Path(s).exists():
        try:
            manifest = load_manifest(s)
        except ConfigError:
            manifest = None
    if manifest is not None:
        if manifest.format != "hf_dir":
            raise ConfigError(
                f"model {s!r} is a {manifest.format} judge model, not a transformers encoder; "
                f"BERTScore needs an encoder such as {DEFAULT_MODEL!r}"
            )
        folder = model_path(s)  # verifies the pinned sha256; ModelFileError if not fetched
        return str(folder), manifest.name, manifest.sha256
    p = Path(s).expanduser()
    if p.is_dir():
        digest = _weights_sha256(p)
        known = [m.name for m in list_manifests() if m.format == "hf_dir" and m.sha256 == digest]
        return str(p), (known[0] if known else p.name), digest
    try:
        from huggingface_hub import snapshot_download

        folder = Path(snapshot_download(s, local_files_only=True))
    except Exception as err:
        raise ModelFileError(
            f"encoder {s!r} is neither an embedded model ({DEFAULT_MODEL!r}, see models/), a "
            f"folder, nor a Hugging Face model in the local cache ({type(err).__name__}: {err}); "
            "localjudge loads encoders with local_files_only=True and never downloads",
            path=s,
        ) from err
    return str(folder), s, _weights_sha256(folder)


def _weights_sha256(folder: Path) -> str:
    files = sorted(folder.glob("*.safetensors")) or sorted(folder.glob("pytorch_model*.bin"))
    if not files:
        raise ModelFileError(
            f"no *.safetensors or pytorch_model*.bin weights in {folder}", path=str(folder)
        )
    if len(files) == 1:
        return file_sha256(files[0])
    return sha256_json({f.name: file_sha256(f) for f in files})


class BERTScorer:
    """BERTScore with a loaded encoder (Zhang et al. 2019, arXiv 1904.09675, section 3).

    Deterministic for fixed model bytes, inputs and library versions (float32, eval mode).
    Scores agree with the ``bert_score`` package (v0.3.13) on the same model folder and layer
    within 1e-5 (tested in ``tests/test_bertscore.py``).

    Args:
        model: an embedded model name (default ``"all-minilm-l6-v2"``, verified against its
            manifest sha256), a local model folder, or a Hugging Face id already in the local
            cache (e.g. ``"roberta-large"``); never downloaded.
        layer: hidden-state index to use, 0 (embedding output) .. number of layers; same
            meaning as ``bert_score``'s ``num_layers``. ``None``: ``DEFAULT_LAYERS[model]``.
        idf: weight tokens by idf (paper section 3 "Importance Weighting", bert_score's
            formula ``log((M+1)/(c+1))``). The idf corpus is ``idf_references`` if given, else
            the ``references`` of each ``score`` call (as ``bert_score.score`` does).
        idf_references: fixed idf corpus (M documents); only with ``idf=True``.
        baseline: rescale baseline: a path (``bert_score``'s ``LAYER,P,R,F`` file or the JSON
            written by ``bench.floor``) or a ``BERTScoreBaseline``. ``None``: no rescaling.
        batch_size: texts per encoder forward pass (>= 1); does not change results beyond
            float32 noise (~1e-7).
        device: torch device string, default ``"cpu"``.

    Raises:
        ConfigError: bad ``layer``/``batch_size``/``idf_references``, or ``idf_references``
            without ``idf=True``.
        ModelFileError: model not fetched / not in the local cache, or sha256 mismatch.
        BaselineError: baseline file missing or malformed, no row for ``layer``, or computed
            for a different model (JSON baselines record the model sha256).
        EmptyTextError, TextTooLongError: an ``idf_references`` text is empty or too long.

    Example:
        >>> scorer = BERTScorer("all-minilm-l6-v2", 6)            # doctest: +SKIP
        >>> r = scorer.score(["A feline rested upon the rug."],
        ...                  ["The cat sat on the mat."])[0]       # doctest: +SKIP
        >>> print(r.alignment[0].format())                         # doctest: +SKIP
    """

    def __init__(
        self,
        model: str | os.PathLike[str] = DEFAULT_MODEL,
        layer: int | None = None,
        *,
        idf: bool = False,
        idf_references: Sequence[str] | None = None,
        baseline: str | os.PathLike[str] | BERTScoreBaseline | None = None,
        batch_size: int = 64,
        device: str = "cpu",
    ) -> None:
        import torch
        import transformers
        from transformers import AutoModel, AutoTokenizer

        if not isinstance(idf, bool):
            raise ConfigError(f"idf must be a bool, got {idf!r}")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigError(f"batch_size must be an int >= 1, got {batch_size!r}")
        if idf_references is not None and not idf:
            raise ConfigError("idf_references was given but idf=False; pass idf=True to use it")
        location, name, weights_sha256 = _resolve_model(model)
        if layer is None:
            if name not in DEFAULT_LAYERS:
                raise ConfigError(
                    f"no default layer for model {name!r}; pass layer= (known defaults: "
                    f"{DEFAULT_LAYERS})"
                )
            layer = DEFAULT_LAYERS[name]
        self._torch = torch
        self._tokenizer = AutoTokenizer.from_pretrained(location, local_files_only=True)
        try:
            self._model = AutoModel.from_pretrained(
                location, local_files_only=True, dtype=torch.float32
            )
        except (OSError, ValueError) as err:
            raise ModelFileError(
                f"transformers could not load encoder {name!r} from {location}: {err}",
                path=location,
            ) from err
        self._model.eval()
        self._model.to(device)
        n_layers = int(getattr(self._model.config, "num_hidden_layers", -1))
        if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer <= n_layers:
            raise ConfigError(
                f"layer must be an int in [0, {n_layers}] for {name!r} "
                f"(0 = embedding output), got {layer!r}"
            )
        self._name = name
        self._location = location
        self._weights_sha256 = weights_sha256
        self._layer = layer
        self._n_layers = n_layers
        self._idf = idf
        self._batch_size = batch_size
        self._device = device
        self._transformers_version = transformers.__version__
        self._max_tokens = self._token_limit()
        # bert_score adds a prefix space for GPT-2/RoBERTa-style byte-level BPE tokenizers
        # (bert_score/utils.py sent_encode); other tokenizers take no such option.
        cls_names = {c.__name__ for c in type(self._tokenizer).__mro__}
        self._prefix_kw: dict[str, Any] = (
            {"add_prefix_space": True}
            if cls_names
            & {"GPT2Tokenizer", "RobertaTokenizer", "GPT2TokenizerFast", "RobertaTokenizerFast"}
            else {}
        )
        self._special_ids = {
            int(v) for a in _SPECIAL_ATTRS if (v := getattr(self._tokenizer, a, None)) is not None
        }
        self._fixed_idf: dict[int, float] | None = None
        self._fixed_idf_info: dict[str, Any] | None = None
        if idf_references is not None:
            refs = self._check_texts(idf_references, "idf_references")
            self._fixed_idf = self._idf_weights(refs, "idf_references")
            self._fixed_idf_info = {
                "source": "fixed",
                "n_documents": len(refs),
                "sha256": sha256_json(list(refs)),
            }
        if baseline is None:
            self._baseline: BERTScoreBaseline | None = None
        else:
            b = baseline if isinstance(baseline, BERTScoreBaseline) else load_baseline(baseline)
            if b.model_sha256 and b.model_sha256 != weights_sha256:
                raise BaselineError(
                    f"baseline {b.source or '(in memory)'} was computed with model "
                    f"{b.model!r} (weights sha256 {b.model_sha256[:12]}...) but the encoder is "
                    f"{name!r} (sha256 {weights_sha256[:12]}...); rescaling would shift every "
                    "score: compute a baseline for this encoder with python -m bench.floor"
                )
            b.for_layer(layer)  # raises BaselineError if the layer is missing
            self._baseline = b

    # ---- properties ---------------------------------------------------------------------
    @property
    def model_name(self) -> str:
        """Model name (manifest name, folder name or Hugging Face id)."""
        return self._name

    @property
    def model_sha256(self) -> str:
        """sha256 of the weight file(s) (manifest digest for embedded models)."""
        return self._weights_sha256

    @property
    def layer(self) -> int:
        """Hidden-state index in use, 0 (embedding output) .. ``n_layers``."""
        return self._layer

    @property
    def n_layers(self) -> int:
        """Number of transformer layers of the encoder (valid layers are 0..n_layers)."""
        return self._n_layers

    @property
    def idf(self) -> bool:
        """Whether idf weighting is on."""
        return self._idf

    @property
    def baseline(self) -> BERTScoreBaseline | None:
        """The rescale baseline in use, or None."""
        return self._baseline

    @property
    def max_tokens(self) -> int:
        """Longest accepted text in tokens, special tokens included."""
        return self._max_tokens

    # ---- tokenisation -------------------------------------------------------------------
    def _token_limit(self) -> int:
        tok_max = int(getattr(self._tokenizer, "model_max_length", 0) or 0)
        pos_max = int(getattr(self._model.config, "max_position_embeddings", 0) or 0)
        if 0 < tok_max < 1_000_000:
            return min(tok_max, pos_max) if pos_max > 0 else tok_max
        if pos_max > 0:
            return pos_max
        raise ConfigError(f"cannot tell the maximum input length of encoder {self._name!r}")

    @staticmethod
    def _check_texts(texts: Sequence[str], argument: str) -> list[str]:
        if isinstance(texts, str):
            raise ConfigError(f"{argument} must be a sequence of str, got one str")
        out = list(texts)
        for i, t in enumerate(out):
            if not isinstance(t, str):
                raise ConfigError(f"{argument}[{i}] must be str, got {type(t).__name__}")
            if not t.strip():
                raise EmptyTextError(argument, i)
        return out

    def _encode_text(self, text: str, argument: str, index: int) -> _Encoded:
        # bert_score strips the text and adds the model's special tokens (utils.py sent_encode).
        enc = self._tokenizer(
            text.strip(),
            add_special_tokens=True,
            truncation=False,
            return_special_tokens_mask=True,
            verbose=False,
            **self._prefix_kw,
        )
        ids = tuple(int(i) for i in enc["input_ids"])
        if len(ids) > self._max_tokens:
            raise TextTooLongError(argument, index, len(ids), self._max_tokens)
        mask = enc.get("special_tokens_mask") or [0] * len(ids)
        special = tuple(bool(m) or i in self._special_ids for i, m in zip(ids, mask))
        if all(special):
            raise EmptyTextError(argument, index)
        unk = getattr(self._tokenizer, "unk_token_id", None)
        if unk is not None and all(s or i == unk for i, s in zip(ids, special)):
            # every content token is the unknown token: two such texts would "match" perfectly
            # (F1 = 1.0, as bert_score reports) although nothing was compared
            raise UnknownTextError(argument, index, self._tokenizer.unk_token)
        return _Encoded(ids, special)

    def _encode_all(self, texts: Sequence[str], argument: str) -> list[_Encoded]:
        return [self._encode_text(t, argument, i) for i, t in enumerate(texts)]

    def _idf_weights(self, references: Sequence[str], argument: str) -> dict[int, float]:
        """bert_score's ``get_idf_dict``: idf(t) = log((M+1)/(c_t+1)), c_t = #docs with t."""
        encoded = self._encode_all(references, argument)
        counts: Counter[int] = Counter()
        for e in encoded:
            counts.update(set(e.ids))
        m = len(encoded)
        return {t: math.log((m + 1) / (c + 1)) for t, c in counts.items()}

    def _weights(self, e: _Encoded, idf: dict[int, float] | None, unseen: float) -> np.ndarray:
        w = np.array(
            [
                0.0 if s else (1.0 if idf is None else idf.get(t, unseen))
                for t, s in zip(e.ids, e.special)
            ],
            dtype=np.float64,
        )
        return w

    # ---- encoding -----------------------------------------------------------------------
    def _embed(
        self, encoded: Sequence[_Encoded], layers: Sequence[int]
    ) -> list[dict[int, torch.Tensor]]:
        """L2-normalised float32 embeddings per text and layer, shape ``(n_tokens, d)``."""
        th = self._torch
        order = sorted(range(len(encoded)), key=lambda i: -len(encoded[i].ids))
        out: list[dict[int, torch.Tensor]] = [{} for _ in encoded]
        pad = self._tokenizer.pad_token_id
        pad = 0 if pad is None else int(pad)
        want_all = len(layers) > 1 or layers[0] != self._n_layers
        with th.inference_mode():
            for start in range(0, len(order), self._batch_size):
                idx = order[start : start + self._batch_size]
                n_max = max(len(encoded[i].ids) for i in idx)
                ids = th.full((len(idx), n_max), pad, dtype=th.long)
                att = th.zeros((len(idx), n_max), dtype=th.long)
                for row, i in enumerate(idx):
                    n = len(encoded[i].ids)
                    ids[row, :n] = th.tensor(encoded[i].ids, dtype=th.long)
                    att[row, :n] = 1
                res = self._model(
                    input_ids=ids.to(self._device),
                    attention_mask=att.to(self._device),
                    output_hidden_states=want_all,
                )
                hidden = res.hidden_states if want_all else (res.last_hidden_state,)
                for layer in layers:
                    h = hidden[layer] if want_all else hidden[0]
                    h = h.float().cpu()
                    for row, i in enumerate(idx):
                        n = len(encoded[i].ids)
                        v = h[row, :n]
                        out[i][layer] = v / th.norm(v, dim=-1, keepdim=True)
        return out

    # ---- scoring ------------------------------------------------------------------------
    def _prepare(
        self, responses: Sequence[str], references: Sequence[str]
    ) -> tuple[list[_Encoded], list[_Encoded], dict[int, float] | None, float, dict[str, Any]]:
        resp = self._check_texts(responses, "responses")
        refs = self._check_texts(references, "references")
        if len(resp) != len(refs):
            raise ConfigError(
                f"responses and references differ in length: {len(resp)} vs {len(refs)}"
            )
        enc_resp = self._encode_all(resp, "responses")
        enc_refs = self._encode_all(refs, "references")
        idf: dict[int, float] | None = None
        unseen = 1.0
        info: dict[str, Any] = {"source": "none"}
        if self._idf:
            if self._fixed_idf is not None and self._fixed_idf_info is not None:
                idf, info = self._fixed_idf, dict(self._fixed_idf_info)
                unseen = math.log(info["n_documents"] + 1)
            else:
                idf = self._idf_weights(refs, "references")
                unseen = math.log(len(refs) + 1)
                info = {
                    "source": "references",
                    "n_documents": len(refs),
                    "sha256": sha256_json(refs),
                }
        return enc_resp, enc_refs, idf, unseen, info

    def _pair_scores(
        self,
        x: torch.Tensor,
        y: torch.Tensor,
        wx: np.ndarray,
        wy: np.ndarray,
        which: str,
        index: int,
    ) -> tuple[float, float, float, Any, Any]:
        sim = (x @ y.T).double().numpy()  # (n_resp_tokens, n_ref_tokens), cosines
        best_x = sim.max(axis=1)
        best_y = sim.max(axis=0)
        sx, sy = float(wx.sum()), float(wy.sum())
        if sx <= 0.0 or sy <= 0.0:
            side = "response" if sx <= 0.0 else "reference"
            raise ConfigError(
                f"{which}[{index}]: all idf weights of the {side} are 0 (every one of its "
                "tokens occurs in every idf document), so the weighted average is undefined; "
                "use a larger idf corpus (idf_references=) or idf=False"
            )
        p = float((best_x * wx).sum() / sx)
        r = float((best_y * wy).sum() / sy)
        f = 2.0 * p * r / (p + r) if (p + r) != 0.0 else 0.0
        return p, r, f, sim, (wx / sx, wy / sy)

    def _tokens(self, e: _Encoded) -> list[str]:
        return [str(self._tokenizer.decode([t])).strip() for t in e.ids]

    def score(
        self,
        responses: Sequence[str],
        references: Sequence[str],
        *,
        alignment: bool = True,
    ) -> list[BERTScoreResult]:
        """BERTScore of each (response, reference) pair, batched.

        Args:
            responses: N texts to evaluate (non-empty after stripping whitespace).
            references: N reference texts, paired by position.
            alignment: also return the per-token greedy alignment listings.

        Returns:
            N ``BERTScoreResult`` in input order; rescaled fields are set iff a baseline is in
            use. With ``idf=True`` and no ``idf_references``, the idf corpus is these N
            references (recorded in the signature).

        Raises:
            ConfigError: lengths differ, a text is not str, or (idf) all weights of a text are 0.
            EmptyTextError: a text is empty or only whitespace.
            TextTooLongError: a text exceeds ``max_tokens``.
        """
        enc_resp, enc_refs, idf, unseen, info = self._prepare(responses, references)
        uniq: dict[tuple[int, ...], int] = {}
        for e in (*enc_resp, *enc_refs):
            uniq.setdefault(e.ids, len(uniq))
        pool = [_Encoded(ids, ()) for ids in uniq]
        emb = self._embed(pool, [self._layer])
        sig = self.signature(idf_info=info)
        base = self._baseline.for_layer(self._layer) if self._baseline is not None else None
        out: list[BERTScoreResult] = []
        for i, (er, ef) in enumerate(zip(enc_resp, enc_refs)):
            x = emb[uniq[er.ids]][self._layer]
            y = emb[uniq[ef.ids]][self._layer]
            wx = self._weights(er, idf, unseen)
            wy = self._weights(ef, idf, unseen)
            p, r, f, sim, (nx, ny) = self._pair_scores(x, y, wx, wy, "pairs", i)
            al: tuple[TokenAlignment, ...] = ()
            ral: tuple[TokenAlignment, ...] = ()
            if alignment:
                tx, ty = self._tokens(er), self._tokens(ef)
                jx, jy = sim.argmax(axis=1), sim.argmax(axis=0)
                al = tuple(
                    TokenAlignment(tx[k], ty[int(jx[k])], float(sim[k, jx[k]]), float(nx[k]))
                    for k in range(len(tx))
                    if not er.special[k]
                )
                ral = tuple(
                    TokenAlignment(ty[k], tx[int(jy[k])], float(sim[jy[k], k]), float(ny[k]))
                    for k in range(len(ty))
                    if not ef.special[k]
                )
            out.append(
                BERTScoreResult(
                    precision=p,
                    recall=r,
                    f1=f,
                    precision_rescaled=None if base is None else rescale(p, base[0]),
                    recall_rescaled=None if base is None else rescale(r, base[1]),
                    f1_rescaled=None if base is None else rescale(f, base[2]),
                    n_response_tokens=len(er.ids),
                    n_reference_tokens=len(ef.ids),
                    alignment=al,
                    reference_alignment=ral,
                    signature=sig,
                )
            )
        return out

    def raw_scores_by_layer(
        self, responses: Sequence[str], references: Sequence[str]
    ) -> np.ndarray:
        """Raw P, R, F at every layer in one encoder pass (for baselines and layer studies).

        Same formula, weights and errors as ``score``; no rescaling, no alignment.

        Args:
            responses: N texts.
            references: N texts, paired by position.

        Returns:
            float64 array of shape ``(n_layers + 1, N, 3)``: ``[layer, pair, (P, R, F)]``,
            layer 0 = embedding output.

        Raises:
            Same as ``score``.
        """
        enc_resp, enc_refs, idf, unseen, _ = self._prepare(responses, references)
        uniq: dict[tuple[int, ...], int] = {}
        for e in (*enc_resp, *enc_refs):
            uniq.setdefault(e.ids, len(uniq))
        layers = list(range(self._n_layers + 1))
        emb = self._embed([_Encoded(ids, ()) for ids in uniq], layers)
        out = np.zeros((len(layers), len(enc_resp), 3), dtype=np.float64)
        for i, (er, ef) in enumerate(zip(enc_resp, enc_refs)):
            wx = self._weights(er, idf, unseen)
            wy = self._weights(ef, idf, unseen)
            for layer in layers:
                x = emb[uniq[er.ids]][layer]
                y = emb[uniq[ef.ids]][layer]
                out[layer, i, :3] = self._pair_scores(x, y, wx, wy, "pairs", i)[:3]
        return out

    def signature(self, *, idf_info: Mapping[str, Any] | None = None) -> Signature:
        """Provenance of scores from this scorer.

        Args:
            idf_info: the idf corpus actually used (set by ``score``); ``None`` describes the
                configuration only.

        Returns:
            ``Signature`` with ``backend="transformers"``, the model and its weights sha256,
            and ``params``: metric, layer, idf (+ corpus size/sha256), baseline (source,
            sha256, the applied row), special-token policy, max_tokens, and
            ``bert_score_equivalent``: the hash string ``bert_score`` 0.3.13 prints for the
            setting it agrees with.
        """
        b = self._baseline
        params: dict[str, Any] = {
            "metric": "bertscore",
            "formula": "Zhang et al. 2019 arXiv:1904.09675 s3",
            "layer": self._layer,
            "idf": self._idf,
            "baseline": None if b is None else (b.source or "(in memory)"),
        }
        if self._idf:
            params["idf_corpus"] = (
                dict(idf_info)
                if idf_info is not None
                else (
                    dict(self._fixed_idf_info) if self._fixed_idf_info else {"source": "references"}
                )
            )
        if b is not None:
            params["baseline_sha256"] = b.sha256
            params["baseline_row"] = list(b.for_layer(self._layer))
        params["special_tokens"] = "weight0-matchable"
        params["max_tokens"] = self._max_tokens
        # The hash bert_score (bert_score/utils.py get_hash) would print for this setting.
        params["bert_score_equivalent"] = (
            f"{self._name}_L{self._layer}_{'idf' if self._idf else 'no-idf'}"
            f"_version=0.3.13(hug_trans={self._transformers_version})"
            + ("-rescaled-custom" if b is not None else "")
        )
        return Signature(
            backend="transformers",
            backend_version=self._transformers_version,
            model=self._name,
            model_sha256=self._weights_sha256,
            template_sha256="none",
            label_map={},
            label_map_sha256="none",
            params=params,
            versions=package_versions("torch", "transformers", "tokenizers", "numpy"),
        )


def bertscore(
    responses: Sequence[str],
    references: Sequence[str],
    *,
    model: str | os.PathLike[str] = DEFAULT_MODEL,
    layer: int | None = None,
    idf: bool = False,
    baseline: str | os.PathLike[str] | BERTScoreBaseline | None = None,
    alignment: bool = True,
) -> list[BERTScoreResult]:
    """One-shot BERTScore: builds a ``BERTScorer`` and calls ``score`` (loads the model each
    call; keep a ``BERTScorer`` for repeated use).

    Args and Raises: as ``BERTScorer`` and ``BERTScorer.score``.

    Returns:
        N ``BERTScoreResult``, in input order.
    """
    return BERTScorer(model, layer, idf=idf, baseline=baseline).score(
        responses, references, alignment=alignment
    )
