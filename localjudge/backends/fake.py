"""``FakeBackend``: a scripted backend with exact arithmetic, for fast unit tests and doctests.

The vocabulary is a small fixed list of token texts; text is tokenised greedily (longest match).
Next-token probabilities are scripted: ``next_probs`` maps token texts to probabilities at the
scoring position, and ``continuations`` maps a tuple of token texts (the last tokens of the
sequence) to the probabilities after them. Probability not assigned in a script goes to the
``filler`` token (default ``"\\n"``). So every distribution is known exactly in advance.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from localjudge.backends.base import Backend
from localjudge.errors import ConfigError
from localjudge.version import package_versions

__all__ = ["CHATML_TEMPLATE", "FakeBackend"]

CHATML_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
"""A minimal ChatML template (the Qwen / SmolLM ``<|im_start|>`` format)."""

_SPECIAL = ("<|im_start|>", "<|im_end|>", "<s>", "</s>")
_WORDS = ("Yes", "No", "yes", "no", "A", "B", "Score", "Coherence")


def _default_vocab() -> list[str]:
    vocab: list[str] = list(_SPECIAL)
    vocab += [chr(c) for c in range(32, 127)]  # every printable ASCII char: any text tokenises
    vocab += ["\n"]
    vocab += [f" {d}" for d in range(10)]
    vocab += [w for w in _WORDS if w not in vocab] + [f" {w}" for w in _WORDS]
    return vocab


ScriptProbs = Mapping[str, float]


class FakeBackend(Backend):
    """Scripted backend: exact, deterministic next-token distributions.

    Args:
        next_probs: token text -> probability at the scoring position (sum <= 1).
        continuations: tuple of token texts (the sequence's last tokens) -> probabilities
            after them; the longest matching tail wins.
        vocab: token texts (index = id); default: printable ASCII, ``"\\n"``, ``" 0".." 9"``,
            a few words and the ChatML special tokens. No single token ``"10"``, so the
            label "10" is spelled ``"1","0"`` as on digit-splitting tokenizers.
        chat_template: template text, or None for a model without one.
        n_ctx: context window in tokens.
        filler: token that receives the probability a script leaves unassigned.
        supports_logprobs: set False to emulate a backend without logprobs (generation only).

    Raises:
        ConfigError: a scripted token is not in the vocabulary, or probabilities exceed 1.
    """

    name: ClassVar[str] = "fake"

    def __init__(
        self,
        next_probs: ScriptProbs,
        *,
        continuations: Mapping[tuple[str, ...], ScriptProbs] | None = None,
        vocab: Sequence[str] | None = None,
        chat_template: str | None = CHATML_TEMPLATE,
        n_ctx: int = 2048,
        filler: str = "\n",
        supports_logprobs: bool = True,
    ) -> None:
        self.supports_logprobs = supports_logprobs
        self._vocab_list = list(vocab) if vocab is not None else _default_vocab()
        self._ids = {t: i for i, t in enumerate(self._vocab_list)}
        self._filler = self._id(filler)
        self._root = self._logprobs_of(next_probs)
        self._conts = {
            tuple(self._id(t) for t in k): self._logprobs_of(v)
            for k, v in (continuations or {}).items()
        }
        self._template = chat_template
        self._n_ctx = n_ctx
        self.calls: list[tuple[int, ...]] = []
        """Every token sequence passed to ``_next_token_logprobs``, in order."""
        self._init_shared()

    @classmethod
    def digits(cls, next_probs: ScriptProbs, **kw: Any) -> FakeBackend:
        """Convenience constructor with the default vocabulary."""
        return cls(next_probs, **kw)

    def _id(self, text: str) -> int:
        if text not in self._ids:
            raise ConfigError(f"token {text!r} is not in the fake vocabulary")
        return self._ids[text]

    def _logprobs_of(self, probs: ScriptProbs) -> np.ndarray:
        p = np.zeros(len(self._vocab_list), dtype=np.float64)
        for t, v in probs.items():
            if v < 0:
                raise ConfigError(f"negative probability {v} for {t!r}")
            p[self._id(t)] += v
        total = p.sum()
        if total > 1 + 1e-12:
            raise ConfigError(f"scripted probabilities sum to {total} > 1")
        p[self._filler] += max(0.0, 1.0 - total)
        with np.errstate(divide="ignore"):
            return np.log(p)

    @property
    def n_ctx(self) -> int:
        return self._n_ctx

    @property
    def n_vocab(self) -> int:
        return len(self._vocab_list)

    @property
    def chat_template(self) -> str | None:
        return self._template

    def _tokenize(self, text: str, *, special: bool) -> list[int]:
        out: list[int] = []
        i = 0
        cands = sorted(self._vocab_list, key=len, reverse=True)
        while i < len(text):
            for t in cands:
                if t and text.startswith(t, i) and (special or t not in _SPECIAL):
                    out.append(self._ids[t])
                    i += len(t)
                    break
            else:
                raise ConfigError(f"character {text[i]!r} cannot be tokenised by FakeBackend")
        return out

    def _decode(self, ids: Sequence[int]) -> str:
        return "".join(self._vocab_list[i] for i in ids if self._vocab_list[i] not in _SPECIAL)

    def _vocab_texts(self) -> list[str]:
        return ["" if t in _SPECIAL else t for t in self._vocab_list]

    def _display_text(self, token_id: int) -> str:
        return self._vocab_list[token_id]

    def _special_ids(self) -> set[int]:
        return {self._ids[t] for t in _SPECIAL if t in self._ids}

    def _eog_ids(self) -> set[int]:
        return {self._ids[t] for t in ("<|im_end|>", "</s>") if t in self._ids}

    def _bos(self) -> tuple[int | None, str]:
        return None, "<s>"

    def _eos_text(self) -> str:
        return "</s>"

    def score_distribution(self, *args: Any, **kwargs: Any) -> Any:
        if not self.supports_logprobs:
            from localjudge.errors import BackendError

            raise BackendError("this fake backend emulates a server without logprobs")
        return super().score_distribution(*args, **kwargs)

    def _next_token_logprobs(self, token_ids: Sequence[int]) -> np.ndarray:
        ids = tuple(token_ids)
        self.calls.append(ids)
        best: tuple[int, ...] | None = None
        for k in self._conts:
            if (len(k) <= len(ids) and ids[len(ids) - len(k):] == k
                    and (best is None or len(k) > len(best))):
                best = k
        return self._conts[best] if best is not None else self._root

    def _signature_fields(self) -> dict[str, Any]:
        return {
            "backend_version": "0",
            "model": "fake",
            "model_sha256": "0" * 64,
            "versions": package_versions("numpy"),
        }


def exact_log(p: float) -> float:
    """``log(p)`` with ``log(0) = -inf`` (helper for tests)."""
    return math.log(p) if p > 0 else -math.inf
