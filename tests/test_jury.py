"""Jury (PoLL) on the scripted FakeBackend: pooling with failed judges, spread, vote,
family warnings."""

from __future__ import annotations

import pytest

from localjudge.backends.fake import FakeBackend
from localjudge.errors import ConfigError
from localjudge.judges.geval import GEval, LLMTestCase, LLMTestCaseParams
from localjudge.jury import Jury, PromptJudge, pool

CASE = LLMTestCase(input="Summarise.", actual_output="A cat sat.", name="c")
TPL = "Rate this: {actual_output}"


def judge(probs, family, name, **kw):
    b = FakeBackend(probs, **kw.pop("fake", {}))
    b.family = family
    return PromptJudge(b, TPL, name=name, **kw)


def test_mean_median_and_spread_exact():
    # scores: 5 -> 1.0 ; 3 -> 0.5 ; p(1)=p(2)=0.5 -> g=1.5 -> 0.125
    js = [judge({"5": 1.0}, "a", "j1"), judge({"3": 1.0}, "b", "j2"),
          judge({"1": 0.5, "2": 0.5}, "c", "j3")]
    r = Jury(js, "mean").measure(CASE)
    assert r.score == pytest.approx((1.0 + 0.5 + 0.125) / 3)
    assert r.n_answered == 3 and r.n_errors == 0 and r.error is None
    assert r.spread_range == pytest.approx(0.875)
    mean = (1.0 + 0.5 + 0.125) / 3
    var = ((1 - mean) ** 2 + (0.5 - mean) ** 2 + (0.125 - mean) ** 2) / 3
    assert r.variance == pytest.approx(var) and r.spread_sd == pytest.approx(var ** 0.5)
    assert Jury(js, "median").measure(CASE).score == pytest.approx(0.5)
    assert [m.expected for m in r.members] == [5.0, 3.0, 1.5]


def test_failed_judge_is_left_out_and_counted_never_zero_or_nan():
    js = [judge({"5": 1.0}, "a", "ok1"), judge({"4": 0.3}, "b", "lowmass"),
          judge({"3": 1.0}, "c", "overflow", fake={"n_ctx": 8})]
    r = Jury(js).measure(CASE)
    assert r.score == pytest.approx(1.0)  # only ok1 answered
    assert r.n_answered == 1 and r.n_errors == 2
    errs = {m.name: m.error for m in r.members}
    assert errs == {"ok1": None, "lowmass": "low_mass", "overflow": "context_overflow"}
    assert r.members[1].distribution is not None  # the refused distribution is kept
    assert r.spread_sd == 0.0


def test_no_judge_answered_is_an_error_not_a_score():
    r = Jury([judge({"4": 0.3}, "a", "x"), judge({"4": 0.2}, "b", "y")]).measure(CASE)
    assert r.score is None and r.error == "no_judge_answered" and r.n_errors == 2


def test_vote_pooling_plurality_and_tie_break():
    js = [judge({"4": 0.6, "2": 0.4}, "a", "j1"), judge({"4": 0.9, "5": 0.1}, "b", "j2"),
          judge({"2": 1.0}, "c", "j3")]
    assert Jury(js, "vote").measure(CASE).score == pytest.approx(0.75)  # label 4 wins 2:1
    # tie 1:1 between 2 and 4: summed probability 4 -> 0.6, 2 -> 0.4+... pick by mass
    tie = [judge({"4": 0.6, "2": 0.4}, "a", "j1"), judge({"2": 0.55, "4": 0.45}, "b", "j2")]
    # p(4) = 0.6 + 0.45 = 1.05 > p(2) = 0.95 -> 4
    assert Jury(tie, "vote").measure(CASE).score == pytest.approx(0.75)
    assert pool([0.2, 0.4], "vote", [2.0, 4.0], {2.0: 0.5, 4.0: 0.5}, (1, 5)) == 0.25


def test_vote_needs_one_scale_and_bad_config():
    a = judge({"3": 1.0}, "a", "a")
    b = judge({"3": 1.0}, "b", "b", score_range=(0, 10))
    with pytest.raises(ConfigError, match="common scale"):
        Jury([a, b], "vote")
    with pytest.raises(ConfigError, match="pooling"):
        Jury([a], "max")
    with pytest.raises(ConfigError, match="at least one"):
        Jury([])
    with pytest.raises(ConfigError, match="unique"):
        Jury([a, judge({"3": 1.0}, "b", "a")])


def test_single_family_panel_warns_and_self_preference_warns():
    clones = Jury([judge({"3": 1.0}, "qwen2", f"q{i}") for i in range(3)])
    assert any("one model family (qwen2)" in w for w in clones.warnings)
    diverse = Jury([judge({"3": 1.0}, "qwen2", "q"), judge({"3": 1.0}, "gemma3", "g")])
    assert diverse.warnings == []
    r = diverse.measure(CASE, response_family="qwen2")
    assert any("self-preference" in w and "'q'" in w for w in r.warnings)
    assert not any("self-preference" in w for w in diverse.measure(CASE).warnings)
    unknown = Jury([judge({"3": 1.0}, None, "u"), judge({"3": 1.0}, "x", "v")])
    assert any("family unknown" in w for w in unknown.warnings)


def test_geval_judges_in_a_jury():
    b1, b2 = FakeBackend({"4": 1.0}), FakeBackend({"2": 1.0})
    b1.family, b2.family = "f1", "f2"
    P = [LLMTestCaseParams.ACTUAL_OUTPUT]
    g1 = GEval("C1", evaluation_steps=["Read."], evaluation_params=P, model=b1)
    g2 = GEval("C2", evaluation_steps=["Read."], evaluation_params=P, model=b2)
    r = Jury([g1, g2]).measure(CASE)
    assert r.score == pytest.approx((0.75 + 0.25) / 2)
    assert [m.family for m in r.members] == ["f1", "f2"]


def test_prompt_judge_refuses_missing_fields_and_bad_templates():
    j = judge({"3": 1.0}, "a", "j", )
    ref = PromptJudge(j.model, "Reference: {expected_output}\nAnswer: {actual_output}", name="r")
    from localjudge.judges.geval import MissingTestCaseParamsError

    with pytest.raises(MissingTestCaseParamsError, match="expected_output"):
        Jury([ref]).measure(CASE)
    for bad in ["{0}", "{", "{nope}"]:
        with pytest.raises(ConfigError):
            PromptJudge(j.model, bad)
    for kw in [{"score_range": (1, 5, 7)}, {"min_mass": float("nan")}, {"min_mass": 2}]:
        with pytest.raises(ConfigError):
            PromptJudge(j.model, TPL, **kw)
