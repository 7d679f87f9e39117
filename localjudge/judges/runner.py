"""Running G-Eval metrics over many test cases: ``evaluate`` (resumable JSONL, per-item errors,
optional parallel workers for thread-safe backends) and ``assert_test`` (pytest-style).

Split from ``localjudge.judges.geval``, which holds the metric itself.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from localjudge._pool import run_in_pool
from localjudge.backends.base import check_int
from localjudge.errors import BackendError, ConfigError, LocalJudgeError
from localjudge.judges.geval import GEval, GEvalResult, LLMTestCase
from localjudge.records import read_jsonl_records

__all__ = ["assert_test", "evaluate"]

logger = logging.getLogger(__name__)

def evaluate(
    test_cases: Iterable[LLMTestCase],
    metrics: Sequence[GEval],
    *,
    out: str | Path | None = None,
    resume: bool = True,
    show_progress: bool = False,
    max_workers: int = 1,
) -> list[GEvalResult]:
    """Judge every test case with every metric; one record per (test case, metric).

    Per-item failures (missing params, low mass, overflow, backend errors) become records with
    ``error`` set; they never stop the run and never count as 0 or as a pass.

    Args:
        test_cases: the items.
        metrics: the metrics (measured in order for each item).
        out: JSONL path; each record is appended as soon as it is made.
        resume: with ``out``, skip (test case, metric) pairs already scored there and return
            their stored records, with ``success`` re-decided under the current threshold.
            Failed items are judged again; a partial last line (interrupted write) is
            dropped. Records made with a different judge configuration raise instead of
            being mixed in.
        show_progress: tqdm progress bar on stderr.
        max_workers: items judged at once (>= 1). Above 1, every metric's backend must be
            thread-safe (``OpenAICompatBackend``: requests to a server, which batches them);
            evaluation steps are generated once before the items are spread over the
            workers. Records are appended in completion order and returned in input order.
            The scores do not depend on ``max_workers`` beyond what the server's own batching
            does (see the README on llama-server's batch-mates).

    Returns:
        Records in (test case, metric) order.

    Raises:
        ConfigError: no metrics, two metrics with the same name, a non-``LLMTestCase`` item,
            duplicate case ids, an unreadable results file, stored records from another
            judge configuration, or ``max_workers > 1`` with a backend that is not
            thread-safe.
    """
    cases = list(test_cases)
    metrics = list(metrics)
    if not metrics:
        raise ConfigError("evaluate needs at least one metric")
    check_int("max_workers", max_workers, 1)
    unsafe = sorted({m.model.name for m in metrics
                     if not getattr(m.model, "thread_safe", False)})
    if max_workers > 1 and unsafe:
        raise ConfigError(
            f"max_workers={max_workers} needs thread-safe backends; {unsafe} are not (an "
            "in-process model judges one item at a time). Use max_workers=1, or serve the "
            "model and use OpenAICompatBackend")
    bad = [i for i, c in enumerate(cases) if not isinstance(c, LLMTestCase)]
    if bad:
        raise ConfigError(f"test cases must be LLMTestCase; items {bad[:5]} are not")
    names = [m.name for m in metrics]
    if len(set(names)) != len(names):
        raise ConfigError(f"metric names must be unique for the records, got {names}")
    ids = [c.case_id for c in cases]
    dups = sorted({i for i in ids if ids.count(i) > 1})
    if dups:
        raise ConfigError(f"test case ids must be unique (they key the records), duplicated: "
                          f"{dups[:5]}; give distinct names")
    done: dict[tuple[str, str], GEvalResult] = {}
    path = Path(out) if out is not None else None
    if path is not None and path.exists() and resume:
        sigs: dict[str, dict[str, Any]] = {}
        for m in metrics:
            try:
                sigs[m.name] = m.signature()
            except LocalJudgeError as err:  # e.g. steps cannot be generated now: its stored
                logger.warning("cannot check stored records of %s (%s); its items are "
                               "judged again", m.name, err)  # records are not trusted
        for d in read_jsonl_records(path):
            try:
                r = GEvalResult.from_dict(d)
            except (KeyError, TypeError, ValueError) as err:
                raise ConfigError(f"{path} holds a record that is not a G-Eval result "
                                  f"({type(err).__name__}: {err})") from None
            if r.name not in sigs or r.error is not None:
                continue  # other metrics are kept in the file; failed items are redone
            if r.signature != sigs[r.name]:
                raise ConfigError(
                    f"{path} holds records of metric {r.name!r} made with a different judge "
                    "configuration (model, template, steps, scale or parameters); resuming "
                    "would mix them. Use a new output file or resume=False / --overwrite")
            done[(r.case_id, r.name)] = r
    elif path is not None and path.exists():
        path.unlink()  # resume=False: start over (after every check above passed)
    by_name = {m.name: m for m in metrics}
    for key, r in list(done.items()):  # threshold and strict mode are policy: re-decide
        m = by_name[key[1]]
        done[key] = r.with_threshold(m.threshold, m.strict_mode)
    todo = [(c, m) for c in cases for m in metrics if (c.case_id, m.name) not in done]
    fh = None
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        fh = path.open("a", encoding="utf-8")

    def record(rec: GEvalResult) -> None:  # always in this thread (see run_in_pool)
        done[(rec.case_id, rec.name)] = rec
        if fh is not None:
            fh.write(json.dumps(rec.to_dict(), allow_nan=False) + "\n")
            fh.flush()

    try:
        if max_workers == 1:
            it: Iterable[tuple[LLMTestCase, GEval]] = todo
            if show_progress:
                from tqdm import tqdm

                it = tqdm(todo, desc="judging", unit="item")
            for case, metric in it:
                record(_judge_one(case, metric, stateful=True))
        else:
            _evaluate_parallel(todo, metrics, max_workers, record, show_progress)
    finally:
        if fh is not None:
            fh.close()
    return [done[(c.case_id, m.name)] for c in cases for m in metrics]


def _evaluate_parallel(todo: list[tuple[LLMTestCase, GEval]], metrics: Sequence[GEval],
                       max_workers: int, record: Callable[[GEvalResult], None],
                       show_progress: bool) -> None:
    """Judge ``todo`` on a thread pool; each record is written as soon as it is made.

    Steps are generated once per metric here, before any item is submitted; a metric whose
    steps cannot be generated gets an error record for each of its items, and none of them
    reaches a worker (so no worker can generate a different set). On any exception in this
    thread (Ctrl-C included), queued items are cancelled and what finished is kept.
    """
    failed: dict[str, LocalJudgeError] = {}
    for m in metrics:
        try:
            m.ensure_steps()
        except LocalJudgeError as err:
            failed[m.name] = err
    work = []
    for case, m in todo:
        if m.name in failed:
            record(_error_record(case, m, failed[m.name], 0.0))
        else:
            work.append((case, m))
    run_in_pool(lambda cm: _judge_one(*cm, stateful=False), work, max_workers=max_workers,
                on_result=record, show_progress=show_progress, desc="judging")


def _judge_one(case: LLMTestCase, metric: GEval, *, stateful: bool) -> GEvalResult:
    """One (case, metric) record; never raises for per-item failures. ``stateful`` uses
    ``metric.measure`` (which sets the metric's attributes); otherwise nothing on the metric
    changes, so workers can share it."""
    t0 = time.perf_counter()
    try:
        if stateful:
            metric.measure(case)
            return metric.result if metric.result is not None else _never()
        metric._check_case(case)
        return metric._measure(case, t0)
    except LocalJudgeError as err:
        return _error_record(case, metric, err, t0)
    except Exception as err:  # a bug or an unforeseen server answer: one item, not the run
        logger.exception("judging %s with %s failed unexpectedly", case.case_id, metric.name)
        return _error_record(case, metric, BackendError(f"{type(err).__name__}: {err}"), t0)


def _error_record(case: LLMTestCase, metric: GEval, err: LocalJudgeError,
                  t0: float) -> GEvalResult:
    """The record of a failed (case, metric): no score, ``error`` = the error's code."""
    return GEvalResult(
        name=metric.name, case_id=case.case_id, score=None, raw_score=None,
        argmax_score=None, distribution=None, mass=None,
        threshold=metric.threshold, strict=metric.strict_mode, success=False,
        reason=None, error=err.code, message=str(err), method=metric._method(),
        evaluation_steps=metric.evaluation_steps or (), signature=metric._safe_signature(),
        seconds=time.perf_counter() - t0 if t0 else 0.0)


def _never() -> GEvalResult:
    raise RuntimeError("GEval.measure returned without a result")  # pragma: no cover


def assert_test(test_case: LLMTestCase, metrics: Sequence[GEval]) -> list[GEvalResult]:
    """Measure ``test_case`` with each metric; raise listing every failed or errored metric.

    Raises:
        AssertionError: at least one metric failed (score below threshold) or errored; the
            message lists each with its score, threshold and error.
    """
    results = evaluate([test_case], metrics)
    bad = [r for r in results if not r.success]
    if bad:
        lines = []
        for r in bad:
            if r.error:
                lines.append(f"{r.name}: ERROR {r.error}: {r.message}")
            else:
                lines.append(f"{r.name}: score {r.score:.4f} < threshold {r.threshold}"
                             + (" (strict mode: needs a full score)" if r.strict else ""))
        raise AssertionError(f"{len(bad)} of {len(results)} metrics failed for test case "
                             f"{test_case.case_id!r}:\n" + "\n".join(lines))
    return results
