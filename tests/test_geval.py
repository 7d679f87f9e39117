"""G-Eval on the scripted FakeBackend: exact arithmetic, rubric validation, strict mode,
threshold re-decision, errors vs fails, steps generation and caching, parsed fallback,
evaluate / assert_test and resume."""

from __future__ import annotations

import json

import pytest

from localjudge.backends.fake import FakeBackend
from localjudge.errors import ConfigError
from localjudge.judges.geval import (
    GEval,
    GEvalResult,
    LLMTestCase,
    LLMTestCaseParams,
    MissingTestCaseParamsError,
    Rubric,
)
from localjudge.judges.runner import assert_test, evaluate

P = [LLMTestCaseParams.INPUT, LLMTestCaseParams.ACTUAL_OUTPUT]
CASE = LLMTestCase(input="Summarise: the cat sat.", actual_output="A cat sat.", name="c1")


def metric(probs, **kw):
    kw.setdefault("evaluation_steps", ["Read the input.", "Check the output."])
    kw.setdefault("evaluation_params", P)
    return GEval("Coherence", model=FakeBackend(probs, **kw.pop("fake", {})), **kw)


def test_weighted_score_normalised_and_argmax():
    # p(2)=0.2, p(4)=0.8 on 1-5: g = 0.4 + 3.2 = 3.6 ; score = (3.6-1)/4 = 0.65
    m = metric({"2": 0.2, "4": 0.8})
    assert m.measure(CASE) == pytest.approx(0.65, abs=1e-12)
    assert m.raw_score == pytest.approx(3.6, abs=1e-12)
    assert m.argmax_score == 4.0
    assert m.distribution.mass == pytest.approx(1.0)
    assert m.success and m.error is None
    assert m.result.method == "logprobs"


def test_zero_to_ten_with_exact_multi_token_ten():
    # 0-10: p("1")=0.5 -> after "1": p("0")=0.6 ; p("9")=0.5
    # P(10)=0.3, P(1)=0.2, P(9)=0.5 ; g = 3 + 0.2 + 4.5 = 7.7 ; score = 0.77
    m = metric({"1": 0.5, "9": 0.5}, score_range=(0, 10),
               fake={"continuations": {("1",): {"0": 0.6, ".": 0.4}}})
    assert m.measure(CASE) == pytest.approx(0.77, abs=1e-12)
    assert m.raw_score == pytest.approx(7.7, abs=1e-12)
    assert m.argmax_score == 9.0


def test_threshold_is_policy_and_redecides_without_rerunning_the_judge():
    m = metric({"2": 0.2, "4": 0.8}, threshold=0.5)
    m.measure(CASE)
    n_calls = len(m.model.calls)
    assert m.success
    m.threshold = 0.7
    assert not m.success and m.score == pytest.approx(0.65)
    m.threshold = 0.65
    assert m.success
    r = m.result.with_threshold(0.9)
    assert not r.success and r.score == m.score
    assert len(m.model.calls) == n_calls  # the judge was not called again


def test_strict_mode_passes_only_a_full_score():
    full = metric({"5": 1.0}, strict_mode=True)
    assert full.measure(CASE) == pytest.approx(1.0) and full.success
    almost = metric({"5": 0.99, "4": 0.01}, strict_mode=True, threshold=0.0)
    almost.measure(CASE)
    assert almost.score == pytest.approx((4.99 - 1) / 4) and not almost.success


def test_low_mass_is_an_error_not_a_low_score_and_not_a_pass():
    m = metric({"3": 0.5}, threshold=0.0)  # "\n" carries 0.5
    assert m.measure(CASE) is None
    assert m.error == "low_mass" and m.score is None and m.raw_score is None
    assert not m.success  # threshold 0 would pass any score, but this is no score
    assert m.result.distribution is not None and m.result.mass == pytest.approx(0.5)


def test_context_overflow_is_an_error():
    m = metric({"3": 1.0}, fake={"n_ctx": 64}, threshold=0.0)
    assert m.measure(CASE) is None
    assert m.error == "context_overflow" and not m.success


