"""HTTP transport of ``OpenAICompatBackend``: a bounded request pool over one or more replicas.

Standard library only (``urllib.request``; one blocking request per thread). Each attempt has
a deadline covering connect, headers and body, and a body cap; 429 / 5xx / dropped connections
/ timeouts are retried with exponential backoff and seeded jitter (``Retry-After`` honoured,
capped); a failing replica sits out a doubling cooldown, and a retry goes to another replica.
"""

from __future__ import annotations

import email.utils
import http.client
import json
import logging
import random
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any

from localjudge.backends._topk import _short
from localjudge.errors import BackendError, ConfigError

__all__ = ["HttpPool"]

logger = logging.getLogger(__name__)

MAX_RETRY_AFTER_S = 30.0
"""Cap on a server's ``Retry-After`` in seconds."""

MAX_BODY_BYTES = 64 << 20
"""Largest response body read (bytes); a larger one is a failed attempt."""

REPLICA_COOLDOWN_S = 1.0
"""Seconds a replica sits out after a failed attempt (doubling per consecutive failure)."""

MAX_REPLICA_COOLDOWN_S = 30.0
"""Cap on a replica's cooldown in seconds."""

_RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


class HttpPool:
    """Requests to one model served by ``roots`` (replicas), at most ``max_concurrency`` in
    flight per replica.

    Args:
        roots: server roots without ``/v1``, distinct.
        api_key: bearer token or None (never logged or recorded).
        max_concurrency, timeout_s, max_retries, backoff_s, seed: see ``OpenAICompatBackend``.
        extra_body: fields merged into every request body (already validated).
    """

    def __init__(self, roots: Sequence[str], *, api_key: str | None, max_concurrency: int,
                 timeout_s: float, max_retries: int, backoff_s: float, seed: int,
                 extra_body: Mapping[str, Any]) -> None:
        self.base_urls: tuple[str, ...] = tuple(roots)
        self.base_url = self.base_urls[0]
        self._api_key = api_key
        self.timeout_s = float(timeout_s)
        self.max_retries = max_retries
        self.backoff_s = float(backoff_s)
        self.extra_body = dict(extra_body)
        self._sem = threading.BoundedSemaphore(max_concurrency * len(roots))
        self._in_flight = [0] * len(roots)
        self._fails = [0] * len(roots)
        self._cool_until = [0.0] * len(roots)
        self._route_lock = threading.Lock()
        self._next = 0
        self._rng = random.Random(seed)
        self._rng_lock = threading.Lock()
        self.n_requests = 0
        """HTTP attempts made (retries included), for benchmarks and tests."""
        self.n_retries = 0
        """Attempts that were retries."""
        self._count_lock = threading.Lock()

    def _headers(self) -> dict[str, str]:
        h = {"Content-Type": "application/json"}
        if self._api_key:
            h["Authorization"] = f"Bearer {self._api_key}"
        return h

    def props(self, root: str) -> dict[str, Any]:
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

    def post(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
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
