"""Meta-evaluation statistics: how well judge scores agree with human scores.

What lives here:

* ``summary_level_correlation``: Spearman ρ, Kendall τ-b and Pearson r computed per document
  and averaged over documents, as in the G-Eval repository's SummEval meta-evaluation script;
* ``pooled_correlation``: the same three coefficients over all items at once;
* ``bootstrap_ci`` (any statistic of one sample, default the mean),
  ``summary_level_correlation_ci`` (resamples documents) and ``pooled_correlation_ci``
  (resamples items): seeded percentile bootstrap intervals;
* ``agreement_rate`` and ``cohen_kappa`` (unweighted, linear or quadratic weights);
* ``count_ties``: how many scores tie (argmax scores tie more than expected scores).

What deliberately does not: producing scores (``localjudge.judges``), reading data sets or
printing tables (``bench``). Nothing here loads a model.

Missing judge scores: a judge score of ``None`` or NaN marks an item whose measurement failed
(``JudgeResult.error`` set). Such items are excluded from every statistic and counted in
``n_missing``; they are never treated as 0. Human scores must be complete.

Undefined statistics (no usable document, constant scores, no agreement expected by chance)
are returned as NaN together with the counts that explain them; bad arguments raise
``ConfigError``. Every random function takes ``seed`` and uses a local
``np.random.default_rng(seed)``: results are deterministic for fixed inputs (including their
order) and seed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any, Literal

import numpy as np
from scipy.stats import kendalltau, pearsonr, spearmanr  # type: ignore[import-untyped]

from localjudge.errors import ConfigError

__all__ = [
    "AgreementResult",
    "ConfidenceInterval",
    "CorrelationCI",
    "KappaResult",
    "PooledCorrelation",
    "SummaryCorrelation",
    "TieCount",
    "agreement_rate",
    "bootstrap_ci",
    "cohen_kappa",
    "count_ties",
    "pooled_correlation",
    "pooled_correlation_ci",
    "summary_level_correlation",
    "summary_level_correlation_ci",
]

KappaWeights = Literal["linear", "quadratic"]
"""Weighting schemes of ``cohen_kappa`` (``None`` means unweighted)."""

_KAPPA_WEIGHTS = (None, "linear", "quadratic")

# Reasons a document is left out of the summary-level mean, in the order they are checked.
_TOO_FEW = "too_few_items"
_CONSTANT_HUMAN = "constant_human"
_CONSTANT_JUDGE = "constant_judge"


class _Record:
    """JSON round-trip for the flat result dataclasses below (NaN stays NaN in Python's json)."""

    __slots__ = ()

    def to_dict(self) -> dict[str, Any]:
        """Plain dict of the fields (JSON-serialisable)."""
        return asdict(self)  # type: ignore[call-overload, no-any-return]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Any:
        """Inverse of ``to_dict``."""
        names = {f.name for f in fields(cls)}  # type: ignore[arg-type]
        return cls(**{k: v for k, v in data.items() if k in names})


# ---- result types --------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class SummaryCorrelation(_Record):
    """Summary-level (per-document, then averaged) correlation between judge and human scores.

    Each coefficient is the unweighted mean over the used documents; NaN when no document is
    usable (``n_groups_used == 0``).
    """

    rho: float
    """Mean Spearman rank correlation, in [-1, 1] or NaN."""
    tau: float
    """Mean Kendall τ-b, in [-1, 1] or NaN."""
    r: float
    """Mean Pearson linear correlation, in [-1, 1] or NaN."""
    n_groups: int
    """Distinct group ids in the input (documents), >= 1."""
    n_groups_used: int
    """Documents that entered the mean."""
    n_groups_skipped: int
    """Documents left out: the sum of the three ``n_skipped_*`` counts."""
    n_skipped_too_few: int
    """Documents with fewer than 2 items that have a judge score."""
    n_skipped_constant_human: int
    """Documents whose human scores (of the scored items) are all equal."""
    n_skipped_constant_judge: int
    """Documents whose judge scores are all equal (human scores not constant)."""
    n_items: int
    """Items in the input, including those without a judge score."""
    n_missing: int
    """Items without a judge score (None/NaN), excluded from every document."""
    n_items_used: int
    """Items in the used documents."""


@dataclass(frozen=True, slots=True)
class PooledCorrelation(_Record):
    """Correlation between judge and human scores over all scored items at once."""

    rho: float
    """Spearman rank correlation, in [-1, 1] or NaN (see ``undefined_reason``)."""
    tau: float
    """Kendall τ-b, in [-1, 1] or NaN."""
    r: float
    """Pearson linear correlation, in [-1, 1] or NaN."""
    n_items: int
    """Items in the input, including those without a judge score."""
    n_missing: int
    """Items without a judge score (None/NaN), excluded."""
    undefined_reason: str | None
    """None when the coefficients are defined; otherwise ``"too_few_items"`` (fewer than 2
    scored items), ``"constant_human"`` or ``"constant_judge"``."""


@dataclass(frozen=True, slots=True)
class ConfidenceInterval(_Record):
    """A point estimate with its percentile-bootstrap confidence interval."""

    estimate: float
    """The statistic on the original data (not the bootstrap mean); NaN if undefined."""
    low: float
    """Lower bound: the ``(1 - level) / 2`` quantile of the defined resample statistics."""
    high: float
    """Upper bound: the ``(1 + level) / 2`` quantile of the defined resample statistics."""
    level: float
    """Two-sided nominal coverage in (0, 1), e.g. 0.95."""
    n_resamples: int
    """Bootstrap resamples drawn, >= 1."""
    n_undefined: int
    """Resamples whose statistic was undefined (NaN), left out of the quantiles; when all are
    undefined, ``low`` and ``high`` are NaN."""
    seed: int
    """Seed of the resampling generator."""


@dataclass(frozen=True, slots=True)
class CorrelationCI:
    """Bootstrap intervals of ρ, τ-b and r, from one shared set of resamples."""

    rho: ConfidenceInterval
    """Spearman ρ."""
    tau: ConfidenceInterval
    """Kendall τ-b."""
    r: ConfidenceInterval
    """Pearson r."""
    unit: str
    """What was resampled: ``"group"`` (documents, summary level) or ``"item"`` (pooled)."""
    n_units: int
    """Number of units each resample draws (with replacement)."""

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dict (JSON-serialisable)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CorrelationCI:
        """Inverse of ``to_dict``."""
        return cls(
            rho=ConfidenceInterval.from_dict(data["rho"]),
            tau=ConfidenceInterval.from_dict(data["tau"]),
            r=ConfidenceInterval.from_dict(data["r"]),
            unit=data["unit"],
            n_units=data["n_units"],
        )


@dataclass(frozen=True, slots=True)
class AgreementResult(_Record):
    """Share of items on which judge and human give the same score (within ``tolerance``)."""

    rate: float
    """``n_agree / (n_items - n_missing)`` in [0, 1]; NaN when no item has a judge score."""
    n_agree: int
    """Scored items with ``|judge - human| <= tolerance`` (equality when tolerance is 0)."""
    n_items: int
    """Items in the input, including those without a judge score."""
    n_missing: int
    """Items without a judge score (None/NaN), excluded."""
    tolerance: float
    """Largest absolute difference that still counts as agreement, >= 0."""


@dataclass(frozen=True, slots=True)
class KappaResult(_Record):
    """Cohen's κ between judge and human labels, ``1 - observed / expected`` disagreement."""

    kappa: float
    """κ in [-1, 1]; 1 is perfect agreement, 0 chance level; NaN when the expected
    disagreement is 0 (both raters use one and the same label throughout) or no item is scored."""
    weights: str | None
    """``None`` (unweighted), ``"linear"`` or ``"quadratic"``."""
    observed_disagreement: float
    """Weighted share of disagreement observed, in [0, 1] (weights scaled so the largest is 1);
    unweighted this is ``1 - agreement rate``."""
    expected_disagreement: float
    """The same under independence of the two raters' marginals, in [0, 1]."""
    labels: tuple[Any, ...]
    """The ordered label set (categories); weights use positions in this order."""
    n_items: int
    """Items in the input, including those without a judge label."""
    n_missing: int
    """Items without a judge label (None/NaN), excluded."""

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> KappaResult:
        """Inverse of ``to_dict`` (``labels`` back to a tuple)."""
        return cls(**{**data, "labels": tuple(data["labels"])})


@dataclass(frozen=True, slots=True)
class TieCount(_Record):
    """How many scores tie, overall or within groups (documents).

    With groups, every count is the sum of the per-group counts: ties across documents do not
    matter for summary-level correlation, ties inside one do.
    """

    n_items: int
    """Scored items (judge score present)."""
    n_distinct: int
    """Distinct score values (summed over groups when grouped)."""
    n_tied_items: int
    """``n_items - n_distinct``: items that repeat a value already seen."""
    n_tied_pairs: int
    """Pairs of items with equal scores, ``Σ_v c_v (c_v - 1) / 2`` over value counts ``c_v``."""
    n_pairs: int
    """All pairs, ``Σ n (n - 1) / 2`` (per group when grouped)."""
    n_missing: int
    """Items without a score (None/NaN), excluded."""
    n_groups: int | None
    """Number of groups, or None when counted over all items."""

    @property
    def tied_pair_fraction(self) -> float:
        """``n_tied_pairs / n_pairs`` in [0, 1]; NaN when there are no pairs."""
        return self.n_tied_pairs / self.n_pairs if self.n_pairs else math.nan


# ---- input checks --------------------------------------------------------------------------
def _length(values: Any, name: str) -> int:
    if isinstance(values, (str, bytes)) or not hasattr(values, "__len__"):
        raise ConfigError(f"{name} must be a sequence, got {type(values).__name__}: {values!r}")
    if isinstance(values, np.ndarray) and values.ndim != 1:
        raise ConfigError(f"{name} must be 1-d, got an array of shape {values.shape}")
    return len(values)


def _check_paired(n_min: int, **seqs: Any) -> int:
    lengths = {name: _length(v, name) for name, v in seqs.items()}
    if len(set(lengths.values())) > 1:
        raise ConfigError(f"length mismatch: {lengths}")
    n = next(iter(lengths.values()))
    if n < n_min:
        raise ConfigError(f"need at least {n_min} items, got {n} ({', '.join(lengths)})")
    return n


def _is_missing(v: Any) -> bool:
    return v is None or (isinstance(v, (float, np.floating)) and bool(np.isnan(v)))


def _to_float(v: Any, name: str, i: int) -> float:
    if isinstance(v, (str, bytes)):
        raise ConfigError(f"{name}[{i}] is not a number: {v!r}")
    try:
        x = float(v)
    except (TypeError, ValueError):
        raise ConfigError(f"{name}[{i}] is not a number: {v!r}") from None
    if math.isinf(x):
        raise ConfigError(f"{name}[{i}] is infinite: {v!r}")
    return x


def _scores(values: Sequence[Any] | np.ndarray, name: str, *, allow_missing: bool) -> np.ndarray:
    """float64 array of shape (n,); None -> NaN when allowed, else ConfigError."""
    out = np.empty(len(values), dtype=np.float64)
    for i, v in enumerate(values):
        if _is_missing(v):
            if not allow_missing:
                raise ConfigError(f"{name}[{i}] is missing ({v!r}); {name} scores must be complete")
            out[i] = math.nan
        else:
            out[i] = _to_float(v, name, i)
    return out


def _check_labels(
    values: Sequence[Any] | np.ndarray, name: str, *, allow_missing: bool
) -> list[Any]:
    out: list[Any] = []
    for i, v in enumerate(values):
        if _is_missing(v):
            if not allow_missing:
                raise ConfigError(f"{name}[{i}] is missing ({v!r}); {name} labels must be complete")
            out.append(None)
            continue
        try:
            hash(v)
        except TypeError:
            raise ConfigError(f"{name}[{i}] is not hashable: {v!r}") from None
        out.append(v)
    return out


def _group_index(groups: Sequence[Hashable] | np.ndarray) -> tuple[list[Hashable], np.ndarray]:
    """Group ids in order of first appearance, and each item's group position, shape (n,)."""
    order: dict[Hashable, int] = {}
    pos = np.empty(len(groups), dtype=np.intp)
    for i, g in enumerate(groups):
        try:
            pos[i] = order.setdefault(g, len(order))
        except TypeError:
            raise ConfigError(f"groups[{i}] is not hashable: {g!r}") from None
    return list(order), pos


def _check_bootstrap_args(seed: int, n_resamples: int, level: float) -> None:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ConfigError(f"seed must be a non-negative int, got {seed!r}")
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, (int, np.integer)):
        raise ConfigError(f"n_resamples must be an int, got {n_resamples!r}")
    if n_resamples < 1:
        raise ConfigError(f"n_resamples must be >= 1, got {n_resamples}")
    if not isinstance(level, (int, float, np.floating)) or not 0.0 < float(level) < 1.0:
        raise ConfigError(f"level must be in (0, 1), got {level!r}")


