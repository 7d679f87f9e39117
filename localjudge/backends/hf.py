"""``HFBackend``: causal language models through Hugging Face transformers (PyTorch).

What lives here: model resolution for transformers (embedded manifest name, ``.gguf`` path,
local folder, or a model id already in the local Hugging Face cache), the cached GGUF ->
transformers conversion, and the token-level primitives of ``Backend``. Everything public
(rendering, labels, scoring, generation, signatures) is shared with the llama.cpp backend in
``localjudge.backends.base``, so the two backends differ only in how logits are computed.

What deliberately does not: downloading (never at run time; ``local_files_only`` everywhere),
``tokenizer.apply_chat_template`` (templates render through the sandboxed
``localjudge.templates.render_chat``), batching and sampling strategies.

GGUF files are dequantised to float32 by transformers (``gguf_file=``) once, then saved with
``save_pretrained`` under ``<cache_dir()>/hf-converted/<gguf sha256[:16]>/`` and loaded from there
on every later load. Dequantisation reproduces the Q4/Q5/Q6/Q8 block values to float32
precision, so this backend runs the same weights as llama.cpp but with float32 activations and
matmuls instead of llama.cpp's quantised dot products (8-bit activations): distributions agree
closely but not bit-for-bit (see ``tests/test_cross_backend.py`` for the measured distance).

Requires the ``[hf]`` extra; imported lazily by ``localjudge.backends.load_backend``, so
``import localjudge`` never imports torch or transformers.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import logging
import os
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
import transformers

from localjudge.backends._blocks import canonical_chunks, plan_reuse
from localjudge.backends._resolve import looks_like_manifest_name, resolve_model_file
from localjudge.backends.base import Backend, check_int, log_softmax
from localjudge.errors import BackendError, ConfigError, ModelFileError
from localjudge.models import MODELS_DIR, cache_dir, file_sha256, hash_file, load_manifest
from localjudge.version import package_versions

__all__ = ["DEFAULT_N_CTX", "HFBackend", "conversion_dir", "model_dir_sha256"]

logger = logging.getLogger(__name__)

DEFAULT_N_CTX = 4096
"""Default context window in tokens (capped at the model's ``max_position_embeddings``);
the same default as ``LlamaCppBackend``."""

_DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "float64": torch.float64,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
}

_MARKER = "localjudge-conversion.json"
"""Written last into a finished conversion folder: GGUF sha256 and the sha256 of every file."""

_MARKER_FORMAT = 1

_WEIGHT_PATTERNS = ("*.safetensors", "*.bin")

# Special tokens that end a turn, after llama.cpp's EOG detection (src/llama-vocab.cpp,
# ``llama_vocab::impl::load``, the ``special_eog_ids`` text list, as vendored by
# llama-cpp-python 0.3.36). Only special (control) tokens with these texts count.
_EOG_TEXTS = frozenset({
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|eom_id|>",
    "<EOT>", "_<EOT>", "<|end_of_text|>", "<end_of_utterance>",
})


@dataclass(frozen=True)
class _Source:
    kind: str  # "gguf" or "dir"
    path: Path  # the GGUF file, or the model folder
    name: str  # display name for signatures
    sha256: str  # GGUF file sha256, or model_dir_sha256(folder)


def conversion_dir(gguf_sha256: str) -> Path:
    """Folder of the cached transformers conversion of the GGUF with this sha256.

    Args:
        gguf_sha256: sha256 hex digest of the GGUF file (64 hex characters).

    Returns:
        ``localjudge.models.cache_dir() / "hf-converted" / gguf_sha256[:16]`` (may not exist).
    """
    return cache_dir() / "hf-converted" / gguf_sha256.lower()[:16]


def _weight_files(folder: Path) -> list[Path]:
    for pattern in _WEIGHT_PATTERNS:
        files = sorted(p for p in folder.glob(pattern) if p.is_file())
        if files:
            return files
    return []


def model_dir_sha256(folder: str | os.PathLike[str]) -> str:
    """sha256 identifying the weights of a Hugging Face model folder.

    The sha256 of the text ``"<file sha256>  <file name>\\n"`` over the weight files sorted by
    name -- ``*.safetensors``, or ``*.bin`` when there is no safetensors file -- i.e. exactly
    ``sha256sum $(ls *.safetensors) | sha256sum`` run in the folder (names in C-locale order).

    Args:
        folder: a model folder (symlinks, as in Hugging Face cache snapshots, are followed).

    Returns:
        64-character hex digest.

    Raises:
        ModelFileError: the folder holds no weight file.
    """
    d = Path(folder)
    files = _weight_files(d)
    if not files:
        ggufs = sorted(p.name for p in d.glob("*.gguf"))
        hint = f"; for a GGUF file pass gguf_file= one of {ggufs}" if ggufs else ""
        raise ModelFileError(
            f"no weight files ({', '.join(_WEIGHT_PATTERNS)}) in model folder {d}{hint}",
            path=str(d),
        )
    listing = "".join(f"{file_sha256(p)}  {p.name}\n" for p in files)
    return hashlib.sha256(listing.encode("utf-8")).hexdigest()


def _hub_error(model: str, revision: str | None, err: Exception | None) -> ModelFileError:
    rev = f" at revision {revision!r}" if revision else ""
    known = sorted(p.stem for p in MODELS_DIR.glob("*.toml"))
    return ModelFileError(
        f"model {model!r}{rev} is not an embedded manifest name, an existing .gguf file or "
        f"model folder, nor in the local Hugging Face cache; localjudge never downloads at run "
        f"time: fetch it first (e.g. `hf download {model}`) or pass a local path. "
        f"Embedded manifests: {known}" + (f" ({err})" if err else ""),
        path=model,
    )


def _hub_snapshot(model: str, revision: str | None) -> Path:
    """Local snapshot folder of a model id in the Hugging Face cache (never downloads)."""
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(model, revision=revision, local_files_only=True))
    except (OSError, ValueError, ImportError) as err:
        raise _hub_error(model, revision, err) from err


def _hub_file(model: str, filename: str, revision: str | None) -> Path:
    """Local path of one file of a model id in the Hugging Face cache (never downloads)."""
    try:
        from huggingface_hub import hf_hub_download

        return Path(hf_hub_download(model, filename, revision=revision, local_files_only=True))
    except (OSError, ValueError, ImportError) as err:
        raise _hub_error(f"{model}/{filename}", revision, err) from err


def _resolve_source(
    model: str | os.PathLike[str], gguf_file: str | None, sha256: str | None,
    revision: str | None,
) -> _Source:
    s = str(model)
    if gguf_file is not None:
        base = Path(s)
        if base.is_dir():
            if revision is not None:
                raise ConfigError(f"revision={revision!r} applies to Hugging Face model ids only, "
                                  f"not to the local folder {s!r}")
            gguf_path = base / gguf_file
        else:
            gguf_path = _hub_file(s, gguf_file, revision)
        r = resolve_model_file(gguf_path, sha256)
        return _Source("gguf", r.path, r.name, r.sha256)
    p = Path(s)
    if p.is_dir():
        if revision is not None:
            raise ConfigError(f"revision={revision!r} applies to Hugging Face model ids only, "
                              f"not to the local folder {s!r}")
        return _dir_source(p, p.name, sha256)
    if s.endswith(".gguf") or p.is_file():
        if revision is not None:
            raise ConfigError(f"revision={revision!r} applies to Hugging Face model ids only, "
                              f"not to the file {s!r}")
        if p.is_file() and not s.endswith(".gguf"):
            raise ConfigError(f"model={s!r} is a file but not a .gguf file; pass a GGUF file, a "
                              "model folder, a manifest name or a Hugging Face model id")
        r = resolve_model_file(p, sha256)
        return _Source("gguf", r.path, r.name, r.sha256)
    if looks_like_manifest_name(s):
        try:
            load_manifest(s)
        except ConfigError:
            pass  # not a manifest: try the Hugging Face cache (e.g. "gpt2")
        else:
            if revision is not None:
                raise ConfigError(f"revision={revision!r} does not apply to the embedded model "
                                  f"{s!r}, whose manifest pins the file sha256")
            r = resolve_model_file(s, sha256)
            if r.manifest_format == "hf_dir":
                return _Source("dir", r.path, r.name, model_dir_sha256(r.path))
            return _Source("gguf", r.path, r.name, r.sha256)
    return _dir_source(_hub_snapshot(s, revision), s, sha256)


def _dir_source(folder: Path, name: str, sha256: str | None) -> _Source:
    digest = model_dir_sha256(folder)
    if sha256 is not None and sha256.lower() != digest:
        raise ModelFileError(
            f"sha256 mismatch for model folder {folder}: expected {sha256}, got {digest} "
            "(sha256 over its weight files' sha256s, see model_dir_sha256)",
            path=str(folder), expected_sha256=sha256, actual_sha256=digest,
        )
    return _Source("dir", folder, name, digest)


def _conversion_is_complete(folder: Path, gguf_sha256: str) -> bool:
    """True when ``folder`` holds a finished conversion of this GGUF with intact files."""
    try:
        marker = json.loads((folder / _MARKER).read_text())
    except (OSError, ValueError):
        return False
    if marker.get("format") != _MARKER_FORMAT or marker.get("gguf_sha256") != gguf_sha256:
        return False
    files = marker.get("files")
    if not isinstance(files, dict) or not files:
        return False
    try:
        return all(file_sha256(folder / name) == digest for name, digest in files.items())
    except ModelFileError:
        return False


def _convert_gguf(gguf_path: Path, gguf_sha256: str) -> tuple[Path, bool]:
    """Cached GGUF -> transformers conversion; returns (folder, loaded from the cache)."""
    target = conversion_dir(gguf_sha256)
    if _conversion_is_complete(target, gguf_sha256):
        return target, True
    if target.exists():
        logger.warning("conversion cache %s is incomplete or its files changed; converting "
                       "%s again", target, gguf_path)
        shutil.rmtree(target, ignore_errors=True)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    t0 = time.perf_counter()
    src = gguf_path.resolve()
    kw: dict[str, Any] = {"gguf_file": src.name, "local_files_only": True}
    model_kw: dict[str, Any] = {"dtype": torch.float32}
    try:  # transformers >= 5 can keep GGUF blocks packed; ask for a plain dense model
        from transformers import GgufConfig

        model_kw["quantization_config"] = GgufConfig(gguf_file=src.name, dequantize=True)
    except ImportError:
        pass  # older transformers always dequantises GGUF checkpoints
    try:
        tok = AutoTokenizer.from_pretrained(str(src.parent), **kw)
        lm = AutoModelForCausalLM.from_pretrained(str(src.parent), **kw, **model_kw)
    except (OSError, ValueError, KeyError, RuntimeError, NotImplementedError) as err:
        raise BackendError(f"transformers could not load the GGUF file {src}: {err}") from err
    quantizer = getattr(lm, "hf_quantizer", None)
    if quantizer is not None and hasattr(quantizer, "remove_quantization_config"):
        quantizer.remove_quantization_config(lm)
    else:
        for attr in ("hf_quantizer", "quantization_method"):
            if hasattr(lm, attr):
                delattr(lm, attr)
        if hasattr(lm.config, "quantization_config"):
            del lm.config.quantization_config
    bad = [n for n, p in lm.named_parameters() if p.dtype != torch.float32]
    if bad:
        raise BackendError(f"GGUF conversion of {src} left non-float32 parameters {bad[:3]}; "
                           "this transformers version did not dequantise the file")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".{target.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        lm.save_pretrained(str(tmp))
        tok.save_pretrained(str(tmp))
        marker = {
            "format": _MARKER_FORMAT,
            "gguf_sha256": gguf_sha256,
            "gguf_file": src.name,
            "dtype": "float32",
            "converted_with": package_versions("transformers", "torch", "gguf"),
            "convert_s": round(time.perf_counter() - t0, 3),
            "files": {p.name: hash_file(p) for p in sorted(tmp.iterdir()) if p.is_file()},
        }
        (tmp / _MARKER).write_text(json.dumps(marker, indent=1, sort_keys=True))
        try:
            os.rename(tmp, target)
        except OSError:
            if not _conversion_is_complete(target, gguf_sha256):
                raise
            # another process finished the same conversion first: use theirs
    except OSError as err:
        raise BackendError(f"could not write the conversion of {src} to {target}: {err}") from err
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    logger.info("converted %s to %s in %.1f s", src, target, time.perf_counter() - t0)
    return target, False


class HFBackend(Backend):
    """A causal LM run by Hugging Face transformers (PyTorch; CPU by default).

    Only the last position's logits are computed (``logits_to_keep=1``), and the KV cache of the
    longest common token prefix with the previous call is kept (``DynamicCache`` cropped back to
    the common prefix) in the canonical block grouping of ``LlamaCppBackend``, so results never
    depend on what was computed before.

    Args:
        model: an embedded model name (``"smollm2-135m-instruct"``, see ``models/``); a path to
            a ``.gguf`` file; a local model folder; or a Hugging Face model id that is already in
            the local Hugging Face cache (never downloaded). GGUF files are dequantised once and
            the conversion is cached (see ``conversion_dir``).
        gguf_file: name of a GGUF file inside the folder / model id ``model``
            (transformers' ``gguf_file=``).
        sha256: expected sha256 -- of the GGUF file, or for a folder / model id the digest
            of ``model_dir_sha256``. For manifest names it must equal the manifest's.
        revision: branch, tag or commit of a Hugging Face model id (cache lookup only).
        dtype: ``"float32"`` (default), ``"float64"`` (reference checks), ``"bfloat16"`` or
            ``"float16"``; the weights are cast to it. Recorded in the signature.
        n_ctx: context window in tokens (default ``min(4096, max_position_embeddings)``).
        device: torch device string, e.g. ``"cpu"`` or ``"cuda:0"``. Recorded in the signature.
        block_size: prompt tokens per forward pass and granularity of KV-cache reuse (default
            128, as ``LlamaCppBackend``); see ``_logprobs_after``.

    Attributes:
        loaded_from_conversion_cache: True when a GGUF model was loaded from an earlier
            conversion; False after converting now, and for non-GGUF models.
        load_dir: the folder transformers loaded (the conversion folder for GGUF models).
        n_decoded_tokens: tokens actually run through the model since load (prefix reuse
            makes this small).
        block_size: see Args.

    Raises:
        ConfigError: unknown dtype/device, bad ``n_ctx`` or ``block_size``, ``revision`` for a
            non-hub model, or
            ``sha256`` differing from the manifest's.
        ModelFileError: missing file or folder, a model id not in the local Hugging Face
            cache, or a sha256 mismatch (names the file and the expected digest).
        BackendError: transformers could not load or convert the model.

    Example:
        Needs the fetched weights, so not run as a doctest::

            judge = HFBackend("smollm2-135m-instruct")  # first load converts (~20 s), then cached
            d = judge.score_distribution("Rate its coherence 1-5: ...", prefill="Score:")
            d.probs, d.mass, d.signature.format(short=True)
    """

    name: ClassVar[str] = "hf"

    def __init__(
        self,
        model: str | os.PathLike[str],
        *,
        gguf_file: str | None = None,
        sha256: str | None = None,
        revision: str | None = None,
        dtype: str = "float32",
        n_ctx: int | None = None,
        device: str = "cpu",
        block_size: int = 128,
    ) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if dtype not in _DTYPES:
            raise ConfigError(f"dtype must be one of {sorted(_DTYPES)}, got {dtype!r}")
        if n_ctx is not None:
            check_int("n_ctx", n_ctx, 16)
        check_int("block_size", block_size, 1)
        self.block_size = block_size
        try:
            self._device = torch.device(device)
        except (RuntimeError, TypeError) as err:
            raise ConfigError(f"device must be a torch device string, got {device!r}") from err
        self._dtype_name = dtype
        src = _resolve_source(model, gguf_file, sha256, revision)
        self._model_name = src.name
        self._sha256 = src.sha256
        if src.kind == "gguf":
            self.load_dir, self.loaded_from_conversion_cache = _convert_gguf(src.path, src.sha256)
        else:
            self.load_dir, self.loaded_from_conversion_cache = src.path, False
        try:
            self._tok = AutoTokenizer.from_pretrained(str(self.load_dir), local_files_only=True)
            self._model = AutoModelForCausalLM.from_pretrained(
                str(self.load_dir), local_files_only=True, dtype=_DTYPES[dtype]
            )
            self._model.to(self._device)
        except (OSError, ValueError, KeyError, RuntimeError) as err:
            raise BackendError(f"transformers could not load {self.load_dir}: {err}") from err
        self._model.eval()

        cfg = self._model.config
        text_cfg = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
        max_pos = getattr(text_cfg, "max_position_embeddings", None) or getattr(
            text_cfg, "n_positions", None)
        if n_ctx is not None and max_pos is not None and n_ctx > int(max_pos):
            raise ConfigError(f"n_ctx={n_ctx} exceeds the model's max_position_embeddings "
                              f"({max_pos})")
        self._n_ctx = n_ctx or min(DEFAULT_N_CTX, int(max_pos or DEFAULT_N_CTX))
        out_emb = self._model.get_output_embeddings()
        width = getattr(getattr(out_emb, "weight", None), "shape", None)
        self._nv = int(width[0]) if width is not None else int(text_cfg.vocab_size)

        template = self._tok.chat_template
        if isinstance(template, dict):  # several named templates: the default one is the chat
            template = template.get("default")
        self._template: str | None = template or None

        params = inspect.signature(self._model.forward).parameters
        self._cache_kw = "cache" if "cache" in params else "past_key_values"
        self._keep_kw = next((k for k in ("logits_to_keep", "num_logits_to_keep") if k in params),
                             None)
        self._fast = getattr(self._tok, "backend_tokenizer", None)
        self._n_tok = min(len(self._tok), self._nv)
        anchor = self._tokenize("a", special=False)
        self._anchor = anchor if len(anchor) == 1 else None
        self._anchor_text = self._raw_decode(self._anchor or [], skip_special=False)
        plain = self._tok("a", add_special_tokens=False)["input_ids"]
        full = self._tok("a", add_special_tokens=True)["input_ids"]
        bos_id = self._tok.bos_token_id
        self._adds_bos = (bos_id is not None and len(full) > len(plain) and full[0] == bos_id)
        self._specials = self._find_special_ids()
        self._cache: Any = None
        self._kv_ids: list[int] = []
        self._kv_n_prompt = 0
        self._last: tuple[tuple[tuple[int, ...], tuple[int, ...]], np.ndarray] | None = None
        self.n_decoded_tokens = 0
        self._init_shared()

    # ---- token-level primitives ---------------------------------------------------------
    @property
    def n_ctx(self) -> int:
        """Context window in tokens."""
        return self._n_ctx

    @property
    def n_vocab(self) -> int:
        """Logits width (the output embedding rows; may exceed ``len(tokenizer)``)."""
        return self._nv

    @property
    def chat_template(self) -> str | None:
        """The model's own chat template (GGUF metadata or tokenizer config), or None."""
        return self._template

    @property
    def model_sha256(self) -> str:
        """sha256 of the GGUF file, or ``model_dir_sha256`` of the model folder."""
        return self._sha256

    def _find_special_ids(self) -> set[int]:
        out = {int(i) for i, t in self._tok.added_tokens_decoder.items() if t.special}
        out |= {int(i) for i in self._tok.all_special_ids if i is not None}
        return {i for i in out if 0 <= i < self._nv}

    def _tokenize(self, text: str, *, special: bool) -> list[int]:
        ids = self._tok(text, add_special_tokens=False, split_special_tokens=not special)
        return [int(t) for t in ids["input_ids"]]

    def _raw_decode(self, ids: Sequence[int], *, skip_special: bool) -> str:
        if self._fast is not None:
            return str(self._fast.decode(list(ids), skip_special_tokens=skip_special))
        return str(self._tok.decode(list(ids), skip_special_tokens=skip_special,
                                    clean_up_tokenization_spaces=False))

    def _decode(self, ids: Sequence[int]) -> str:
        # Decode after an anchor token so a leading space survives decoders that strip it at
        # the start of a text (SentencePiece "▁7" -> " 7"), as llama.cpp's token pieces keep it.
        ids = [int(t) for t in ids if 0 <= int(t) < self._n_tok]  # padding rows have no text
        if self._anchor is None:
            return self._raw_decode(ids, skip_special=True)
        s = self._raw_decode([*self._anchor, *ids], skip_special=True)
        if s.startswith(self._anchor_text):
            return s[len(self._anchor_text):]
        return self._raw_decode(ids, skip_special=True)

    def _vocab_texts(self) -> list[str]:
        n_tok = self._n_tok
        if len(self._tok) > self._nv:
            logger.warning("tokenizer has %d tokens but the model only %d logits; ids beyond "
                           "the logits are ignored", len(self._tok), self._nv)
        anchor = self._anchor or []
        seqs = [[*anchor, i] for i in range(n_tok)]
        if self._fast is not None:  # one Rust call, parallel: ~0.3 s for a 151k vocabulary
            decoded = list(self._fast.decode_batch(seqs, skip_special_tokens=False))
        else:
            decoded = [self._raw_decode(s, skip_special=False) for s in seqs]
        at = self._anchor_text
        texts = [d[len(at):] if d.startswith(at) else self._raw_decode([i], skip_special=False)
                 for i, d in enumerate(decoded)]
        for i in self._specials:
            if i < n_tok:
                texts[i] = ""
        return texts + [""] * (self._nv - n_tok)

    def _display_text(self, token_id: int) -> str:
        tok = self._tok.convert_ids_to_tokens(int(token_id)) if token_id < len(self._tok) else None
        return str(tok) if tok else f"<id:{token_id}>"

    def _special_ids(self) -> set[int]:
        return set(self._specials)

    def _eog_ids(self) -> set[int]:
        ids: set[int] = set()
        for src in (self._tok.eos_token_id, getattr(self._model.config, "eos_token_id", None),
                    getattr(getattr(self._model, "generation_config", None), "eos_token_id",
                            None)):
            if isinstance(src, int):
                ids.add(src)
            elif isinstance(src, (list, tuple)):
                ids |= {int(x) for x in src}
        for i, t in self._tok.added_tokens_decoder.items():
            if t.special and t.content in _EOG_TEXTS:
                ids.add(int(i))
        return {i for i in ids if 0 <= i < self._nv}

    def _bos(self) -> tuple[int | None, str]:
        text = self._tok.bos_token or ""
        return (self._tok.bos_token_id if self._adds_bos else None), str(text)

    def _eos_text(self) -> str:
        return str(self._tok.eos_token or "")

    def _new_cache(self) -> Any:
        from transformers import DynamicCache

        try:
            return DynamicCache(config=self._model.config)
        except TypeError:  # transformers without the config argument
            return DynamicCache()

    def _next_token_logprobs(self, token_ids: Sequence[int]) -> np.ndarray:
        """Log-probabilities of the token after ``token_ids`` (all of it read as the prompt).

        Args:
            token_ids: the whole sequence, BOS included if any.

        Returns:
            float64 array, shape ``(n_vocab,)``, natural-log probabilities (nats).

        Raises:
            BackendError: empty sequence, or the forward pass failed.
        """
        return self._logprobs_after(token_ids)

    def _logprobs_after(
        self, prompt_ids: Sequence[int], suffix_ids: Sequence[int] = ()
    ) -> np.ndarray:
        """Log-probabilities after ``prompt_ids + suffix_ids``, history-independent.

        Every sequence is computed in the canonical grouping of ``LlamaCppBackend``: the prompt
        in forward passes over blocks aligned to multiples of ``block_size`` (positions
        ``[0, B), [B, 2B), ...``, the last one partial) and each suffix token (label
        continuation, generated token) in a forward pass of its own. The ``DynamicCache`` is
        reused (cropped back) only at that granularity -- the longest common prefix with the
        previous call, rounded down to whole blocks unless the prompt is the same -- so the
        result is bitwise the same whatever was computed before. (float32 matmuls over a
        different number of rows round differently: measured up to 4e-5 nats on SmolLM2 with
        2 threads when the grouping is not fixed.) When everything is cached, the last unit
        (suffix token, or the prompt's last block) is run again for its logits.

        Args:
            prompt_ids: prompt token ids, BOS included if any (non-empty).
            suffix_ids: continuation token ids after the prompt.

        Returns:
            float64 array, shape ``(n_vocab,)``, log-softmax (nats) of the last position's
            logits, computed with ``logits_to_keep=1``.

        Raises:
            BackendError: empty prompt, or the forward pass failed (the cache is dropped).
        """
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
        try:
            with torch.inference_mode():
                if self._cache is None or r == 0:
                    self._cache, r = self._new_cache(), 0
                elif r < len(kv):
                    try:
                        self._cache.crop(r - len(kv))  # negative: remove that many tokens
                    except (RuntimeError, ValueError):  # e.g. a full sliding window: start over
                        self._cache, r = self._new_cache(), 0
                self._kv_ids = list(target[:r])
                self._kv_n_prompt = n_p
                chunks = canonical_chunks(r, n_p, len(target), bs)
                kwargs: dict[str, Any] = {self._cache_kw: self._cache, "use_cache": True}
                if self._keep_kw is not None:
                    kwargs[self._keep_kw] = 1
                logits = None
                for lo, hi in chunks:
                    x = torch.tensor([target[lo:hi]], dtype=torch.long, device=self._device)
                    logits = self._model(input_ids=x, **kwargs).logits[0, -1]
                    self._kv_ids.extend(target[lo:hi])
                    self.n_decoded_tokens += hi - lo
                if logits is None:  # unreachable: at least one unit is always run
                    raise RuntimeError("no tokens were evaluated")
                row = logits.to(torch.float64).cpu().numpy()
        except (RuntimeError, IndexError, ValueError) as err:
            self.reset_cache()
            raise BackendError(f"transformers forward pass failed: {err}") from err
        lp = log_softmax(row)
        self._last = ((prompt, suffix), lp)
        return lp

    def reset_cache(self) -> None:
        """Drop the KV cache, so the next call processes its whole prompt (tests, benchmarks)."""
        self._cache, self._kv_ids, self._kv_n_prompt, self._last = None, [], 0, None

    def _signature_fields(self) -> dict[str, Any]:
        versions = package_versions("transformers", "torch", "gguf", "numpy")
        versions["dtype"] = self._dtype_name  # dtype and device change results: record them
        versions["device"] = str(self._device)
        return {
            "backend_version": transformers.__version__,
            "model": self._model_name,
            "model_sha256": self._sha256,
            "versions": versions,
        }
