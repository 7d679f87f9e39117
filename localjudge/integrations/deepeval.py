"""``LocalJudgeModel``: a localjudge backend as a DeepEval custom model (``[deepeval]`` extra).

DeepEval's metrics call a judge through ``DeepEvalBaseLLM`` (``generate`` / ``a_generate``,
optionally with a pydantic ``schema``). Its ``GEval`` additionally asks for a raw chat
response with ``top_logprobs`` (``generate_raw_response`` / ``a_generate_raw_response``) and
turns it into a probability-weighted score with ``calculate_weighted_summed_score``
(deepeval 4.3.1, ``deepeval/metrics/g_eval/utils.py``): it finds the last generated token equal
to the parsed integer score, keeps that position's top tokens that are decimal strings with
probability >= 1 %, and returns ``Σ s·p(s) / Σ p(s)`` over them.

This adapter answers that request with localjudge's exact label distribution instead of an
API's top-k: the JSON answer's score is read with ``backend.score_distribution`` after the
prefill ``'{\\n  "score": '`` (labels: the integers of the range DeepEval's prompt states, e.g.
0-10), and the returned response carries, at the score token, one top-logprob entry per label
whose value is the label's exact raw log-probability -- every spelling summed (``"7"``, ``" 7"``,
multi-token ``"10"``), see ``localjudge.labels``. DeepEval's own weighting then reproduces
localjudge's expectation except for its 1 % filter: labels with raw probability below 0.01
are dropped and the rest renormalised, which moves the 0-1 score by at most the renormalised
probability of the dropped labels, ``δ = Σ_{p_raw(s) < 0.01} p(s)`` (<= 0.01·(n_labels − 1) /
mass), because ``E − E_kept = δ·(E_dropped − E_kept)`` and both lie in the scale.

A label mass below ``min_mass`` raises ``LowMassError`` (DeepEval records the metric as
errored); it is never turned into a score. Generation (steps, schema answers) is greedy.

Importing this module imports deepeval (and openai's response types, a deepeval dependency);
``import localjudge`` never does. What does not live here: DeepEval's prompts and metrics
(unchanged), localjudge's own G-Eval (``localjudge.judges.geval``).
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import threading
import time
from typing import Any

from localjudge.backends.base import DEFAULT_MIN_MASS, Backend, check_int, check_min_mass
from localjudge.errors import ConfigError
from localjudge.types import ScoreDistribution

try:
    from deepeval.models import DeepEvalBaseLLM
    from openai.types.chat import ChatCompletion
except ImportError as _err:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "localjudge.integrations.deepeval needs the [deepeval] extra: "
        f"pip install 'localjudge[deepeval]' ({_err})") from _err

__all__ = ["DEFAULT_PREFILL", "LocalJudgeModel", "deepeval_weighted_score"]

DEFAULT_PREFILL = '{\n  "score": '
"""Assistant prefill at which the score distribution is read: the start of DeepEval's JSON
answer with the score key first (the trailing space keeps the label tokens likely)."""

DEEPEVAL_MIN_PROB = 0.01
"""DeepEval's filter in ``calculate_weighted_summed_score``: top tokens below 1 % are dropped."""

_RANGE_RE = re.compile(r"an integer between (\d+) and (\d+)")
_STRICT_RE = re.compile(r"STRICTLY EITHER 1 .*?OR 0", re.DOTALL)


def deepeval_weighted_score(dist: ScoreDistribution) -> float:
    """What DeepEval's ``calculate_weighted_summed_score`` computes from this distribution.

    Labels with raw probability below 1 % are dropped, the rest renormalised:
    ``Σ s·p(s) / Σ p(s)`` over the kept labels (raw scale, e.g. 0-10).

    Raises:
        ConfigError: non-integer labels, or every label below 1 % (DeepEval then falls back
            to the integer score).
    """
    kept = [(int(lab), math.exp(lp)) for lab, lp in zip(dist.labels, dist.logprobs)
            if lp >= math.log(DEEPEVAL_MIN_PROB) and lab.isdecimal()]
    if len(kept) != sum(1 for lp in dist.logprobs if lp >= math.log(DEEPEVAL_MIN_PROB)):
        raise ConfigError(f"DeepEval weights only decimal labels, got {list(dist.labels)}")
    total = math.fsum(p for _, p in kept)
    if total == 0:
        raise ConfigError("every label is below DeepEval's 1 % filter")
    return math.fsum(s * p for s, p in kept) / total