def _percentile_interval(
    replicates: np.ndarray, estimate: float, *, level: float, seed: int
) -> ConfidenceInterval:
    """Percentile interval (Efron & Tibshirani 1993, ch. 13) of the defined replicates."""
    ok = replicates[~np.isnan(replicates)]
    alpha = (1.0 - level) / 2.0
    if ok.size:
        low, high = (float(q) for q in np.quantile(ok, [alpha, 1.0 - alpha]))
    else:
        low = high = math.nan
    return ConfidenceInterval(
        estimate=float(estimate),
        low=low,
        high=high,
        level=float(level),
        n_resamples=int(replicates.size),
        n_undefined=int(replicates.size - ok.size),
        seed=int(seed),
    )


# ---- correlation ---------------------------------------------------------------------------
def _correlate(judge: np.ndarray, human: np.ndarray) -> tuple[float, float, float]:
    """(Spearman ρ, Kendall τ-b, Pearson r) with scipy; inputs non-constant, n >= 2."""
    # Same calls and argument order as calculate_correlation() in nlpyang/geval
    # meta_eval_summeval.py; kendalltau's default variant is "b".
    rho = float(spearmanr(judge, human)[0])
    tau = float(kendalltau(judge, human)[0])
    r = float(pearsonr(judge, human)[0])
    return rho, tau, r


