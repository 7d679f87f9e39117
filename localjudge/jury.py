"""LLM juries: a panel of judges pooled per item (PoLL, Verga et al. 2024, "Replacing Judges
with Juries", arXiv 2404.18796).

A panel of judges from *disjoint model families* reduces both variance and intra-model bias
(PoLL §3: pooling by average or max voting). A panel of clones of one model only samples that
model's own distribution: it lowers variance and leaves the bias where it is -- and the exact
expectation from one forward pass (``score_distribution``) already gives what infinitely many
clones would. This module therefore knows each judge's model family and warns when the whole
panel is one family, and when a judge shares its family with the system that produced the
response (self-preference, PoLL §1; Panickssery et al. 2024, arXiv 2404.13076).

Judges are G-Eval metrics (``GEval``) or a backend plus a prompt (``PromptJudge``). Pooling is
on the 0-1 score: ``mean``, ``median``, or ``vote`` (plurality of the judges' argmax labels;
needs one common scale). A judge that errors (low mass, overflow) is left out of the pool and
counted; it never turns the pooled score into NaN or 0. When no judge answers, the item's
pooled score is ``None`` with ``error="no_judge_answered"``.
"""

from __future__ import annotations

import logging
import math
import statistics
import string
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from localjudge.backends.base import DEFAULT_MIN_MASS, Backend, check_min_mass
from localjudge.errors import ConfigError, LocalJudgeError, LowMassError
from localjudge.judges.geval import GEval, LLMTestCase, MissingTestCaseParamsError
from localjudge.types import ScoreDistribution

__all__ = ["POOLINGS", "Jury", "JuryMember", "JuryResult", "PromptJudge"]

logger = logging.getLogger(__name__)

POOLINGS = ("mean", "median", "vote")


class PromptJudge:
    """A judge made of a backend and a prompt (no G-Eval steps).

    Args:
        backend: the model.
        prompt: a template with ``{field}`` placeholders of ``LLMTestCase`` fields
            (``"{input}"``, ``"{actual_output}"``, ...), or a function ``case -> prompt``.
        name: judge name in results (default: the backend's model name).
        score_range: inclusive integer scale; the 0-1 score is ``(g - lo)/(hi - lo)``.
        prefill, system, raw, min_mass: as in ``Backend.score_distribution``.

    Raises:
        ConfigError: bad scale or prompt.
    """

    def __init__(
        self,
        backend: Backend,
        prompt: str | Callable[[LLMTestCase], str],
        *,
        name: str | None = None,
        score_range: tuple[int, int] = (1, 5),
        prefill: str | None = None,
        system: str | None = None,
        raw: bool = False,
        min_mass: float = DEFAULT_MIN_MASS,
    ) -> None:
        if not isinstance(backend, Backend):
            raise ConfigError(f"backend must be a localjudge Backend, got {backend!r}")
        if not (callable(prompt) or (isinstance(prompt, str) and prompt.strip())):
            raise ConfigError(f"prompt must be a non-empty template or a function, got {prompt!r}")
        if (not isinstance(score_range, (tuple, list)) or len(score_range) != 2
                or not all(isinstance(x, int) and not isinstance(x, bool) for x in score_range)
                or not score_range[0] < score_range[1]):
            raise ConfigError(f"score_range must be two ints lo < hi, got {score_range!r}")
        lo, hi = score_range
        check_min_mass(min_mass)
        if isinstance(prompt, str):
            try:
                fields = {f for _, f, _, _ in string.Formatter().parse(prompt) if f is not None}
            except ValueError as err:
                raise ConfigError(f"prompt template is malformed: {err}") from None
            known = set(LLMTestCase().to_dict())
            if not fields <= known or "" in fields:
                raise ConfigError(f"prompt template names fields {sorted(fields - known)} ; "
                                  f"use named LLMTestCase fields {sorted(known)}")
            self._fields = fields
        else:
            self._fields = set()
        self.model = backend
        self.prompt = prompt
        self.name = name or str(backend.signature(range(lo, hi + 1)).model)
        self.score_range = (lo, hi)
        self.prefill, self.system, self.raw, self.min_mass = prefill, system, raw, min_mass
        backend.resolve_labels(range(lo, hi + 1))

    def render_prompt(self, case: LLMTestCase) -> str:
        if callable(self.prompt):
            return self.prompt(case)
        values = case.to_dict()
        missing = sorted(f for f in self._fields if values.get(f) in (None, "", []))
        if missing:
            raise MissingTestCaseParamsError(
                f"test case {case.case_id!r} lacks {missing}, used by the prompt of judge "
                f"{self.name!r}")
        fields = {k: ("\n".join(v) if isinstance(v, (list, tuple)) else v)
                  for k, v in values.items()}
        return self.prompt.format(**fields)

    def score(self, case: LLMTestCase) -> ScoreDistribution:
        lo, hi = self.score_range
        return self.model.score_distribution(
            self.render_prompt(case), range(lo, hi + 1), prefill=self.prefill,
            system=self.system, raw=self.raw, min_mass=self.min_mass)


