"""Result and message types: ``Message``, ``TopToken``, ``ScoreDistribution``.

All are frozen dataclasses with ``to_dict()`` / ``from_dict()`` that round-trip through JSON.
Log-probabilities are natural logs (nats); ``-inf`` is stored as ``null`` in JSON.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from localjudge.errors import ConfigError
from localjudge.signature import Signature

__all__ = ["Message", "ScoreDistribution", "ScoreSamples", "TopToken", "to_messages"]

_ROLES = ("system", "user", "assistant")


@dataclass(frozen=True, slots=True)
class Message:
    """One chat message.

    Attributes:
        role: ``"system"``, ``"user"`` or ``"assistant"``.
        content: the message text (non-empty).
    """

    role: str
    content: str

    def __post_init__(self) -> None:
        if self.role not in _ROLES:
            raise ConfigError(f"message role must be one of {_ROLES}, got {self.role!r}")
        if not isinstance(self.content, str):
            raise ConfigError(f"message content must be str, got {type(self.content).__name__}")

    def to_dict(self) -> dict[str, str]:
        return {"role": self.role, "content": self.content}


def to_messages(prompt: str | Sequence[Message | Mapping[str, str]]) -> list[Message]:
    """Normalise a prompt to a list of messages.

    Args:
        prompt: a user message string, or a sequence of ``Message`` / ``{"role", "content"}``.

    Returns:
        A new list of ``Message``.

    Raises:
        ConfigError: empty prompt, empty message list, or a malformed message.
    """
    if isinstance(prompt, str):
        if not prompt.strip():
            raise ConfigError(f"prompt is empty: {prompt!r}")
        return [Message("user", prompt)]
    if isinstance(prompt, (bytes, bytearray)):
        raise ConfigError("prompt must be str or a list of messages, got bytes")
    if isinstance(prompt, Mapping) or not isinstance(prompt, Sequence):
        raise ConfigError(f"prompt must be str or a list of messages, got "
                          f"{type(prompt).__name__}: {prompt!r:.80}")
    msgs: list[Message] = []
    for i, m in enumerate(prompt):
        if isinstance(m, Message):
            msgs.append(m)
        elif isinstance(m, Mapping):
            if "role" not in m or "content" not in m:
                raise ConfigError(f"message {i} needs 'role' and 'content', got keys {list(m)}")
            msgs.append(Message(str(m["role"]), m["content"]))
        else:
            raise ConfigError(f"message {i} must be a Message or a mapping, got {m!r}")
    if not msgs:
        raise ConfigError("prompt is an empty list of messages")
    if not any(m.role == "user" and m.content.strip() for m in msgs):
        raise ConfigError("prompt has no non-empty user message")
    return msgs


@dataclass(frozen=True, slots=True)
class TopToken:
    """One of the most probable next tokens at the scoring position.

    Attributes:
        token_id: the token id in the model's vocabulary.
        text: the decoded token text (as the tokenizer spells it, e.g. ``" 7"`` or ``"\\n"``).
        prob: its probability in [0, 1] (not renormalised).
        is_label: whether this token starts a spelling of one of the labels.
    """

    token_id: int
    text: str
    prob: float
    is_label: bool

    def to_dict(self) -> dict[str, Any]:
        return {"token_id": self.token_id, "text": self.text, "prob": self.prob,
                "is_label": self.is_label}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TopToken:
        return cls(int(d["token_id"]), str(d["text"]), float(d["prob"]), bool(d["is_label"]))


def _label_value(label: str) -> float | None:
    try:
        v = float(label)
    except ValueError:
        return None
    return v if math.isfinite(v) else None


@dataclass(frozen=True, slots=True)
class ScoreDistribution:
    """The next-token distribution of a judge over its score labels.

    Attributes:
        labels: the labels in the requested order, e.g. ``("1", "2", "3", "4", "5")``.
        probs: probabilities renormalised over the labels, each in [0, 1], summing to 1
            (within 1e-9); all zero only if ``mass == 0``.
        logprobs: raw log-probabilities of each label in nats, before renormalisation; a label
            spelled by several tokens gets its exact sequence log-probability. ``-inf`` when 0.
        mass: raw probability mass on all labels in [0, 1] = Σ exp(logprobs).
        min_mass: the threshold this distribution was checked against.
        argmax: the most probable label (first in label order on ties).
        expected: Σ v·p(v) over numeric labels (G-Eval, Liu et al. 2023, arXiv 2303.16634,
            §2, "scoring function"); ``None`` for non-numeric labels.
        top_tokens: the most probable tokens at the scoring position (k=10), labels included.
        pruned_mass: upper bound on label mass not computed because a multi-token prefix had
            probability below the prune threshold (0 when nothing was pruned).
        n_prompt_tokens: tokens in the rendered prompt (prefill included).
        prompt_sha256: sha256 of the rendered prompt text.
        method: ``"logprobs"`` (read from the model's logits).
        signature: provenance (``Signature``).
    """

    labels: tuple[str, ...]
    probs: tuple[float, ...]
    logprobs: tuple[float, ...]
    mass: float
    min_mass: float
    argmax: str
    expected: float | None
    top_tokens: tuple[TopToken, ...]
    pruned_mass: float
    n_prompt_tokens: int
    prompt_sha256: str
    method: str
    signature: Signature

    @classmethod
    def from_label_probs(
        cls,
        labels: Sequence[str],
        label_probs: Sequence[float],
        *,
        min_mass: float,
        top_tokens: Sequence[TopToken],
        pruned_mass: float,
        n_prompt_tokens: int,
        prompt_sha256: str,
        signature: Signature,
        method: str = "logprobs",
    ) -> ScoreDistribution:
        """Build from raw (not renormalised) label probabilities.

        ``probs = p / Σp``; ``argmax`` is the first label with the largest raw probability;
        ``expected = Σ v·probs`` when every label is numeric.
        """
        raw = [max(0.0, float(p)) for p in label_probs]
        mass = math.fsum(raw)
        probs = tuple(p / mass for p in raw) if mass > 0 else tuple(0.0 for _ in raw)
        logprobs = tuple(math.log(p) if p > 0 else -math.inf for p in raw)
        best = max(range(len(raw)), key=lambda i: (raw[i], -i))
        values = [_label_value(lab) for lab in labels]
        expected: float | None = None
        if mass > 0 and all(v is not None for v in values):
            expected = math.fsum(v * p for v, p in zip(values, probs))  # type: ignore[operator]
        return cls(
            labels=tuple(labels),
            probs=probs,
            logprobs=logprobs,
            mass=mass,
            min_mass=float(min_mass),
            argmax=labels[best],
            expected=expected,
            top_tokens=tuple(top_tokens),
            pruned_mass=float(pruned_mass),
            n_prompt_tokens=int(n_prompt_tokens),
            prompt_sha256=prompt_sha256,
            method=method,
            signature=signature,
        )

    def expectation(self, values: Mapping[str, float] | Sequence[float]) -> float:
        """Σ v·p over the renormalised label distribution with caller-given values.

        Args:
            values: one number per label (same order) or a mapping label -> number.

        Raises:
            ConfigError: wrong number of values or a label missing from the mapping.
        """
        if isinstance(values, Mapping):
            missing = [lab for lab in self.labels if lab not in values]
            if missing:
                raise ConfigError(f"values has no entry for labels {missing}")
            vals = [float(values[lab]) for lab in self.labels]
        else:
            vals = [float(v) for v in values]
            if len(vals) != len(self.labels):
                raise ConfigError(
                    f"values has {len(vals)} entries for {len(self.labels)} labels {self.labels}"
                )
        return math.fsum(v * p for v, p in zip(vals, self.probs))

    def as_dict(self) -> dict[str, float]:
        """label -> renormalised probability."""
        return dict(zip(self.labels, self.probs))

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable dict (``-inf`` logprobs become ``None``)."""
        return {
            "labels": list(self.labels),
            "probs": list(self.probs),
            "logprobs": [lp if math.isfinite(lp) else None for lp in self.logprobs],
            "mass": self.mass,
            "min_mass": self.min_mass,
            "argmax": self.argmax,
            "expected": self.expected,
            "top_tokens": [t.to_dict() for t in self.top_tokens],
            "pruned_mass": self.pruned_mass,
            "n_prompt_tokens": self.n_prompt_tokens,
            "prompt_sha256": self.prompt_sha256,
            "method": self.method,
            "signature": self.signature.to_dict(),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ScoreDistribution:
        """Inverse of ``to_dict``."""
        return cls(
            labels=tuple(d["labels"]),
            probs=tuple(float(p) for p in d["probs"]),
            logprobs=tuple(-math.inf if lp is None else float(lp) for lp in d["logprobs"]),
            mass=float(d["mass"]),
            min_mass=float(d["min_mass"]),
            argmax=str(d["argmax"]),
            expected=None if d["expected"] is None else float(d["expected"]),
            top_tokens=tuple(TopToken.from_dict(t) for t in d["top_tokens"]),
            pruned_mass=float(d["pruned_mass"]),
            n_prompt_tokens=int(d["n_prompt_tokens"]),
            prompt_sha256=str(d["prompt_sha256"]),
            method=str(d["method"]),
            signature=Signature.from_dict(d["signature"]),
        )


SEM_KS = (1, 3, 5)
"""Panel sizes k for which ``ScoreSamples`` reports SEM = sd / sqrt(k)."""


@dataclass(frozen=True, slots=True)
class ScoreSamples:
    """Real samples of a judge's score, next to the exact expectation at the same temperature.

    Attributes:
        labels: the labels, in order.
        draws: each draw's label, or ``None`` for a draw that spelled no label.
        counts: draws per label (label order).
        n: number of draws.
        n_non_label: draws that spelled no label (counted, never dropped).
        non_label_texts: text of those draws -> count.
        mean: mean of the numeric label draws (``None`` if no numeric draw).
        sd: sample standard deviation (ddof=1) of those draws; ``None`` with < 2 draws.
        sem: SEM = sd / sqrt(k) for k = 1, 3, 5 averaged judges and for k = n (``"n"``),
            where n counts the label draws.
        expected: the exact expectation Σ v·p(v) from ``score_distribution`` at the same T.
        gap_sem: ``(mean - expected) / sem["n"]``: the sampled mean's distance from the exact
            value in SEM units (``None`` when undefined).
        temperature: T of both the draws and the exact distribution.
        seed: the generator seed.
        distribution: the exact ``ScoreDistribution`` at T (raw mass included).
    """

    labels: tuple[str, ...]
    draws: tuple[str | None, ...]
    counts: tuple[int, ...]
    n: int
    n_non_label: int
    non_label_texts: dict[str, int]
    mean: float | None
    sd: float | None
    sem: dict[str, float | None]
    expected: float | None
    gap_sem: float | None
    temperature: float
    seed: int
    distribution: ScoreDistribution

    @classmethod
    def from_draws(cls, exact: ScoreDistribution, draws: Sequence[str | None],
                   non_label_texts: Mapping[str, int], *, temperature: float,
                   seed: int) -> ScoreSamples:
        """Summarise draws (SEM arithmetic: sd / sqrt(k); sample sd with ddof = 1)."""
        counts = tuple(sum(1 for d in draws if d == lab) for lab in exact.labels)
        vals = [_label_value(d) for d in draws if d is not None]
        nums = [v for v in vals if v is not None]
        mean = math.fsum(nums) / len(nums) if nums else None
        sd = None
        if mean is not None and len(nums) >= 2:
            sd = math.sqrt(math.fsum((v - mean) ** 2 for v in nums) / (len(nums) - 1))
        sem: dict[str, float | None] = {
            str(k): (None if sd is None else sd / math.sqrt(k)) for k in SEM_KS}
        sem["n"] = None if sd is None else sd / math.sqrt(len(nums))
        gap = None
        if mean is not None and exact.expected is not None and sem["n"]:
            gap = (mean - exact.expected) / sem["n"]
        return cls(labels=exact.labels, draws=tuple(draws), counts=counts, n=len(draws),
                   n_non_label=sum(1 for d in draws if d is None),
                   non_label_texts=dict(non_label_texts), mean=mean, sd=sd, sem=sem,
                   expected=exact.expected, gap_sem=gap, temperature=float(temperature),
                   seed=int(seed), distribution=exact)

    def to_dict(self) -> dict[str, Any]:
        return {"labels": list(self.labels), "draws": list(self.draws),
                "counts": list(self.counts), "n": self.n, "n_non_label": self.n_non_label,
                "non_label_texts": dict(self.non_label_texts), "mean": self.mean, "sd": self.sd,
                "sem": dict(self.sem), "expected": self.expected, "gap_sem": self.gap_sem,
                "temperature": self.temperature, "seed": self.seed,
                "distribution": self.distribution.to_dict()}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ScoreSamples:
        return cls(labels=tuple(d["labels"]), draws=tuple(d["draws"]),
                   counts=tuple(d["counts"]), n=int(d["n"]), n_non_label=int(d["n_non_label"]),
                   non_label_texts=dict(d["non_label_texts"]), mean=d["mean"], sd=d["sd"],
                   sem=dict(d["sem"]), expected=d["expected"], gap_sem=d["gap_sem"],
                   temperature=float(d["temperature"]), seed=int(d["seed"]),
                   distribution=ScoreDistribution.from_dict(d["distribution"]))