def _undefined_reason(judge: np.ndarray, human: np.ndarray) -> str | None:
    """Why (ρ, τ, r) cannot be computed, checked in the order too few / human / judge."""
    if judge.size < 2:
        return _TOO_FEW
    if np.all(human == human[0]):
        return _CONSTANT_HUMAN
    if np.all(judge == judge[0]):
        return _CONSTANT_JUDGE
    return None


def _per_group(
    judge: Sequence[float | None] | np.ndarray,
    human: Sequence[float] | np.ndarray,
    groups: Sequence[Hashable] | np.ndarray,
) -> tuple[np.ndarray, list[str | None], np.ndarray, int, int]:
    """Per-group coefficients, shape (n_groups, 3) with NaN rows for skipped groups; the skip
    reason of each group; scored items per group, shape (n_groups,); n_items; n_missing."""
    n = _check_paired(2, judge=judge, human=human, groups=groups)
    j = _scores(judge, "judge", allow_missing=True)
    h = _scores(human, "human", allow_missing=False)
    ids, pos = _group_index(groups)
    scored = ~np.isnan(j)
    corr = np.full((len(ids), 3), math.nan)
    reasons: list[str | None] = []
    sizes = np.zeros(len(ids), dtype=np.intp)
    order = np.argsort(pos, kind="stable")  # items grouped, input order kept within a group
    bounds = np.searchsorted(pos[order], np.arange(len(ids) + 1))
    for g in range(len(ids)):
        sel = order[bounds[g] : bounds[g + 1]]
        sel = sel[scored[sel]]
        jg, hg = j[sel], h[sel]
        sizes[g] = jg.size
        reason = _undefined_reason(jg, hg)
        reasons.append(reason)
        if reason is None:
            corr[g] = _correlate(jg, hg)
    return corr, reasons, sizes, n, int(n - scored.sum())