Judge = GEval | PromptJudge


@dataclass(frozen=True)
class JuryMember:
    """One judge's answer on one item.

    Attributes:
        name: the judge's name.
        model: model name from the backend signature.
        family: model family, or None when unknown.
        distribution: the label distribution (kept on low-mass errors), or None.
        expected: the probability-weighted score Σ s·p(s) on the judge's scale, or None.
        score: 0-1 score, or None iff ``error`` is set.
        argmax: the most probable label as a number, or None.
        mass: raw label mass in [0, 1], or None.
        error: error code, or None.
        message: error message, or None.
    """

    name: str
    model: str
    family: str | None
    distribution: ScoreDistribution | None
    expected: float | None
    score: float | None
    argmax: float | None
    mass: float | None
    error: str | None
    message: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "model": self.model, "family": self.family,
                "distribution": None if self.distribution is None
                else self.distribution.to_dict(),
                "expected": self.expected, "score": self.score, "argmax": self.argmax,
                "mass": self.mass, "error": self.error, "message": self.message}


@dataclass(frozen=True)
class JuryResult:
    """The jury's verdict on one item.

    Attributes:
        case_id: the test case id.
        members: each judge's answer, in panel order.
        pooling: ``"mean"``, ``"median"`` or ``"vote"``.
        score: pooled 0-1 score over the judges that answered, or None when none did.
        n_judges: panel size.
        n_answered: judges that produced a score.
        n_errors: judges that errored (left out of the pool).
        spread_sd: standard deviation (ddof=0) of the answering judges' 0-1 scores; 0 for one.
        spread_range: max - min of those scores.
        variance: between-judge variance (ddof=0) of those scores.
        warnings: family warnings for this item (single family, self-preference).
        error: ``"no_judge_answered"`` when no judge answered, else None.
        seconds: wall time.
    """

    case_id: str
    members: tuple[JuryMember, ...]
    pooling: str
    score: float | None
    n_judges: int
    n_answered: int
    n_errors: int
    spread_sd: float | None
    spread_range: float | None
    variance: float | None
    warnings: tuple[str, ...]
    error: str | None
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"case_id": self.case_id, "members": [m.to_dict() for m in self.members],
                "pooling": self.pooling, "score": self.score, "n_judges": self.n_judges,
                "n_answered": self.n_answered, "n_errors": self.n_errors,
                "spread_sd": self.spread_sd, "spread_range": self.spread_range,
                "variance": self.variance, "warnings": list(self.warnings),
                "error": self.error, "seconds": self.seconds}


