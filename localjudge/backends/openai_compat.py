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

import email.utils
import http.client
import inspect
import json
import logging
import math
import random
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from localjudge.backends.base import (
    DEFAULT_MIN_MASS,
    DEFAULT_PRUNE_BELOW,
    N_TOP_TOKENS,
    Backend,
    Prompt,
    check_min_mass,
    check_seed,
    normalize_stop,
)
from localjudge.errors import BackendError, ConfigError, LocalJudgeError, LowMassError
from localjudge.labels import LabelMap, _Node, normalize_labels
from localjudge.records import read_jsonl_records
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

MAX_RETRY_AFTER_S = 30.0
"""Cap on a server's ``Retry-After`` in seconds."""

MAX_BODY_BYTES = 64 << 20
"""Largest response body read (bytes); a larger one is a failed attempt."""

REPLICA_COOLDOWN_S = 1.0
"""Seconds a replica sits out after a failed attempt (doubling per consecutive failure)."""

MAX_REPLICA_COOLDOWN_S = 30.0
"""Cap on a replica's cooldown in seconds."""

DEFAULT_SCAN_TOKENS = 16
"""``chat_prefill="scan"``: answer tokens searched for the first label token."""

_OWN_FIELDS = frozenset({
    "model", "prompt", "messages", "max_tokens", "temperature", "logprobs", "top_logprobs",
    "echo", "stream", "seed", "stop", "continue_final_message", "add_generation_prompt",
    # servers' aliases of the above, and fields that change what the returned logprobs mean
    "n_probs", "n_predict", "max_completion_tokens", "post_sampling_probs", "n", "best_of",
    "logit_bias", "prompt_logprobs"})
_RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
_SPACE_MARKS = ("▁", "Ġ")


def normalize_token_text(text: str) -> str:
    """A token's text with leading spaces removed (``" 5"``, ``"▁5"``, ``"Ġ5"`` -> ``"5"``).

    Only spaces are removed, as in ``localjudge.labels.resolve_label_ids``; a newline or tab
    before a digit is a different answer, not a spelling of the label.
    """
    i = 0
    while i < len(text) and (text[i] == " " or text[i] in _SPACE_MARKS):
        i += 1
    return text[i:]


@dataclass(frozen=True)
class _Entry:
    """One returned top token: id (None when the server gives none), text, logprob (nats)."""

    token_id: int | None
    text: str
    logprob: float