def summary_level_correlation(
    judge: Sequence[float | None] | np.ndarray,
    human: Sequence[float] | np.ndarray,
    groups: Sequence[Hashable] | np.ndarray,
) -> SummaryCorrelation:
    """Summary-level Spearman ρ, Kendall τ-b and Pearson r, averaged over documents.

    Mirrors the meta-evaluation of the G-Eval paper (Liu et al. 2023, arXiv 2303.16634,
    Table 1, following Zhong et al. 2022): the script ``meta_eval_summeval.py``
    of nlpyang/geval at commit c03b505e7f33d2cdd59a06d457aba8fe7ab3d27f groups items by
    ``doc_id``; per document it computes ``scipy.stats.pearsonr``, ``spearmanr`` and
    ``kendalltau`` (τ-b, scipy's default) of judge against human scores; it skips a document
    when ``len(set(human)) <= 1 or len(set(judge)) <= 1``; it sums the coefficients in order of
    first appearance of the documents and divides by the number of documents used.

    Deviations from that script, all deliberate:

    * A missing judge score (None/NaN) excludes the item and is counted in ``n_missing``;
      the script turns an unparsable answer into a score of 0.
    * With no usable document the coefficients are NaN; the script prints 0.
    * Documents with fewer than 2 scored items are skipped as in the script (there a single
      item counts as constant) but counted separately as ``n_skipped_too_few``.
    * The script averages the scores of the sampled answers of each item (n=20 in the paper)
      before correlating; here the caller passes one score per item (e.g. the
      probability-weighted G-Eval score).

    Args:
        judge: judge scores, shape ``(n_items,)``; None or NaN marks a failed measurement.
        human: human scores, shape ``(n_items,)``, all present and finite.
        groups: document id of each item, shape ``(n_items,)``, any hashable.

    Returns:
        ``SummaryCorrelation``; each skipped document is counted under the first reason that
        applies, in the order: too few scored items, constant human, constant judge.

    Raises:
        ConfigError: length mismatch, fewer than 2 items, a non-numeric or infinite score, a
            missing human score, or an unhashable group id.

    Example:
        >>> res = summary_level_correlation(
        ...     [1, 2, 3, 3, 2, 1, 4, 4], [1, 2, 3, 1, 2, 3, 5, 5], ["a"] * 3 + ["b"] * 3 + ["c"] * 2
        ... )
        >>> (round(res.rho, 6), res.n_groups_used, res.n_skipped_constant_human)
        (0.0, 2, 1)
    """
    corr, reasons, sizes, n, n_missing = _per_group(judge, human, groups)
    used = [g for g, reason in enumerate(reasons) if reason is None]
    if used:
        # Sequential sum in first-appearance order, then / n, exactly as the script.
        rho, tau, r = (sum(float(corr[g, k]) for g in used) / len(used) for k in range(3))
    else:
        rho = tau = r = math.nan
    n_skip = {
        reason: reasons.count(reason) for reason in (_TOO_FEW, _CONSTANT_HUMAN, _CONSTANT_JUDGE)
    }
    return SummaryCorrelation(
        rho=rho,
        tau=tau,
        r=r,
        n_groups=len(reasons),
        n_groups_used=len(used),
        n_groups_skipped=len(reasons) - len(used),
        n_skipped_too_few=n_skip[_TOO_FEW],
        n_skipped_constant_human=n_skip[_CONSTANT_HUMAN],
        n_skipped_constant_judge=n_skip[_CONSTANT_JUDGE],
        n_items=n,
        n_missing=n_missing,
        n_items_used=int(sizes[used].sum()) if used else 0,
    )