def test_state_is_cleared_between_cases():
    m = metric({"3": 1.0})
    m.measure(CASE)
    assert m.score is not None
    with pytest.raises(MissingTestCaseParamsError, match="lacks \\['input'\\]"):
        m.measure(LLMTestCase(actual_output="x"))
    assert m.score is None and m.result is None


@pytest.mark.parametrize(
    ("kw", "fragment"),
    [
        ({"evaluation_steps": None}, "criteria or evaluation_steps"),
        ({"evaluation_steps": []}, "non-empty"),
        ({"evaluation_steps": "one step"}, "not one string"),
        ({"score_range": (5, 1)}, "lo < hi"),
        ({"score_range": (1.0, 5)}, "pair of ints"),
        ({"threshold": 1.5}, "threshold"),
        ({"method": "magic"}, "method"),
        ({"evaluation_params": ["input", "nope"]}, "unknown evaluation param"),
        ({"rubric": [Rubric((1, 3), "bad"), Rubric((3, 5), "good")]}, "overlap"),
        ({"rubric": [Rubric((0, 2), "bad")], "score_range": (1, 5)}, "outside the scale"),
    ],
)
def test_configuration_errors(kw, fragment):
    with pytest.raises(ConfigError, match=fragment):
        metric({"3": 1.0}, **kw)


@pytest.mark.parametrize("bad", [((3, 1), "x"), ((1, 2), ""), ((1,), "x")])
def test_rubric_entry_validation(bad):
    with pytest.raises(ConfigError):
        Rubric(*bad)


def test_rubric_sets_scale_and_goes_into_the_prompt():
    rub = [Rubric((0, 3), "Wrong or off-topic."), Rubric((4, 7), "Partly right."),
           Rubric((8, 10), "Correct and complete.")]
    m = metric({"8": 1.0}, rubric=rub)
    assert m.score_range == (0, 10)
    prompt = m._form_prompt(CASE, m.ensure_steps())
    assert "Rubric:\n0-3: Wrong or off-topic.\n4-7: Partly right.\n8-10: Correct" in prompt
    assert m.prefill == "Coherence (0-10): "
    assert m.measure(CASE) == pytest.approx(0.8)


def test_steps_are_generated_once_cached_and_recorded():
    fb = FakeBackend({"3": 1.0})
    m = GEval("Coherence", criteria="Is it well organised?", evaluation_params=P, model=fb)
    # fb generates "333..." greedily: no numbered steps. fb2 generates "1. Read" then stops.
    fb2 = FakeBackend({"1": 1.0}, continuations={
        ("1",): {".": 1.0}, ("1", "."): {" ": 1.0}, (".", " "): {"R": 1.0},
        (" ", "R"): {"e": 1.0}, ("R", "e"): {"a": 1.0}, ("e", "a"): {"d": 1.0},
        ("a", "d"): {"<|im_end|>": 1.0}})
    m2 = GEval("Coherence", criteria="Is it well organised?", evaluation_params=P, model=fb2,
               min_mass=0.0)
    assert m2.evaluation_steps is None
    m2.measure(CASE)
    assert m2.evaluation_steps == ("Read",)
    n = len(fb2.calls)
    m2.measure(CASE)
    sig = m2.result.signature
    assert sig["steps_source"] == "generated" and sig["evaluation_steps"] == ["Read"]
    # second measure did not regenerate: only the scoring call(s) were added
    assert len(fb2.calls) - n < 5
    # unparsable steps are a per-item error, not a crash and not a score
    assert m.measure(CASE) is None and m.error == "parse_failure"


def test_parsed_fallback_is_marked_and_logged(caplog):
    fb = FakeBackend({" ": 1.0}, continuations={(" ",): {"4": 1.0}, ("4",): {"<|im_end|>": 1.0}},
                     supports_logprobs=False)
    m = GEval("Coherence", evaluation_steps=["Read."], evaluation_params=P, model=fb)
    with caplog.at_level("WARNING"):
        assert m.measure(CASE) == pytest.approx(0.75)
    assert m.result.method == "parsed" and m.distribution is None
    assert "parsed-integer fallback" in caplog.text
    with pytest.raises(ConfigError, match="no logprobs"):
        GEval("C", evaluation_steps=["x"], evaluation_params=P, model=fb, method="logprobs")


