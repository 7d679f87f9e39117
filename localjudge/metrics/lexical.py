"""Sentence-level lexical overlap: BLEU-4, BLEU-2, smoothed BLEU-4 (sacrebleu) and ROUGE-1/2/L F1
(rouge-score).

Thin wrappers only: the n-gram statistics, brevity penalty, smoothing and LCS are sacrebleu's
and rouge-score's (nothing is re-implemented here); this module fixes their settings, records
them in a ``Signature`` and returns a frozen result. BERTScore lives in
``localjudge.metrics.bertscore``. sacrebleu and rouge-score (the ``[bertscore]`` extra) are
imported inside ``LexicalScorer``, never at import time.

Settings (chosen to reproduce the values in issue 4, see ``tests/test_lexical.py``):

* BLEU (Papineni et al. 2002, ACL, section 2; sacrebleu ``BLEU.sentence_score``): one
  reference, case-sensitive, ``tokenize="none"`` (split on whitespace only, so
  ``"mat."`` is one token), ``effective_order=True`` (sacrebleu's recommended sentence-level
  setting: n-gram orders the response is too short to have are left out of the geometric
  mean; it changes nothing for responses of at least N tokens).
  - BLEU-4: ``max_ngram_order=4``, ``smooth_method="none"`` (any zero n-gram precision gives 0).
  - BLEU-2: ``max_ngram_order=2``, ``smooth_method="none"``.
  - smoothed BLEU-4: ``smooth_method="exp"``: Chen & Cherry 2014 (WMT, "A Systematic
    Comparison of Smoothing Techniques for Sentence-Level BLEU") method 3, the NIST
    geometric-sequence smoothing of mteval-v13a: the k-th order with zero matches gets
    precision 1 / (2^k * total_n).
* ROUGE (Lin 2004, "ROUGE: A Package for Automatic Evaluation of Summaries", sections 2-3;
  rouge-score ``RougeScorer``): ``rouge1``, ``rouge2``, ``rougeL`` (sentence-level LCS, not
  ``rougeLsum``), F-measure, rouge-score's default tokenizer (lowercase, every
  non-``[a-z0-9]`` character is a separator, so non-ASCII letters are dropped), no stemming.

Example:
    >>> from localjudge.metrics.lexical import lexical_scores
    >>> s = lexical_scores("The cat sat on the", "The cat sat on the mat.")  # doctest: +SKIP
    >>> round(s.bleu4, 4), round(s.rouge_l_f1, 4)                           # doctest: +SKIP
    (0.8187, 0.9091)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from localjudge.errors import ConfigError
from localjudge.signature import Signature
from localjudge.version import package_versions

__all__ = ["ROUGE_SETTINGS", "SMOOTH_METHOD", "LexicalScorer", "LexicalScores", "lexical_scores"]

SMOOTH_METHOD = "exp"
"""sacrebleu smoothing of the smoothed BLEU-4: Chen & Cherry 2014 method 3 (NIST/mteval-v13a)."""

BLEU_TOKENIZE = "none"
"""sacrebleu tokenizer: whitespace split only (reproduces BLEU-4 = 0.8187 = e^-0.2 for C)."""

ROUGE_SETTINGS = "rouge-score|types:rouge1,rouge2,rougeL|tokenizer:default|stemmer:no|f1"
"""The rouge-score settings, as recorded in the signature."""


@dataclass(frozen=True, slots=True)
class LexicalScores:
    """Sentence-level lexical overlap of one response with one reference (all in [0, 1]).

    Attributes:
        bleu4: BLEU-4, unsmoothed (sacrebleu score / 100), in [0, 1].
        bleu2: BLEU-2, unsmoothed, in [0, 1].
        bleu4_smoothed: BLEU-4 with Chen & Cherry 2014 method 3 (``"exp"``) smoothing, [0, 1].
        rouge1_f1: ROUGE-1 F-measure, in [0, 1].
        rouge2_f1: ROUGE-2 F-measure, in [0, 1].
        rouge_l_f1: ROUGE-L (sentence LCS) F-measure, in [0, 1].
        signature: sacrebleu signatures and rouge-score settings that produced the values.
    """

    bleu4: float
    """Unsmoothed sentence BLEU-4 in [0, 1]."""
    bleu2: float
    """Unsmoothed sentence BLEU-2 in [0, 1]."""
    bleu4_smoothed: float
    """Smoothed (Chen & Cherry 2014 method 3) sentence BLEU-4 in [0, 1]."""
    rouge1_f1: float
    """ROUGE-1 F1 in [0, 1]."""
    rouge2_f1: float
    """ROUGE-2 F1 in [0, 1]."""
    rouge_l_f1: float
    """ROUGE-L F1 in [0, 1]."""
    signature: Signature
    """Provenance (library versions and exact settings in ``params``)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable dict; inverse of ``from_dict``."""
        return {
            "bleu4": self.bleu4,
            "bleu2": self.bleu2,
            "bleu4_smoothed": self.bleu4_smoothed,
            "rouge1_f1": self.rouge1_f1,
            "rouge2_f1": self.rouge2_f1,
            "rouge_l_f1": self.rouge_l_f1,
            "signature": self.signature.to_dict(),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LexicalScores:
        """Inverse of ``to_dict``."""
        return cls(
            bleu4=float(d["bleu4"]),
            bleu2=float(d["bleu2"]),
            bleu4_smoothed=float(d["bleu4_smoothed"]),
            rouge1_f1=float(d["rouge1_f1"]),
            rouge2_f1=float(d["rouge2_f1"]),
            rouge_l_f1=float(d["rouge_l_f1"]),
            signature=Signature.from_dict(d["signature"]),
        )


class LexicalScorer:
    """Holds the configured sacrebleu ``BLEU`` objects and the rouge-score ``RougeScorer``.

    Deterministic (no randomness, no model). Settings are fixed: see the module docstring.

    Raises:
        ConfigError: sacrebleu or rouge-score is not installed (names the ``[bertscore]``
            extra).
    """

    def __init__(self) -> None:
        try:
            from rouge_score import rouge_scorer  # type: ignore[import-untyped]
            from sacrebleu.metrics.bleu import BLEU
        except ImportError as err:
            raise ConfigError(
                "lexical metrics need sacrebleu and rouge-score: pip install "
                f"'localjudge[bertscore]' ({err})"
            ) from err
        common: dict[str, Any] = {"tokenize": BLEU_TOKENIZE, "effective_order": True}
        self._bleu4 = BLEU(max_ngram_order=4, smooth_method="none", **common)
        self._bleu2 = BLEU(max_ngram_order=2, smooth_method="none", **common)
        self._bleu4s = BLEU(max_ngram_order=4, smooth_method=SMOOTH_METHOD, **common)
        self._rouge = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=False)
        for b in (self._bleu4, self._bleu2, self._bleu4s):
            # sacrebleu fills nrefs into its signature only after one evaluation.
            b.sentence_score("a", ["a"])
        self._signature = Signature(
            backend="lexical",
            backend_version=(
                f"sacrebleu-{metadata.version('sacrebleu')}"
                f"+rouge-score-{metadata.version('rouge-score')}"
            ),
            model="none",
            model_sha256="",
            template_sha256="none",
            label_map={},
            label_map_sha256="none",
            params={
                "bleu4": f"{self._bleu4.get_signature()}|order:4",
                "bleu2": f"{self._bleu2.get_signature()}|order:2",
                "bleu4_smoothed": f"{self._bleu4s.get_signature()}|order:4",
                "rouge": ROUGE_SETTINGS,
            },
            versions=package_versions("sacrebleu", "rouge-score"),
        )

    @property
    def signature(self) -> Signature:
        """Provenance of every ``LexicalScores`` this scorer returns."""
        return self._signature

    def score(self, response: str, reference: str) -> LexicalScores:
        """BLEU-4, BLEU-2, smoothed BLEU-4 and ROUGE-1/2/L F1 of one pair.

        Args:
            response: the text to evaluate (non-empty after stripping whitespace).
            reference: the reference text (non-empty).

        Returns:
            ``LexicalScores``, all values in [0, 1].

        Raises:
            ConfigError: a text is not a str or is empty (BLEU's brevity penalty and ROUGE's
                precision/recall are then undefined or degenerate; record the item as an
                error instead of scoring it 0).
        """
        for name, t in (("response", response), ("reference", reference)):
            if not isinstance(t, str):
                raise ConfigError(f"{name} must be str, got {type(t).__name__}")
            if not t.strip():
                raise ConfigError(f"{name} is empty: {t!r}")
        refs = [reference]
        r = self._rouge.score(reference, response)  # rouge-score's order is (target, prediction)
        return LexicalScores(
            bleu4=self._bleu4.sentence_score(response, refs).score / 100.0,
            bleu2=self._bleu2.sentence_score(response, refs).score / 100.0,
            bleu4_smoothed=self._bleu4s.sentence_score(response, refs).score / 100.0,
            rouge1_f1=float(r["rouge1"].fmeasure),
            rouge2_f1=float(r["rouge2"].fmeasure),
            rouge_l_f1=float(r["rougeL"].fmeasure),
            signature=self._signature,
        )


def lexical_scores(response: str, reference: str) -> LexicalScores:
    """One-shot ``LexicalScorer().score(response, reference)``.

    Args and Raises: as ``LexicalScorer.score``.
    """
    return LexicalScorer().score(response, reference)