def pooled_correlation(
    judge: Sequence[float | None] | np.ndarray,
    human: Sequence[float] | np.ndarray,
) -> PooledCorrelation:
    """Spearman ρ, Kendall τ-b and Pearson r over all scored items at once.

    The same scipy calls as ``summary_level_correlation`` (``spearmanr``, ``kendalltau`` τ-b,
    ``pearsonr``), on the concatenation of all documents (the "dataset-level" correlation).

    Args:
        judge: judge scores, shape ``(n_items,)``; None or NaN marks a failed measurement.
        human: human scores, shape ``(n_items,)``, all present and finite.

    Returns:
        ``PooledCorrelation``; NaN coefficients with ``undefined_reason`` set when fewer than 2
        items are scored or either side is constant.

    Raises:
        ConfigError: length mismatch, fewer than 2 items, a non-numeric or infinite score, or a
            missing human score.

    Example:
        >>> round(pooled_correlation([1, 1, 2, 3, None], [1, 2, 2, 3, 5]).tau, 6)  # 4/5
        0.8
    """
    n = _check_paired(2, judge=judge, human=human)
    j = _scores(judge, "judge", allow_missing=True)
    h = _scores(human, "human", allow_missing=False)
    scored = ~np.isnan(j)
    j, h = j[scored], h[scored]
    reason = _undefined_reason(j, h)
    rho, tau, r = (math.nan,) * 3 if reason else _correlate(j, h)
    return PooledCorrelation(
        rho=rho, tau=tau, r=r, n_items=n, n_missing=int(n - j.size), undefined_reason=reason
    )


# ---- bootstrap -----------------------------------------------------------------------------
def bootstrap_ci(
    values: Sequence[float] | np.ndarray,
    *,
    seed: int,
    statistic: Callable[[np.ndarray], float] | None = None,
    n_resamples: int = 2000,
    level: float = 0.95,
) -> ConfidenceInterval:
    """Percentile-bootstrap confidence interval of a statistic of one sample (default: mean).

    Efron & Tibshirani 1993, "An Introduction to the Bootstrap", ch. 13 (percentile interval).
    Draws ``rng.integers(0, n, size=(n_resamples, n))`` from ``np.random.default_rng(seed)``
    and takes ``np.quantile`` (linear) of the replicates. Deterministic for fixed ``values``
    and ``seed``. (Moved here from ``bench._common``, which keeps a tuple-returning wrapper;
    the draws are unchanged, so earlier bench numbers reproduce.)

    Args:
        values: shape ``(n,)``, n >= 1, finite.
        seed: seed of the resampling generator, >= 0.
        statistic: maps a resample, shape ``(n,)``, to a float (NaN = undefined, left out of
            the quantiles and counted); None means the mean (vectorised).
        n_resamples: bootstrap resamples, >= 1.
        level: two-sided coverage in (0, 1).

    Returns:
        ``ConfidenceInterval`` whose ``estimate`` is the statistic of ``values`` itself.

    Raises:
        ConfigError: empty or non-1-d input, NaN or infinite values, or bad
            ``seed``/``n_resamples``/``level``.

    Example:
        >>> ci = bootstrap_ci([1.0, 2.0, 3.0, 4.0], seed=0, n_resamples=200)
        >>> ci.estimate, ci.low <= 2.5 <= ci.high
        (2.5, True)
    """
    _check_bootstrap_args(seed, n_resamples, level)
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1 or x.size == 0:
        raise ConfigError(f"values must be a non-empty 1-d sequence, got shape {x.shape}")
    if not np.isfinite(x).all():
        bad = int(np.flatnonzero(~np.isfinite(x))[0])
        raise ConfigError(f"values[{bad}] is not finite: {x[bad]}")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, x.size, size=(n_resamples, x.size))
    if statistic is None:
        estimate = float(x.mean())
        replicates = x[idx].mean(axis=1)
    else:
        estimate = float(statistic(x))
        replicates = np.array([float(statistic(x[row])) for row in idx], dtype=np.float64)
    return _percentile_interval(replicates, estimate, level=level, seed=seed)


