"""Canonical token grouping and KV-cache reuse, shared by the llama.cpp and HF backends.

Inference libraries give slightly different logits depending on how tokens are grouped into
forward calls (llama.cpp Q4: up to 0.025 in a label probability; transformers float32: ~4e-5
nats). So that a distribution never depends on what was computed before it, every sequence
``prompt + suffix`` is computed in one canonical grouping: the prompt in blocks aligned to
multiples of ``block_size`` (``[0, B), [B, 2B), ...``, the last one partial) and each suffix
token (label continuations, generated text) in a call of its own. A KV cache is reused only at
that granularity: whole canonical blocks of a previous prompt, or -- for the same prompt --
its blocks plus the matching single-token suffix.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["canonical_chunks", "plan_reuse"]


def plan_reuse(
    kv_ids: Sequence[int], kv_n_prompt: int, prompt: Sequence[int], suffix: Sequence[int],
    block_size: int,
) -> int:
    """How many cached tokens can be kept for ``prompt + suffix``.

    Args:
        kv_ids: tokens currently in the cache (computed canonically for a prompt of length
            ``kv_n_prompt``).
        kv_n_prompt: prompt length of the sequence that filled the cache.
        prompt, suffix: the sequence wanted.
        block_size: canonical block size B (>= 1).

    Returns:
        ``r``: keep ``kv_ids[:r]``, compute the rest. Always ``r < len(prompt + suffix)`` so
        the last position's logits are produced.
    """
    target = [*prompt, *suffix]
    n_p = len(prompt)
    common, n = 0, min(len(kv_ids), len(target))
    while common < n and kv_ids[common] == target[common]:
        common += 1
    if kv_n_prompt == n_p and common >= n_p:
        r = common  # same prompt: its blocks and the matching single-token suffix
    else:
        r = (min(common, n_p, kv_n_prompt) // block_size) * block_size
    if r == len(target):  # all cached: the last position's logits are needed again
        r = r - 1 if r > n_p else ((n_p - 1) // block_size) * block_size
    return r


def canonical_chunks(r: int, n_prompt: int, n_total: int, block_size: int
                     ) -> list[tuple[int, int]]:
    """The ``(lo, hi)`` forward calls that compute positions ``r..n_total`` canonically.

    ``r`` must be a block boundary or lie in the suffix (as ``plan_reuse`` guarantees).
    """
    chunks: list[tuple[int, int]] = []
    pos = r
    while pos < n_prompt:
        end = min((pos // block_size + 1) * block_size, n_prompt)
        chunks.append((pos, end))
        pos = end
    chunks += [(i, i + 1) for i in range(max(r, n_prompt), n_total)]
    return chunks
