"""Start a local OpenAI-compatible judge server for ``OpenAICompatBackend`` (tests, benches).

Two servers, both on a free ``127.0.0.1`` port, both as context managers that stop the process
(and its log file handle) on exit:

* ``LlamaServer`` -- llama.cpp's own C++ ``llama-server`` with ``--parallel N`` slots and
  continuous batching: the server to scale out on. ``make llama-server`` (or ``make test``)
  builds it from the
  llama.cpp sources vendored in the pinned llama-cpp-python sdist
  (``scripts/build_llama_server.py``); ``llama_server_binary()`` finds it.
* ``LlamaCppPythonServer`` -- ``python -m llama_cpp.server`` (llama-cpp-python's ``[server]``
  extra). One model behind one lock: one request at a time.

vLLM is not started here (it needs a GPU); point ``OpenAICompatBackend`` at its URL instead
(see the README's scale-out section).
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self

from localjudge.backends.base import check_int
from localjudge.errors import BackendError, ConfigError
from localjudge.models import cache_dir

__all__ = ["LlamaCppPythonServer", "LlamaServer", "free_port", "llama_server_binary"]

LLAMA_SERVER_ENV = "LOCALJUDGE_LLAMA_SERVER"
"""Environment variable naming a ``llama-server`` binary to use instead of the built one."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def llama_server_binary() -> Path:
    """Path of the ``llama-server`` binary: ``$LOCALJUDGE_LLAMA_SERVER``, else the one
    ``scripts/build_llama_server.py`` built into ``<cache>/bin``, else ``llama-server`` on PATH.

    Raises:
        ConfigError: none found (the message says how to build it).
    """
    env = os.environ.get(LLAMA_SERVER_ENV)
    if env:
        p = Path(env)
        if not (p.is_file() and os.access(p, os.X_OK)):
            raise ConfigError(f"{LLAMA_SERVER_ENV}={env!r} is not an executable file")
        return p
    built = cache_dir() / "bin" / "llama-server"
    if built.is_file() and os.access(built, os.X_OK):
        return built
    found = shutil.which("llama-server")
    if found:
        return Path(found)
    raise ConfigError(
        f"no llama-server binary: run `make llama-server` (or `python "
        f"scripts/build_llama_server.py`), put llama-server on PATH, or set {LLAMA_SERVER_ENV}")


