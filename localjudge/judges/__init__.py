"""Judges built on the backend layer: G-Eval (``localjudge.judges.geval``)."""

from localjudge.judges.geval import (
    GEval,
    GEvalResult,
    LLMTestCase,
    LLMTestCaseParams,
    Rubric,
)
from localjudge.judges.runner import assert_test, evaluate

__all__ = [
    "GEval",
    "GEvalResult",
    "LLMTestCase",
    "LLMTestCaseParams",
    "Rubric",
    "assert_test",
    "evaluate",
]

from localjudge.judges.pairwise import (
    PairwiseJudge,
    PairwisePrompt,
    PairwiseResult,
    compare,
)

__all__ += ["PairwiseJudge", "PairwisePrompt", "PairwiseResult", "compare"]
