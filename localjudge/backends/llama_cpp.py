"""``LlamaCppBackend``: GGUF models through llama-cpp-python.

Only the last position's logits are computed (``logits_all=False``; the batch requests logits for
its last token only), and the KV cache of the longest common token prefix with the previous call
is kept, so judging 16 summaries of one article processes the article once. Requires the
``[llama]`` extra; this module is imported lazily by ``localjudge.backends.load_backend``.
"""

from __future__ import annotations

import ctypes
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from localjudge.backends.base import Backend, log_softmax
from localjudge.errors import BackendError, ConfigError, ModelFileError
from localjudge.models import file_sha256, load_manifest, model_path, verify_file
from localjudge.version import package_versions

__all__ = ["LlamaCppBackend"]

logger = logging.getLogger(__name__)

DEFAULT_N_CTX = 4096
"""Default context window in tokens (capped at the model's training context)."""


def _resolve_model(model: str | os.PathLike[str], sha256: str | None) -> tuple[Path, str, str]:
    """(path, display name, sha256) for a manifest name or a GGUF path."""
    s = str(model)
    if not s.endswith(".gguf") and os.sep not in s and not Path(s).exists():
        m = load_manifest(s)  # ConfigError for an unknown name
        if sha256 is not None and sha256 != m.sha256:
            raise ConfigError(f"sha256={sha256!r} differs from manifest {m.name!r} ({m.sha256})")
        return model_path(s), m.name, m.sha256
    p = Path(s)
    if not p.is_file():
        raise ModelFileError(
            f"model file not found: {p}" + (f" (expected sha256 {sha256})" if sha256 else ""),
            path=str(p), expected_sha256=sha256,
        )
    digest = verify_file(p, sha256) if sha256 else file_sha256(p)
    return p, p.name, digest


