"""Shared helpers of the bench experiments: run folders, run config, JSON writing, data paths
and a seeded bootstrap.

Each run writes ``bench/results/<experiment>/<utc-timestamp>-<sig8>/`` with ``config.json``
(argv, seed, signatures, git commit + dirty flag, package versions, device, dtype),
``items.jsonl`` (one record per item) and ``summary.json`` (STYLE.md section 7). Experiment
logic lives in the experiment modules (``bench.floor``, ``bench.ranking``, ...), not here.
"""

from __future__ import annotations

import json
import math
import platform
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from localjudge import stats
from localjudge.signature import sha256_json
from localjudge.version import package_versions

__all__ = [
    "REPO_ROOT",
    "RESULTS_ROOT",
    "bootstrap_ci",
    "git_state",
    "make_run_dir",
    "run_config",
    "shared_data_dir",
    "write_json",
    "write_jsonl",
]

REPO_ROOT = Path(__file__).resolve().parent.parent
"""The repository root (the folder holding ``bench/`` and ``localjudge/``)."""

RESULTS_ROOT = REPO_ROOT / "bench" / "results"
"""Where run folders go (git-ignored)."""


def shared_data_dir() -> Path:
    """``../shared/data`` relative to the repository root (read-only team data, never copied)."""
    return (REPO_ROOT.parent / "shared" / "data").resolve()


def make_run_dir(experiment: str, signature: Any, *, root: Path | None = None) -> Path:
    """Create ``<root>/<experiment>/<UTC YYYYmmddTHHMMSSZ>-<sig8>/`` and return it.

    Args:
        experiment: experiment name, e.g. ``"floor"``.
        signature: anything JSON-serialisable describing the run (config + signatures); its
            canonical-JSON sha256 gives ``sig8`` (first 8 hex digits).
        root: results root; default ``bench/results``.

    Returns:
        The new, empty folder (a ``-2``, ``-3`` ... suffix is added if it already exists).
    """
    base = (root or RESULTS_ROOT) / experiment
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    name = f"{stamp}-{sha256_json(signature)[:8]}"
    path = base / name
    k = 2
    while path.exists():
        path = base / f"{name}-{k}"
        k += 1
    path.mkdir(parents=True)
    return path


def git_state() -> dict[str, Any]:
    """``{"commit": sha or None, "dirty": bool or None}`` of the repository (read-only git)."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, check=True, capture_output=True, text=True
        ).stdout.strip()
        status = subprocess.run(
            ["git", "status", "--porcelain"],
            cwd=REPO_ROOT,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return {"commit": None, "dirty": None}
    return {"commit": commit, "dirty": bool(status.strip())}


def run_config(
    argv: Sequence[str],
    *,
    experiment: str,
    seed: int,
    signatures: Mapping[str, Any],
    packages: Iterable[str] = (),
    device: str = "cpu",
    dtype: str = "float32",
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``config.json`` record of a run: enough to re-create it.

    Args:
        argv: the command-line arguments the experiment parsed (without the program name).
        experiment: experiment module name (``python -m bench.<experiment>``).
        seed: the run's seed.
        signatures: name -> ``Signature.to_dict()`` (or any JSON) of each scorer used.
        packages: distributions whose versions to record (localjudge is always recorded).
        device: torch/llama device string.
        dtype: compute dtype of the models.
        extra: further JSON-serialisable settings (data files and their sha256, ...).
    """
    return {
        "experiment": experiment,
        "command": [sys.executable, "-m", f"bench.{experiment}", *argv],
        "argv": list(argv),
        "seed": seed,
        "signatures": dict(signatures),
        "git": git_state(),
        "versions": package_versions(*packages),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "device": device,
        "dtype": dtype,
        "utc": datetime.now(UTC).isoformat(timespec="seconds"),
        **(dict(extra) if extra else {}),
    }


def _default(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    if hasattr(obj, "to_dict"):
        return obj.to_dict()
    raise TypeError(f"not JSON-serialisable: {type(obj).__name__}")


def _clean(obj: Any) -> Any:
    """NaN/inf -> None so the files are strict JSON."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    return obj


def write_json(path: Path, obj: Any) -> Path:
    """Write ``obj`` as indented, key-sorted strict JSON (NaN -> null); returns ``path``."""
    text = json.dumps(
        _clean(json.loads(json.dumps(obj, default=_default))),
        indent=1,
        sort_keys=True,
        allow_nan=False,
    )
    path.write_text(text + "\n")
    return path


def write_jsonl(path: Path, records: Iterable[Any]) -> Path:
    """Write one compact JSON object per line (NaN -> null); returns ``path``."""
    with path.open("w") as f:
        for r in records:
            obj = _clean(json.loads(json.dumps(r, default=_default)))
            f.write(json.dumps(obj, sort_keys=True, allow_nan=False) + "\n")
    return path


def bootstrap_ci(
    values: Sequence[float] | np.ndarray,
    *,
    seed: int,
    n_resamples: int = 2000,
    level: float = 0.95,
) -> tuple[float, float, float]:
    """Mean and percentile-bootstrap confidence interval of the mean, as a tuple.

    Thin wrapper over ``localjudge.stats.bootstrap_ci`` (the implementation moved there; same
    draws, so earlier results reproduce). Deterministic for fixed ``values`` and ``seed``.

    Args:
        values: shape ``(n,)``, n >= 1; NaNs are not allowed.
        seed: seed of the resampling generator.
        n_resamples: bootstrap resamples (>= 1).
        level: two-sided coverage in (0, 1).

    Returns:
        ``(mean, low, high)``.

    Raises:
        ConfigError: (a ``ValueError``) empty input, NaNs, or bad ``n_resamples``/``level``.
    """
    ci = stats.bootstrap_ci(values, seed=seed, n_resamples=n_resamples, level=level)
    return ci.estimate, ci.low, ci.high