def summary_level_correlation_ci(
    judge: Sequence[float | None] | np.ndarray,
    human: Sequence[float] | np.ndarray,
    groups: Sequence[Hashable] | np.ndarray,
    *,
    seed: int,
    n_resamples: int = 1000,
    level: float = 0.95,
) -> CorrelationCI:
    """Bootstrap intervals of the summary-level ρ, τ-b and r, resampling documents.

    Resamples whole documents with replacement (all ``n_groups`` of them, skipped ones
    included, so the skip rate varies as it would in a new sample of documents; this is the
    input resampling of Deutsch, Dror & Roth 2021, "A Statistical Analysis of Summarization
    Evaluation Metrics using Resampling Methods", TACL 9) and recomputes ``summary_level_correlation`` on
    each resample: a document drawn twice counts twice in the mean. Percentile intervals
    (Efron & Tibshirani 1993, ch. 13). Draws ``rng.integers(0, n_groups, size=(n_resamples,
    n_groups))`` from ``np.random.default_rng(seed)``, groups numbered in order of first
    appearance; deterministic for fixed inputs, their order and ``seed``. A resample with no
    usable document is undefined and counted in ``n_undefined``.

    Args:
        judge: judge scores, shape ``(n_items,)``; None or NaN marks a failed measurement.
        human: human scores, shape ``(n_items,)``, all present and finite.
        groups: document id of each item, shape ``(n_items,)``.
        seed: seed of the resampling generator, >= 0.
        n_resamples: bootstrap resamples, >= 1.
        level: two-sided coverage in (0, 1).

    Returns:
        ``CorrelationCI`` with ``unit="group"``; the estimates equal
        ``summary_level_correlation(judge, human, groups)``.

    Raises:
        ConfigError: as ``summary_level_correlation``, or bad ``seed``/``n_resamples``/``level``.
    """
    _check_bootstrap_args(seed, n_resamples, level)
    point = summary_level_correlation(judge, human, groups)
    corr, _, _, _, _ = _per_group(judge, human, groups)
    n_groups = corr.shape[0]
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n_groups, size=(n_resamples, n_groups))
    drawn = corr[idx]  # (n_resamples, n_groups, 3)
    used = ~np.isnan(drawn[..., 0])
    n_used = used.sum(axis=1)  # (n_resamples,)
    sums = np.where(used[..., None], drawn, 0.0).sum(axis=1)  # (n_resamples, 3)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = np.where(n_used[:, None] > 0, sums / n_used[:, None], math.nan)
    cis = [
        _percentile_interval(means[:, k], est, level=level, seed=seed)
        for k, est in enumerate((point.rho, point.tau, point.r))
    ]
    return CorrelationCI(rho=cis[0], tau=cis[1], r=cis[2], unit="group", n_units=n_groups)


def pooled_correlation_ci(
    judge: Sequence[float | None] | np.ndarray,
    human: Sequence[float] | np.ndarray,
    *,
    seed: int,
    n_resamples: int = 1000,
    level: float = 0.95,
) -> CorrelationCI:
    """Bootstrap intervals of the pooled ρ, τ-b and r, resampling items.

    Resamples the scored items (missing judge scores excluded first) with replacement and
    recomputes ``pooled_correlation`` on each resample; a resample with constant judge or
    human scores is undefined and counted in ``n_undefined``. Percentile intervals (Efron &
    Tibshirani 1993, ch. 13). Draws ``rng.integers(0, n_scored, size=(n_resamples,
    n_scored))`` from ``np.random.default_rng(seed)``; deterministic for fixed inputs, their
    order and ``seed``. Cost: three scipy calls per resample (1-2 s per 1000 resamples of
    1600 items).

    Args:
        judge: judge scores, shape ``(n_items,)``; None or NaN marks a failed measurement.
        human: human scores, shape ``(n_items,)``, all present and finite.
        seed: seed of the resampling generator, >= 0.
        n_resamples: bootstrap resamples, >= 1.
        level: two-sided coverage in (0, 1).

    Returns:
        ``CorrelationCI`` with ``unit="item"`` and ``n_units`` the number of scored items; the
        estimates equal ``pooled_correlation(judge, human)``.

    Raises:
        ConfigError: as ``pooled_correlation``, or bad ``seed``/``n_resamples``/``level``.
    """
    _check_bootstrap_args(seed, n_resamples, level)
    point = pooled_correlation(judge, human)
    j = _scores(judge, "judge", allow_missing=True)
    h = _scores(human, "human", allow_missing=False)
    scored = ~np.isnan(j)
    j, h = j[scored], h[scored]
    reps = np.full((n_resamples, 3), math.nan)
    if j.size:
        rng = np.random.default_rng(seed)
        idx = rng.integers(0, j.size, size=(n_resamples, j.size))
        for b, row in enumerate(idx):
            jb, hb = j[row], h[row]
            if _undefined_reason(jb, hb) is None:
                reps[b] = _correlate(jb, hb)
    cis = [
        _percentile_interval(reps[:, k], est, level=level, seed=seed)
        for k, est in enumerate((point.rho, point.tau, point.r))
    ]
    return CorrelationCI(rho=cis[0], tau=cis[1], r=cis[2], unit="item", n_units=int(j.size))