class LlamaCppBackend(Backend):
    """A GGUF model run by llama.cpp (CPU by default; ``n_gpu_layers`` offloads to a GPU).

    Args:
        model: an embedded model name (``"qwen2.5-coder-0.5b-instruct"``, see ``models/``) or a
            path to a ``.gguf`` file.
        sha256: expected file sha256; for manifest names the manifest's digest is used.
        n_ctx: context window in tokens (default 4096, capped at the training context).
        n_threads: CPU threads (default: llama.cpp's choice).
        n_batch: prompt tokens per decode call.
        n_gpu_layers: layers to offload (0 = CPU only).

    Raises:
        ConfigError: unknown model name or bad ``n_ctx``.
        ModelFileError: missing file or sha256 mismatch (names the file and expected digest).
        BackendError: llama.cpp failed to load the file.
    """

    name: ClassVar[str] = "llama_cpp"

    def __init__(
        self,
        model: str | os.PathLike[str],
        *,
        sha256: str | None = None,
        n_ctx: int | None = None,
        n_threads: int | None = None,
        n_batch: int = 512,
        n_gpu_layers: int = 0,
    ) -> None:
        import llama_cpp

        if n_ctx is not None and (isinstance(n_ctx, bool) or not isinstance(n_ctx, int)
                                  or n_ctx < 16):
            raise ConfigError(f"n_ctx must be an int >= 16, got {n_ctx!r}")
        path, display, digest = _resolve_model(model, sha256)
        self._path = path
        self._model_name = display
        self._sha256 = digest
        try:
            self._llama = llama_cpp.Llama(
                model_path=str(path),
                n_ctx=n_ctx or DEFAULT_N_CTX,
                n_batch=n_batch,
                n_threads=n_threads,
                n_gpu_layers=n_gpu_layers,
                logits_all=False,
                verbose=False,
            )
        except (ValueError, RuntimeError) as err:
            raise BackendError(f"llama.cpp could not load {path}: {err}") from err
        train = self._llama._model.n_ctx_train()
        if n_ctx is None and train < DEFAULT_N_CTX:
            self._llama = llama_cpp.Llama(model_path=str(path), n_ctx=train, n_batch=n_batch,
                                          n_threads=n_threads, n_gpu_layers=n_gpu_layers,
                                          logits_all=False, verbose=False)
        self._lib = llama_cpp
        self._vocab_ptr = self._llama._model.vocab
        self._nv = int(self._llama._model.n_vocab())
        self._template = self._llama.metadata.get("tokenizer.chat_template") or None
        self._kv_ids: list[int] = []
        self._last: tuple[tuple[int, ...], np.ndarray] | None = None
        self.n_decoded_tokens = 0
        """Tokens actually run through the model since load (prefix reuse makes this small)."""
        self._init_shared()

    # ---- token-level primitives ---------------------------------------------------------
    @property
    def n_ctx(self) -> int:
        return int(self._llama.n_ctx())

    @property
    def n_vocab(self) -> int:
        return self._nv

    @property
    def chat_template(self) -> str | None:
        return self._template

    @property
    def model_sha256(self) -> str:
        """sha256 of the GGUF file."""
        return self._sha256

    def _piece(self, tid: int, special: bool) -> bytes:
        buf = ctypes.create_string_buffer(256)
        n = self._lib.llama_token_to_piece(self._vocab_ptr, tid, buf, 256, 0, special)
        return bytes(buf.raw[: max(n, 0)])

    def _tokenize(self, text: str, *, special: bool) -> list[int]:
        return list(self._llama.tokenize(text.encode("utf-8"), add_bos=False, special=special))

    def _decode(self, ids: Sequence[int]) -> str:
        return b"".join(self._piece(int(t), False) for t in ids).decode("utf-8", errors="replace")

    def _vocab_texts(self) -> list[str]:
        return [self._piece(i, False).decode("utf-8", errors="replace") for i in range(self._nv)]

    def _special_ids(self) -> set[int]:
        mask = self._lib.LLAMA_TOKEN_ATTR_CONTROL | self._lib.LLAMA_TOKEN_ATTR_UNKNOWN
        return {i for i in range(self._nv)
                if self._lib.llama_vocab_get_attr(self._vocab_ptr, i) & mask}

    def _eog_ids(self) -> set[int]:
        return {i for i in range(self._nv) if self._lib.llama_vocab_is_eog(self._vocab_ptr, i)}

    def _bos(self) -> tuple[int | None, str]:
        bos = int(self._lib.llama_vocab_bos(self._vocab_ptr))
        text = self._piece(bos, True).decode("utf-8", errors="replace") if bos >= 0 else ""
        add = bool(self._lib.llama_vocab_get_add_bos(self._vocab_ptr)) and bos >= 0
        return (bos if add else None), text

    def _eos_text(self) -> str:
        eos = int(self._lib.llama_vocab_eos(self._vocab_ptr))
        return self._piece(eos, True).decode("utf-8", errors="replace") if eos >= 0 else ""

    def _next_token_logprobs(self, token_ids: Sequence[int]) -> np.ndarray:
        ids = tuple(int(t) for t in token_ids)
        if not ids:
            raise BackendError("cannot score an empty token sequence")
        if self._last is not None and self._last[0] == ids:
            return self._last[1]
        kv = self._kv_ids
        k = 0
        n = min(len(kv), len(ids))
        while k < n and kv[k] == ids[k]:
            k += 1
        if k == len(ids):
            k -= 1  # logits of the last token are needed: evaluate it again
        ctx = self._llama._ctx
        if not ctx.kv_cache_seq_rm(0, k, -1):
            ctx.kv_cache_seq_rm(0, 0, -1)  # memory type without partial removal: start over
            k = 0
        self._kv_ids = list(ids[:k])
        batch = self._llama._batch
        n_batch = int(self._llama.n_batch)
        try:
            for i in range(k, len(ids), n_batch):
                chunk = list(ids[i : i + n_batch])
                batch.set_batch(batch=chunk, n_past=i, logits_all=False)
                ctx.decode(batch)
                self._kv_ids.extend(chunk)
                self.n_decoded_tokens += len(chunk)
        except RuntimeError as err:
            self._kv_ids = []
            ctx.kv_cache_seq_rm(0, 0, -1)
            raise BackendError(f"llama.cpp decode failed: {err}") from err
        logits = np.ctypeslib.as_array(ctx.get_logits_ith(-1), shape=(self._nv,))
        lp = log_softmax(logits)
        self._last = (ids, lp)
        return lp

    def _signature_fields(self) -> dict[str, Any]:
        import llama_cpp

        return {
            "backend_version": llama_cpp.__version__,
            "model": self._model_name,
            "model_sha256": self._sha256,
            "versions": package_versions("llama_cpp_python", "numpy"),
        }