def pool(scores: Sequence[float], pooling: str,
         argmaxes: Sequence[float] | None = None,
         probs_by_label: Mapping[float, float] | None = None,
         scale: tuple[int, int] | None = None) -> float:
    """Pool 0-1 scores (PoLL §3).

    ``mean`` / ``median`` of the scores; ``vote``: the plurality argmax label (ties broken
    toward the label with the larger summed probability over judges, then the lower label),
    normalised to 0-1 on ``scale``.

    Raises:
        ConfigError: no scores, unknown pooling, or ``vote`` without argmaxes / scale.
    """
    if not scores:
        raise ConfigError("nothing to pool: no judge answered")
    if pooling == "mean":
        return math.fsum(scores) / len(scores)
    if pooling == "median":
        return float(statistics.median(scores))
    if pooling == "vote":
        if not argmaxes or scale is None:
            raise ConfigError("vote pooling needs each judge's argmax and a common scale")
        counts: dict[float, int] = {}
        for a in argmaxes:
            counts[a] = counts.get(a, 0) + 1
        best = max(counts.values())
        tied = sorted(a for a, c in counts.items() if c == best)
        mass = probs_by_label or {}
        winner = max(tied, key=lambda a: (mass.get(a, 0.0), -a))
        lo, hi = scale
        return (winner - lo) / (hi - lo)
    raise ConfigError(f"pooling must be one of {POOLINGS}, got {pooling!r}")


