"""Reading a server's top-k logprobs into label probabilities (used by ``OpenAICompatBackend``).

Pure functions over parsed JSON: validation of every returned entry (a NaN, +inf or positive
logprob, a wrong type or top-k probabilities summing above 1 are ``BackendError``s, never a
score), de-duplication by token id or text, and the walk over multi-token labels with the
chain rule and the boundary rule of ``localjudge.labels`` (every result a lower bound).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from localjudge.errors import BackendError, ConfigError

__all__ = ["normalize_token_text"]

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
