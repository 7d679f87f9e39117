"""Label resolution: score labels -> explicit token-id sequences, and exact label probabilities.

This module is the core of localjudge's scoring. It is backend-independent: a backend supplies
its vocabulary texts, a tokenizer and a ``next_logprobs(prefix_ids)`` function; this module
decides which token sequences spell each label and computes each label's exact probability.

Spellings of a label ``L`` (all are summed):

* every single vocabulary token whose text is ``L`` preceded by zero or more spaces
  (``"7"``, ``" 7"``, SentencePiece ``"▁7"`` which decodes to ``" 7"``); special/control tokens
  are never spellings;
* the tokenizer's own encodings of ``L`` and ``" " + L`` when they take several tokens
  (``"10"`` -> ``"1"``, ``"0"`` on tokenizers that split digits), kept only if they decode back
  to ``L`` with optional leading spaces.

Labels are keyed by token id, never by decoded text. A label with no spelling raises
``TokenizationError`` at set-up; overlapping labels ("1" and "01", "Yes" and "yes") raise
``ConfigError`` in ``normalize_labels``. Non-canonical paths (``" "`` then ``"7"`` on a tokenizer
that has the single token ``" 7"``) are not spellings: models emit canonical tokenisations.

Exact probabilities. The spellings form a trie over token ids. A label whose spelling is a
single token that is not the prefix of another spelling gets ``p(token)``. A spelling of
several tokens gets the chain-rule product ``p(t1)·p(t2|t1)···`` (one extra next-token
evaluation per internal trie node). When a label's spelling is also a proper prefix of another
label's spelling (``"1"`` vs ``"10"`` on a 0-10 scale), the shorter label only counts when the
next token does not extend it: ``P("1") = p("1")·(1 − Σ p(t|"1"))`` over tokens ``t`` whose text
starts with a digit (for labels ending in a digit) or a letter/digit (labels ending in a letter),
or over the trie children otherwise. So ``P("10") = p("1")·p("0"|"1")`` and "1" followed by a
non-digit is label 1 -- not a first-token guess. A token that continues another label's
spelling is excluded too, whatever it is: with labels "A" and "A+", or "1" and "1.5",
``P("A") = p("A")·(1 − p(letter|"A") − p("+"|"A"))``, so probabilities never overlap and the mass
never exceeds 1.

By default (``boundary="prefix"``) a complete spelling that is *not* a prefix of another label's
spelling gets its probability without a boundary check (the standard logprob reading used by
G-Eval and DeepEval). ``boundary="all"`` checks those too, at one extra next-token evaluation per
label spelling, so that e.g. "1" followed by "0" is never counted as label 1 on a 1-5 scale.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from localjudge.errors import ConfigError, TokenizationError
from localjudge.signature import sha256_json

__all__ = [
    "DEFAULT_LABELS",
    "LabelMap",
    "label_probabilities",
    "normalize_labels",
    "resolve_label_ids",
]

DEFAULT_LABELS: tuple[str, ...] = ("1", "2", "3", "4", "5")
"""The default score scale: the integers 1-5 (G-Eval's SummEval scale)."""


def normalize_labels(labels: Iterable[str | int] | range | None) -> tuple[str, ...]:
    """Turn a label spec into a tuple of label strings.

    Args:
        labels: ``None`` (the integers 1-5), a ``range``, integers, or strings such as
            ``("Yes", "No")`` or ``("A", "B")``.

    Returns:
        Labels as strings, in the given order.

    Raises:
        ConfigError: empty list, fewer than 2 labels, a non-str/int label, an empty label,
            a label with leading or trailing whitespace, a duplicate, or overlapping labels
            (same numeric value such as "1" and "01", or the same text up to case).
    """
    if labels is None:
        return DEFAULT_LABELS
    if isinstance(labels, (str, bytes)):
        raise ConfigError(f"labels must be a sequence of labels, got the single string {labels!r}")
    if not isinstance(labels, Iterable):
        raise ConfigError(f"labels must be a sequence of labels such as range(1, 6) or "
                          f"['Yes', 'No'], got {labels!r}")
    out: list[str] = []
    for lab in labels:
        if isinstance(lab, bool) or not isinstance(lab, (str, numbers.Integral)):
            raise ConfigError(f"each label must be str or int, got {lab!r}")
        s = lab if isinstance(lab, str) else str(int(lab))
        if not s.strip():
            raise ConfigError(f"label is empty or whitespace: {s!r}")
        if s != s.strip():
            raise ConfigError(
                f"label {s!r} has leading/trailing whitespace; give the bare label, spellings "
                "with a leading space are found automatically"
            )
        out.append(s)
    if len(out) < 2:
        raise ConfigError(f"need at least 2 labels, got {out}")
    dup = sorted({x for x in out if out.count(x) > 1})
    if dup:
        raise ConfigError(f"duplicate labels: {dup}")
    seen: dict[float, str] = {}
    for s in out:
        try:
            v = float(s)
        except ValueError:
            continue
        if v in seen:
            raise ConfigError(f"labels {seen[v]!r} and {s!r} overlap: both mean the score {v:g}")
        seen[v] = s
    folded: dict[str, str] = {}
    for s in out:
        if s.casefold() in folded:
            raise ConfigError(
                f"labels {folded[s.casefold()]!r} and {s!r} overlap: they differ only by case, "
                "which many judges do not distinguish"
            )
        folded[s.casefold()] = s
    return tuple(out)


@dataclass
class _Node:
    children: dict[int, _Node] = field(default_factory=dict)
    label: str | None = None


@dataclass(frozen=True)
class LabelMap:
    """Labels resolved to token-id sequences for one tokenizer.

    Attributes:
        labels: the labels, in requested order.
        spellings: label -> tuple of token-id sequences that spell it.
        first_token_ids: ids that start any spelling (to flag label tokens in ``top_tokens``).
        max_len: the longest spelling, in tokens.
        sha256: sha256 of the canonical JSON of ``spellings``.
    """

    labels: tuple[str, ...]
    spellings: dict[str, tuple[tuple[int, ...], ...]]
    first_token_ids: frozenset[int]
    max_len: int
    sha256: str
    _root: _Node = field(repr=False, compare=False)

    def as_json(self) -> dict[str, list[list[int]]]:
        """label -> list of token-id lists (for signatures)."""
        return {lab: [list(s) for s in self.spellings[lab]] for lab in self.labels}


def resolve_label_ids(
    labels: Sequence[str],
    *,
    vocab_texts: Sequence[str],
    special_ids: Iterable[int],
    tokenize: Callable[[str], list[int]],
    decode: Callable[[Sequence[int]], str],
) -> LabelMap:
    """Resolve labels to explicit token-id sequences.

    Args:
        labels: normalised labels (see ``normalize_labels``).
        vocab_texts: decoded text of every token id, index = id.
        special_ids: ids of special/control tokens (never spellings).
        tokenize: text -> ids without BOS and without parsing special tokens.
        decode: ids -> text.

    Returns:
        A ``LabelMap``.

    Raises:
        TokenizationError: a label has no spelling.
    """
    specials = set(special_ids)
    wanted = {lab: set[tuple[int, ...]]() for lab in labels}
    for tid, text in enumerate(vocab_texts):
        if tid in specials or not text:
            continue
        bare = text.lstrip(" ")
        if bare in wanted:
            wanted[bare].add((tid,))
    for lab in labels:
        for variant in (lab, " " + lab):
            try:
                ids = tuple(tokenize(variant))
            except Exception as err:  # tokenizer failure is a set-up error
                raise TokenizationError(f"cannot tokenise label {lab!r}: {err}") from err
            if len(ids) > 1 and not (set(ids) & specials) and decode(ids).lstrip(" ") == lab:
                wanted[lab].add(ids)
    for lab in labels:
        if not wanted[lab]:
            raise TokenizationError(
                f"label {lab!r} cannot be tokenised: no token sequence of this tokenizer "
                "spells it"
            )
    # Each spelling decodes to exactly one label text, so spellings of distinct labels are
    # disjoint by construction; labels that mean the same thing are refused in
    # normalize_labels.
    spellings = {lab: tuple(sorted(wanted[lab], key=lambda s: (len(s), s))) for lab in labels}
    root = _Node()
    for lab in labels:
        for seq in spellings[lab]:
            node = root
            for tid in seq:
                node = node.children.setdefault(tid, _Node())
            node.label = lab
    return LabelMap(
        labels=tuple(labels),
        spellings=spellings,
        first_token_ids=frozenset(seq[0] for seqs in spellings.values() for seq in seqs),
        max_len=max(len(s) for seqs in spellings.values() for s in seqs),
        sha256=sha256_json({lab: [list(s) for s in spellings[lab]] for lab in labels}),
        _root=root,
    )


@dataclass
class LabelProbabilities:
    """Exact raw label probabilities computed by ``label_probabilities``.

    Attributes:
        probs: raw probability of each label in [0, 1] (label order), not renormalised.
        pruned_mass: total probability of trie prefixes not expanded (upper bound on the
            label mass left out).
        n_evals: next-token evaluations used beyond the prompt (internal trie nodes).
    """

    probs: list[float]
    pruned_mass: float
    n_evals: int


def label_probabilities(
    label_map: LabelMap,
    root_logprobs: np.ndarray,
    next_logprobs: Callable[[Sequence[int]], np.ndarray],
    *,
    extend_masks: dict[str, np.ndarray],
    prune_below: float = 1e-6,
    boundary: str = "prefix",
) -> LabelProbabilities:
    """Exact label probabilities from next-token log-probabilities (chain rule over the trie).

    Args:
        label_map: resolved labels.
        root_logprobs: log-probabilities (nats, shape ``(n_vocab,)``) at the scoring position.
        next_logprobs: suffix token ids (after the prompt) -> log-probabilities, shape
            ``(n_vocab,)``, at the position after that suffix.
        extend_masks: ``{"digit": bool[n_vocab], "alnum": bool[n_vocab]}``: tokens whose text
            starts with a digit / a letter or digit (no leading space); used for the
            boundary rule of labels that are prefixes of other labels.
        prune_below: internal trie nodes whose prefix probability is below this are not
            expanded; their probability is added to ``pruned_mass``.
        boundary: ``"prefix"`` applies the boundary rule only where a label's spelling is a
            proper prefix of another label's (required to split "1" from "10"); ``"all"``
            also checks every complete spelling with probability above ``prune_below`` (one
            extra next-token evaluation each), so "1" followed by "0" never counts as label 1
            on a 1-5 scale.

    Returns:
        ``LabelProbabilities`` (raw label probabilities, pruned mass, extra evaluations).
    """
    index = {lab: i for i, lab in enumerate(label_map.labels)}
    probs = [0.0] * len(label_map.labels)
    pruned = 0.0
    n_evals = 0

    def walk(node: _Node, prefix: tuple[int, ...], lp: np.ndarray, p_prefix: float) -> None:
        nonlocal pruned, n_evals
        for tid, child in node.children.items():
            p = p_prefix * math.exp(float(lp[tid]))
            check_leaf = boundary == "all" and p > prune_below
            if not child.children and not check_leaf:
                if child.label is not None:
                    probs[index[child.label]] += p
                continue
            if p <= prune_below:
                pruned += p
                continue
            seq = prefix + (tid,)
            lp_child = next_logprobs(seq)
            n_evals += 1
            if child.label is not None:
                # the label ends here unless the next token extends it (a digit after a
                # number, a letter/digit after a word) or continues another label's spelling
                # ("+" after "A" toward "A+", "." after "1" toward "1.5")
                mask = _extension_mask(child.label, extend_masks, len(lp_child))
                if child.children:
                    mask = mask.copy()
                    mask[list(child.children)] = True
                ext = float(np.exp(lp_child[mask]).sum())
                probs[index[child.label]] += p * max(0.0, 1.0 - ext)
            if child.children:
                walk(child, seq, lp_child, p)

    walk(label_map._root, (), root_logprobs, 1.0)
    return LabelProbabilities(probs=probs, pruned_mass=pruned, n_evals=n_evals)


def sample_label(
    label_map: LabelMap,
    cdf_after: Callable[[tuple[int, ...]], np.ndarray],
    rng: np.random.Generator,
    *,
    extend_masks: dict[str, np.ndarray],
    boundary: str = "prefix",
) -> tuple[str | None, tuple[int, ...]]:
    """Draw one real sample of the score from the model's full next-token distribution.

    Tokens are drawn one at a time from the *full* vocabulary distribution (never from the
    renormalised label distribution) and walked down the same trie and boundary rule as
    ``label_probabilities``, so the sampled frequencies converge to the exact raw label
    probabilities and the draws that spell no label are counted, not dropped.

    Args:
        label_map: resolved labels.
        cdf_after: suffix token ids -> cumulative probabilities over the vocabulary, shape
            ``(n_vocab,)``, last element 1 (at the temperature being sampled).
        rng: the local generator.
        extend_masks, boundary: as in ``label_probabilities``.

    Returns:
        ``(label or None, drawn token ids)``.
    """

    def draw(suffix: tuple[int, ...]) -> int:
        cdf = cdf_after(suffix)
        return int(min(np.searchsorted(cdf, rng.random() * cdf[-1], side="right"),
                       cdf.shape[0] - 1))

    drawn: tuple[int, ...] = (draw(()),)
    child = label_map._root.children.get(drawn[0])
    if child is None:
        return None, drawn
    while True:
        needs_next = bool(child.children) or (boundary == "all" and child.label is not None)
        if not needs_next:
            return child.label, drawn
        nxt = draw(drawn)
        drawn = drawn + (nxt,)
        if nxt in child.children:
            child = child.children[nxt]
            continue
        if child.label is not None and not _extends(child.label, nxt, extend_masks):
            return child.label, drawn
        return None, drawn


def _extension_mask(label: str, extend_masks: dict[str, np.ndarray], n: int) -> np.ndarray:
    """Tokens that would extend ``label`` into a longer word/number (boundary rule)."""
    last = label[-1]
    if last.isdigit():
        return extend_masks["digit"]
    if last.isalpha():
        return extend_masks["alnum"]
    return np.zeros(n, dtype=bool)


def _extends(label: str, tid: int, extend_masks: dict[str, np.ndarray]) -> bool:
    return bool(_extension_mask(label, extend_masks, tid + 1)[tid])


def extend_masks_from_texts(vocab_texts: Sequence[str]) -> dict[str, np.ndarray]:
    """Boolean masks over the vocabulary for the label boundary rule.

    ``digit[i]``: token text starts with a digit; ``alnum[i]``: starts with a letter or digit.
    A token starting with a space never extends a label.
    """
    digit = np.fromiter((t[:1].isdigit() for t in vocab_texts), dtype=bool, count=len(vocab_texts))
    alnum = np.fromiter((t[:1].isalnum() for t in vocab_texts), dtype=bool, count=len(vocab_texts))
    return {"digit": digit, "alnum": alnum}