class Jury:
    """A panel of judges pooled per item.

    Args:
        judges: ``GEval`` metrics and/or ``PromptJudge``s (at least one).
        pooling: ``"mean"`` (PoLL's average pooling), ``"median"`` or ``"vote"`` (max voting).

    Attributes:
        warnings: panel-level warnings found at set-up (e.g. the whole panel is one family).

    Raises:
        ConfigError: no judges, unknown pooling, duplicate judge names, or ``vote`` over
            judges with different scales.

    Example:
        >>> from localjudge.backends.fake import FakeBackend
        >>> a = FakeBackend({"4": 1.0}); a.family = "fam-a"
        >>> b = FakeBackend({"2": 0.5, "3": 0.5}); b.family = "fam-b"
        >>> jury = Jury([PromptJudge(a, "Rate: {actual_output}", name="a"),
        ...              PromptJudge(b, "Rate: {actual_output}", name="b")])
        >>> r = jury.measure(LLMTestCase(actual_output="A cat sat."))
        >>> round(r.score, 4), r.n_answered
        (0.5625, 2)
    """

    def __init__(self, judges: Sequence[Judge], pooling: str = "mean") -> None:
        judges = list(judges)
        if not judges:
            raise ConfigError("a jury needs at least one judge")
        for j in judges:
            if not isinstance(j, (GEval, PromptJudge)):
                raise ConfigError(f"each judge must be a GEval or a PromptJudge, got {j!r}")
        if pooling not in POOLINGS:
            raise ConfigError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
        names = [j.name for j in judges]
        if len(set(names)) != len(names):
            raise ConfigError(f"judge names must be unique, got {names}; pass name=...")
        scales = {j.score_range for j in judges}
        if pooling == "vote" and len(scales) > 1:
            raise ConfigError(f"vote pooling needs one common scale, got {sorted(scales)}")
        self.judges = judges
        self.pooling = pooling
        self.warnings: list[str] = []
        fams = [j.model.family for j in judges]
        unknown = [j.name for j, f in zip(judges, fams) if f is None]
        if unknown:
            self.warnings.append(f"model family unknown for judges {unknown}: set "
                                 "backend.family so family diversity can be checked")
        known = {f for f in fams if f is not None}
        if len(judges) > 1 and len(known) == 1 and not unknown:
            self.warnings.append(
                f"the whole panel is one model family ({known.pop()}): averaging clones "
                "lowers variance but leaves that family's bias untouched; add judges from "
                "other families (PoLL)")
        for w in self.warnings:
            logger.warning(w)

    @property
    def families(self) -> list[str | None]:
        """Each judge's model family, in panel order."""
        return [j.model.family for j in self.judges]

    def _member(self, judge: Judge, case: LLMTestCase) -> JuryMember:
        model = str(judge.model.signature(range(judge.score_range[0],
                                                judge.score_range[1] + 1)).model)
        base = {"name": judge.name, "model": model, "family": judge.model.family}
        lo, hi = judge.score_range
        if isinstance(judge, GEval):
            judge.measure(case)
            r = judge.result
            if r is None or r.error is not None:
                return JuryMember(**base, distribution=None if r is None else r.distribution,
                                  expected=None, score=None, argmax=None,
                                  mass=None if r is None else r.mass,
                                  error="error" if r is None else r.error,
                                  message=None if r is None else r.message)
            return JuryMember(**base, distribution=r.distribution, expected=r.raw_score,
                              score=r.score, argmax=r.argmax_score, mass=r.mass, error=None,
                              message=None)
        try:
            d = judge.score(case)
        except MissingTestCaseParamsError:
            raise
        except LowMassError as err:
            return JuryMember(**base, distribution=err.distribution, expected=None,
                              score=None, argmax=None, mass=err.mass, error=err.code,
                              message=str(err))
        except LocalJudgeError as err:
            return JuryMember(**base, distribution=None, expected=None, score=None,
                              argmax=None, mass=None, error=err.code, message=str(err))
        g = float(d.expected) if d.expected is not None else math.nan
        return JuryMember(**base, distribution=d, expected=g, score=(g - lo) / (hi - lo),
                          argmax=float(d.argmax), mass=d.mass, error=None, message=None)

    def measure(self, test_case: LLMTestCase, *,
                response_family: str | None = None) -> JuryResult:
        """Judge one item with every judge and pool the answers.

        Args:
            test_case: the item.
            response_family: model family of the system that produced the response, if known;
                judges of the same family get a self-preference warning.

        Raises:
            MissingTestCaseParamsError: a G-Eval judge needs a field the case lacks.
        """
        t0 = time.perf_counter()
        members = tuple(self._member(j, test_case) for j in self.judges)
        warns = list(self.warnings)
        if response_family is not None:
            same = [m.name for m in members if m.family == response_family]
            if same:
                w = (f"self-preference risk: judges {same} share the model family "
                     f"{response_family!r} of the system that produced the response")
                logger.warning(w)
                warns.append(w)
        ok = [m for m in members if m.score is not None]
        scores = [float(m.score) for m in ok if m.score is not None]
        if not scores:
            return JuryResult(case_id=test_case.case_id, members=members, pooling=self.pooling,
                              score=None, n_judges=len(members), n_answered=0,
                              n_errors=len(members), spread_sd=None, spread_range=None,
                              variance=None, warnings=tuple(warns), error="no_judge_answered",
                              seconds=time.perf_counter() - t0)
        probs: dict[float, float] = {}
        for m in ok:
            if m.distribution is not None:
                for lab, p in zip(m.distribution.labels, m.distribution.probs):
                    probs[float(lab)] = probs.get(float(lab), 0.0) + p
        scale = self.judges[0].score_range
        pooled = pool(scores, self.pooling, [float(m.argmax) for m in ok if m.argmax is not None],
                      probs, scale)
        var = statistics.pvariance(scores) if len(scores) > 1 else 0.0
        return JuryResult(case_id=test_case.case_id, members=members, pooling=self.pooling,
                          score=pooled, n_judges=len(members), n_answered=len(ok),
                          n_errors=len(members) - len(ok), spread_sd=math.sqrt(var),
                          spread_range=max(scores) - min(scores), variance=var,
                          warnings=tuple(warns), error=None, seconds=time.perf_counter() - t0)

    def evaluate(self, test_cases: Iterable[LLMTestCase], *,
                 response_families: Sequence[str | None] | None = None) -> list[JuryResult]:
        """``measure`` over many items (same order)."""
        cases = list(test_cases)
        fams = list(response_families) if response_families is not None else [None] * len(cases)
        if len(fams) != len(cases):
            raise ConfigError(f"response_families has {len(fams)} entries for {len(cases)} cases")
        return [self.measure(c, response_family=f) for c, f in zip(cases, fams)]


