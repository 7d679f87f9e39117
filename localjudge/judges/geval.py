"""G-Eval with probability-weighted scores, computed locally (DeepEval-compatible names).

G-Eval (Liu et al. 2023, "G-Eval: NLG Evaluation using GPT-4 with Better Human Alignment",
arXiv 2303.16634) works in two steps:

1. *Auto chain-of-thought* (§2, "Auto Chain-of-Thoughts for NLG Evaluation"): a natural-language
   criterion is expanded into evaluation steps by the model itself. Here: generated once with the
   local model (greedy, fixed seed), cached on the metric, recorded in the signature.
2. *Form filling and probability-weighted scoring* (§2, "Scoring Function"): the judge fills in a
   form; the score is the expectation ``g = Σ_i s_i · p(s_i)`` over the score labels instead of
   the argmax, read here from the exact label distribution of ``Backend.score_distribution``.

The 0-1 score is ``(g − lo) / (hi − lo)`` for the scale ``[lo, hi]``.

What this module fixes relative to common implementations: a failed measurement (low label
mass, context overflow, backend failure, unparsable fallback) sets ``error`` and leaves
``score=None`` -- never 0 and never a pass; the threshold is policy, so changing it re-decides
``success`` from stored scores without calling the judge; the parsed-integer fallback for
backends without logprobs is marked ``method="parsed"`` and logged, never silent; multi-token
labels ("10" on 0-10) get exact probabilities.

What does not live here: correlation with humans (``localjudge.stats``), juries.
"""

from __future__ import annotations

import enum
import hashlib
import itertools
import logging
import math
import re
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from localjudge.backends.base import DEFAULT_MIN_MASS, Backend, check_min_mass, check_seed
from localjudge.errors import (
    ConfigError,
    LocalJudgeError,
    LowMassError,
    ParseFailureError,
)
from localjudge.signature import sha256_json
from localjudge.types import ScoreDistribution
from localjudge.version import __version__

__all__ = [
    "PROMPT_TEMPLATE_VERSION",
    "GEval",
    "GEvalResult",
    "LLMTestCase",
    "LLMTestCaseParams",
    "MissingTestCaseParamsError",
    "Rubric",
    "decide_success",
]

logger = logging.getLogger(__name__)

PROMPT_TEMPLATE_VERSION = "geval-form-v1"
"""Version of the step-generation and form-filling prompts below; part of every signature."""

STRICT_TOLERANCE = 1e-9
"""A score counts as "full" in strict mode when it is at least ``1 - STRICT_TOLERANCE``."""


class LLMTestCaseParams(str, enum.Enum):
    """Fields of an ``LLMTestCase`` a metric can judge (DeepEval's names)."""

    INPUT = "input"
    ACTUAL_OUTPUT = "actual_output"
    EXPECTED_OUTPUT = "expected_output"
    CONTEXT = "context"
    RETRIEVAL_CONTEXT = "retrieval_context"


_FIELD_TITLE = {
    LLMTestCaseParams.INPUT: "Input",
    LLMTestCaseParams.ACTUAL_OUTPUT: "Actual Output",
    LLMTestCaseParams.EXPECTED_OUTPUT: "Expected Output",
    LLMTestCaseParams.CONTEXT: "Context",
    LLMTestCaseParams.RETRIEVAL_CONTEXT: "Retrieval Context",
}


class MissingTestCaseParamsError(ConfigError):
    """A test case lacks a field the metric's ``evaluation_params`` name (an input error)."""

    code = "missing_params"