class LocalJudgeModel(DeepEvalBaseLLM):  # type: ignore[misc,no-untyped-call,unused-ignore]
    """A localjudge backend as DeepEval's custom judge model, with exact G-Eval logprobs.

    Args:
        backend: any localjudge backend (``load_backend("llama_cpp", ...)``,
            ``OpenAICompatBackend(...)``). Backends that are not thread-safe (the in-process
            ones) are called under a lock, so DeepEval's async mode cannot run two calls on
            one model at once.
        score_range: ``(lo, hi)`` labels for ``generate_raw_response``; default: read from
            DeepEval's prompt (``"an integer between 0 and 10"``; strict mode: 0-1).
        prefill: assistant prefill before the score (see ``DEFAULT_PREFILL``).
        min_mass: minimum raw label mass in [0, 1]; below it ``LowMassError`` is raised.
        reason_max_tokens: tokens generated for the JSON ``reason`` after the score (0: the
            reason is left empty and nothing is generated).
        max_tokens: token limit of ``generate`` / ``a_generate`` (>= 1).
        seed: seed passed to the backend's ``generate`` (greedy, so it rarely matters).

    Raises:
        ConfigError: ``backend`` is not a localjudge ``Backend``, or bad arguments.

    Example:
        >>> from localjudge.backends.fake import FakeBackend
        >>> m = LocalJudgeModel(FakeBackend.digits(next_probs={"4": 0.75, "5": 0.25}),
        ...                     score_range=(1, 5), reason_max_tokens=0)
        >>> res, cost = m.generate_raw_response("Rate it.", top_logprobs=20)
        >>> res.choices[0].message.content
        '{"reason": "", "score": 4}'
        >>> deepeval_weighted_score(m.last_distribution)
        4.25
    """

    def __init__(
        self,
        backend: Backend,
        *,
        score_range: tuple[int, int] | None = None,
        prefill: str = DEFAULT_PREFILL,
        min_mass: float = DEFAULT_MIN_MASS,
        reason_max_tokens: int = 64,
        max_tokens: int = 512,
        seed: int = 0,
    ) -> None:
        if not isinstance(backend, Backend):
            raise ConfigError(f"backend must be a localjudge Backend, got {backend!r}")
        if score_range is not None and not (
                isinstance(score_range, tuple) and len(score_range) == 2
                and all(isinstance(x, int) and not isinstance(x, bool) for x in score_range)
                and 0 <= score_range[0] < score_range[1]):
            raise ConfigError(f"score_range must be (lo, hi) ints, 0 <= lo < hi, "
                              f"got {score_range!r}")
        check_int("reason_max_tokens", reason_max_tokens, 0)
        check_int("max_tokens", max_tokens, 1)
        check_min_mass(min_mass)
        self.backend = backend
        self.score_range = score_range
        self.prefill = prefill
        self.min_mass = float(min_mass)
        self.reason_max_tokens = reason_max_tokens
        self.max_tokens = max_tokens
        self.seed = int(seed)
        self.last_distribution: ScoreDistribution | None = None
        """The distribution behind the last raw response (mass, signature, top tokens)."""
        self.last_prompt: str | None = None
        """The last prompt DeepEval sent to ``generate_raw_response``."""
        self._lock = (None if getattr(backend, "thread_safe", False) else threading.Lock())
        model = str(backend._signature_fields()["model"])
        super().__init__(model=f"localjudge-{backend.name}-{model}")

    # ---- DeepEvalBaseLLM interface ---------------------------------------------------------
    def load_model(self, *args: Any, **kwargs: Any) -> Backend:  # type: ignore[override]
        """The wrapped backend (already loaded; DeepEval stores it as ``self.model``)."""
        return self.backend

    def get_model_name(self, *args: Any, **kwargs: Any) -> str:
        """``"localjudge-<backend>-<model>"``."""
        return str(self.name)

    def supports_log_probs(self) -> bool:
        """True: ``generate_raw_response`` returns exact label logprobs."""
        return True

    def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        if self._lock is None:
            return fn(*args, **kwargs)
        with self._lock:
            return fn(*args, **kwargs)

    def generate(self, prompt: str, schema: Any = None, **kwargs: Any) -> Any:
        """Greedy answer to ``prompt``; with a pydantic ``schema``, the parsed instance.

        Returns:
            The text, or ``schema`` instance when the text holds valid JSON for it (otherwise
            the text, which DeepEval then reports as invalid JSON).

        Raises:
            LocalJudgeError: the backend failed (``BackendError``, ``ContextOverflowError``).
        """
        text: str = self._call(self.backend.generate, prompt, max_tokens=self.max_tokens,
                               temperature=0.0, seed=self.seed)
        if schema is None:
            return text
        return _parse_schema(text, schema)

    async def a_generate(self, prompt: str, schema: Any = None, **kwargs: Any) -> Any:
        """``generate`` in a worker thread (the backends are blocking)."""
        return await asyncio.to_thread(self.generate, prompt, schema)

    def generate_raw_response(self, prompt: str, top_logprobs: int = 20,
                              **kwargs: Any) -> tuple[ChatCompletion, float]:
        """DeepEval G-Eval's logprob request, answered with localjudge's exact distribution.

        Args:
            prompt: DeepEval's evaluation-results prompt (sent as the user message).
            top_logprobs: entries at the score token (the labels, most probable first; labels
                with probability 0 are omitted).
            **kwargs: ignored (DeepEval's audio arguments).

        Returns:
            ``(ChatCompletion, 0.0)``: the message content is ``{"reason": ..., "score": k}``
            with ``k`` the argmax label; ``choices[0].logprobs.content`` is three positions
            (the text before the score, the score token, ``"}"``), the score token carrying
            one top-logprob per label = its exact raw log-probability (nats). Cost 0.0.

        Raises:
            ConfigError: no score range given or found in the prompt.
            LowMassError: label mass below ``min_mass``.
            LocalJudgeError: the backend failed.
        """
        lo, hi = self._range(prompt)
        self.last_prompt = prompt
        dist: ScoreDistribution = self._call(
            self.backend.score_distribution, prompt, range(lo, hi + 1), prefill=self.prefill,
            min_mass=self.min_mass)
        self.last_distribution = dist
        score = int(dist.argmax)
        reason = ""
        if self.reason_max_tokens:
            reason = self._call(
                self.backend.generate, prompt, max_tokens=self.reason_max_tokens,
                temperature=0.0, seed=self.seed,
                prefill=f'{self.prefill}{score},\n  "reason": "', stop=['"']).strip()
        head = '{"reason": ' + json.dumps(reason) + ', "score": '
        entries = sorted(((lab, lp) for lab, lp in zip(dist.labels, dist.logprobs)
                          if math.isfinite(lp)), key=lambda x: -x[1])[: max(1, top_logprobs)]
        score_lp = dist.logprobs[dist.labels.index(dist.argmax)]

        def pos(token: str, logprob: float, tops: list[tuple[str, float]]) -> dict[str, Any]:
            return {"token": token, "logprob": logprob, "bytes": list(token.encode()),
                    "top_logprobs": [{"token": t, "logprob": v, "bytes": list(t.encode())}
                                     for t, v in tops]}

        res = ChatCompletion.model_validate({
            "id": f"localjudge-{dist.prompt_sha256[:16]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.get_model_name(),
            "choices": [{
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": f"{head}{score}}}"},
                "logprobs": {"content": [pos(head, 0.0, []),
                                         pos(str(score), score_lp, entries),
                                         pos("}", 0.0, [])]},
            }],
        })
        return res, 0.0

    async def a_generate_raw_response(self, prompt: str, top_logprobs: int = 20,
                                      **kwargs: Any) -> tuple[ChatCompletion, float]:
        """``generate_raw_response`` in a worker thread."""
        return await asyncio.to_thread(self.generate_raw_response, prompt, top_logprobs)

    def _range(self, prompt: str) -> tuple[int, int]:
        if self.score_range is not None:
            return self.score_range
        m = _RANGE_RE.search(prompt)
        if m:
            lo, hi = int(m.group(1)), int(m.group(2))
            if lo < hi:
                return lo, hi
        if _STRICT_RE.search(prompt):
            return 0, 1
        raise ConfigError("no score range in the prompt (expected DeepEval's 'an integer "
                          "between LO and HI'); pass score_range= to LocalJudgeModel")


def _parse_schema(text: str, schema: Any) -> Any:
    start, end = text.find("{"), text.rfind("}") + 1
    if start == -1 or end == 0:
        return text
    try:
        return schema.model_validate(json.loads(text[start:end]))
    except (ValueError, TypeError):
        return text
