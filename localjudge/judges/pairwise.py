"""Pairwise judging with position swap: which of two responses better follows an instruction.

The judge is asked twice, once with ``response_a`` in the first slot (*original* order) and once
with ``response_b`` in the first slot (*swapped* order). In each order P(first slot better) is
read from the exact next-token distribution over the two answer labels (``Backend.
score_distribution``, renormalised over the two labels) and mapped back to the original
numbering, so both orders give a P(A better). The verdict is ``"A"`` or ``"B"`` only when both
orders agree; otherwise it is ``"tie"``. Asking in both orders and calling a disagreement a tie
is the position-bias remedy of Zheng et al. 2023 ("Judging LLM-as-a-Judge with MT-Bench and
Chatbot Arena", arXiv 2306.05685, §3.3 "Limitations of LLM-as-a-Judge: position bias" and §3.4
"swapping positions"); LLMBar (Zeng et al. 2024, "Evaluating Large Language Models at Evaluating
Instruction Following", ICLR 2024, arXiv 2310.07641) evaluates its judges the same way
(positional agreement = both orders pick the same output).

Errors. An order whose raw label mass is below ``min_mass`` (or that overflows the context or
fails in the backend) is recorded on that order (``error``, ``message``; the distribution is kept
for ``low_mass``); the pair's verdict is then ``"error"``, ``position_consistent`` is ``None``
and ``error`` names the first failed order's code. A failed order is never read as a tie or as a
vote for either response: aggregates (``bench.pairwise``) leave such items out and count them.
The single-order verdict (original order only) is still reported when the original order
succeeded, because it is a valid measurement on its own.

Prompt. ``VANILLA_AB_V1`` is LLMBar's "Vanilla" comparison prompt (``Vanilla_NoRules``,
princeton-nlp/LLMBar ``LLMEvaluator/evaluators/prompts/comparison/Vanilla_NoRules.txt`` at commit
caa7bee794bfed74baed038b99229fa3f0c4c511) with two changes: the outputs are ``Output (A)`` /
``Output (B)`` (upper case), and the assistant answer is prefilled with ``"Output ("`` so the
label is the next token. ``"Output (A)"`` tokenises as ``"Output", " (", "A", ")"`` in Qwen2.5,
SmolLM2 and Gemma 3 alike (checked with the embedded GGUFs), so the prefill ends on the canonical
``" ("`` token and ``"A"`` / ``"B"`` are read at the token boundary the model itself would use.
(Lower-case ``"(a"`` is a single token in Qwen2.5's vocabulary, so the upstream spelling could
not be read at a clean boundary.) A bare-letter variant -- answer ``"A"`` or ``"B"`` after the
prefill ``"Better output:"`` -- left only 0.01-0.26 of the probability on the labels for SmolLM2
and Gemma 3 (they want to write ``" Output"``), against 0.98-0.996 with ``"Output ("``, on five
Natural items; so it was dropped.

What does not live here: juries (``localjudge.jury``), the LLMBar benchmark (``bench.pairwise``).
"""

from __future__ import annotations

import string
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from localjudge.backends.base import DEFAULT_MIN_MASS, Backend, check_min_mass
from localjudge.errors import BackendError, ConfigError, LowMassError, TemplateError
from localjudge.labels import normalize_labels
from localjudge.signature import Signature, sha256_json
from localjudge.types import ScoreDistribution
from localjudge.version import __version__

__all__ = [
    "VANILLA_AB_V1",
    "PairwiseJudge",
    "PairwiseOrderResult",
    "PairwisePrompt",
    "PairwiseResult",
    "compare",
    "format_signature",
]

_RAW_JOIN = "\n\n"
"""Separator between the system text, the user text and the prefill in raw (no chat template)
prompts; part of the prompt sha256."""

_FIELDS = frozenset({"instruction", "response_1", "response_2", "label_1", "label_2"})
_REQUIRED = frozenset({"instruction", "response_1", "response_2"})


