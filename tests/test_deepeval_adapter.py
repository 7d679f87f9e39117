"""``LocalJudgeModel``: DeepEval's own GEval weighting on localjudge's exact distribution.

Needs the ``[deepeval]`` extra (skipped without it). DeepEval's telemetry, dotenv loading and
update checks are switched off before it is imported, and its state goes to a temp folder.

The 1 % bound: DeepEval drops labels with raw probability < 0.01 and renormalises the rest,
so its 0-1 score differs from the exact expectation by at most
``δ = Σ_{p_raw(s) < 0.01} p(s)`` (renormalised probability of the dropped labels), and
``deepeval_weighted_score`` reproduces its arithmetic exactly (to 1e-12).
"""

from __future__ import annotations

import math
import os
import tempfile

import pytest
from conftest import require_module

os.environ.setdefault("DEEPEVAL_TELEMETRY_OPT_OUT", "YES")
os.environ.setdefault("DEEPEVAL_DISABLE_DOTENV", "1")
os.environ.setdefault("DEEPEVAL_HOME", tempfile.mkdtemp(prefix="deepeval-home-"))
os.environ.pop("DEEPEVAL_UPDATE_WARNING_OPT_IN", None)

require_module("deepeval", env="LOCALJUDGE_REQUIRE_DEEPEVAL")

from deepeval.metrics import GEval as DEGEval
from deepeval.metrics.g_eval.utils import calculate_weighted_summed_score
from deepeval.test_case import LLMTestCase as DECase
from deepeval.test_case import SingleTurnParams

from localjudge.backends.fake import FakeBackend
from localjudge.integrations.deepeval import (
    LocalJudgeModel,
    deepeval_weighted_score,
)
from localjudge.judges import GEval, LLMTestCase, LLMTestCaseParams

STEPS = ["Check whether the response answers the question.",
         "Check whether the response is correct."]


def _dropped_mass(dist) -> float:
    return math.fsum(p for p, lp in zip(dist.probs, dist.logprobs) if lp < math.log(0.01))


def test_import_localjudge_does_not_import_deepeval():
    import subprocess
    import sys

    code = ("import sys, localjudge, localjudge.integrations, localjudge.backends.openai_compat;"
            "print(any(m.split('.')[0] in ('deepeval', 'openai') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=False)
    assert out.stdout.strip() == "False", out.stderr


def test_raw_response_shape_and_deepeval_weighting():
    # raw: "3" .5, "4" .495, "5" .005 -> DeepEval drops "5": (3*.5 + 4*.495)/.995
    fb = FakeBackend.digits(next_probs={"3": 0.5, "4": 0.495, "5": 0.005})
    m = LocalJudgeModel(fb, score_range=(1, 5), reason_max_tokens=0)
    res, cost = m.generate_raw_response("Rate it. an integer between 1 and 5", top_logprobs=20)
    assert cost == 0.0
    assert res.choices[0].message.content == '{"reason": "", "score": 3}'
    tok = res.choices[0].logprobs.content[1]
    assert tok.token == "3" and [t.token for t in tok.top_logprobs] == ["3", "4", "5"]
    w = calculate_weighted_summed_score(3, res)
    assert w == pytest.approx((3 * .5 + 4 * .495) / .995, abs=1e-12)
    assert w == pytest.approx(deepeval_weighted_score(m.last_distribution), abs=1e-12)
    exact = m.last_distribution.expected                          # 3.505
    assert abs(w - exact) <= _dropped_mass(m.last_distribution) * (5 - 1) + 1e-12


def test_deepeval_geval_with_fake_backend_is_weighted():
    fb = FakeBackend.digits(next_probs={"6": 0.5, "7": 0.25, "8": 0.25})
    metric = DEGEval(name="Correctness", evaluation_steps=STEPS,
                     evaluation_params=[SingleTurnParams.INPUT, SingleTurnParams.ACTUAL_OUTPUT],
                     model=LocalJudgeModel(fb, reason_max_tokens=0), async_mode=False)
    score = metric.measure(DECase(input="2+2?", actual_output="4"), _show_indicator=False)
    assert score == pytest.approx((6 * .5 + 7 * .25 + 8 * .25) / 10)   # 0.675, not an integer


def test_schema_generation_parses_or_returns_text():
    from deepeval.metrics.g_eval.schema import Steps

    fb = FakeBackend.digits(next_probs={"1": 1.0})
    m = LocalJudgeModel(fb)
    out = m.generate("steps please", schema=Steps)
    assert isinstance(out, (str, Steps))


@pytest.mark.model
@pytest.mark.parametrize("async_mode", [False, True])
def test_deepeval_geval_matches_localjudge_geval(smollm_llama, async_mode):
    adapter = LocalJudgeModel(smollm_llama, reason_max_tokens=0, min_mass=0.0)
    metric = DEGEval(name="Correctness", evaluation_steps=STEPS,
                     evaluation_params=[SingleTurnParams.INPUT, SingleTurnParams.ACTUAL_OUTPUT],
                     model=adapter, async_mode=async_mode)
    de_score = metric.measure(DECase(input="What is the capital of France?",
                                     actual_output="Paris is the capital of France."),
                              _show_indicator=False)
    dist = adapter.last_distribution
    assert dist is not None and dist.labels == tuple(str(i) for i in range(11))
    assert de_score != round(de_score)                           # weighted, not the integer

    prompt = adapter.last_prompt

    class SamePrompt(GEval):
        """localjudge's G-Eval reading the score on DeepEval's prompt and prefill."""

        def _form_prompt(self, case, steps):
            return prompt

        @property
        def prefill(self):
            return adapter.prefill

    ours = SamePrompt("Correctness", evaluation_steps=STEPS, score_range=(0, 10),
                      evaluation_params=[LLMTestCaseParams.INPUT,
                                         LLMTestCaseParams.ACTUAL_OUTPUT],
                      model=smollm_llama, min_mass=0.0)
    lj_score = ours.measure(LLMTestCase(input="What is the capital of France?",
                                        actual_output="Paris is the capital of France."))
    delta = _dropped_mass(dist)
    print(f"deepeval {de_score:.6f} localjudge {lj_score:.6f} |diff| "
          f"{abs(de_score - lj_score):.2e} bound δ {delta:.2e} mass {dist.mass:.4f}")
    assert abs(de_score - lj_score) <= delta + 1e-9
    assert de_score == pytest.approx(deepeval_weighted_score(dist) / 10, abs=1e-12)