# ---- agreement -----------------------------------------------------------------------------
def agreement_rate(
    judge: Sequence[Any] | np.ndarray,
    human: Sequence[Any] | np.ndarray,
    *,
    tolerance: float = 0.0,
) -> AgreementResult:
    """Share of scored items where judge and human agree (raw, not chance-corrected).

    With ``tolerance=0`` labels are compared with ``==`` (any hashable labels, e.g. ``"A"``);
    with ``tolerance > 0`` they must be numbers and agree when ``|judge - human| <= tolerance``
    (e.g. 1 for "within one point" on a 1-5 scale).

    Args:
        judge: judge labels or scores, shape ``(n_items,)``; None or NaN marks a failure.
        human: human labels or scores, shape ``(n_items,)``, all present.
        tolerance: largest absolute difference counted as agreement, finite and >= 0.

    Returns:
        ``AgreementResult``; ``rate`` is NaN when no item has a judge score.

    Raises:
        ConfigError: length mismatch, fewer than 2 items, a missing human label, a negative or
            non-finite tolerance, or non-numeric labels with ``tolerance > 0``.

    Example:
        >>> agreement_rate([1, 2, 3, None], [1, 2, 4, 4]).rate  # 2 of 3 scored items
        0.6666666666666666
    """
    n = _check_paired(2, judge=judge, human=human)
    if (
        isinstance(tolerance, bool)
        or not isinstance(tolerance, (int, float, np.integer, np.floating))
        or not math.isfinite(tolerance)
        or tolerance < 0
    ):
        raise ConfigError(f"tolerance must be a finite number >= 0, got {tolerance!r}")
    if tolerance > 0:
        j = _scores(judge, "judge", allow_missing=True)
        h = _scores(human, "human", allow_missing=False)
        scored = ~np.isnan(j)
        n_agree = int((np.abs(j[scored] - h[scored]) <= tolerance).sum())
        n_scored = int(scored.sum())
    else:
        jl = _check_labels(judge, "judge", allow_missing=True)
        hl = _check_labels(human, "human", allow_missing=False)
        pairs = [(a, b) for a, b in zip(jl, hl) if a is not None]
        n_agree = sum(1 for a, b in pairs if a == b)
        n_scored = len(pairs)
    return AgreementResult(
        rate=n_agree / n_scored if n_scored else math.nan,
        n_agree=n_agree,
        n_items=n,
        n_missing=n - n_scored,
        tolerance=float(tolerance),
    )