@dataclass(frozen=True)
class BatchRecord:
    """One item of ``OpenAICompatBackend.score_batch``: a distribution or an error, never both.

    Attributes:
        index: position of the item in the input (0-based).
        distribution: the distribution, or None on error (kept on ``low_mass``).
        error: error code (``low_mass``, ``backend_error``, ``config_error``...) or None.
        message: the error message or None.
        seconds: wall time of the item in seconds.
        prompt_sha256: sha256 of the item's prompt as given (keys resume: a stored record is
            reused only for the same prompt at the same index).
        config_sha256: sha256 of the batch configuration (labels, keyword arguments, backend
            signature); a resumed file must hold only this configuration's records.
    """

    index: int
    distribution: ScoreDistribution | None
    error: str | None
    message: str | None
    seconds: float
    prompt_sha256: str = ""
    config_sha256: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable dict."""
        return {"index": self.index,
                "distribution": None if self.distribution is None else
                self.distribution.to_dict(),
                "error": self.error, "message": self.message, "seconds": self.seconds,
                "prompt_sha256": self.prompt_sha256, "config_sha256": self.config_sha256}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> BatchRecord:
        """Inverse of ``to_dict``."""
        dist = d.get("distribution")
        return cls(index=int(d["index"]),
                   distribution=None if dist is None else ScoreDistribution.from_dict(dist),
                   error=d.get("error"), message=d.get("message"),
                   seconds=float(d.get("seconds", 0.0)),
                   prompt_sha256=str(d.get("prompt_sha256", "")),
                   config_sha256=str(d.get("config_sha256", "")))


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
        _check_int("top_logprobs", top_logprobs, 1)
        _check_int("max_concurrency", max_concurrency, 1)
        _check_int("max_retries", max_retries, 0)
        _check_int("n_ctx", n_ctx, 0)
        _check_int("scan_tokens", scan_tokens, 1)
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
        self._api_key = api_key
        self.top_logprobs = top_logprobs
        self.max_concurrency = max_concurrency
        self.timeout_s = float(timeout_s)
        self.max_retries = max_retries
        self.backoff_s = float(backoff_s)
        self.chat_prefill = chat_prefill
        self.scan_tokens = scan_tokens
        self._n_ctx = n_ctx
        self._model_sha256 = model_sha256
        self._bos_text = bos_token
        self._eos = eos_token
        self._sem = threading.BoundedSemaphore(max_concurrency * len(roots))
        self._in_flight = [0] * len(roots)
        self._fails = [0] * len(roots)
        self._cool_until = [0.0] * len(roots)
        self._route_lock = threading.Lock()
        self._next = 0
        self._rng = random.Random(seed)
        self._rng_lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._template_source = "given" if chat_template else "none"
        self._server_info: dict[str, str] = {}
        if mode == "auto" and not chat_template:
            all_props = [self._server_props(u) for u in roots]
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
        self.n_requests = 0
        """HTTP attempts made (retries included), for benchmarks and tests."""
        self.n_retries = 0
        """Attempts that were retries."""
        self._count_lock = threading.Lock()

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
    def _headers(self) -> dict[str, str]:
        h = {"Content-Type": "application/json"}
        if self._api_key:
            h["Authorization"] = f"Bearer {self._api_key}"
        return h

    def _server_props(self, root: str) -> dict[str, Any]:
        """llama.cpp's ``GET /props`` (chat template, BOS/EOS text), or {} when the server has
        none (404 / 405: not llama.cpp). A 503 (model still loading) is retried until
        ``timeout_s`` has passed.

        Raises:
            ConfigError: the server is unreachable, answers another error status (e.g. 401),
                or still 503 after ``timeout_s``, or its answer is not a JSON object.
        """
        deadline = time.monotonic() + self.timeout_s
        while True:
            req = urllib.request.Request(root + "/props", headers=self._headers())
            try:
                with urllib.request.urlopen(req, timeout=min(self.timeout_s, 10.0)) as r:
                    out: Any = json.loads(r.read(1 << 24).decode("utf-8"))
            except urllib.error.HTTPError as err:
                if err.code in (404, 405):
                    return {}  # not llama.cpp's server: no /props
                if err.code != 503 or time.monotonic() > deadline:
                    raise ConfigError(
                        f"{root}/props answered HTTP {err.code}: {_read_error(err)}") from err
                time.sleep(0.5)  # loading the model
                continue
            except (OSError, ValueError, RecursionError, http.client.HTTPException) as err:
                raise ConfigError(f"cannot read {root}/props: {type(err).__name__}: "
                                  f"{str(err)[:200]}") from err
            if not isinstance(out, dict):
                raise ConfigError(f"{root}/props answered {_short(out)}, not a JSON object")
            bad = [k for k in ("chat_template", "bos_token", "eos_token")
                   if out.get(k) is not None and not isinstance(out[k], str)]
            if bad:
                raise ConfigError(f"{root}/props has non-string {bad}: {_short(out)}")
            return out

    def _sleep_before_retry(self, attempt: int, retry_after: str | None) -> None:
        with self._rng_lock:
            jitter = self._rng.random() * 0.5
        delay = self.backoff_s * (2 ** attempt) * (1.0 + jitter)
        wait = _retry_after_s(retry_after)
        if wait is not None:
            delay = max(delay, min(wait, MAX_RETRY_AFTER_S))
        time.sleep(delay)

    def _read_body(self, r: Any, deadline: float) -> bytes:
        """The response body, read in chunks until ``deadline`` (monotonic seconds).

        Raises:
            TimeoutError: the deadline passed while reading (a server trickling its answer).
            ValueError: the body is larger than ``MAX_BODY_BYTES``.
        """
        sock = getattr(getattr(getattr(r, "fp", None), "raw", None), "_sock", None)
        chunks: list[bytes] = []
        size = 0
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"response not read within timeout_s={self.timeout_s}")
            if sock is not None:
                try:
                    sock.settimeout(left)
                except OSError:  # closed by http.client: the body has been read
                    sock = None
            chunk = r.read1(1 << 16)  # what has arrived: the deadline is checked per chunk
            if not chunk:
                return b"".join(chunks)
            size += len(chunk)
            if size > MAX_BODY_BYTES:
                raise ValueError(f"response body larger than {MAX_BODY_BYTES} bytes")
            chunks.append(chunk)

    def _post(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """POST JSON with bounded concurrency, a per-attempt deadline and retries.

        Each attempt goes to a replica (``_pick_replica``) and must finish -- connect, headers
        and body -- within ``timeout_s``.

        Raises:
            BackendError: a non-retryable HTTP status, or retries exhausted (the message
                names the last failure, its replica and the number of attempts).
        """
        data = json.dumps({**body, **self.extra_body}).encode("utf-8")
        last = ""
        failed: int | None = None
        for attempt in range(self.max_retries + 1):
            retry_after: str | None = None
            with self._count_lock:
                self.n_requests += 1
                self.n_retries += attempt > 0
            i = -1
            ok = False
            try:
                with self._sem:
                    i = self._pick_replica(avoid=failed)
                    try:
                        req = urllib.request.Request(self.base_urls[i] + path, data=data,
                                                     headers=self._headers(), method="POST")
                        deadline = time.monotonic() + self.timeout_s
                        try:
                            with urllib.request.urlopen(req, timeout=self.timeout_s) as r:
                                raw = self._read_body(r, deadline)
                        except urllib.error.HTTPError as err:
                            ok = err.code not in _RETRY_STATUS  # a 4xx is about the request
                            raise
                        ok = True
                    finally:
                        self._release_replica(i, ok)
                out = json.loads(raw.decode("utf-8"))
                if isinstance(out, dict):
                    return out
                last = f"expected a JSON object from {self.base_urls[i]}, got {_short(out)}"
            except urllib.error.HTTPError as err:
                detail = _read_error(err)
                if err.code not in _RETRY_STATUS:
                    raise BackendError(
                        f"server {self.base_urls[i]} answered HTTP {err.code} to POST {path}: "
                        f"{detail}") from err
                last = f"HTTP {err.code} from {self.base_urls[i]}: {detail}"
                retry_after = err.headers.get("Retry-After") if err.headers else None
            except (urllib.error.URLError, http.client.HTTPException, ConnectionError,
                    TimeoutError, OSError, ValueError, RecursionError) as err:
                last = f"{type(err).__name__} from {self.base_urls[i]}: {str(err)[:200]}"
            failed = i
            if attempt < self.max_retries:
                logger.info("POST %s failed (%s); retry %d of %d", path, last, attempt + 1,
                            self.max_retries)
                self._sleep_before_retry(attempt, retry_after)
        where = self.base_url if len(self.base_urls) == 1 else f"{len(self.base_urls)} replicas"
        raise BackendError(
            f"POST {where}{path} failed after {self.max_retries + 1} attempts; last: {last}")

    def _pick_replica(self, avoid: int | None) -> int:
        """The replica to send a request to; counts it as in flight.

        Replicas that failed recently (connection refused, timeout, 5xx) sit out a cooldown
        that doubles with each consecutive failure (``REPLICA_COOLDOWN_S`` up to
        ``MAX_REPLICA_COOLDOWN_S``); among the others, the fewest requests in flight wins,
        round-robin among ties, and ``avoid`` (the replica that just failed this request) is
        skipped when another exists. If every replica is cooling down, the one whose
        cooldown ends first is used.
        """
        with self._route_lock:
            n = len(self.base_urls)
            now = time.monotonic()
            order = [(self._next + k) % n for k in range(n)]
            if avoid is not None and n > 1:
                order.remove(avoid)
            ready = [j for j in order if self._cool_until[j] <= now]
            if ready:
                i = min(ready, key=lambda j: self._in_flight[j])
            else:
                i = min(order, key=lambda j: self._cool_until[j])
            self._in_flight[i] += 1
            self._next = (i + 1) % n
            return i

    def _release_replica(self, i: int, ok: bool) -> None:
        """Count a request to replica ``i`` as finished; start or clear its cooldown."""
        with self._route_lock:
            self._in_flight[i] -= 1
            if ok:
                self._fails[i] = 0
                self._cool_until[i] = 0.0
            else:
                self._fails[i] += 1
                cool = min(MAX_REPLICA_COOLDOWN_S,
                           REPLICA_COOLDOWN_S * 2 ** (self._fails[i] - 1))
                self._cool_until[i] = time.monotonic() + cool

    # ---- reading top-k ------------------------------------------------------------------------
    def _completion_topk(self, text: str) -> list[_Entry]:
        body = {"model": self.model, "prompt": text, "max_tokens": 1, "temperature": 0.0,
                "logprobs": self.top_logprobs, "echo": False, "stream": False}
        out = self._post("/v1/completions", body)
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
        out = self._post("/v1/chat/completions", body)
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
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise ConfigError(f"max_tokens must be an int >= 1, got {max_tokens!r}")
        if not (isinstance(temperature, (int, float)) and not isinstance(temperature, bool)
                and math.isfinite(temperature) and temperature >= 0):
            raise ConfigError(f"temperature must be a finite number >= 0, got {temperature!r}")
        check_seed(seed)
        stops = normalize_stop(stop)
        common: dict[str, Any] = {"model": self.model, "max_tokens": max_tokens,
                                  "temperature": float(temperature), "seed": seed,
                                  "stream": False}
        if stops:
            common["stop"] = stops
        if self.mode == "completion" or raw:
            text = self.render(prompt, system=system, prefill=prefill, raw=raw)
            out = self._post("/v1/completions", {**common, "prompt": text})
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
            out = self._post("/v1/chat/completions", body)
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

        Per-item failures (retries exhausted, low mass, bad responses) become records with
        ``error`` set -- never a crash of the run, never a score. With ``out``, each record is
        appended to a JSONL file as soon as it is made (completion order; ``index`` keys it),
        once per item and run. On Ctrl-C or any exception, queued items are cancelled; the
        records already written stay.

        Args:
            prompts: the items.
            labels: as in ``score_distribution``.
            out: optional JSONL path (appended to).
            resume: with an existing ``out``: keep its successful records (same prompt at the
                same index, same configuration) and score only the rest; failed items are
                scored again and their new record is appended (the last record of an index is
                the one that counts). ``False``: start the file over.
            show_progress: tqdm progress bar on stderr.
            **kwargs: passed to ``score_distribution`` (prefill, system, min_mass, ...).

        Returns:
            One ``BatchRecord`` per prompt, in input order.

        Raises:
            ConfigError: bad prompts, labels or keyword arguments (checked once before any
                request), ``out`` is a folder, or ``out`` holds records of another
                configuration or another prompt at some index (resuming would mix them).
        """
        if isinstance(prompts, (str, bytes)) or not isinstance(prompts, Sequence):
            raise ConfigError(f"prompts must be a sequence of prompts (a list), got "
                              f"{type(prompts).__name__}: {_short_repr(prompts)}")
        try:
            inspect.signature(self.score_distribution).bind("prompt", labels, **kwargs)
        except TypeError as err:
            raise ConfigError(f"score_batch: {err} (keyword arguments go to "
                              f"score_distribution)") from err
        if "min_mass" in kwargs:
            check_min_mass(kwargs["min_mass"])
        if out is not None and Path(out).is_dir():
            raise ConfigError(f"out must be a JSONL file path, got the folder {str(out)!r}")
        key = self.resolve_labels(labels).labels
        try:
            config = sha256_json({"labels": list(key), "kwargs": kwargs,
                                  "signature": self.signature(key).to_dict()})
        except TypeError as err:
            raise ConfigError(f"score_batch keyword arguments must be JSON values: {err}") \
                from None
        hashes = []
        for i, pr in enumerate(prompts):
            try:
                hashes.append(sha256_json([m.to_dict() for m in to_messages(pr)]))
            except (ConfigError, TypeError, ValueError) as err:
                raise ConfigError(f"prompt {i} is not a prompt: {err}") from None
        records: dict[int, BatchRecord] = {}
        path = Path(out) if out is not None else None
        if path is not None and path.exists() and resume:
            for d in read_jsonl_records(path):
                try:
                    r = BatchRecord.from_dict(d)
                except (KeyError, TypeError, ValueError) as err:
                    raise ConfigError(f"{path} holds a record that is not a score_batch record "
                                      f"({type(err).__name__}: {err})") from None
                if r.config_sha256 != config:
                    raise ConfigError(
                        f"{path} holds records of another configuration (labels, arguments or "
                        "backend); resuming would mix them. Use a new file or resume=False")
                if not (0 <= r.index < len(prompts)) or r.prompt_sha256 != hashes[r.index]:
                    raise ConfigError(
                        f"{path} holds a record for index {r.index} of a different prompt "
                        "list; use a new file or resume=False")
                if r.error is None:
                    records[r.index] = r
                else:
                    records.pop(r.index, None)
        elif path is not None and path.exists():
            path.unlink()  # resume=False: start over
        todo = [i for i in range(len(prompts)) if i not in records]
        fh = None
        lock = threading.Lock()
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            fh = path.open("a", encoding="utf-8")

        def one(i: int) -> BatchRecord:
            t0 = time.perf_counter()
            try:
                d = self.score_distribution(prompts[i], key, **kwargs)
                return BatchRecord(i, d, None, None, time.perf_counter() - t0,
                                   hashes[i], config)
            except LowMassError as err:
                return BatchRecord(i, err.distribution, err.code, str(err),
                                   time.perf_counter() - t0, hashes[i], config)
            except LocalJudgeError as err:
                return BatchRecord(i, None, err.code, str(err), time.perf_counter() - t0,
                                   hashes[i], config)
            except Exception as err:
                logger.exception("item %d failed unexpectedly", i)
                return BatchRecord(i, None, "backend_error", f"{type(err).__name__}: {err}",
                                   time.perf_counter() - t0, hashes[i], config)

        pool = ThreadPoolExecutor(
            max_workers=max(1, min(self.max_concurrency * len(self.base_urls), len(todo))))
        try:
            futures = [pool.submit(one, i) for i in todo]
            done_it: Iterable[Any] = as_completed(futures)
            if show_progress:
                from tqdm import tqdm

                done_it = tqdm(done_it, total=len(futures), desc="scoring", unit="item")
            for fut in done_it:
                rec = fut.result()
                records[rec.index] = rec
                if fh is not None:
                    with lock:
                        fh.write(json.dumps(rec.to_dict(), allow_nan=False) + "\n")
                        fh.flush()
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        finally:
            if fh is not None:
                fh.close()
        pool.shutdown(wait=True)
        return [records[i] for i in range(len(prompts))]


