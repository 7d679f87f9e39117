"""The backend protocol and the one shared implementation of scoring and generation.

Backends (llama.cpp, transformers, the scripted fake) implement only private token-level
methods: tokenisation, vocabulary texts and ``_next_token_logprobs(token_ids)``. Everything
public -- rendering the chat template, prefill, label resolution, exact label probabilities,
the mass check, generation and the signature -- lives here, once, so every backend behaves
identically and the cross-backend comparison compares models, not code paths.
"""

from __future__ import annotations

import logging
import math
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from localjudge.errors import (
    BackendError,
    ConfigError,
    ContextOverflowError,
    LowMassError,
    TemplateError,
)
from localjudge.labels import (
    LabelMap,
    extend_masks_from_texts,
    label_probabilities,
    normalize_labels,
    resolve_label_ids,
    sample_label,
)
from localjudge.signature import Signature, sha256_text
from localjudge.templates import build_messages, render_chat
from localjudge.types import Message, ScoreDistribution, ScoreSamples, TopToken, to_messages

__all__ = ["DEFAULT_MIN_MASS", "DEFAULT_PRUNE_BELOW", "N_TOP_TOKENS", "Backend", "log_softmax"]

logger = logging.getLogger(__name__)

DEFAULT_MIN_MASS = 0.9
"""Default minimum raw label mass in [0, 1] ("the label probabilities sum to about 1")."""

DEFAULT_PRUNE_BELOW = 1e-6
"""Multi-token label prefixes with probability at or below this are not expanded (probability)."""

N_TOP_TOKENS = 10
"""How many of the most probable next tokens a ``ScoreDistribution`` reports."""

Prompt = str | Sequence[Message | Mapping[str, str]]


def check_min_mass(min_mass: Any) -> None:
    """Raise ``ConfigError`` unless ``min_mass`` is a number (not bool) in [0, 1]."""
    if (isinstance(min_mass, bool) or not isinstance(min_mass, (int, float))
            or not 0.0 <= float(min_mass) <= 1.0):
        raise ConfigError(f"min_mass must be a number in [0, 1], got {min_mass!r}")


