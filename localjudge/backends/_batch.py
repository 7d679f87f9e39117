"""Scoring many prompts with per-item records, a resumable JSONL and bounded concurrency.

``OpenAICompatBackend.score_batch`` runs on this; the records key each item by index, prompt
sha256 and configuration sha256, so a resumed file never mixes prompts or configurations.
"""

from __future__ import annotations

import inspect
import json
import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from localjudge._pool import run_in_pool
from localjudge.backends._topk import _short_repr
from localjudge.backends.base import Backend, Prompt, check_int, check_min_mass
from localjudge.errors import ConfigError, LocalJudgeError, LowMassError
from localjudge.records import read_jsonl_records
from localjudge.signature import sha256_json
from localjudge.types import ScoreDistribution, to_messages

__all__ = ["BatchRecord", "score_batch"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class BatchRecord:
    """One item of ``OpenAICompatBackend.score_batch``: a distribution or an error, never both.

    Attributes:
        index: position of the item in the input (0-based).
        distribution: the distribution, or None on error (kept on ``low_mass``).
        error: error code (``low_mass``, ``backend_error``, ``config_error``...) or None.
        message: the error message or None.
        seconds: wall time of the item in seconds.
        prompt_sha256: sha256 of the item's prompt as given (keys resume: a stored record is
            reused only for the same prompt at the same index).
        config_sha256: sha256 of the batch configuration (labels, keyword arguments, backend
            signature); a resumed file must hold only this configuration's records.
    """

    index: int
    distribution: ScoreDistribution | None
    error: str | None
    message: str | None
    seconds: float
    prompt_sha256: str = ""
    config_sha256: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable dict."""
        return {"index": self.index,
                "distribution": None if self.distribution is None else
                self.distribution.to_dict(),
                "error": self.error, "message": self.message, "seconds": self.seconds,
                "prompt_sha256": self.prompt_sha256, "config_sha256": self.config_sha256}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> BatchRecord:
        """Inverse of ``to_dict``."""
        dist = d.get("distribution")
        return cls(index=int(d["index"]),
                   distribution=None if dist is None else ScoreDistribution.from_dict(dist),
                   error=d.get("error"), message=d.get("message"),
                   seconds=float(d.get("seconds", 0.0)),
                   prompt_sha256=str(d.get("prompt_sha256", "")),
                   config_sha256=str(d.get("config_sha256", "")))


def score_batch(
    backend: Backend,
    prompts: Sequence[Prompt],
    labels: Iterable[str | int] | range | None = None,
    *,
    out: str | Path | None = None,
    resume: bool = True,
    show_progress: bool = False,
    max_workers: int = 1,
    **kwargs: Any,
) -> list[BatchRecord]:
    """``backend.score_distribution`` over many prompts, ``max_workers`` at once.

    Per-item failures (retries exhausted, low mass, bad responses) become records with
    ``error`` set -- never a crash of the run, never a score. With ``out``, each record is
    appended to a JSONL file as soon as it is made (completion order; ``index`` keys it),
    once per item and run. On Ctrl-C or any exception, queued items are cancelled; the
    records already written stay.

    Args:
        backend: the judge; above one worker it must be thread-safe (``thread_safe``).
        prompts: the items.
        labels: as in ``score_distribution``.
        out: optional JSONL path (appended to).
        resume: with an existing ``out``: keep its successful records (same prompt at the
            same index, same configuration) and score only the rest; failed items are
            scored again and their new record is appended (the last record of an index is
            the one that counts). ``False``: start the file over.
        show_progress: tqdm progress bar on stderr.
        max_workers: items scored at once (>= 1).
        **kwargs: passed to ``score_distribution`` (prefill, system, min_mass, ...).

    Returns:
        One ``BatchRecord`` per prompt, in input order.

    Raises:
        ConfigError: bad prompts, labels or keyword arguments (checked once before any
            request), ``out`` is a folder, or ``out`` holds records of another
            configuration or another prompt at some index (resuming would mix them), or
            ``max_workers`` is not an int >= 1 or above 1 with a backend that is not
            thread-safe.
    """
    check_int("max_workers", max_workers, 1)
    if max_workers > 1 and not getattr(backend, "thread_safe", False):
        raise ConfigError(f"max_workers={max_workers} needs a thread-safe backend; "
                          f"{type(backend).__name__} is not")
    if isinstance(prompts, (str, bytes)) or not isinstance(prompts, Sequence):
        raise ConfigError(f"prompts must be a sequence of prompts (a list), got "
                          f"{type(prompts).__name__}: {_short_repr(prompts)}")
    try:
        inspect.signature(backend.score_distribution).bind("prompt", labels, **kwargs)
    except TypeError as err:
        raise ConfigError(f"score_batch: {err} (keyword arguments go to "
                          f"score_distribution)") from err
    if "min_mass" in kwargs:
        check_min_mass(kwargs["min_mass"])
    if out is not None and Path(out).is_dir():
        raise ConfigError(f"out must be a JSONL file path, got the folder {str(out)!r}")
    key = backend.resolve_labels(labels).labels
    try:
        config = sha256_json({"labels": list(key), "kwargs": kwargs,
                              "signature": backend.signature(key).to_dict()})
    except TypeError as err:
        raise ConfigError(f"score_batch keyword arguments must be JSON values: {err}") \
            from None
    hashes = []
    for i, pr in enumerate(prompts):
        try:
            hashes.append(sha256_json([m.to_dict() for m in to_messages(pr)]))
        except (ConfigError, TypeError, ValueError) as err:
            raise ConfigError(f"prompt {i} is not a prompt: {err}") from None
    records: dict[int, BatchRecord] = {}
    path = Path(out) if out is not None else None
    if path is not None and path.exists() and resume:
        for d in read_jsonl_records(path):
            try:
                r = BatchRecord.from_dict(d)
            except (KeyError, TypeError, ValueError) as err:
                raise ConfigError(f"{path} holds a record that is not a score_batch record "
                                  f"({type(err).__name__}: {err})") from None
            if r.config_sha256 != config:
                raise ConfigError(
                    f"{path} holds records of another configuration (labels, arguments or "
                    "backend); resuming would mix them. Use a new file or resume=False")
            if not (0 <= r.index < len(prompts)) or r.prompt_sha256 != hashes[r.index]:
                raise ConfigError(
                    f"{path} holds a record for index {r.index} of a different prompt "
                    "list; use a new file or resume=False")
            if r.error is None:
                records[r.index] = r
            else:
                records.pop(r.index, None)
    elif path is not None and path.exists():
        path.unlink()  # resume=False: start over
    todo = [i for i in range(len(prompts)) if i not in records]
    fh = None
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        fh = path.open("a", encoding="utf-8")

    def one(i: int) -> BatchRecord:
        t0 = time.perf_counter()
        try:
            d = backend.score_distribution(prompts[i], key, **kwargs)
            return BatchRecord(i, d, None, None, time.perf_counter() - t0,
                               hashes[i], config)
        except LowMassError as err:
            return BatchRecord(i, err.distribution, err.code, str(err),
                               time.perf_counter() - t0, hashes[i], config)
        except LocalJudgeError as err:
            return BatchRecord(i, None, err.code, str(err), time.perf_counter() - t0,
                               hashes[i], config)
        except Exception as err:
            logger.exception("item %d failed unexpectedly", i)
            return BatchRecord(i, None, "backend_error", f"{type(err).__name__}: {err}",
                               time.perf_counter() - t0, hashes[i], config)

    def handle(rec: BatchRecord) -> None:
        records[rec.index] = rec
        if fh is not None:
            fh.write(json.dumps(rec.to_dict(), allow_nan=False) + "\n")
            fh.flush()

    try:
        run_in_pool(one, todo, max_workers=max_workers, on_result=handle,
                    show_progress=show_progress, desc="scoring")
    finally:
        if fh is not None:
            fh.close()
    return [records[i] for i in range(len(prompts))]