# ---- helpers ---------------------------------------------------------------------------------
def _check_int(name: str, value: Any, lo: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < lo:
        raise ConfigError(f"{name} must be an int >= {lo}, got {value!r}")


def _read_error(err: urllib.error.HTTPError) -> str:
    try:
        return err.read(4096).decode("utf-8", errors="replace")[:300]
    except (OSError, http.client.HTTPException, ValueError):  # a cut-short body must not
        # hide the status
        return str(err)


def _retry_after_s(value: str | None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header: delta-seconds or an HTTP-date
    (RFC 9110 §10.2.3); None when absent or unreadable."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - time.time())


def _short_repr(obj: Any) -> str:
    r = repr(obj)
    return r if len(r) <= 80 else r[:77] + "..."


def _short(obj: Any) -> str:
    return json.dumps(obj)[:300]


def _starts_label(text: str, labels: Sequence[str]) -> bool:
    t = normalize_token_text(text)
    return bool(t) and any(lab.startswith(t) for lab in labels)


def _never_continue() -> list[_Entry]:
    raise ConfigError("continuation requests need mode='completion'")


def _entry_id(d: Mapping[str, Any]) -> int | None:
    v = d.get("id", d.get("token_id"))
    return v if isinstance(v, int) and not isinstance(v, bool) else None


_POSITIVE_SLACK = 1e-6
"""Largest logprob (nats) above 0 accepted as float noise and read as 0."""
_SUM_SLACK = 1e-4
"""Largest excess of the returned top-k probabilities over 1 accepted as float noise."""


def _entry(token_id: Any, text: Any, logprob: Any) -> _Entry:
    """One validated top-k entry.

    Raises:
        BackendError: the logprob is not a number, is NaN or +inf, or is above 0 by more than
            ``_POSITIVE_SLACK`` (a probability above 1); the token text is not a string.
    """
    if isinstance(logprob, bool) or not isinstance(logprob, (int, float)):
        raise BackendError(f"server returned a non-numeric logprob {_short_repr(logprob)} "
                           f"for token {text!r}")
    try:
        lp = float(logprob)
    except OverflowError:
        raise BackendError(f"server returned an out-of-range logprob "
                           f"{_short_repr(logprob)} for token {text!r}") from None
    if math.isnan(lp) or lp > _POSITIVE_SLACK:
        raise BackendError(f"server returned logprob {lp!r} for token {text!r}: a logprob "
                           "must be a number <= 0")
    if not isinstance(text, str):
        raise BackendError(f"server returned a non-string token {text!r}")
    tid = token_id if isinstance(token_id, int) and not isinstance(token_id, bool) else None
    return _Entry(tid, text, min(lp, 0.0))


def _checked(entries: list[_Entry]) -> list[_Entry]:
    """Entries sorted by logprob (most probable first)."""
    entries.sort(key=lambda e: -e.logprob)
    return entries


def _parse_completion_logprobs(lp: Any, k: int) -> list[_Entry]:
    """Top entries at the first generated position of a ``/v1/completions`` response.

    OpenAI's legacy format (vLLM too): ``top_logprobs: [{text: logprob}]`` (keyed by text,
    no ids). llama.cpp's server gives ``content: [{id, token, logprob, top_logprobs}]``.

    Raises:
        BackendError: no or unreadable logprobs (wrong types, NaN, logprob > 0, sum > 1).
    """
    if not isinstance(lp, Mapping):
        raise BackendError(f"completion response has no logprobs object: {_short(lp)}")
    content = lp.get("content")
    if content:
        if not isinstance(content, list) or not isinstance(content[0], Mapping):
            raise BackendError(f"unreadable logprobs.content: {_short(content)}")
        return _parse_chat_position(content[0])
    tops = lp.get("top_logprobs")
    if not tops:
        raise BackendError(f"completion response has no top_logprobs: {_short(lp)}")
    if not isinstance(tops, list):
        raise BackendError(f"top_logprobs is not a list: {_short(tops)}")
    first = tops[0]
    if isinstance(first, Mapping):
        entries = [_entry(None, t, v) for t, v in first.items()]
    elif isinstance(first, list) and all(isinstance(d, Mapping) for d in first):
        entries = [_entry(_entry_id(d), d.get("token", ""), d.get("logprob")) for d in first]
    else:
        raise BackendError(f"unreadable top_logprobs: {_short(first)}")
    return _checked(entries)


def _parse_chat_position(pos: Any) -> list[_Entry]:
    """Top entries of one position of a chat ``logprobs.content`` list.

    Raises:
        BackendError: the position has neither ``top_logprobs`` nor ``logprob`` (e.g. a
            llama.cpp request with ``post_sampling_probs``, which answers with probabilities
            under other keys), or unreadable entries.
    """
    if not isinstance(pos, Mapping):
        raise BackendError(f"unreadable logprobs position: {_short(pos)}")
    tops = pos.get("top_logprobs")
    if tops:
        if not isinstance(tops, list) or not all(isinstance(d, Mapping) for d in tops):
            raise BackendError(f"unreadable top_logprobs: {_short(tops)}")
        entries = [_entry(_entry_id(d), d.get("token", ""), d.get("logprob")) for d in tops]
    elif pos.get("logprob") is not None:
        entries = [_entry(_entry_id(pos), pos.get("token", ""), pos.get("logprob"))]
    else:
        raise BackendError(f"logprobs position has neither top_logprobs nor logprob: "
                           f"{_short(pos)}")
    return _checked(entries)


def _dedupe(entries: Sequence[_Entry]) -> tuple[list[_Entry], str]:
    """Entries keyed by id when every entry has one (``"id"``), else by text (``"text"``).

    Raises:
        BackendError: the distinct entries' probabilities sum above 1 (+ ``_SUM_SLACK``).
    """
    if entries and all(e.token_id is not None for e in entries):
        seen: dict[int | None, _Entry] = {}
        for e in entries:
            seen.setdefault(e.token_id, e)
        out, match = list(seen.values()), "id"
    else:
        seen_t: dict[str, _Entry] = {}
        for e in entries:
            seen_t.setdefault(e.text, e)
        out, match = list(seen_t.values()), "text"
    total = math.fsum(math.exp(e.logprob) for e in out)
    if total > 1.0 + _SUM_SLACK:
        raise BackendError(f"server's top-k probabilities sum to {total:.6f} > 1 "
                           f"({len(out)} distinct tokens)")
    return out, match


def _first_label_position(positions: Sequence[Sequence[_Entry]],
                          labels: Sequence[str]) -> int | None:
    """Index of the first position whose chosen (top-1) token starts a label."""
    for i, entries in enumerate(positions):
        if not entries:
            continue
        if _starts_label(entries[0].text, labels):
            return i
    return None


def _label_probs(
    labels: Sequence[str],
    topk: Callable[[str], list[_Entry]],
    prune_below: float,
) -> tuple[list[float], float, float, str, list[_Entry]]:
    """Label probabilities from top-k entries, with text continuations for long labels.

    ``topk(suffix)`` returns the entries after the prompt plus ``suffix`` (raw token texts).
    Returns (raw label probs in label order, probability not returned at the root, pruned
    or unreturned mass below continuations, label_match, root entries). Every probability
    is a lower bound: where the boundary rule subtracts ``Σ p(extending tokens)``, the
    probability the server did not return is subtracted as well.
    """
    index = {lab: i for i, lab in enumerate(labels)}
    probs = [0.0] * len(labels)
    pruned = 0.0
    matches: set[str] = set()
    root, match = _dedupe(topk(""))
    matches.add(match)
    rest_root = max(0.0, 1.0 - math.fsum(math.exp(e.logprob) for e in root))

    def walk(entries: Sequence[_Entry], suffix: str, done: str, p_prefix: float) -> None:
        nonlocal pruned
        for e in entries:
            t = normalize_token_text(e.text) if not done else e.text
            if not t:
                continue
            cand = done + t
            full = [lab for lab in labels if lab == cand]
            longer = [lab for lab in labels if lab != cand and lab.startswith(cand)]
            if not full and not longer:
                continue
            p = p_prefix * math.exp(e.logprob)
            if full and not longer:
                probs[index[full[0]]] += p
                continue
            if p <= prune_below:
                pruned += p
                continue
            nxt, m = _dedupe(topk(suffix + e.text))
            matches.add(m)
            unreturned = max(0.0, 1.0 - math.fsum(math.exp(x.logprob) for x in nxt))
            if full:
                last = cand[-1]
                ext = math.fsum(math.exp(x.logprob) for x in nxt
                                if x.text[:1] and ((x.text[:1].isdigit() and last.isdigit())
                                                   or (x.text[:1].isalnum()
                                                       and last.isalpha())))
                probs[index[full[0]]] += p * max(0.0, 1.0 - ext - unreturned)
            pruned += p * unreturned
            walk(nxt, suffix + e.text, cand, p)

    walk(root, "", "", 1.0)
    return probs, rest_root, pruned, ("text" if "text" in matches else "id"), root