class _Server:
    """A child process serving HTTP on 127.0.0.1, started by ``__enter__``."""

    ready_path = "/health"

    def __init__(self, timeout_s: float, log: str | Path | None) -> None:
        if not (isinstance(timeout_s, (int, float)) and timeout_s > 0):
            raise ConfigError(f"timeout_s must be a number > 0, got {timeout_s!r}")
        self.timeout_s = float(timeout_s)
        self.log_path = Path(log) if log is not None else None
        self.port = 0
        self.url = ""
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    def command(self) -> list[str]:  # pragma: no cover - abstract
        raise NotImplementedError

    def _prepare(self) -> None:
        """Set-up a subclass needs before its command line is built (run by ``start``)."""

    def _log_tail(self) -> str:
        if self.log_path is None or not self.log_path.is_file():
            return ""
        return self.log_path.read_bytes()[-2000:].decode("utf-8", errors="replace")

    def start(self) -> Self:
        """Start the process and wait until ``ready_path`` answers 200.

        Raises:
            ConfigError: already running.
            BackendError: the process could not be started, exited, or was not ready within
                ``timeout_s`` (the message carries the tail of its log when ``log`` was
                given). On any failure, Ctrl-C included, the process is stopped first.
        """
        if self.running:
            raise ConfigError(f"server already running at {self.url}; stop() it first")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        try:
            self._prepare()
            if self.log_path is not None:
                self.log_path.parent.mkdir(parents=True, exist_ok=True)
                self._log = self.log_path.open("wb")
            out = self._log if self._log is not None else subprocess.DEVNULL
            try:
                self.proc = subprocess.Popen(self.command(), stdout=out,
                                             stderr=subprocess.STDOUT)
            except OSError as err:
                raise BackendError(f"cannot start {self.command()[0]}: {err}") from err
            t0 = time.monotonic()
            while time.monotonic() - t0 < self.timeout_s:
                if self.proc.poll() is not None:
                    raise BackendError(
                        f"{self.command()[0]} exited with {self.proc.returncode} before it "
                        f"was ready; log tail:\n{self._log_tail()}")
                try:
                    with urllib.request.urlopen(self.url + self.ready_path, timeout=2) as r:
                        if r.status == 200:
                            return self
                except (OSError, http.client.HTTPException):
                    pass
                time.sleep(0.25)
            raise BackendError(f"server not ready within {self.timeout_s} s; log tail:\n"
                               f"{self._log_tail()}")
        except BaseException:
            self.stop()
            raise

    @property
    def running(self) -> bool:
        """True while the started process is alive."""
        return self.proc is not None and self.proc.poll() is None

    def get_json(self, path: str) -> Any:
        """GET ``path`` and decode the JSON answer.

        Raises:
            BackendError: not started.
        """
        if not self.running:
            raise BackendError("server not running: start() it first")
        with urllib.request.urlopen(self.url + path, timeout=10) as r:
            return json.loads(r.read().decode("utf-8"))

    def stop(self) -> None:
        """Terminate the process (kill after 20 s) and close the log."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=20)
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


class LlamaServer(_Server):
    """llama.cpp's ``llama-server`` on a GGUF file, with ``parallel`` slots.

    Args:
        model: GGUF path.
        parallel: slots (``--parallel``); requests beyond it queue in the server.
        n_ctx: total context (``--ctx-size``), split evenly across slots: each slot gets
            ``n_ctx // parallel`` tokens.
        n_threads: CPU threads (``--threads``, also for batches).
        n_batch: logical batch size (``--batch-size``); ``--ubatch-size`` is the same.
        alias: model name the server reports and accepts (``--alias``).
        cache_prompt: keep each slot's KV cache between requests (``--cache-reuse`` is not
            set either way). Off by default so a result never depends on what the slot held.
        cache_ram_mib: llama-server's host-memory prompt cache (``--cache-ram``) in MiB; 0
            (default) turns it off, so ``erase_slots()`` really empties every cache.
        flash_attn: ``--flash-attn on`` / ``off``. Off by default, as in llama-cpp-python
            (``LlamaCppBackend``): llama-server's own default ``auto`` turns flash attention
            on for CPU too, which moved SmolLM2-135M label logprobs by up to 0.116 nats
            against the in-process backend (``off``: 2.0e-4 nats).
        extra_args: appended to the command line verbatim.
        binary: the executable (default ``llama_server_binary()``).
        timeout_s: start-up limit in seconds.
        log: file that receives the server's stdout and stderr (default: discarded).

    Raises:
        ConfigError: bad arguments or no binary.
    """

    def __init__(self, model: str | Path, *, parallel: int = 4, n_ctx: int = 4096,
                 n_threads: int = 2, n_batch: int = 512, alias: str = "judge",
                 cache_prompt: bool = False, cache_ram_mib: int = 0,
                 flash_attn: bool = False, extra_args: list[str] | None = None,
                 binary: str | Path | None = None, timeout_s: float = 120.0,
                 log: str | Path | None = None) -> None:
        super().__init__(timeout_s, log)
        for name, v in (("parallel", parallel), ("n_ctx", n_ctx), ("n_threads", n_threads),
                        ("n_batch", n_batch)):
            check_int(name, v, 1)
        if not Path(model).is_file():
            raise ConfigError(f"model file not found: {str(model)!r}")
        self.model = Path(model)
        self.binary = Path(binary) if binary is not None else llama_server_binary()
        if not (self.binary.is_file() and os.access(self.binary, os.X_OK)):
            raise ConfigError(f"llama-server binary {str(self.binary)!r} is not an executable "
                              "file")
        self.parallel, self.n_ctx, self.n_threads, self.n_batch = parallel, n_ctx, n_threads, \
            n_batch
        self.alias = alias
        self.cache_prompt = cache_prompt
        self.flash_attn = flash_attn
        check_int("cache_ram_mib", cache_ram_mib, -1)
        self.cache_ram_mib = cache_ram_mib
        self._slot_dir: tempfile.TemporaryDirectory[str] | None = None
        self.extra_args = list(extra_args or [])

    def _prepare(self) -> None:
        """A private ``--slot-save-path`` (removed by ``stop``)."""
        self._slot_dir = tempfile.TemporaryDirectory(prefix="localjudge-slots-")

    def stop(self) -> None:
        """Stop the server and remove its slot folder."""
        super().stop()
        if self._slot_dir is not None:
            self._slot_dir.cleanup()
            self._slot_dir = None

    def command(self) -> list[str]:
        """The command line."""
        cmd = [str(self.binary), "--model", str(self.model), "--host", "127.0.0.1",
               "--port", str(self.port), "--parallel", str(self.parallel),
               "--ctx-size", str(self.n_ctx), "--threads", str(self.n_threads),
               "--threads-batch", str(self.n_threads), "--batch-size", str(self.n_batch),
               "--ubatch-size", str(self.n_batch), "--alias", self.alias, "--no-webui",
               "--flash-attn", "on" if self.flash_attn else "off",
               "--cache-ram", str(self.cache_ram_mib)]
        if self._slot_dir is not None:  # enables POST /slots/{id}?action=erase
            cmd += ["--slot-save-path", self._slot_dir.name]
        if not self.cache_prompt:
            cmd.append("--no-cache-prompt")
        return cmd + self.extra_args


    def erase_slots(self) -> None:
        """Empty every slot's KV cache (``POST /slots/{id}?action=erase``), e.g. between timed
        runs of a benchmark so a repeat cannot hit the previous run's prompts.

        Raises:
            BackendError: the server refused (``--no-slots``) or is not running.
        """
        if not self.running:
            raise BackendError("server not running: start() it first")
        for i in range(self.parallel):
            req = urllib.request.Request(f"{self.url}/slots/{i}?action=erase", data=b"{}",
                                         headers={"Content-Type": "application/json"},
                                         method="POST")
            try:
                with urllib.request.urlopen(req, timeout=30) as r:
                    r.read()
            except OSError as err:
                raise BackendError(f"cannot erase slot {i} at {self.url}: {err}") from err


class LlamaCppPythonServer(_Server):
    """``python -m llama_cpp.server`` (llama-cpp-python's ``[server]`` extra) on a GGUF file.

    Args:
        model: GGUF path.
        n_ctx, n_batch, n_threads: the server's ``--n_ctx``, ``--n_batch``, ``--n_threads``.
        timeout_s: start-up limit in seconds.
        log: file that receives the server's output (default: discarded).

    Raises:
        ConfigError: bad arguments.
    """

    ready_path = "/v1/models"

    def __init__(self, model: str | Path, *, n_ctx: int = 512, n_batch: int = 128,
                 n_threads: int = 1, timeout_s: float = 180.0,
                 log: str | Path | None = None) -> None:
        super().__init__(timeout_s, log)
        for name, v in (("n_ctx", n_ctx), ("n_batch", n_batch), ("n_threads", n_threads)):
            check_int(name, v, 1)
        if not Path(model).is_file():
            raise ConfigError(f"model file not found: {str(model)!r}")
        self.model = Path(model)
        self.n_ctx, self.n_batch, self.n_threads = n_ctx, n_batch, n_threads

    def command(self) -> list[str]:
        """The command line."""
        return [sys.executable, "-m", "llama_cpp.server", "--model", str(self.model),
                "--host", "127.0.0.1", "--port", str(self.port), "--n_ctx", str(self.n_ctx),
                "--n_batch", str(self.n_batch), "--n_threads", str(self.n_threads)]
