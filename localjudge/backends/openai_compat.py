"""``OpenAICompatBackend``: the same ``score_distribution`` / ``generate`` API over HTTP.

Talks to any server that speaks the OpenAI API: llama.cpp's ``llama-server``,
``python -m llama_cpp.server`` (llama-cpp-python's ``[server]`` extra) and vLLM (one GPU,
tensor-parallel or multi-node; the client does not care). Two request modes:

* ``"completion"`` (``/v1/completions``): localjudge renders the chat template itself (given as
  ``chat_template=``, or read from llama.cpp's ``/props``), appends the prefill and sends the
  raw text with ``max_tokens=1, logprobs=k``. The distribution is read exactly where the
  in-process backends read it. Labels that continue over several tokens ("10") get a
  continuation request per prefix (prompt text + the token text), the chain rule and the
  boundary rule of ``localjudge.labels``.
* ``"chat"`` (``/v1/chat/completions`` with ``logprobs=true, top_logprobs=k``): the server
  applies its own template. A prefill cannot be appended in general, so it is refused unless
  the caller chose ``chat_prefill="continue"`` (the assistant turn is sent and continued:
  vLLM's ``continue_final_message``) or ``chat_prefill="scan"`` (the prefill is *not* sent;
  the answer is generated greedily for up to ``scan_tokens`` tokens and the distribution is
  read at the first token that starts a label, as DeepEval's G-Eval does). The choice is
  recorded in the signature.

What the server returns is only the top ``k`` tokens (``top_logprobs``), so every result is a
**lower bound**: ``mass`` sums the label tokens among the returned ones, ``pruned_mass`` is the
probability the server did not return (``1 - Σ top-k``, an upper bound on the label mass left
out), and the signature's params say ``mass_bound="lower"``. Label tokens are keyed by token id
where the server returns ids (llama.cpp's ``"id"`` field): two tokens that decode alike are
both counted and none twice (``label_match="id"``). Otherwise the server keys its top-k by
decoded text, where tokens that decode alike may already have been merged
(``label_match="text"``). In both cases a token belongs to a label when its text, with leading
spaces (``" "``, ``"▁"``, ``"Ġ"``) removed, is the label -- the rule of
``localjudge.labels.resolve_label_ids``, without access to the vocabulary.

Transport: the standard library (``urllib.request`` in a ``ThreadPoolExecutor``). It adds no
dependency to the core install, and one blocking request per thread is all a bounded pool of
short requests needs; an async client would only pay off at thousands of requests in flight.
Requests in flight are bounded by ``max_concurrency`` per replica (a semaphore shared by every
caller of this backend; ``base_url`` may list several replicas), each has a timeout, and 429 / 5xx / dropped connections / timeouts are retried
``max_retries`` times with exponential backoff and seeded jitter (``Retry-After`` is honoured,
capped). A request that still fails raises ``BackendError``; ``score_batch`` turns per-item
failures into per-item error records and never into a score.

What does not live here: the DeepEval adapter (``localjudge.integrations.deepeval``), server
start-up (see the README), token-level access (``_tokenize`` etc. raise ``BackendError``: the
tokenizer lives in the server), ``sample_scores`` and ``boundary="all"`` (refused).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from localjudge.backends._batch import BatchRecord, score_batch
from localjudge.backends._http import HttpPool
from localjudge.backends._topk import (
    _Entry,
    _first_label_position,
    _label_probs,
    _never_continue,
    _parse_chat_position,
    _parse_completion_logprobs,
    _short,
    _starts_label,
    normalize_token_text,
)
from localjudge.backends.base import (
    DEFAULT_MIN_MASS,
    DEFAULT_PRUNE_BELOW,
    N_TOP_TOKENS,
    Backend,
    Prompt,
    _check_temperature,
    check_int,
    check_min_mass,
    check_seed,
    normalize_stop,
)
from localjudge.errors import BackendError, ConfigError, LowMassError
from localjudge.labels import LabelMap, _Node, normalize_labels
from localjudge.signature import Signature, sha256_json, sha256_text
from localjudge.templates import build_messages
from localjudge.types import ScoreDistribution, TopToken, to_messages
from localjudge.version import package_versions

__all__ = ["BatchRecord", "OpenAICompatBackend", "normalize_token_text"]

logger = logging.getLogger(__name__)

DEFAULT_TOP_LOGPROBS = 20
"""Top tokens requested per position (OpenAI's chat API allows at most 20)."""

DEFAULT_MAX_CONCURRENCY = 4
"""Requests in flight per backend (match the server's parallel slots; 4 is llama-server's
default ``--parallel`` in recent releases)."""

DEFAULT_TIMEOUT_S = 120.0
"""Per-request timeout in seconds (a cold CPU server can take tens of seconds per prompt)."""

DEFAULT_MAX_RETRIES = 3
"""Retries after the first attempt on 429 / 5xx / dropped connections / timeouts."""

DEFAULT_BACKOFF_S = 0.5
"""First backoff in seconds; doubles each retry, plus up to 50 % seeded jitter."""

DEFAULT_SCAN_TOKENS = 16
"""``chat_prefill="scan"``: answer tokens searched for the first label token."""

_OWN_FIELDS = frozenset({
    "model", "prompt", "messages", "max_tokens", "temperature", "logprobs", "top_logprobs",
    "echo", "stream", "seed", "stop", "continue_final_message", "add_generation_prompt",
    # servers' aliases of the above, and fields that change what the returned logprobs mean
    "n_probs", "n_predict", "max_completion_tokens", "post_sampling_probs", "n", "best_of",
    "logit_bias", "prompt_logprobs"})


class OpenAICompatBackend(Backend):
    """A judge model served behind an OpenAI-compatible HTTP API.

    Args:
        base_url: server root, e.g. ``"http://127.0.0.1:8080"`` or ``".../v1"`` (a trailing
            ``/v1`` is accepted), or a list of roots: replicas of one model. Each request
            goes to the replica with the fewest requests in flight, and a retry goes to
            another replica than the one that just failed. In ``mode="auto"`` every replica's
            ``/props`` template must be the same (a score must not depend on routing).
        model: the served model name sent in each request (vLLM: ``--served-model-name``).
        api_key: sent as ``Authorization: Bearer ...``; never recorded.
        mode: ``"completion"``, ``"chat"`` or ``"auto"`` (completion when a chat template is
            known -- given, or from llama.cpp's ``/props`` -- else chat).
        chat_template: the model's Jinja chat template for completion mode (e.g.
            ``LlamaCppBackend(...).chat_template``); rendered in localjudge's sandbox.
        bos_token, eos_token: texts exposed to the template as ``bos_token`` / ``eos_token``.
        chat_prefill: chat mode with a prefill: ``"error"`` (default: refuse), ``"continue"``
            (send it as the final assistant turn and ask the server to continue it: vLLM's
            ``continue_final_message``) or ``"scan"`` (not sent; read the first label token of
            a greedy answer of up to ``scan_tokens`` tokens).
        top_logprobs: top tokens requested per position (1-20 for chat; the server may cap).
        max_concurrency: requests in flight at once per replica (>= 1; match the server's
            ``--parallel``), shared by all callers.
        timeout_s: per-request timeout in seconds (> 0).
        max_retries: retries after the first attempt (>= 0).
        backoff_s: first backoff in seconds (>= 0), doubled per retry, plus seeded jitter.
        seed: seed of the jitter generator (backoff timing only; never changes results).
        n_ctx: the server's context window in tokens if known (0: unknown, the server checks).
        model_sha256: sha256 of the served weights if known (recorded in the signature).
        scan_tokens: see ``chat_prefill``.
        extra_body: server-specific request fields merged into every request body (e.g.
            llama.cpp's ``{"cache_prompt": False}``, vLLM's ``{"top_k": -1}``); JSON only,
            recorded in the signature's params. Keys localjudge sets itself are refused.

    Raises:
        ConfigError: bad argument values, ``mode="completion"`` without a chat template, or
            an unreachable server when ``mode="auto"`` needs to ask it for its template.
    """

    name: ClassVar[str] = "openai"

    thread_safe: ClassVar[bool] = True
    """Safe to call from several threads at once (requests are independent)."""

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        *,
        mode: str = "auto",
        chat_template: str | None = None,
        bos_token: str = "",
        eos_token: str = "",
        chat_prefill: str = "error",
        top_logprobs: int = DEFAULT_TOP_LOGPROBS,
        max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_retries: int = DEFAULT_MAX_RETRIES,
        backoff_s: float = DEFAULT_BACKOFF_S,
        seed: int = 0,
        n_ctx: int = 0,
        model_sha256: str = "",
        scan_tokens: int = DEFAULT_SCAN_TOKENS,
        extra_body: Mapping[str, Any] | None = None,
    ) -> None:
        urls = [base_url] if isinstance(base_url, str) else base_url
        if isinstance(urls, (bytes, bytearray)) or not isinstance(urls, Sequence) or not urls:
            raise ConfigError(f"base_url must be an http(s) URL or a non-empty list of them, "
                              f"got {base_url!r}")
        for u in urls:
            if not isinstance(u, str) or not u.startswith(("http://", "https://")):
                raise ConfigError(f"base_url must be an http(s) URL, got {u!r}")
        roots = [u.rstrip("/").removesuffix("/v1") for u in urls]
        if len(set(roots)) != len(roots):
            raise ConfigError(f"base_url lists the same server twice: {list(urls)}")
        if not isinstance(model, str) or not model:
            raise ConfigError(f"model must be the served model name, got {model!r}")
        if mode not in ("auto", "completion", "chat"):
            raise ConfigError(f"mode must be 'auto', 'completion' or 'chat', got {mode!r}")
        for name, v in (("bos_token", bos_token), ("eos_token", eos_token),
                        ("model_sha256", model_sha256)):
            if not isinstance(v, str):
                raise ConfigError(f"{name} must be a string, got {v!r}")
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ConfigError(f"seed must be an int, got {seed!r}")
        if chat_prefill not in ("error", "continue", "scan"):
            raise ConfigError(
                f"chat_prefill must be 'error', 'continue' or 'scan', got {chat_prefill!r}")
        check_int("top_logprobs", top_logprobs, 1)
        check_int("max_concurrency", max_concurrency, 1)
        check_int("max_retries", max_retries, 0)
        check_int("n_ctx", n_ctx, 0)
        check_int("scan_tokens", scan_tokens, 1)
        if not (isinstance(timeout_s, (int, float)) and not isinstance(timeout_s, bool)
                and timeout_s > 0 and math.isfinite(timeout_s)):
            raise ConfigError(f"timeout_s must be a finite number > 0, got {timeout_s!r}")
        if not (isinstance(backoff_s, (int, float)) and not isinstance(backoff_s, bool)
                and 0 <= backoff_s < 3600):
            raise ConfigError(f"backoff_s must be a number in [0, 3600), got {backoff_s!r}")
        if not isinstance(extra_body, (Mapping, type(None))):
            raise ConfigError(f"extra_body must be a mapping, got {extra_body!r}")
        raw_extra = dict(extra_body or {})
        try:  # a deep, plain-JSON copy: later changes to the caller's dict change nothing
            extra = json.loads(json.dumps(raw_extra, allow_nan=False))
        except (TypeError, ValueError) as err:
            raise ConfigError(f"extra_body must be JSON-serialisable: {err}") from err
        if extra != raw_extra:
            raise ConfigError(f"extra_body must be plain JSON (string keys, lists not tuples): "
                              f"{raw_extra!r}")
        clash = sorted(set(extra) & _OWN_FIELDS)
        if clash:
            raise ConfigError(f"extra_body may not set fields localjudge sends itself or "
                              f"that change what the logprobs mean: {clash}")
        self.extra_body = extra
        if api_key is not None:
            if not isinstance(api_key, str) or not api_key:
                raise ConfigError("api_key must be a non-empty string or None")
            try:
                api_key.encode("latin-1")
            except UnicodeEncodeError as err:
                raise ConfigError("api_key has characters an HTTP header cannot carry "
                                  f"(position {err.start})") from err
        self.base_urls: tuple[str, ...] = tuple(roots)
        """Server roots (one per replica), without a trailing ``/v1``."""
        self.base_url = roots[0]
        self.model = model
        self.top_logprobs = top_logprobs
        self.max_concurrency = max_concurrency
        self.chat_prefill = chat_prefill
        self.scan_tokens = scan_tokens
        self._n_ctx = n_ctx
        self._model_sha256 = model_sha256
        self._bos_text = bos_token
        self._eos = eos_token
        self._http = HttpPool(roots, api_key=api_key, max_concurrency=max_concurrency,
                              timeout_s=timeout_s, max_retries=max_retries,
                              backoff_s=backoff_s, seed=seed, extra_body=self.extra_body)
        self._template_source = "given" if chat_template else "none"
        self._server_info: dict[str, str] = {}
        if mode == "auto" and not chat_template:
            all_props = [self._http.props(u) for u in roots]
            props = all_props[0]
            keys = ("chat_template", "bos_token", "eos_token")
            differ = [u for u, q in zip(roots, all_props)
                      if any(q.get(k) != props.get(k) for k in keys)]
            if differ:
                raise ConfigError(
                    f"replicas serve different chat templates or BOS/EOS tokens ({differ} "
                    f"differ from {roots[0]}): a score would depend on which replica answered")
            info = {k: str(props[src]) for k, src in
                    (("model_file", "model_path"), ("build", "build_info")) if props.get(src)}
            if "model_file" in info:
                info["model_file"] = Path(info["model_file"]).name
            self._server_info = info
            if props.get("chat_template"):
                chat_template = str(props["chat_template"])
                self._template_source = "server_props"
                self._bos_text = bos_token or str(props.get("bos_token") or "")
                self._eos = eos_token or str(props.get("eos_token") or "")
        if mode == "auto":
            mode = "completion" if chat_template else "chat"
        if mode == "completion" and not chat_template:
            raise ConfigError(
                "mode='completion' needs the model's chat template: pass chat_template= "
                "(e.g. LlamaCppBackend(path).chat_template) or use mode='chat'")
        self.mode = mode
        self._template = chat_template
        self._label_cache: dict[tuple[str, ...], LabelMap] = {}

    @property
    def timeout_s(self) -> float:
        """Per-attempt deadline in seconds (held by the request pool)."""
        return self._http.timeout_s

    @property
    def max_retries(self) -> int:
        """Retries after the first attempt."""
        return self._http.max_retries

    @property
    def backoff_s(self) -> float:
        """First retry backoff in seconds."""
        return self._http.backoff_s

    @property
    def n_requests(self) -> int:
        """HTTP attempts made (retries included), for benchmarks and tests."""
        return self._http.n_requests

    @property
    def n_retries(self) -> int:
        """Attempts that were retries."""
        return self._http.n_retries

    # ---- Backend's token-level interface: the tokenizer lives in the server ------------------
    @property
    def n_ctx(self) -> int:
        """The server's context window if given, else 0 (unknown; the server enforces it)."""
        return self._n_ctx

    @property
    def n_vocab(self) -> int:
        """Unknown over HTTP: 0."""
        return 0

    @property
    def chat_template(self) -> str | None:
        """The template rendered in completion mode, or None in chat mode."""
        return self._template if self.mode == "completion" else None

    def _no_tokenizer(self) -> BackendError:
        return BackendError("OpenAICompatBackend has no local tokenizer: token-level access "
                            "is not available over HTTP")

    def _tokenize(self, text: str, *, special: bool) -> list[int]:
        raise self._no_tokenizer()

    def _decode(self, ids: Sequence[int]) -> str:
        raise self._no_tokenizer()

    def _vocab_texts(self) -> list[str]:
        raise self._no_tokenizer()

    def _special_ids(self) -> set[int]:
        raise self._no_tokenizer()

    def _eog_ids(self) -> set[int]:
        raise self._no_tokenizer()

    def _bos(self) -> tuple[int | None, str]:
        return None, self._bos_text

    def _eos_text(self) -> str:
        return self._eos

    def _next_token_logprobs(self, token_ids: Sequence[int]) -> np.ndarray:
        raise self._no_tokenizer()

    def _signature_fields(self) -> dict[str, Any]:
        return {"backend_version": "http", "model": self.model,
                "model_sha256": self._model_sha256, "versions": package_versions("numpy")}

    # ---- labels and signature -------------------------------------------------------------
    def resolve_labels(self, labels: Iterable[str | int] | range | None = None) -> LabelMap:
        """Validate labels; over HTTP they are matched at run time, so no token ids are known.

        The returned map has empty spellings; its ``sha256`` covers the labels and the
        matching rule (normalised token text, see the module docstring).

        Raises:
            ConfigError: malformed label list (see ``normalize_labels``).
        """
        key = normalize_labels(labels)
        if key not in self._label_cache:
            rule = "openai-topk:text-lstrip-space"
            self._label_cache[key] = LabelMap(
                labels=key, spellings={lab: () for lab in key}, first_token_ids=frozenset(),
                max_len=1, sha256=sha256_json({"labels": list(key), "rule": rule}),
                _root=_Node())
        return self._label_cache[key]

    def signature(
        self,
        labels: Iterable[str | int] | range | None = None,
        *,
        raw: bool = False,
        params: Mapping[str, Any] | None = None,
    ) -> Signature:
        """Provenance: model name, template sha256 (``"server"`` in chat mode: the server
        applied a template localjudge cannot see), labels, request mode and parameters."""
        lm = self.resolve_labels(labels)
        if raw:
            tmpl = "raw"
        elif self.mode == "completion":
            tmpl = sha256_text(self._template or "")
        else:
            tmpl = "server"
        p = {"mode": self.mode, "top_logprobs": self.top_logprobs,
             "template_source": self._template_source}
        if self._server_info:  # llama.cpp's /props: served file name and build
            p["server"] = dict(self._server_info)
        if self.extra_body:
            p["extra_body"] = self.extra_body
        if self.mode == "chat":
            p["chat_prefill"] = self.chat_prefill
        p.update(params or {})
        return Signature(
            backend=self.name, backend_version="http", model=self.model,
            model_sha256=self._model_sha256, template_sha256=tmpl,
            label_map={lab: [] for lab in lm.labels}, label_map_sha256=lm.sha256,
            params=p, versions=package_versions("numpy"))

    # ---- HTTP -----------------------------------------------------------------------------
    # ---- reading top-k ------------------------------------------------------------------------
    def _completion_topk(self, text: str) -> list[_Entry]:
        body = {"model": self.model, "prompt": text, "max_tokens": 1, "temperature": 0.0,
                "logprobs": self.top_logprobs, "echo": False, "stream": False}
        out = self._http.post("/v1/completions", body)
        try:
            lp = out["choices"][0]["logprobs"]
        except (KeyError, IndexError, TypeError) as err:
            raise BackendError(f"completion response has no logprobs: {_short(out)}") from err
        return _parse_completion_logprobs(lp, self.top_logprobs)

    def _chat_topk(self, messages: list[dict[str, str]], continue_final: bool,
                   max_tokens: int) -> list[list[_Entry]]:
        body: dict[str, Any] = {"model": self.model, "messages": messages,
                                "max_tokens": max_tokens, "temperature": 0.0,
                                "logprobs": True, "top_logprobs": self.top_logprobs,
                                "stream": False}
        if continue_final:
            body["continue_final_message"] = True
            body["add_generation_prompt"] = False
        out = self._http.post("/v1/chat/completions", body)
        try:
            content = out["choices"][0]["logprobs"]["content"]
        except (KeyError, IndexError, TypeError) as err:
            raise BackendError(f"chat response has no logprobs: {_short(out)}") from err
        if not content:
            raise BackendError(f"chat response has empty logprobs: {_short(out)}")
        return [_parse_chat_position(pos) for pos in content]

    # ---- public API -------------------------------------------------------------------------
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
        """Label distribution from the server's top-k logprobs (a lower bound; see module doc).

        Args:
            prompt, labels, system, prefill, raw, min_mass, prune_below: as in
                ``Backend.score_distribution``.
            boundary: only ``"prefix"`` (``"all"`` needs the full vocabulary).
            temperature: only 1.0 (servers return the model's own logprobs).

        Returns:
            ``ScoreDistribution``: ``mass`` = label mass among the returned tokens (a lower
            bound on the exact mass), ``pruned_mass`` = probability the server did not return
            (+ pruned prefixes), ``top_tokens`` the returned tokens (``token_id`` -1 when the
            server gives no ids), signature params ``label_match`` (``"id"`` or ``"text"``),
            ``mass_bound="lower"``, ``mode``, ``top_logprobs``. ``n_prompt_tokens`` is 0
            (the tokenizer is in the server). Deterministic for a deterministic server.

        Raises:
            ConfigError: bad arguments, ``boundary="all"``, ``temperature != 1``, a prefill
                in chat mode with ``chat_prefill="error"``, or labels that need continuation
                requests ("1" and "10") in chat mode.
            LowMassError: returned label mass below ``min_mass`` (distribution attached).
            BackendError: the request failed after retries, or the response has no logprobs.
        """
        check_min_mass(min_mass)
        if not (isinstance(prune_below, (int, float)) and 0.0 <= float(prune_below) < 1.0):
            raise ConfigError(f"prune_below must be a number in [0, 1), got {prune_below!r}")
        if boundary != "prefix":
            raise ConfigError(f"boundary={boundary!r} needs the full vocabulary; "
                              "OpenAICompatBackend supports only 'prefix'")
        if temperature != 1.0:
            raise ConfigError(f"temperature must be 1.0 over HTTP, got {temperature!r}")
        lm = self.resolve_labels(labels)
        labs = lm.labels
        read_at: str | None = None
        if self.mode == "completion" or raw:
            text = self.render(prompt, system=system, prefill=prefill, raw=raw)

            def topk(suffix: str) -> list[_Entry]:
                return self._completion_topk(text + suffix)

            probs, rest, pruned, match, top = _label_probs(labs, topk, float(prune_below))
            prompt_hash = sha256_text(text)
        else:
            messages, continue_final = self._chat_messages(prompt, system, prefill)
            if any(a != b and b.startswith(a) for a in labs for b in labs):
                raise ConfigError(
                    f"labels {list(labs)} include a label that is a prefix of another; its "
                    "exact probability needs continuation requests: use mode='completion'")
            scan = prefill is not None and self.chat_prefill == "scan"
            positions = self._chat_topk(messages, continue_final,
                                        self.scan_tokens if scan else 1)
            idx = _first_label_position(positions, labs) if scan else 0
            if idx is None:
                idx = 0
                read_at = "first_token:no_label_token_in_answer"
            elif scan:
                read_at = f"first_label_token:{idx}"
            entries = positions[idx]
            probs, rest, pruned, match, top = _label_probs(
                labs, lambda s: entries if s == "" else _never_continue(), float(prune_below))
            prompt_hash = sha256_json(messages)
        params: dict[str, Any] = {
            "min_mass": float(min_mass), "prefill": prefill, "system": system is not None,
            "raw": raw, "prune_below": float(prune_below), "boundary": boundary,
            "temperature": 1.0, "label_match": match, "mass_bound": "lower"}
        if read_at is not None:
            params["read_at"] = read_at
        top_tokens = [TopToken(-1 if e.token_id is None else e.token_id, e.text,
                               math.exp(e.logprob), _starts_label(e.text, labs))
                      for e in top[:N_TOP_TOKENS]]
        dist = ScoreDistribution.from_label_probs(
            labs, probs, min_mass=float(min_mass), top_tokens=top_tokens,
            pruned_mass=rest + pruned, n_prompt_tokens=0, prompt_sha256=prompt_hash,
            signature=self.signature(labs, raw=raw, params=params))
        if dist.mass < float(min_mass):
            raise LowMassError(dist, float(min_mass))
        return dist

    def _chat_messages(self, prompt: Prompt, system: str | None,
                       prefill: str | None) -> tuple[list[dict[str, str]], bool]:
        msgs = [m.to_dict() for m in build_messages(to_messages(prompt), system=system)]
        if msgs[-1]["role"] == "assistant":
            raise ConfigError("the last message is an assistant turn; pass it as prefill=")
        if prefill is None:
            return msgs, False
        if self.chat_prefill == "error":
            raise ConfigError(
                f"chat mode cannot append the prefill {prefill!r}: pass chat_template= for "
                "completion mode, or choose chat_prefill='continue' (vLLM) or 'scan'")
        if self.chat_prefill == "continue":
            return [*msgs, {"role": "assistant", "content": prefill}], True
        return msgs, False

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
        """Generate text on the server (greedy at ``temperature == 0``; ``seed`` is sent).

        Args:
            prompt, system, prefill, raw, stop: as in ``Backend.generate``.
            max_tokens: at most this many new tokens (>= 1).
            temperature: >= 0.
            seed: sent as the request's ``seed`` (servers that honour it are deterministic).

        Returns:
            The generated text (without the prefill).

        Raises:
            ConfigError: bad arguments, or a prefill in chat mode without
                ``chat_prefill="continue"``.
            BackendError: the request failed after retries or the response has no text.
        """
        check_int("max_tokens", max_tokens, 1)
        _check_temperature(temperature, allow_zero=True)
        check_seed(seed)
        stops = normalize_stop(stop)
        common: dict[str, Any] = {"model": self.model, "max_tokens": max_tokens,
                                  "temperature": float(temperature), "seed": seed,
                                  "stream": False}
        if stops:
            common["stop"] = stops
        if self.mode == "completion" or raw:
            text = self.render(prompt, system=system, prefill=prefill, raw=raw)
            out = self._http.post("/v1/completions", {**common, "prompt": text})
            key: tuple[str, ...] = ("text",)
        else:
            if prefill is not None and self.chat_prefill != "continue":
                raise ConfigError(
                    f"chat mode cannot generate after the prefill {prefill!r} unless "
                    "chat_prefill='continue'")
            msgs, cont = self._chat_messages(prompt, system, prefill)
            body = {**common, "messages": msgs}
            if cont:
                body.update(continue_final_message=True, add_generation_prompt=False)
            out = self._http.post("/v1/chat/completions", body)
            key = ("message", "content")
        try:
            v: Any = out["choices"][0]
            for k in key:
                v = v[k]
        except (KeyError, IndexError, TypeError) as err:
            raise BackendError(f"response has no generated text: {_short(out)}") from err
        if not isinstance(v, str):
            raise BackendError(f"response has no generated text: {_short(out)}")
        return v

    def sample_scores(self, *args: Any, **kwargs: Any) -> Any:
        """Not available over HTTP (sampling from the full distribution needs every logit).

        Raises:
            ConfigError: always.
        """
        raise ConfigError("sample_scores needs the full next-token distribution; use an "
                          "in-process backend (llama_cpp, hf)")

    # ---- batches --------------------------------------------------------------------------------
    def score_batch(
        self,
        prompts: Sequence[Prompt],
        labels: Iterable[str | int] | range | None = None,
        *,
        out: str | Path | None = None,
        resume: bool = True,
        show_progress: bool = False,
        **kwargs: Any,
    ) -> list[BatchRecord]:
        """Score many prompts concurrently (``max_concurrency`` requests in flight per replica).

        See ``localjudge.backends._batch.score_batch`` for the arguments, the per-item error
        records, the resumable JSONL (``out``, ``resume``) and the errors raised.
        """
        return score_batch(self, prompts, labels, out=out, resume=resume,
                           show_progress=show_progress,
                           max_workers=self.max_concurrency * len(self.base_urls), **kwargs)


