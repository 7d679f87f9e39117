"""``LlamaCppBackend``: GGUF models through llama-cpp-python.

Only the last position's logits are computed (``logits_all=False``; each batch requests logits
for its last token only), and the KV cache of the longest common token prefix with the previous
call is kept, so judging 16 summaries of one article processes the article once.

History independence. llama.cpp's results depend on how tokens are grouped into decode calls
(measured on SmolLM2 Q4_1: decoding the last token alone instead of in one batch with the
prompt moves a label probability by up to 0.025). Plain prefix reuse would therefore make a
score depend on which prompt was judged before it. This backend computes every sequence in one
canonical grouping: the prompt in blocks aligned to multiples of ``block_size`` (positions
``[0, B), [B, 2B), ...``, the last one partial) and every continuation token (multi-token
labels, generated text) in a decode call of its own. The KV cache is reused only at that
granularity, so a distribution is bitwise the same whatever was computed before it. Requires the
``[llama]`` extra; this module is imported lazily by ``localjudge.backends.load_backend``.
"""

from __future__ import annotations

import ctypes
import logging
import os
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from localjudge.backends._blocks import canonical_chunks, plan_reuse
from localjudge.backends._resolve import resolve_model_file
from localjudge.backends.base import Backend, check_int, log_softmax
from localjudge.errors import BackendError
from localjudge.version import package_versions

__all__ = ["LlamaCppBackend"]

logger = logging.getLogger(__name__)

DEFAULT_N_CTX = 4096
"""Default context window in tokens (capped at the model's training context)."""


class LlamaCppBackend(Backend):
    """A GGUF model run by llama.cpp (CPU by default; ``n_gpu_layers`` offloads to a GPU).

    Args:
        model: an embedded model name (``"qwen2.5-coder-0.5b-instruct"``, see ``models/``) or a
            path to a ``.gguf`` file.
        sha256: expected file sha256; for manifest names the manifest's digest is used.
        n_ctx: context window in tokens (default 4096, capped at the training context).
        n_threads: CPU threads (default: llama.cpp's choice).
        block_size: prompt tokens per decode call and granularity of KV-cache reuse (default
            128: measured as fast as 512 for prompt processing on 2 CPU cores, and a finer
            reuse granularity).
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
        block_size: int = 128,
        n_gpu_layers: int = 0,
    ) -> None:
        import llama_cpp

        if n_ctx is not None:
            check_int("n_ctx", n_ctx, 16)
        check_int("block_size", block_size, 1)
        n_batch = block_size
        self.block_size = block_size
        resolved = resolve_model_file(model, sha256)
        path = resolved.path
        self._path = path
        self._model_name = resolved.name
        self._sha256 = resolved.sha256
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
        self._kv_n_prompt = 0
        self._last: tuple[tuple[tuple[int, ...], tuple[int, ...]], np.ndarray] | None = None
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

    def reset_cache(self) -> None:
        """Drop the KV cache, so the next call processes its whole prompt (benchmarks)."""
        self._llama._ctx.kv_cache_seq_rm(0, 0, -1)
        self._kv_ids = []
        self._kv_n_prompt = 0
        self._last = None

    def _display_text(self, token_id: int) -> str:
        return self._piece(token_id, True).decode("utf-8", errors="replace")

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
        return self._logprobs_after(token_ids)

    def _logprobs_after(
        self, prompt_ids: Sequence[int], suffix_ids: Sequence[int] = ()
    ) -> np.ndarray:
        prompt = tuple(int(t) for t in prompt_ids)
        suffix = tuple(int(t) for t in suffix_ids)
        if not prompt:
            raise BackendError("cannot score an empty token sequence")
        if self._last is not None and self._last[0] == (prompt, suffix):
            return self._last[1]
        target = prompt + suffix
        n_p, bs = len(prompt), self.block_size
        kv = self._kv_ids
        r = plan_reuse(kv, self._kv_n_prompt, prompt, suffix, bs)
        ctx = self._llama._ctx
        if not ctx.kv_cache_seq_rm(0, r, -1):
            ctx.kv_cache_seq_rm(0, 0, -1)  # memory type without partial removal: start over
            r = 0
        self._kv_ids = list(target[:r])
        self._kv_n_prompt = n_p
        chunks = canonical_chunks(r, n_p, len(target), bs)
        batch = self._llama._batch
        try:
            for lo, hi in chunks:
                batch.set_batch(batch=list(target[lo:hi]), n_past=lo, logits_all=False)
                ctx.decode(batch)
                self._kv_ids.extend(target[lo:hi])
                self.n_decoded_tokens += hi - lo
        except RuntimeError as err:
            self._kv_ids = []
            ctx.kv_cache_seq_rm(0, 0, -1)
            raise BackendError(f"llama.cpp decode failed: {err}") from err
        logits = np.ctypeslib.as_array(ctx.get_logits_ith(-1), shape=(self._nv,))
        lp = log_softmax(logits)
        self._last = ((prompt, suffix), lp)
        return lp

    def _signature_fields(self) -> dict[str, Any]:
        import llama_cpp

        return {
            "backend_version": llama_cpp.__version__,
            "model": self._model_name,
            "model_sha256": self._sha256,
            "versions": package_versions("llama_cpp_python", "numpy"),
        }