def check_int(name: str, value: Any, lo: int) -> None:
    """Raise ``ConfigError`` naming ``name`` unless ``value`` is an int (not bool) >= ``lo``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < lo:
        raise ConfigError(f"{name} must be an int >= {lo}, got {value!r}")


def check_seed(seed: Any) -> None:
    """Raise ``ConfigError`` unless ``seed`` is an int (not bool) >= 0."""
    check_int("seed", seed, 0)


def normalize_stop(stop: Any) -> list[str]:
    """Stop strings as a list: one string is one stop sequence (as in OpenAI's API), not its
    characters.

    Raises:
        ConfigError: not a string or a sequence of non-empty strings.
    """
    stops = [stop] if isinstance(stop, str) else stop
    if not isinstance(stops, (list, tuple)) or not all(isinstance(x, str) and x
                                                       for x in stops):
        raise ConfigError(f"stop must be a string or a list of non-empty strings, got {stop!r}")
    return list(stops)


def _check_temperature(temperature: Any, *, allow_zero: bool) -> None:
    ok = (isinstance(temperature, (int, float)) and not isinstance(temperature, bool)
          and math.isfinite(temperature)
          and (temperature >= 0 if allow_zero else temperature > 0))
    if not ok:
        bound = ">= 0" if allow_zero else "> 0"
        raise ConfigError(f"temperature must be a finite number {bound}, got {temperature!r}")


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """Log-softmax in float64: ``logits - logsumexp(logits)`` (nats), shape preserved."""
    x = np.asarray(logits, dtype=np.float64)
    m = float(np.max(x))
    return x - (m + math.log(float(np.exp(x - m).sum())))


class Backend(ABC):
    """Base class of every backend; public API shared by all.

    Subclasses implement the private token-level methods below and set ``name``.
    """

    name: ClassVar[str] = "base"

    supports_logprobs: bool = True
    """Whether ``score_distribution`` can read logprobs (False: judges fall back to parsing
    generated text, marked ``method="parsed"``)."""

    # ---- subclass interface -------------------------------------------------------------
    @property
    @abstractmethod
    def n_ctx(self) -> int:
        """Context window in tokens."""

    @property
    @abstractmethod
    def n_vocab(self) -> int:
        """Vocabulary size (length of the logits vector)."""

    @property
    @abstractmethod
    def chat_template(self) -> str | None:
        """The model's own chat template text, or None when the model has none."""

    @abstractmethod
    def _tokenize(self, text: str, *, special: bool) -> list[int]:
        """Text -> ids, no BOS; ``special`` parses special-token text such as ``<|im_start|>``."""

    @abstractmethod
    def _decode(self, ids: Sequence[int]) -> str:
        """Ids -> text."""

    @abstractmethod
    def _vocab_texts(self) -> list[str]:
        """Decoded text of every token id (index = id)."""

    @abstractmethod
    def _special_ids(self) -> set[int]:
        """Ids of special / control tokens."""

    @abstractmethod
    def _eog_ids(self) -> set[int]:
        """Ids that end generation (EOS, end-of-turn)."""

    @abstractmethod
    def _bos(self) -> tuple[int | None, str]:
        """(BOS id to prepend or None, BOS text exposed to the chat template)."""

    @abstractmethod
    def _eos_text(self) -> str:
        """EOS text exposed to the chat template."""

    @abstractmethod
    def _next_token_logprobs(self, token_ids: Sequence[int]) -> np.ndarray:
        """Log-probabilities (nats, float64, shape ``(n_vocab,)``) of the token after
        ``token_ids``. Implementations compute only the last position and reuse the KV cache
        of the longest common prefix with the previous call."""

    def _logprobs_after(
        self, prompt_ids: Sequence[int], suffix_ids: Sequence[int] = ()
    ) -> np.ndarray:
        """Log-probabilities after ``prompt_ids + suffix_ids``; the split tells a backend which
        tokens are the prompt and which are label / generated continuations, so it can compute
        them in a canonical, history-independent way (see ``LlamaCppBackend``)."""
        return self._next_token_logprobs([*prompt_ids, *suffix_ids])

    @abstractmethod
    def _signature_fields(self) -> dict[str, Any]:
        """backend_version, model, model_sha256 and versions for the signature."""

    def _display_text(self, token_id: int) -> str:
        """Text shown for a token whose vocabulary text is empty (special tokens)."""
        return f"<id:{token_id}>"

    # ---- shared implementation ----------------------------------------------------------
    def _init_shared(self) -> None:
        self._label_cache: dict[tuple[str, ...], LabelMap] = {}
        self._masks: dict[str, np.ndarray] | None = None
        self._texts: list[str] | None = None

    def _vocab(self) -> list[str]:
        if self._texts is None:
            self._texts = self._vocab_texts()
        return self._texts

    def resolve_labels(self, labels: Iterable[str | int] | range | None = None) -> LabelMap:
        """Resolve labels to token-id sequences for this model (cached per label tuple).

        Raises:
            ConfigError: malformed label list (see ``normalize_labels``).
            TokenizationError: a label cannot be tokenised, or two labels overlap.
        """
        key = normalize_labels(labels)
        if key not in self._label_cache:
            self._label_cache[key] = resolve_label_ids(
                key,
                vocab_texts=self._vocab(),
                special_ids=self._special_ids(),
                tokenize=lambda t: self._tokenize(t, special=False),
                decode=self._decode,
            )
        return self._label_cache[key]

    def render(
        self,
        prompt: Prompt,
        *,
        system: str | None = None,
        prefill: str | None = None,
        raw: bool = False,
    ) -> str:
        """The exact text the model sees: chat template + generation prompt + prefill.

        Args:
            prompt: a user message string or a list of chat messages; with ``raw=True`` a
                string in a prompt format the caller supplies (no chat template).
            system: optional system message, prepended.
            prefill: optional start of the assistant answer (e.g. ``"Score: "``), appended
                after the generation prompt.
            raw: skip the chat template (for base models such as Gemma 3 270M).

        Raises:
            ConfigError: empty prompt, or ``raw=True`` with messages or a system message.
            TemplateError: the model has no chat template (and ``raw`` is False), or the
                template failed / was refused by the sandbox.
        """
        if prefill is not None and not isinstance(prefill, str):
            raise ConfigError(f"prefill must be str, got {prefill!r}")
        if raw:
            if not isinstance(prompt, str):
                raise ConfigError("raw=True takes the whole prompt as one string, got messages")
            if not prompt.strip():
                raise ConfigError(f"prompt is empty: {prompt!r}")
            if system is not None:
                raise ConfigError("raw=True has no system turn; put it in your prompt format")
            return prompt + (prefill or "")
        if system is not None and not isinstance(system, str):
            raise ConfigError(f"system must be str, got {type(system).__name__}: {system!r}")
        messages = build_messages(to_messages(prompt), system=system)
        self._refuse_control_tokens([m.content for m in messages] + [prefill or ""])
        template = self.chat_template
        if not template:
            raise TemplateError(
                f"model {self._signature_fields()['model']!r} has no chat template; pass "
                "raw=True with a prompt format you supply (e.g. 'Text: ...\\nScore (1-5):')"
            )
        if messages[-1].role == "assistant":
            raise ConfigError(
                "the last message is an assistant turn; pass the start of the answer as "
                "prefill= instead so it follows the generation prompt"
            )
        _, bos_text = self._bos()
        text = render_chat(template, messages, bos_token=bos_text, eos_token=self._eos_text())
        return text + (prefill or "")

    def _special_texts(self) -> set[str]:
        if getattr(self, "_special_text_cache", None) is None:
            try:
                ids = self._special_ids()
            except BackendError:  # no local vocabulary (HTTP backends): nothing to check
                ids = set()
            texts = {self._display_text(i) for i in ids}
            self._special_text_cache = {t for t in texts if len(t) > 1 and not t.startswith("<id:")}
        return set(self._special_text_cache or ())

    def _refuse_control_tokens(self, contents: Sequence[str]) -> None:
        """Message text is data: a chat control token spelled inside it (``<|im_end|>``) would
        be parsed as structure when the rendered prompt is tokenised, letting the judged text
        rewrite the conversation. Refuse it, naming the token, instead of judging silently."""
        specials = self._special_texts()
        for text in contents:
            for tok in specials:
                if tok in text:
                    raise ConfigError(
                        f"message text contains the control token {tok!r} of this model's "
                        "chat format; it would be parsed as chat structure (prompt injection). "
                        "Remove or escape it, or use raw=True with your own prompt format")

    def _encode_prompt(self, text: str) -> list[int]:
        bos_id, bos_text = self._bos()
        ids = self._tokenize(text, special=True)
        if bos_id is not None and not (bos_text and text.startswith(bos_text)):
            ids = [bos_id, *ids]
        return ids

    def _template_sha256(self, raw: bool) -> str:
        if raw:
            return "raw"
        return sha256_text(self.chat_template or "")

    def signature(
        self,
        labels: Iterable[str | int] | range | None = None,
        *,
        raw: bool = False,
        params: Mapping[str, Any] | None = None,
    ) -> Signature:
        """Provenance of distributions produced with these labels and parameters."""
        lm = self.resolve_labels(labels)
        f = self._signature_fields()
        return Signature(
            backend=self.name,
            backend_version=f["backend_version"],
            model=f["model"],
            model_sha256=f["model_sha256"],
            template_sha256=self._template_sha256(raw),
            label_map=lm.as_json(),
            label_map_sha256=lm.sha256,
            params=dict(params or {}),
            versions=dict(f["versions"]),
        )

    def score_distribution(
        self,
        prompt: Prompt,
        labels: Iterable[str | int] | range | None = None,
        *,
        system: str | None = None,
        prefill: str | None = None,
        raw: bool = False,
        min_mass: float = DEFAULT_MIN_MASS,
        prune_below: float = DEFAULT_PRUNE_BELOW,
        boundary: str = "prefix",
        temperature: float = 1.0,
    ) -> ScoreDistribution:
        """Next-token distribution over the score labels.

        Renders the prompt with the model's chat template (sandboxed) and the generation
        prompt, appends the prefill, and reads the label probabilities from the next-token
        logits at that position. Multi-token labels get exact chain-rule probabilities (see
        ``localjudge.labels``). The raw label mass is always reported.

        Args:
            prompt: user message string or list of messages (``raw=True``: whole prompt text).
            labels: score labels; default the integers 1-5. Any integer range or words.
            system: optional system message.
            prefill: optional assistant prefill, e.g. ``"Coherence (1-5):"``.
            raw: no chat template; the caller supplies the prompt format.
            min_mass: minimum raw label mass in [0, 1]; below it ``LowMassError`` is raised.
                Use 0 to get every distribution (the mass is still reported).
            prune_below: see ``DEFAULT_PRUNE_BELOW``.
            boundary: ``"prefix"`` (default) or ``"all"``; see ``localjudge.labels``.
            temperature: read the distribution of ``softmax(logits / T)`` (T > 0; default 1,
                the model's own distribution); use the T you would sample at to compare
                with ``sample_scores``.

        Returns:
            ``ScoreDistribution`` with probs (renormalised), logprobs (raw, nats), mass,
            argmax, expected value Σ v·p(v) (G-Eval, arXiv 2303.16634 §2), top tokens and
            signature. Deterministic for fixed model bytes, prompt and labels.

        Raises:
            ConfigError: empty prompt, bad labels, or ``min_mass`` outside [0, 1].
            TokenizationError: a label cannot be tokenised or two labels overlap.
            TemplateError: no chat template (without ``raw=True``) or the sandbox refused it.
            ContextOverflowError: the prompt plus the longest label does not fit in n_ctx.
            LowMassError: raw label mass below ``min_mass`` (the distribution is attached).
            BackendError: inference failed.

        Example:
            >>> from localjudge.backends.fake import FakeBackend
            >>> fb = FakeBackend.digits(next_probs={"4": 0.75, "5": 0.25})
            >>> d = fb.score_distribution("Rate it.")
            >>> d.argmax, d.expected, d.mass
            ('4', 4.25, 1.0)
        """
        check_min_mass(min_mass)
        if not (isinstance(prune_below, (int, float)) and 0.0 <= float(prune_below) < 1.0):
            raise ConfigError(f"prune_below must be a number in [0, 1), got {prune_below!r}")
        if boundary not in ("prefix", "all"):
            raise ConfigError(f"boundary must be 'prefix' or 'all', got {boundary!r}")
        _check_temperature(temperature, allow_zero=False)
        label_map = self.resolve_labels(labels)
        text = self.render(prompt, system=system, prefill=prefill, raw=raw)
        ids = self._encode_prompt(text)
        self._check_context(len(ids), label_map.max_len)
        t = float(temperature)
        root = self._tempered(ids, (), t)
        lp = label_probabilities(
            label_map,
            root,
            lambda suffix: self._tempered(ids, suffix, t),
            extend_masks=self._extend_masks(),
            prune_below=float(prune_below),
            boundary=boundary,
        )
        k = min(N_TOP_TOKENS, root.shape[0])
        top_ids = np.argpartition(-root, k - 1)[:k]
        top_ids = top_ids[np.argsort(-root[top_ids], kind="stable")]
        texts = self._vocab()
        top = [
            TopToken(int(t), texts[int(t)] or self._display_text(int(t)), float(math.exp(root[t])),
                     int(t) in label_map.first_token_ids)
            for t in top_ids
        ]
        params = {
            "min_mass": float(min_mass),
            "prefill": prefill,
            "system": system is not None,
            "raw": raw,
            "prune_below": float(prune_below),
            "boundary": boundary,
            "temperature": t,
        }
        dist = ScoreDistribution.from_label_probs(
            label_map.labels,
            lp.probs,
            min_mass=float(min_mass),
            top_tokens=top,
            pruned_mass=lp.pruned_mass,
            n_prompt_tokens=len(ids),
            prompt_sha256=sha256_text(text),
            signature=self.signature(label_map.labels, raw=raw, params=params),
        )
        if dist.mass < float(min_mass) or dist.mass == 0.0:
            # mass 0 has no distribution to renormalise: an error even with min_mass=0
            raise LowMassError(dist, float(min_mass))
        return dist

    def _extend_masks(self) -> dict[str, np.ndarray]:
        if self._masks is None:
            self._masks = extend_masks_from_texts(self._vocab())
        return self._masks

    def _tempered(self, ids: Sequence[int], suffix: Sequence[int], t: float) -> np.ndarray:
        lp = self._logprobs_after(ids, suffix)
        if t == 1.0:
            return lp
        # shift before dividing: (lp - max)/t stays finite for tiny t (lp - max <= 0)
        return log_softmax((lp - float(np.max(lp))) / t)

    @property
    def family(self) -> str | None:
        """Model family (``"qwen2"``, ``"smollm2"``, ``"gemma3"``...) from the model's manifest,
        or as set by the caller (``backend.family = "llama"``); None when unknown. Juries use
        it to warn about single-family panels and self-preference."""
        fam: str | None = getattr(self, "_family", None)
        if fam:
            return fam
        from localjudge.models import load_manifest

        try:
            return load_manifest(str(self._signature_fields()["model"])).family
        except ConfigError:
            return None

    @family.setter
    def family(self, value: str | None) -> None:
        self._family = value

    def sample_scores(
        self,
        prompt: Prompt,
        labels: Iterable[str | int] | range | None = None,
        *,
        n: int,
        temperature: float = 1.0,
        seed: int = 0,
        system: str | None = None,
        prefill: str | None = None,
        raw: bool = False,
        boundary: str = "prefix",
    ) -> ScoreSamples:
        """Draw ``n`` real samples of the score from the model's full next-token distribution.

        Each draw samples tokens from ``softmax(logits / T)`` over the whole vocabulary --
        never from the renormalised label distribution -- and reads the label they spell with
        the same trie and boundary rule as ``score_distribution`` (``localjudge.labels``).
        Draws that spell no label are counted (``n_non_label``) and their texts reported, not
        dropped. The exact distribution at the same T is computed in the same call, so the
        sampled mean can be compared with the expectation in SEM units.

        Args:
            prompt, labels, system, prefill, raw, boundary: as in ``score_distribution``.
            n: number of draws (>= 1).
            temperature: T > 0.
            seed: seed of the local ``numpy.random.default_rng``; deterministic for fixed
                model bytes, prompt and seed.

        Returns:
            ``ScoreSamples`` (draws, histogram, mean, sd, SEM for k = 1, 3, 5 and n, the exact
            expectation at T and the gap in SEM units).

        Raises:
            ConfigError: bad ``n`` or ``temperature``; as ``score_distribution`` otherwise.
        """
        check_int("n", n, 1)
        check_seed(seed)
        _check_temperature(temperature, allow_zero=False)
        t = float(temperature)
        exact = self.score_distribution(prompt, labels, system=system, prefill=prefill,
                                        raw=raw, min_mass=0.0, boundary=boundary,
                                        temperature=t)
        label_map = self.resolve_labels(labels)
        ids = self._encode_prompt(self.render(prompt, system=system, prefill=prefill, raw=raw))
        cdfs: dict[tuple[int, ...], np.ndarray] = {}

        def cdf_after(suffix: tuple[int, ...]) -> np.ndarray:
            if suffix not in cdfs:
                cdfs[suffix] = np.cumsum(np.exp(self._tempered(ids, suffix, t)))
            return cdfs[suffix]

        rng = np.random.default_rng(seed)
        draws: list[str | None] = []
        other: dict[str, int] = {}
        texts = self._vocab()
        for _ in range(n):
            lab, toks = sample_label(label_map, cdf_after, rng,
                                     extend_masks=self._extend_masks(), boundary=boundary)
            draws.append(lab)
            if lab is None:
                key = "".join(texts[i] or self._display_text(i) for i in toks)
                other[key] = other.get(key, 0) + 1
        return ScoreSamples.from_draws(exact, draws, other, temperature=t, seed=seed)

    def _check_context(self, n_prompt: int, n_extra: int, what: str = "the longest label"
                       ) -> None:
        if n_prompt + n_extra > self.n_ctx:
            raise ContextOverflowError(
                n_prompt_tokens=n_prompt, n_needed_tokens=n_prompt + n_extra, n_ctx=self.n_ctx,
                what=what,
            )

    def count_tokens(self, prompt: Prompt, *, system: str | None = None,
                     prefill: str | None = None, raw: bool = False) -> int:
        """Tokens the rendered prompt takes (BOS included)."""
        return len(self._encode_prompt(self.render(prompt, system=system, prefill=prefill,
                                                   raw=raw)))

    def generate(
        self,
        prompt: Prompt,
        *,
        max_tokens: int = 256,
        temperature: float = 0.0,
        seed: int = 0,
        system: str | None = None,
        prefill: str | None = None,
        raw: bool = False,
        stop: Sequence[str] = (),
    ) -> str:
        """Generate text after the rendered prompt (and prefill).

        Greedy at ``temperature == 0``; otherwise samples from ``softmax(logits / T)`` with a
        local ``numpy.random.default_rng(seed)``, so the output is deterministic for fixed
        model bytes, prompt and seed, and identical in algorithm across backends.

        Args:
            prompt, system, prefill, raw: as in ``score_distribution``.
            max_tokens: at most this many new tokens (>= 1).
            temperature: >= 0.
            seed: seed of the local generator.
            stop: strings that end generation (not included in the output); one string is
                one stop sequence.

        Returns:
            The generated text (without the prefill).

        Raises:
            ConfigError: bad ``max_tokens`` / ``temperature`` or empty prompt.
            ContextOverflowError: the prompt plus ``max_tokens`` does not fit in n_ctx.
        """
        check_int("max_tokens", max_tokens, 1)
        _check_temperature(temperature, allow_zero=True)
        check_seed(seed)
        stop = normalize_stop(stop)
        text = self.render(prompt, system=system, prefill=prefill, raw=raw)
        ids = self._encode_prompt(text)
        self._check_context(len(ids), max_tokens, what="max_tokens")
        rng = np.random.default_rng(seed)
        eog = self._eog_ids()
        out: list[int] = []
        for _ in range(max_tokens):
            lp = self._logprobs_after(ids, out)
            if temperature == 0:
                tid = int(np.argmax(lp))
            else:
                z = lp / float(temperature)
                p = np.exp(z - z.max())
                p /= p.sum()
                tid = int(rng.choice(p.shape[0], p=p))
            if tid in eog:
                break
            out.append(tid)
            if stop:
                s = self._decode(out)
                cut = min((s.find(x) for x in stop if x in s), default=-1)
                if cut >= 0:
                    return s[:cut]
        return self._decode(out)