def test_reason_is_off_by_default_and_generated_when_asked():
    m = metric({"4": 1.0})
    m.measure(CASE)
    assert m.reason is None
    m2 = metric({"4": 1.0}, include_reason=True)
    m2.measure(CASE)
    assert isinstance(m2.reason, str)


def test_signature_has_model_template_steps_and_prompt_version():
    m = metric({"4": 1.0})
    m.measure(CASE)
    sig = m.result.signature
    assert sig["prompt_template"] == "geval-form-v1"
    assert sig["evaluation_steps"] == ["Read the input.", "Check the output."]
    assert sig["steps_source"] == "given" and len(sig["steps_sha256"]) == 64
    assert sig["backend"]["model_sha256"] == "0" * 64
    assert len(sig["backend"]["template_sha256"]) == 64
    assert "threshold" not in json.dumps(sig)  # policy is not provenance


def test_evaluate_records_per_item_errors_and_resumes(tmp_path):
    ok = metric({"4": 1.0})
    cases = [CASE, LLMTestCase(actual_output="no input", name="c2"),
             LLMTestCase(input="q", actual_output="a", name="c3")]
    out = tmp_path / "r.jsonl"
    recs = evaluate(cases, [ok], out=out)
    assert [r.case_id for r in recs] == ["c1", "c2", "c3"]
    assert recs[1].error == "missing_params" and recs[1].score is None
    assert recs[0].score == pytest.approx(0.75) and recs[2].success
    lines = out.read_text().splitlines()
    assert len(lines) == 3
    assert GEvalResult.from_dict(json.loads(lines[0])) == recs[0]
    n_calls = len(ok.model.calls)
    again = evaluate(cases, [ok], out=out)
    assert len(ok.model.calls) == n_calls  # scored items not redone
    assert again[0] == recs[0] and again[2] == recs[2] and again[1].error == "missing_params"
    # the failed item was tried again (and failed again); scored ones were not re-written
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert [x["case_id"] for x in lines] == ["c1", "c2", "c3", "c2"]


def test_resume_redecides_success_under_the_current_threshold(tmp_path):
    out = tmp_path / "r.jsonl"
    m = metric({"4": 1.0}, threshold=0.5)
    assert evaluate([CASE], [m], out=out)[0].success
    m.threshold = 0.9
    again = evaluate([CASE], [m], out=out)
    assert not again[0].success and again[0].threshold == 0.9
    assert again[0].score == pytest.approx(0.75)


def test_resume_refuses_records_of_another_configuration(tmp_path):
    out = tmp_path / "r.jsonl"
    evaluate([CASE], [metric({"4": 1.0})], out=out)
    other = metric({"4": 1.0}, evaluation_steps=["Something else entirely."])
    with pytest.raises(ConfigError, match="different judge configuration"):
        evaluate([CASE], [other], out=out)
    assert evaluate([CASE], [other], out=out, resume=False)[0].score == pytest.approx(0.75)


def test_resume_drops_a_partial_last_line_and_names_bad_lines(tmp_path):
    out = tmp_path / "r.jsonl"
    m = metric({"4": 1.0})
    cases = [CASE, LLMTestCase(input="q", actual_output="a", name="c3")]
    evaluate(cases, [m], out=out)
    text = out.read_text()
    out.write_text(text[: len(text) - 40])  # interrupted in the middle of the last record
    recs = evaluate(cases, [m], out=out)
    assert [r.case_id for r in recs] == ["c1", "c3"]
    assert [json.loads(x)["case_id"] for x in out.read_text().splitlines()] == ["c1", "c3"]
    out.write_text("garbage\n" + out.read_text())
    with pytest.raises(ConfigError, match="r.jsonl:1 is not valid JSON"):
        evaluate(cases, [m], out=out)