@dataclass(frozen=True)
class LLMTestCase:
    """One item to judge (DeepEval's ``LLMTestCase``).

    Attributes:
        input: the instruction / source given to the system.
        actual_output: the response being judged.
        expected_output: a reference answer, optional.
        context: ideal context passages, optional.
        retrieval_context: retrieved passages, optional.
        name: optional stable id (used as the record key for resuming); default: a sha256 of
            the fields.
    """

    input: str | None = None
    actual_output: str | None = None
    expected_output: str | None = None
    context: Sequence[str] | None = None
    retrieval_context: Sequence[str] | None = None
    name: str | None = None

    def __post_init__(self) -> None:
        for f in ("input", "actual_output", "expected_output"):
            v = getattr(self, f)
            if v is not None and not isinstance(v, str):
                raise ConfigError(f"test case field {f!r} must be str or None, got "
                                  f"{type(v).__name__}: {v!r:.80}")
        for f in ("context", "retrieval_context"):
            v = getattr(self, f)
            if v is None:
                continue
            if isinstance(v, str) or not isinstance(v, (list, tuple)) or not all(
                    isinstance(x, str) for x in v):
                raise ConfigError(f"test case field {f!r} must be a list of str or None, got "
                                  f"{v!r:.80}")
        if self.name is not None and not isinstance(self.name, (str, int)):
            raise ConfigError(f"test case name must be str or int, got {self.name!r:.80}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "input": self.input,
            "actual_output": self.actual_output,
            "expected_output": self.expected_output,
            "context": None if self.context is None else list(self.context),
            "retrieval_context": (None if self.retrieval_context is None
                                  else list(self.retrieval_context)),
            "name": self.name,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LLMTestCase:
        """Build from a mapping; unknown keys raise ``ConfigError`` (typos are not ignored)."""
        known = {"input", "actual_output", "expected_output", "context", "retrieval_context",
                 "name", "id"}
        extra = sorted(set(d) - known)
        if extra:
            raise ConfigError(f"unknown test-case fields {extra}; known: {sorted(known)}")
        return cls(
            input=d.get("input"),
            actual_output=d.get("actual_output"),
            expected_output=d.get("expected_output"),
            context=d.get("context"),
            retrieval_context=d.get("retrieval_context"),
            name=d.get("name", d.get("id")),
        )

    @property
    def case_id(self) -> str:
        """``name`` if set, else the first 16 hex digits of the sha256 of the fields."""
        if self.name is not None:
            return str(self.name)
        return sha256_json(self.to_dict())[:16]


@dataclass(frozen=True)
class Rubric:
    """A score range and the outcome expected in it (DeepEval's ``Rubric``).

    Attributes:
        score_range: inclusive integer range ``(lo, hi)`` on the metric's scale.
        expected_outcome: what an answer in that range looks like.
    """

    score_range: tuple[int, int]
    expected_outcome: str

    def __post_init__(self) -> None:
        r = self.score_range
        if (not isinstance(r, (tuple, list)) or len(r) != 2
                or not all(isinstance(x, int) and not isinstance(x, bool) for x in r)):
            raise ConfigError(f"rubric score_range must be a pair of ints, got {r!r}")
        if r[0] > r[1]:
            raise ConfigError(f"rubric score_range {tuple(r)} has lo > hi")
        if not isinstance(self.expected_outcome, str) or not self.expected_outcome.strip():
            raise ConfigError(f"rubric {tuple(r)} needs a non-empty expected_outcome")


def decide_success(score: float | None, threshold: float, strict: bool) -> bool:
    """Policy: does a 0-1 score pass?

    ``None`` (a failed measurement) never passes. Non-strict: ``score >= threshold``. Strict:
    only a full score passes (``score >= 1 - STRICT_TOLERANCE``); with the probability-weighted
    score that needs essentially all label mass on the top label.
    """
    if score is None:
        return False
    if strict:
        return score >= 1.0 - STRICT_TOLERANCE
    return score >= threshold


@dataclass(frozen=True)
class GEvalResult:
    """The outcome of one ``GEval.measure`` call; also the JSONL record of ``evaluate``.

    Attributes:
        name: the metric name.
        case_id: the test case id.
        score: 0-1 score ``(g − lo)/(hi − lo)``, or ``None`` iff ``error`` is set.
        raw_score: the probability-weighted score ``g`` in ``[lo, hi]`` (``None`` on error).
        argmax_score: the most probable label as a number (``None`` on error).
        distribution: the label distribution (kept on ``low_mass`` errors too), or ``None``.
        mass: raw label mass in [0, 1], or ``None`` when no distribution was read.
        threshold: the policy threshold used for ``success``.
        strict: strict mode.
        success: ``decide_success(score, threshold, strict)``; False on error.
        reason: generated rationale, or ``None`` (off by default).
        error: error code (``low_mass``, ``context_overflow``, ``backend_error``,
            ``parse_failure``, ``missing_params``, ``template_error``), or ``None``.
        message: the error message, or ``None``.
        method: ``"logprobs"`` or ``"parsed"`` (fallback for backends without logprobs).
        evaluation_steps: the steps used.
        signature: the judge's provenance (model / template sha256, steps, prompt version,
            parameters; see ``GEval.signature``).
        seconds: wall time of the measurement.
    """

    name: str
    case_id: str
    score: float | None
    raw_score: float | None
    argmax_score: float | None
    distribution: ScoreDistribution | None
    mass: float | None
    threshold: float
    strict: bool
    success: bool
    reason: str | None
    error: str | None
    message: str | None
    method: str
    evaluation_steps: tuple[str, ...]
    signature: dict[str, Any]
    seconds: float

    def with_threshold(self, threshold: float, strict: bool | None = None) -> GEvalResult:
        """The same measurement under another policy; the judge is not called again."""
        _check_threshold(threshold)
        s = self.strict if strict is None else strict
        return _replace(self, threshold=float(threshold), strict=s,
                        success=decide_success(self.score, threshold, s))

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "case_id": self.case_id, "score": self.score,
            "raw_score": self.raw_score, "argmax_score": self.argmax_score,
            "distribution": None if self.distribution is None else self.distribution.to_dict(),
            "mass": self.mass, "threshold": self.threshold, "strict": self.strict,
            "success": self.success, "reason": self.reason, "error": self.error,
            "message": self.message, "method": self.method,
            "evaluation_steps": list(self.evaluation_steps), "signature": self.signature,
            "seconds": self.seconds,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> GEvalResult:
        dist = d.get("distribution")
        return cls(
            name=d["name"], case_id=d["case_id"], score=d["score"], raw_score=d["raw_score"],
            argmax_score=d["argmax_score"],
            distribution=None if dist is None else ScoreDistribution.from_dict(dist),
            mass=d["mass"], threshold=float(d["threshold"]), strict=bool(d["strict"]),
            success=bool(d["success"]), reason=d.get("reason"), error=d.get("error"),
            message=d.get("message"), method=d["method"],
            evaluation_steps=tuple(d.get("evaluation_steps", ())),
            signature=dict(d.get("signature", {})), seconds=float(d.get("seconds", 0.0)),
        )


def _replace(r: GEvalResult, **kw: Any) -> GEvalResult:
    d = {f: getattr(r, f) for f in r.__dataclass_fields__}
    d.update(kw)
    return GEvalResult(**d)


def _check_threshold(threshold: Any) -> None:
    if (isinstance(threshold, bool) or not isinstance(threshold, (int, float))
            or not 0.0 <= float(threshold) <= 1.0):
        raise ConfigError(f"threshold must be a number in [0, 1], got {threshold!r}")


_STEP_RE = re.compile(r"^\s*(?:\d+[.)]|[-*•])\s+(.*\S)\s*$")
_INT_RE = re.compile(r"-?\d+")


MAX_GENERATED_STEPS = 4
"""G-Eval asks for 3-4 evaluation steps (arXiv 2303.16634 §2); generated lists are cut here."""


def parse_steps(text: str) -> list[str]:
    """Numbered or bulleted lines of ``text`` -> distinct steps, at most
    ``MAX_GENERATED_STEPS``, in order (small models repeat themselves)."""
    steps: list[str] = []
    for m in (_STEP_RE.match(line) for line in text.splitlines()):
        if m and m.group(1) not in steps:
            steps.append(m.group(1))
    return steps[:MAX_GENERATED_STEPS]


class GEval:
    """G-Eval metric with probability-weighted scores on a local backend.

    Args:
        name: metric name, e.g. ``"Coherence"``; also the form field (``"Coherence (1-5):"``).
        criteria: what to judge, in natural language; required unless ``evaluation_steps``.
        evaluation_steps: the chain-of-thought steps; when given, no steps are generated.
        evaluation_params: the test-case fields shown to the judge (must be present).
        rubric: ``Rubric`` list: score ranges with expected outcomes, put into the prompt.
        score_range: inclusive integer scale ``(lo, hi)``; default (1, 5), or the span of the
            rubric when a rubric is given without a range. 0-10 works ("10" is exact).
        threshold: policy threshold on the 0-1 score in [0, 1].
        strict_mode: only a full score passes.
        model: the backend (``load_backend(...)``); required.
        min_mass: minimum raw label mass in [0, 1]; below it the measurement is an error.
        method: ``"auto"`` (logprobs when the backend has them, else the parsed fallback,
            logged), ``"logprobs"`` or ``"parsed"``.
        include_reason: generate a short rationale after scoring (off by default).
        raw: no chat template (base models); the form is sent as a plain completion prompt.
        seed: seed for step / reason generation (greedy, so it only matters for sampling).
        boundary: label boundary rule, ``"prefix"`` or ``"all"`` (see ``localjudge.labels``).

    Raises:
        ConfigError: neither criteria nor steps, empty steps, bad scale, overlapping or
            out-of-scale rubric ranges, unknown evaluation params, bad threshold / method.

    Example:
        >>> from localjudge.backends.fake import FakeBackend
        >>> judge = FakeBackend({"3": 0.5, "4": 0.5})
        >>> m = GEval("Coherence", evaluation_steps=["Read it."], model=judge,
        ...           evaluation_params=[LLMTestCaseParams.ACTUAL_OUTPUT])
        >>> m.measure(LLMTestCase(actual_output="A cat sat."))
        0.625
        >>> m.raw_score, m.argmax_score, m.success
        (3.5, 3.0, True)
    """

    def __init__(
        self,
        name: str,
        criteria: str | None = None,
        evaluation_steps: Sequence[str] | None = None,
        evaluation_params: Sequence[LLMTestCaseParams | str] = (
            LLMTestCaseParams.INPUT, LLMTestCaseParams.ACTUAL_OUTPUT),
        rubric: Sequence[Rubric] | None = None,
        score_range: tuple[int, int] | None = None,
        threshold: float = 0.5,
        strict_mode: bool = False,
        model: Backend | None = None,
        *,
        min_mass: float = DEFAULT_MIN_MASS,
        method: str = "auto",
        include_reason: bool = False,
        raw: bool = False,
        seed: int = 0,
        boundary: str = "prefix",
    ) -> None:
        if not isinstance(name, str) or not name.strip():
            raise ConfigError(f"name must be a non-empty string, got {name!r}")
        if criteria is None and evaluation_steps is None:
            raise ConfigError("GEval needs criteria or evaluation_steps (got neither)")
        if criteria is not None and (not isinstance(criteria, str) or not criteria.strip()):
            raise ConfigError(f"criteria must be a non-empty string, got {criteria!r}")
        if evaluation_steps is not None:
            if isinstance(evaluation_steps, str):
                raise ConfigError("evaluation_steps must be a list of strings, not one string")
            steps = [s for s in evaluation_steps]
            if not steps or not all(isinstance(s, str) and s.strip() for s in steps):
                raise ConfigError(f"evaluation_steps must be non-empty strings, got {steps!r}")
        if model is None or not isinstance(model, Backend):
            raise ConfigError(f"model must be a localjudge Backend (load_backend(...)), got "
                              f"{model!r}")
        if method not in ("auto", "logprobs", "parsed"):
            raise ConfigError(f"method must be 'auto', 'logprobs' or 'parsed', got {method!r}")
        if method == "logprobs" and not model.supports_logprobs:
            raise ConfigError(f"backend {model.name!r} has no logprobs; use method='parsed'")
        _check_threshold(threshold)
        check_min_mass(min_mass)
        if boundary not in ("prefix", "all"):
            raise ConfigError(f"boundary must be 'prefix' or 'all', got {boundary!r}")
        check_seed(seed)
        params: list[LLMTestCaseParams] = []
        for p in evaluation_params:
            try:
                params.append(LLMTestCaseParams(p))
            except ValueError:
                raise ConfigError(
                    f"unknown evaluation param {p!r}; choose from "
                    f"{[x.value for x in LLMTestCaseParams]}") from None
        if not params:
            raise ConfigError("evaluation_params is empty")
        self.rubric = tuple(rubric) if rubric else ()
        self.score_range = self._scale(score_range, self.rubric)
        self.name = name
        self.criteria = criteria
        self.evaluation_params = tuple(params)
        self.model = model
        self.min_mass = float(min_mass)
        self.method = method
        self.include_reason = bool(include_reason)
        self.raw = bool(raw)
        self.seed = int(seed)
        self.boundary = boundary
        self.strict_mode = bool(strict_mode)
        self._threshold = float(threshold)
        self._given_steps = tuple(evaluation_steps) if evaluation_steps is not None else None
        self._generated_steps: tuple[str, ...] | None = None
        self._steps_lock = threading.Lock()
        self.result: GEvalResult | None = None
        self._labels = tuple(range(self.score_range[0], self.score_range[1] + 1))
        model.resolve_labels(self._labels)  # TokenizationError at set-up, not per item

    # ---- configuration ----------------------------------------------------------------
    @staticmethod
    def _scale(score_range: tuple[int, int] | None,
               rubric: tuple[Rubric, ...]) -> tuple[int, int]:
        for r in rubric:
            if not isinstance(r, Rubric):
                raise ConfigError(f"rubric entries must be Rubric, got {r!r}")
        if score_range is None:
            score_range = ((min(r.score_range[0] for r in rubric),
                            max(r.score_range[1] for r in rubric)) if rubric else (1, 5))
        if (not isinstance(score_range, (tuple, list)) or len(score_range) != 2
                or not all(isinstance(x, int) and not isinstance(x, bool) for x in score_range)):
            raise ConfigError(f"score_range must be a pair of ints, got {score_range!r}")
        lo, hi = score_range
        if not lo < hi:
            raise ConfigError(f"score_range needs lo < hi, got {tuple(score_range)}")
        if lo < 0 or hi - lo > 100:
            raise ConfigError(f"score_range must be within 0..lo+100, got {tuple(score_range)}")
        spans = sorted(tuple(r.score_range) for r in rubric)
        for a, b in spans:
            if a < lo or b > hi:
                raise ConfigError(f"rubric range {(a, b)} lies outside the scale {(lo, hi)}")
        for (a1, b1), (a2, b2) in itertools.pairwise(spans):
            if a2 <= b1:
                raise ConfigError(f"rubric ranges {(a1, b1)} and {(a2, b2)} overlap")
        return (lo, hi)

    @property
    def threshold(self) -> float:
        """Policy threshold; setting it re-decides ``success`` from the stored score."""
        return self._threshold

    @threshold.setter
    def threshold(self, value: float) -> None:
        _check_threshold(value)
        self._threshold = float(value)
        if self.result is not None:
            self.result = self.result.with_threshold(value, self.strict_mode)

    @property
    def evaluation_steps(self) -> tuple[str, ...] | None:
        """The given steps, or the generated ones once generated (else None)."""
        return self._given_steps if self._given_steps is not None else self._generated_steps

    # ---- DeepEval-style state of the last measurement ----------------------------------
    @property
    def score(self) -> float | None:
        return None if self.result is None else self.result.score

    @property
    def raw_score(self) -> float | None:
        return None if self.result is None else self.result.raw_score

    @property
    def argmax_score(self) -> float | None:
        return None if self.result is None else self.result.argmax_score

    @property
    def distribution(self) -> ScoreDistribution | None:
        return None if self.result is None else self.result.distribution

    @property
    def reason(self) -> str | None:
        return None if self.result is None else self.result.reason

    @property
    def error(self) -> str | None:
        return None if self.result is None else self.result.error

    @property
    def success(self) -> bool:
        return False if self.result is None else self.result.success

    def is_successful(self) -> bool:
        """DeepEval's name for ``success``."""
        return self.success

    # ---- prompts ------------------------------------------------------------------------
    def _fields_desc(self) -> str:
        return ", ".join(_FIELD_TITLE[p] for p in self.evaluation_params)

    def _steps_prompt(self) -> str:
        lo, hi = self.score_range
        return (
            "You are designing an evaluation procedure.\n\n"
            f"The judge will see: {self._fields_desc()}.\n"
            f"Criteria for \"{self.name}\" (scored {lo}-{hi}): {self.criteria}\n\n"
            "Write 3-4 concise evaluation steps that a careful judge should follow to apply "
            "these criteria. Reply with a numbered list only, one step per line."
        )

    def _rubric_text(self) -> str:
        if not self.rubric:
            return ""
        lines = []
        for r in sorted(self.rubric, key=lambda r: r.score_range):
            a, b = r.score_range
            rng = f"{a}" if a == b else f"{a}-{b}"
            lines.append(f"{rng}: {r.expected_outcome}")
        return "Rubric:\n" + "\n".join(lines) + "\n\n"

    def _form_prompt(self, case: LLMTestCase, steps: Sequence[str]) -> str:
        lo, hi = self.score_range
        crit = self.criteria or "judged by the evaluation steps below"
        parts = [
            (f"You will be given the following: {self._fields_desc()}.\n\n"
            "Your task is to rate it on one metric.\n\n"
            "Please make sure you read and understand these instructions carefully.\n\n"
            f"Evaluation Criteria:\n\n{self.name} ({lo}-{hi}) - {crit}\n\n"),
            self._rubric_text(),
            "Evaluation Steps:\n\n"
            + "\n".join(f"{i}. {s}" for i, s in enumerate(steps, 1)) + "\n\n",
        ]
        for p in self.evaluation_params:
            v = getattr(case, p.value)
            text = "\n".join(v) if isinstance(v, (list, tuple)) else str(v)
            parts.append(f"{_FIELD_TITLE[p]}:\n\n{text}\n\n")
        parts.append(f"Evaluation Form (scores ONLY, an integer from {lo} to {hi}):\n\n"
                     f"- {self.name}:")
        return "".join(parts)

    def form_prompt(self, test_case: LLMTestCase) -> str:
        """The exact form-filling prompt (user message, or raw text with ``raw=True``) for a
        test case; the distribution is read after it plus ``prefill``.

        Raises:
            MissingTestCaseParamsError: the case lacks a field in ``evaluation_params``.
        """
        self._check_case(test_case)
        return self._form_prompt(test_case, self.ensure_steps())

    @property
    def prefill(self) -> str:
        """Assistant prefill at which the score distribution is read, e.g.
        ``"Coherence (1-5): "``. The trailing space is deliberate: measured on SummEval with
        Qwen2.5-0.5B, ``"Coherence (1-5):"`` leaves 0.86-0.89 of the mass on the labels (the
        model puts ~0.11 on ending its turn), ``"Coherence (1-5): "`` 0.995."""
        lo, hi = self.score_range
        return f"{self.name} ({lo}-{hi}): "

    # ---- steps, signature -----------------------------------------------------------------
    def ensure_steps(self) -> tuple[str, ...]:
        """The evaluation steps: given, cached, or generated now (greedy, ``seed``).

        Raises:
            ParseFailureError: the model's output has no numbered steps.
            LocalJudgeError: generation failed.
        """
        if self.evaluation_steps is not None:
            return self.evaluation_steps
        with self._steps_lock:  # one generation even when several threads ask at once
            if self.evaluation_steps is not None:
                return self.evaluation_steps
            text = self.model.generate(self._steps_prompt(), max_tokens=256, temperature=0.0,
                                       seed=self.seed, raw=self.raw)
            steps = parse_steps(text)
            if not steps:
                raise ParseFailureError(
                    f"could not parse evaluation steps from the model's output: {text[:200]!r}")
            self._generated_steps = tuple(steps)
            logger.info("generated %d evaluation steps for %s", len(steps), self.name)
            return self._generated_steps

    def signature(self) -> dict[str, Any]:
        """The judge's provenance (steps generated first if needed).

        Holds the metric configuration (name, criteria, steps and whether they were given or
        generated, their sha256, rubric, scale, evaluation params, prompt-template version,
        method, min_mass, seed, boundary) and the backend signature for the labels (model
        sha256, chat-template sha256, label map, versions). Threshold and strict mode are
        policy and are not part of it.
        """
        steps = self.ensure_steps()
        b = self.model.signature(self._labels, raw=self.raw,
                                 params={"min_mass": self.min_mass, "prefill": self.prefill,
                                         "boundary": self.boundary})
        return {
            "judge": "geval",
            "name": self.name,
            "prompt_template": PROMPT_TEMPLATE_VERSION,
            "criteria": self.criteria,
            "evaluation_steps": list(steps),
            "steps_source": "given" if self._given_steps is not None else "generated",
            "steps_sha256": hashlib.sha256("\n".join(steps).encode()).hexdigest(),
            "rubric": [[list(r.score_range), r.expected_outcome] for r in self.rubric],
            "score_range": list(self.score_range),
            "evaluation_params": [p.value for p in self.evaluation_params],
            "method": self._method(),
            "params": {"min_mass": self.min_mass, "seed": self.seed, "boundary": self.boundary,
                       "include_reason": self.include_reason, "raw": self.raw},
            "backend": b.to_dict(),
            "localjudge": __version__,
        }

    def _method(self) -> str:
        if self.method == "auto":
            return "logprobs" if self.model.supports_logprobs else "parsed"
        return self.method

    # ---- measuring -------------------------------------------------------------------------
    def _check_case(self, case: LLMTestCase) -> None:
        if not isinstance(case, LLMTestCase):
            raise ConfigError(f"test case must be an LLMTestCase, got {type(case).__name__}")
        missing = []
        for p in self.evaluation_params:
            v = getattr(case, p.value)
            if v is None or (isinstance(v, str) and not v.strip()) or (
                    isinstance(v, (list, tuple)) and not v):
                missing.append(p.value)
        if missing:
            raise MissingTestCaseParamsError(
                f"test case {case.case_id!r} lacks {missing}, required by metric "
                f"{self.name!r} (evaluation_params={[p.value for p in self.evaluation_params]})"
            )

    def measure(self, test_case: LLMTestCase) -> float | None:
        """Judge one test case; sets ``score``, ``raw_score``, ``argmax_score``,
        ``distribution``, ``reason``, ``success``, ``error`` (state of the previous case is
        cleared first). Not for concurrent calls on one metric (that state is shared); use
        ``evaluate(..., max_workers=N)``, which never touches it.

        Returns:
            The 0-1 score, or ``None`` when the measurement failed (see ``error``).

        Raises:
            MissingTestCaseParamsError: the test case lacks a field named in
                ``evaluation_params`` (an input error; ``evaluate`` records it per item).
        """
        self.result = None
        t0 = time.perf_counter()
        self._check_case(test_case)
        self.result = self._measure(test_case, t0)
        return self.result.score

    def _measure(self, case: LLMTestCase, t0: float) -> GEvalResult:
        lo, hi = self.score_range
        method = self._method()
        if method == "parsed" and self.method == "auto":
            logger.warning("backend %r has no logprobs: %s uses the parsed-integer fallback "
                           "(method='parsed')", self.model.name, self.name)
        dist: ScoreDistribution | None = None
        reason = None
        base: dict[str, Any] = {"name": self.name, "case_id": case.case_id,
                                "threshold": self._threshold, "strict": self.strict_mode,
                                "method": method}
        try:
            steps = self.ensure_steps()
            sig = self.signature()
            prompt = self._form_prompt(case, steps)
            if method == "logprobs":
                dist = self.model.score_distribution(
                    prompt, self._labels, prefill=self.prefill, raw=self.raw,
                    min_mass=self.min_mass, boundary=self.boundary)
                g = float(dist.expected) if dist.expected is not None else math.nan
                argmax = float(dist.argmax)
            else:
                text = self.model.generate(prompt, max_tokens=8, temperature=0.0,
                                           seed=self.seed, prefill=self.prefill, raw=self.raw)
                m = _INT_RE.search(text)
                if m is None or not lo <= int(m.group()) <= hi:
                    raise ParseFailureError(
                        f"no integer in {lo}-{hi} in the generated answer {text!r}")
                g = argmax = float(int(m.group()))
            if self.include_reason:
                reason = self._reason(prompt, g, dist)
        except LowMassError as err:
            return GEvalResult(**base, score=None, raw_score=None, argmax_score=None,
                               distribution=err.distribution, mass=err.mass, success=False,
                               reason=None, error=err.code, message=str(err),
                               evaluation_steps=self.evaluation_steps or (),
                               signature=self._safe_signature(),
                               seconds=time.perf_counter() - t0)
        except LocalJudgeError as err:
            return GEvalResult(**base, score=None, raw_score=None, argmax_score=None,
                               distribution=None, mass=None, success=False, reason=None,
                               error=err.code, message=str(err),
                               evaluation_steps=self.evaluation_steps or (),
                               signature=self._safe_signature(),
                               seconds=time.perf_counter() - t0)
        score = (g - lo) / (hi - lo)
        return GEvalResult(
            **base, score=score, raw_score=g, argmax_score=argmax, distribution=dist,
            mass=None if dist is None else dist.mass,
            success=decide_success(score, self._threshold, self.strict_mode), reason=reason,
            error=None, message=None, evaluation_steps=steps, signature=sig,
            seconds=time.perf_counter() - t0,
        )

    def _safe_signature(self) -> dict[str, Any]:
        """The signature for an error record; never generates steps (a failed item must not
        cost another generation)."""
        if self.evaluation_steps is None:
            return {"judge": "geval", "name": self.name,
                    "prompt_template": PROMPT_TEMPLATE_VERSION, "evaluation_steps": None}
        try:
            return self.signature()
        except LocalJudgeError:
            return {"judge": "geval", "name": self.name,
                    "prompt_template": PROMPT_TEMPLATE_VERSION, "evaluation_steps": None}

    def _reason(self, prompt: str, g: float, dist: ScoreDistribution | None) -> str:
        lo, hi = self.score_range
        shown = (", ".join(f"{lab}: {p:.2f}" for lab, p in zip(dist.labels, dist.probs))
                 if dist is not None else f"{g:g}")
        ask = (f"{prompt} {g:.2f}\n\nThe score distribution over {lo}-{hi} was {shown}. In "
               "one to three sentences, explain the score with reference to the evaluation "
               "steps.")
        return self.model.generate(ask, max_tokens=128, temperature=0.0, seed=self.seed,
                                   raw=self.raw).strip()