@dataclass(frozen=True, slots=True)
class PairwisePrompt:
    """A versioned pairwise prompt template.

    ``user`` is a ``str.format`` template with the fields ``{instruction}``, ``{response_1}``,
    ``{response_2}`` (the responses in slot order: what the model sees first and second) and
    optionally ``{label_1}``, ``{label_2}`` (the answer labels of the two slots).

    With a chat template the prompt is ``[system, user]`` messages plus ``prefill`` after the
    generation prompt. Without one (``raw=True``, base models) it is
    ``system + "\\n\\n" + user + "\\n\\n" + prefill`` (the system part left out when empty).

    Attributes:
        version: template id recorded in every signature, e.g. ``"llmbar-vanilla-ab-v1"``.
        user: the user-message template (see above).
        system: default system message; ``""`` for none.
        prefill: assistant prefill after which the label is read (``""`` for none).

    Raises:
        ConfigError: empty version or user text, a required field missing from ``user``, or an
            unknown / positional field in it.
    """

    version: str
    user: str
    system: str = ""
    prefill: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.version, str) or not self.version.strip():
            raise ConfigError(f"prompt version must be a non-empty string, got {self.version!r}")
        if not isinstance(self.user, str) or not self.user.strip():
            raise ConfigError(f"prompt user template must be a non-empty string, got {self.user!r}")
        if not isinstance(self.system, str) or not isinstance(self.prefill, str):
            raise ConfigError("prompt system and prefill must be strings ('' for none)")
        try:
            names = {f for _, f, _, _ in string.Formatter().parse(self.user) if f is not None}
        except ValueError as err:
            raise ConfigError(f"prompt user template {self.version!r} is malformed: {err}") from err
        unknown = sorted(names - _FIELDS)
        if unknown:
            raise ConfigError(
                f"prompt {self.version!r} has unknown fields {unknown}; allowed: {sorted(_FIELDS)}"
            )
        missing = sorted(_REQUIRED - names)
        if missing:
            raise ConfigError(f"prompt {self.version!r} lacks the fields {missing}")

    @property
    def sha256(self) -> str:
        """sha256 of the template texts and the raw join rule (hex)."""
        return sha256_json(
            {
                "version": self.version,
                "user": self.user,
                "system": self.system,
                "prefill": self.prefill,
                "raw_join": _RAW_JOIN,
            }
        )

    def format_user(
        self, instruction: str, response_1: str, response_2: str, labels: Sequence[str]
    ) -> str:
        """The user text for one order (``response_1`` is shown first)."""
        return self.user.format(
            instruction=instruction,
            response_1=response_1,
            response_2=response_2,
            label_1=labels[0],
            label_2=labels[1],
        )

    def to_dict(self) -> dict[str, str]:
        """JSON-serialisable dict; ``from_dict`` inverts it."""
        return {
            "version": self.version,
            "user": self.user,
            "system": self.system,
            "prefill": self.prefill,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PairwisePrompt:
        """Inverse of ``to_dict``."""
        return cls(
            version=d["version"],
            user=d["user"],
            system=d.get("system", ""),
            prefill=d.get("prefill", ""),
        )


VANILLA_AB_V1 = PairwisePrompt(
    version="llmbar-vanilla-ab-v1",
    system=(
        "You are a helpful assistant in evaluating the quality of the outputs for a given "
        "instruction. Your goal is to select the best output for the given instruction."
    ),
    user=(
        "Select the Output ({label_1}) or Output ({label_2}) that is better for the given "
        "instruction. The two outputs are generated by two different AI chatbots respectively.\n"
        "\n"
        "Do NOT provide any explanation for your choice.\n"
        "Do NOT say both / neither are good.\n"
        'You should answer using ONLY "Output ({label_1})" or "Output ({label_2})". Do NOT '
        "output any other words.\n"
        "\n"
        "# Instruction:\n{instruction}\n\n"
        "# Output ({label_1}):\n{response_1}\n\n"
        "# Output ({label_2}):\n{response_2}\n\n"
        "# Which is better, Output ({label_1}) or Output ({label_2})? Your response should be "
        'either "Output ({label_1})" or "Output ({label_2})":'
    ),
    prefill="Output (",
)
"""LLMBar "Vanilla" prompt (arXiv 2310.07641; upstream ``Vanilla_NoRules``) with upper-case output
names and the assistant prefill ``"Output ("``; the label is read as the next token (see the
module docstring for why)."""


@dataclass(frozen=True, slots=True)
class PairwiseOrderResult:
    """The judge's answer for one presentation order.

    Attributes:
        order: ``"original"`` (response_a shown first) or ``"swapped"`` (response_b first).
        first: which response was in the first slot, ``"A"`` or ``"B"``.
        p_first: probability in [0, 1] that the first slot is better, renormalised over the two
            labels; ``None`` on error.
        p_a: P(response_a better) in [0, 1] in the original numbering (``p_first`` in the
            original order, ``1 - p_first`` -- read as the second label's probability -- in
            the swapped order); ``None`` on error.
        choice: this order's verdict in the original numbering: ``"A"``, ``"B"``, or ``"tie"``
            when both labels are exactly equally probable; ``None`` on error.
        first_slot_chosen: whether ``choice`` is the response in the first slot (``None`` on
            error or an exact tie).
        distribution: the label distribution (labels in slot order), kept on ``low_mass``
            errors; ``None`` when nothing was read.
        mass: raw label mass in [0, 1] before renormalisation; ``None`` when nothing was read.
        error: ``None``, or ``"low_mass"``, ``"context_overflow"``, ``"backend_error"``.
        message: the error message, or ``None``.
    """

    order: str
    first: str
    p_first: float | None
    p_a: float | None
    choice: str | None
    first_slot_chosen: bool | None
    distribution: ScoreDistribution | None
    mass: float | None
    error: str | None
    message: str | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable dict (distributions via ``ScoreDistribution.to_dict``)."""
        return {
            "order": self.order,
            "first": self.first,
            "p_first": self.p_first,
            "p_a": self.p_a,
            "choice": self.choice,
            "first_slot_chosen": self.first_slot_chosen,
            "distribution": None if self.distribution is None else self.distribution.to_dict(),
            "mass": self.mass,
            "error": self.error,
            "message": self.message,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PairwiseOrderResult:
        """Inverse of ``to_dict``."""
        dist = d.get("distribution")
        return cls(
            order=str(d["order"]),
            first=str(d["first"]),
            p_first=_opt_float(d["p_first"]),
            p_a=_opt_float(d["p_a"]),
            choice=d["choice"],
            first_slot_chosen=d["first_slot_chosen"],
            distribution=None if dist is None else ScoreDistribution.from_dict(dist),
            mass=_opt_float(d["mass"]),
            error=d.get("error"),
            message=d.get("message"),
        )


@dataclass(frozen=True, slots=True)
class PairwiseResult:
    """The outcome of one position-swapped pairwise comparison.

    Attributes:
        labels: the two answer labels ``(label of slot 1, label of slot 2)``, e.g. ``("A", "B")``.
        p_a_original: P(response_a better) in [0, 1] from the original order; ``None`` if that
            order failed.
        p_a_swapped: P(response_a better) in [0, 1] from the swapped order, mapped back to the
            original numbering; ``None`` if that order failed.
        p_a_mean: mean of the two in [0, 1] (a position-balanced probability); ``None`` unless
            both orders succeeded.
        verdict: ``"A"`` / ``"B"`` (response_a / response_b, whatever the labels) when both
            orders choose it; ``"tie"`` when they disagree (or either is an exact tie);
            ``"error"`` when either order failed.
        position_consistent: True iff the verdict survives the swap (``verdict`` is A or B);
            ``None`` when either order failed.
        single_order_verdict: the original order's choice alone (``"A"``, ``"B"``, ``"tie"``),
            what a judge without swapping would report; ``None`` if the original order failed.
        original: the original-order answer (response_a first).
        swapped: the swapped-order answer (response_b first).
        error: ``None`` iff ``verdict != "error"``; else the error code of the first failed
            order (``original`` checked first).
        signature: the judge's provenance (``PairwiseJudge.signature()``).
        seconds: wall time of both calls in seconds.
    """

    labels: tuple[str, str]
    p_a_original: float | None
    p_a_swapped: float | None
    p_a_mean: float | None
    verdict: str
    position_consistent: bool | None
    single_order_verdict: str | None
    original: PairwiseOrderResult
    swapped: PairwiseOrderResult
    error: str | None
    signature: dict[str, Any]
    seconds: float

    @property
    def orders(self) -> tuple[PairwiseOrderResult, PairwiseOrderResult]:
        """``(original, swapped)``."""
        return (self.original, self.swapped)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable dict (distributions via ``ScoreDistribution.to_dict``)."""
        return {
            "labels": list(self.labels),
            "p_a_original": self.p_a_original,
            "p_a_swapped": self.p_a_swapped,
            "p_a_mean": self.p_a_mean,
            "verdict": self.verdict,
            "position_consistent": self.position_consistent,
            "single_order_verdict": self.single_order_verdict,
            "original": self.original.to_dict(),
            "swapped": self.swapped.to_dict(),
            "error": self.error,
            "signature": self.signature,
            "seconds": self.seconds,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PairwiseResult:
        """Inverse of ``to_dict``."""
        labels = tuple(d["labels"])
        if len(labels) != 2:
            raise ConfigError(f"a pairwise result has two labels, got {list(labels)}")
        return cls(
            labels=(str(labels[0]), str(labels[1])),
            p_a_original=_opt_float(d["p_a_original"]),
            p_a_swapped=_opt_float(d["p_a_swapped"]),
            p_a_mean=_opt_float(d["p_a_mean"]),
            verdict=str(d["verdict"]),
            position_consistent=d["position_consistent"],
            single_order_verdict=d["single_order_verdict"],
            original=PairwiseOrderResult.from_dict(d["original"]),
            swapped=PairwiseOrderResult.from_dict(d["swapped"]),
            error=d.get("error"),
            signature=dict(d.get("signature", {})),
            seconds=float(d.get("seconds", 0.0)),
        )


def _opt_float(x: Any) -> float | None:
    return None if x is None else float(x)


class PairwiseJudge:
    """A backend plus a pairwise prompt: compares two responses in both orders.

    Args:
        model: the judge backend (``load_backend(...)``); it must read logprobs.
        labels: the two answer labels ``(slot 1, slot 2)``; each must spell as a token of the
            model (``TokenizationError`` otherwise). Default ``("A", "B")``.
        min_mass: minimum raw label mass in [0, 1] per order; below it that order is an error.
        system: system message; ``None`` uses ``prompt_template.system``, ``""`` sends none.
        raw: no chat template (base models such as Gemma 3 270M); the prompt is the plain
            format described in ``PairwisePrompt``.
        prompt_template: the ``PairwisePrompt``; default ``VANILLA_AB_V1``.
        boundary: label boundary rule, ``"prefix"`` or ``"all"`` (see ``localjudge.labels``).

    Raises:
        ConfigError: not a backend, a backend without logprobs, not exactly two distinct
            labels, ``min_mass`` outside [0, 1], a bad template or boundary.
        TokenizationError: a label cannot be tokenised by the model.
        TemplateError: ``raw=False`` and the model has no chat template.

    Example:
        >>> from localjudge.backends.fake import FakeBackend
        >>> judge = PairwiseJudge(FakeBackend({"A": 0.75, "B": 0.25}))  # always slot 1
        >>> r = judge.compare("Say hi.", "hi", "bye")
        >>> r.p_a_original, r.p_a_swapped, r.verdict, r.position_consistent
        (0.75, 0.25, 'tie', False)
    """

    def __init__(
        self,
        model: Backend,
        *,
        labels: Sequence[str] = ("A", "B"),
        min_mass: float = DEFAULT_MIN_MASS,
        system: str | None = None,
        raw: bool = False,
        prompt_template: PairwisePrompt = VANILLA_AB_V1,
        boundary: str = "prefix",
    ) -> None:
        if not isinstance(model, Backend):
            raise ConfigError(
                f"model must be a localjudge Backend (load_backend(...)), got {model!r}"
            )
        if not model.supports_logprobs:
            raise ConfigError(
                f"backend {model.name!r} has no logprobs; pairwise judging reads "
                "P(A better) from the label distribution and has no parsed fallback"
            )
        if isinstance(labels, str):
            raise ConfigError(f"labels must be two strings, got the single string {labels!r}")
        labs = normalize_labels(labels)
        if len(labs) != 2:
            raise ConfigError(f"labels must be exactly two, got {list(labs)}")
        check_min_mass(min_mass)
        if system is not None and not isinstance(system, str):
            raise ConfigError(f"system must be a string or None, got {system!r}")
        if not isinstance(prompt_template, PairwisePrompt):
            raise ConfigError(f"prompt_template must be a PairwisePrompt, got {prompt_template!r}")
        if boundary not in ("prefix", "all"):
            raise ConfigError(f"boundary must be 'prefix' or 'all', got {boundary!r}")
        model.resolve_labels(labs)  # TokenizationError at set-up, not per item
        if not raw and not model.chat_template:
            raise TemplateError(
                f"model {model.signature(labs).model!r} has no chat template; pass raw=True "
                "(the plain prompt format of PairwisePrompt is used)"
            )
        self.model = model
        self.labels: tuple[str, str] = (labs[0], labs[1])
        self.min_mass = float(min_mass)
        self.system = prompt_template.system if system is None else system
        self.raw = bool(raw)
        self.prompt_template = prompt_template
        self.boundary = boundary

    # ---- prompts and provenance ------------------------------------------------------------
    def render_inputs(
        self, instruction: str, response_1: str, response_2: str
    ) -> tuple[str, str | None, str | None]:
        """``(prompt, system, prefill)`` as passed to ``score_distribution`` for one order.

        With ``raw=True`` the system text and the separators are inside ``prompt`` and
        ``system`` is ``None``.
        """
        user = self.prompt_template.format_user(instruction, response_1, response_2, self.labels)
        prefill = self.prompt_template.prefill or None
        if self.raw:
            parts = [p for p in (self.system, user) if p]
            return _RAW_JOIN.join(parts) + _RAW_JOIN, None, prefill
        return user, (self.system or None), prefill

    def signature(self) -> dict[str, Any]:
        """The judge's provenance: prompt version and sha256, labels, parameters, and the
        backend signature (model / chat-template sha256, label map, versions)."""
        params = {
            "min_mass": self.min_mass,
            "prefill": self.prompt_template.prefill,
            "boundary": self.boundary,
            "swap": True,
        }
        b = self.model.signature(self.labels, raw=self.raw, params=params)
        return {
            "judge": "pairwise",
            "prompt_template": self.prompt_template.version,
            "prompt_sha256": self.prompt_template.sha256,
            "system_sha256": None if not self.system else sha256_json(self.system),
            "labels": list(self.labels),
            "params": {
                "min_mass": self.min_mass,
                "raw": self.raw,
                "boundary": self.boundary,
                "swap": True,
            },
            "backend": b.to_dict(),
            "localjudge": __version__,
        }

    # ---- judging ---------------------------------------------------------------------------
    def _order(
        self, order: str, instruction: str, response_a: str, response_b: str
    ) -> PairwiseOrderResult:
        first = "A" if order == "original" else "B"
        r1, r2 = (response_a, response_b) if first == "A" else (response_b, response_a)
        prompt, system, prefill = self.render_inputs(instruction, r1, r2)
        base: dict[str, Any] = {"order": order, "first": first}
        try:
            dist = self.model.score_distribution(
                prompt,
                self.labels,
                system=system,
                prefill=prefill,
                raw=self.raw,
                min_mass=self.min_mass,
                boundary=self.boundary,
            )
        except LowMassError as err:
            return PairwiseOrderResult(
                **base,
                p_first=None,
                p_a=None,
                choice=None,
                first_slot_chosen=None,
                distribution=err.distribution,
                mass=err.mass,
                error=err.code,
                message=str(err),
            )
        except BackendError as err:  # ContextOverflowError included
            return PairwiseOrderResult(
                **base,
                p_first=None,
                p_a=None,
                choice=None,
                first_slot_chosen=None,
                distribution=None,
                mass=None,
                error=err.code,
                message=str(err),
            )
        if not dist.mass > 0:
            return PairwiseOrderResult(
                **base,
                p_first=None,
                p_a=None,
                choice=None,
                first_slot_chosen=None,
                distribution=dist,
                mass=dist.mass,
                error=LowMassError.code,
                message="label mass is 0: no probability can be read (min_mass was "
                f"{self.min_mass})",
            )
        p1, p2 = dist.probs
        p_a = p1 if first == "A" else p2
        second = "B" if first == "A" else "A"
        if p1 > p2:
            choice: str = first
        elif p2 > p1:
            choice = second
        else:
            choice = "tie"
        return PairwiseOrderResult(
            **base,
            p_first=p1,
            p_a=p_a,
            choice=choice,
            first_slot_chosen=None if choice == "tie" else choice == first,
            distribution=dist,
            mass=dist.mass,
            error=None,
            message=None,
        )

    def compare(self, instruction: str, response_a: str, response_b: str) -> PairwiseResult:
        """Judge which response better follows the instruction, asking in both orders.

        Two ``score_distribution`` calls: original order (response_a in slot 1) and swapped
        order (response_b in slot 1). Deterministic for fixed model bytes and inputs.

        Args:
            instruction: the instruction both responses answer (non-empty).
            response_a: the first response in the caller's numbering (non-empty).
            response_b: the second response (non-empty).

        Returns:
            ``PairwiseResult``; per-order failures (low mass, context overflow, backend
            errors) are recorded in it, with ``verdict="error"``.

        Raises:
            ConfigError: an argument is not a non-empty string.
            TemplateError: the chat template failed to render (a configuration problem).
        """
        for name, v in (
            ("instruction", instruction),
            ("response_a", response_a),
            ("response_b", response_b),
        ):
            if not isinstance(v, str) or not v.strip():
                raise ConfigError(f"{name} must be a non-empty string, got {v!r}")
        t0 = time.perf_counter()
        sig = self.signature()
        orig = self._order("original", instruction, response_a, response_b)
        swap = self._order("swapped", instruction, response_a, response_b)
        return _combine(self.labels, orig, swap, sig, time.perf_counter() - t0)


def _combine(
    labels: tuple[str, str],
    orig: PairwiseOrderResult,
    swap: PairwiseOrderResult,
    signature: dict[str, Any],
    seconds: float,
) -> PairwiseResult:
    failed = [o for o in (orig, swap) if o.error is not None]
    if failed:
        verdict, consistent, p_mean = "error", None, None
        error: str | None = failed[0].error
    else:
        verdict = (
            orig.choice if (orig.choice == swap.choice and orig.choice in ("A", "B")) else "tie"
        )
        consistent = verdict in ("A", "B")
        p_mean = (orig.p_a + swap.p_a) / 2.0  # type: ignore[operator]
        error = None
    return PairwiseResult(
        labels=labels,
        p_a_original=orig.p_a,
        p_a_swapped=swap.p_a,
        p_a_mean=p_mean,
        verdict=str(verdict),
        position_consistent=consistent,
        single_order_verdict=orig.choice,
        original=orig,
        swapped=swap,
        error=error,
        signature=signature,
        seconds=seconds,
    )


def compare(
    instruction: str,
    response_a: str,
    response_b: str,
    judge: Backend,
    *,
    labels: Sequence[str] = ("A", "B"),
    min_mass: float = DEFAULT_MIN_MASS,
    system: str | None = None,
    raw: bool = False,
    prompt_template: PairwisePrompt = VANILLA_AB_V1,
) -> PairwiseResult:
    """One-shot pairwise comparison with position swap (thin wrapper of ``PairwiseJudge``).

    Args:
        instruction, response_a, response_b: see ``PairwiseJudge.compare``.
        judge: the judge backend.
        labels, min_mass, system, raw, prompt_template: see ``PairwiseJudge``.

    Returns:
        ``PairwiseResult`` (verdict ``"A"``/``"B"`` only when both orders agree).

    Raises:
        ConfigError, TokenizationError, TemplateError: as ``PairwiseJudge`` and
            ``PairwiseJudge.compare``.

    Example:
        >>> from localjudge.backends.fake import FakeBackend
        >>> r = compare("Say hi.", "hi", "bye", FakeBackend({"A": 0.75, "B": 0.25}))
        >>> r.p_a_original, r.p_a_swapped, r.p_a_mean, r.verdict, r.single_order_verdict
        (0.75, 0.25, 0.5, 'tie', 'A')
    """
    return PairwiseJudge(
        judge,
        labels=labels,
        min_mass=min_mass,
        system=system,
        raw=raw,
        prompt_template=prompt_template,
    ).compare(instruction, response_a, response_b)


def format_signature(signature: Mapping[str, Any]) -> str:
    """A stable one-line form of ``PairwiseJudge.signature()``, e.g.
    ``judge:pairwise|prompt:llmbar-vanilla-ab-v1@1a2b3c4d|raw:False|backend:llama_cpp-...``."""
    backend = Signature.from_dict(dict(signature["backend"]))
    return (
        f"judge:{signature['judge']}|prompt:{signature['prompt_template']}@"
        f"{signature['prompt_sha256'][:8]}|raw:{signature['params']['raw']}|"
        f"{backend.format()}"
    )
