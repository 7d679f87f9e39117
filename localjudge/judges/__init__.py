"""Judges built on the backend layer: G-Eval (``localjudge.judges.geval``)."""

from localjudge.judges.geval import (
    GEval,
    GEvalResult,
    LLMTestCase,
    LLMTestCaseParams,
    Rubric,
    assert_test,
    evaluate,
)

__all__ = [
    "GEval",
    "GEvalResult",
    "LLMTestCase",
    "LLMTestCaseParams",
    "Rubric",
    "assert_test",
    "evaluate",
]