def cohen_kappa(
    judge: Sequence[Any] | np.ndarray,
    human: Sequence[Any] | np.ndarray,
    *,
    weights: KappaWeights | None = None,
    labels: Sequence[Any] | None = None,
) -> KappaResult:
    """Cohen's κ, unweighted or weighted for ordinal scales.

    ``κ = 1 - Σ w_ij O_ij / Σ w_ij E_ij`` with ``O`` the confusion matrix of (judge, human)
    labels and ``E_ij = O_i. O_.j / n`` its expectation under independent marginals. Weights:
    unweighted ``w_ij = [i != j]`` (Cohen 1960, Educ. Psychol. Meas. 20(1):37-46); linear
    ``|i - j|`` (Cohen 1968, Psychol. Bull. 70(4):213-220); quadratic ``(i - j)^2`` (Fleiss &
    Cohen 1973, Educ. Psychol. Meas. 33(3):613-619). ``i, j`` are positions in ``labels``, so
    the categories are taken as equally spaced. Same definition as
    ``sklearn.metrics.cohen_kappa_score``.

    For an ordinal scale pass the full scale as ``labels`` (e.g. ``range(1, 6)``): without it
    the labels are the sorted observed values, and a scale point nobody used would shrink the
    distance between its neighbours in the weighted κ.

    Args:
        judge: judge labels, shape ``(n_items,)``, hashable; None or NaN marks a failure.
        human: human labels, shape ``(n_items,)``, all present.
        weights: None (unweighted), ``"linear"`` or ``"quadratic"``.
        labels: the ordered label set; default the sorted union of the observed labels.

    Returns:
        ``KappaResult``; ``kappa`` is NaN when no item is scored or the expected disagreement
        is 0.

    Raises:
        ConfigError: length mismatch, fewer than 2 items, a missing human label, unknown
            ``weights``, duplicate labels in ``labels``, an observed label not in ``labels``,
            or observed labels that cannot be sorted (pass ``labels``).

    Example:
        >>> round(cohen_kappa([1, 2, 3, 3], [1, 2, 3, 2]).kappa, 4)  # hand value 7/11
        0.6364
    """
    n = _check_paired(2, judge=judge, human=human)
    if weights not in _KAPPA_WEIGHTS:
        raise ConfigError(f"weights must be one of {_KAPPA_WEIGHTS}, got {weights!r}")
    jl = _check_labels(judge, "judge", allow_missing=True)
    hl = _check_labels(human, "human", allow_missing=False)
    pairs = [(a, b) for a, b in zip(jl, hl) if a is not None]
    if labels is None:
        observed = {a for a, _ in pairs} | {b for _, b in pairs} or set(hl)
        try:
            label_list = sorted(observed)
        except TypeError:
            raise ConfigError(
                f"observed labels cannot be sorted ({sorted(map(repr, observed))}); pass labels="
            ) from None
    else:
        if isinstance(labels, (str, bytes)):
            raise ConfigError(f"labels must be a sequence of labels, got {labels!r}")
        label_list = list(labels)
    index: dict[Any, int] = {}
    for lab in label_list:
        if lab in index:
            raise ConfigError(f"labels contains {lab!r} twice: {label_list!r}")
        index[lab] = len(index)
    for name, seq in (("judge", [a for a, _ in pairs]), ("human", hl)):
        for v in seq:
            if v not in index:
                raise ConfigError(f"{name} label {v!r} is not in labels {label_list!r}")
    k = len(label_list)
    confusion = np.zeros((k, k), dtype=np.float64)
    for a, b in pairs:
        confusion[index[a], index[b]] += 1.0
    dist = np.abs(np.subtract.outer(np.arange(k), np.arange(k))).astype(np.float64)
    if weights is None:
        w = (dist > 0).astype(np.float64)
    elif weights == "linear":
        w = dist
    else:
        w = dist**2
    if w.max() > 0:
        w = w / w.max()
    n_scored = len(pairs)
    if n_scored:
        expected = np.outer(confusion.sum(axis=1), confusion.sum(axis=0)) / n_scored
        d_obs = float((w * confusion).sum() / n_scored)
        d_exp = float((w * expected).sum() / n_scored)
        kappa = 1.0 - d_obs / d_exp if d_exp > 0 else math.nan
    else:
        d_obs = d_exp = kappa = math.nan
    return KappaResult(
        kappa=kappa,
        weights=weights,
        observed_disagreement=d_obs,
        expected_disagreement=d_exp,
        labels=tuple(label_list),
        n_items=n,
        n_missing=n - n_scored,
    )


# ---- ties ----------------------------------------------------------------------------------
def count_ties(
    scores: Sequence[float | None] | np.ndarray,
    *,
    groups: Sequence[Hashable] | np.ndarray | None = None,
) -> TieCount:
    """Count tied scores, over all items or within each group (document).

    Values tie when exactly equal (no rounding): argmax scores on a 1-5 scale tie often,
    probability-weighted scores rarely (G-Eval, Liu et al. 2023, section 2, "Scoring
    Function"). Ties lower the
    attainable rank correlation, so compare the counts of the two score kinds per document.

    Args:
        scores: shape ``(n_items,)``; None or NaN marks a failed measurement (excluded).
        groups: optional group id per item, shape ``(n_items,)``; counts are then per group
            and summed.

    Returns:
        ``TieCount``.

    Raises:
        ConfigError: fewer than 2 items, a length mismatch with ``groups``, a non-numeric or
            infinite score, or an unhashable group id.

    Example:
        >>> t = count_ties([3, 3, 4, 3, None])
        >>> (t.n_tied_items, t.n_tied_pairs, t.n_pairs)
        (2, 3, 6)
    """
    if groups is None:
        n = _check_paired(2, scores=scores)
        pos = np.zeros(n, dtype=np.intp)
        n_groups = 1
    else:
        n = _check_paired(2, scores=scores, groups=groups)
        ids, pos = _group_index(groups)
        n_groups = len(ids)
    x = _scores(scores, "scores", allow_missing=True)
    scored = ~np.isnan(x)
    n_distinct = n_tied_pairs = n_pairs = 0
    for g in range(n_groups):
        xs = x[(pos == g) & scored]
        _, counts = np.unique(xs, return_counts=True)
        n_distinct += int(counts.size)
        n_tied_pairs += int((counts * (counts - 1) // 2).sum())
        n_pairs += xs.size * (xs.size - 1) // 2
    n_scored = int(scored.sum())
    return TieCount(
        n_items=n_scored,
        n_distinct=n_distinct,
        n_tied_items=n_scored - n_distinct,
        n_tied_pairs=n_tied_pairs,
        n_pairs=n_pairs,
        n_missing=n - n_scored,
        n_groups=None if groups is None else n_groups,
    )