def test_duplicate_case_ids_and_bad_items_are_refused_before_touching_the_file(tmp_path):
    out = tmp_path / "r.jsonl"
    out.write_text("keep me\n")
    m = metric({"4": 1.0})
    twins = [LLMTestCase(input="a", actual_output="x", name="same"),
             LLMTestCase(input="b", actual_output="y", name="same")]
    with pytest.raises(ConfigError, match="unique"):
        evaluate(twins, [m], out=out, resume=False)
    with pytest.raises(ConfigError, match="LLMTestCase"):
        evaluate([{"input": "x"}], [m], out=out, resume=False)
    assert out.read_text() == "keep me\n"  # nothing lost


@pytest.mark.parametrize("kw", [{"context": [1]}, {"actual_output": [1, 2]},
                                {"context": "one string"}, {"input": b"bytes"},
                                {"name": object()}])
def test_test_case_field_types_are_checked(kw):
    with pytest.raises(ConfigError, match="test case"):
        LLMTestCase(**kw)


@pytest.mark.parametrize("kw", [{"min_mass": float("nan")}, {"min_mass": 2}, {"min_mass": None},
                                {"boundary": "bogus"}, {"seed": -1}, {"seed": "abc"}])
def test_geval_settings_checked_at_construction(kw):
    with pytest.raises(ConfigError):
        metric({"4": 1.0}, **kw)


def test_evaluate_rejects_duplicate_metric_names():
    with pytest.raises(ConfigError, match="unique"):
        evaluate([CASE], [metric({"4": 1.0}), metric({"4": 1.0})])


def test_assert_test_lists_every_failed_or_errored_metric():
    good = metric({"5": 1.0})
    low = GEval("Relevance", evaluation_steps=["x"], evaluation_params=P,
                model=FakeBackend({"2": 1.0}), threshold=0.5)
    broken = GEval("Fluency", evaluation_steps=["x"], evaluation_params=P,
                   model=FakeBackend({"2": 0.1}))
    with pytest.raises(AssertionError) as ei:
        assert_test(CASE, [good, low, broken])
    msg = str(ei.value)
    assert "2 of 3 metrics failed" in msg
    assert "Relevance: score 0.2500 < threshold 0.5" in msg
    assert "Fluency: ERROR low_mass" in msg
    assert assert_test(CASE, [good])[0].success


def test_test_case_from_dict_rejects_unknown_fields():
    with pytest.raises(ConfigError, match="unknown test-case fields \\['actual'\\]"):
        LLMTestCase.from_dict({"input": "x", "actual": "y"})
    assert LLMTestCase.from_dict({"input": "x", "id": 7}).case_id == "7"


@pytest.mark.model
def test_end_to_end_on_the_fast_real_model(smollm_llama, tmp_path):
    """G-Eval on SmolLM2 (CPU): generated steps are cached, every score is the expectation of
    its own stored distribution, and 0-10 works with the multi-token "10"."""
    m = GEval("Correctness", criteria="Is the actual output a correct answer to the input?",
              evaluation_params=P, model=smollm_llama, min_mass=0.0)
    cases = [LLMTestCase(input="What is 2+3?", actual_output="2+3 equals 5.", name="right"),
             LLMTestCase(input="What is 2+3?", actual_output="It is 7.", name="wrong")]
    recs = evaluate(cases, [m], out=tmp_path / "r.jsonl")
    assert 1 <= len(m.evaluation_steps) <= 4
    for r in recs:
        assert r.error is None and r.method == "logprobs"
        d = r.distribution
        g = sum(int(lab) * p for lab, p in zip(d.labels, d.probs))
        assert r.raw_score == pytest.approx(g, abs=1e-12)
        assert r.score == pytest.approx((g - 1) / 4, abs=1e-12)
        assert r.signature["evaluation_steps"] == list(m.evaluation_steps)
        assert r.signature["backend"]["model_sha256"].startswith("b179c952")
    ten = GEval("Correctness", evaluation_steps=list(m.evaluation_steps), evaluation_params=P,
                model=smollm_llama, score_range=(0, 10), min_mass=0.0)
    ten.measure(cases[0])
    assert ten.distribution.labels[-1] == "10"
    assert any(len(seq) >= 2 for seq in ten.distribution.signature.label_map["10"])
    assert 0.0 <= ten.score <= 1.0
