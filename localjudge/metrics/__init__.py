"""Reference-based metrics: BERTScore and lexical overlap (BLEU, ROUGE).

Re-exports only. ``localjudge.metrics.bertscore`` imports torch/transformers lazily (inside
``BERTScorer``) and ``localjudge.metrics.lexical`` imports sacrebleu/rouge-score lazily, so
importing this package needs neither the ``[hf]`` nor the ``[bertscore]`` extra.
"""

from localjudge.metrics.bertscore import (
    DEFAULT_LAYERS,
    DEFAULT_MODEL,
    BaselineError,
    BERTScoreBaseline,
    BERTScorer,
    BERTScoreResult,
    EmptyTextError,
    TextTooLongError,
    TokenAlignment,
    bertscore,
    load_baseline,
    rescale,
)
from localjudge.metrics.lexical import LexicalScorer, LexicalScores, lexical_scores

__all__ = [
    "DEFAULT_LAYERS",
    "DEFAULT_MODEL",
    "BERTScoreBaseline",
    "BERTScoreResult",
    "BERTScorer",
    "BaselineError",
    "EmptyTextError",
    "LexicalScorer",
    "LexicalScores",
    "TextTooLongError",
    "TokenAlignment",
    "bertscore",
    "lexical_scores",
    "load_baseline",
    "rescale",
]
