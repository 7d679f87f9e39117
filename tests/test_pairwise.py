"""Pairwise judging with position swap: exact swap arithmetic on the scripted FakeBackend,
verdict / tie / error rules, prompt rendering, validation, JSON round-trip, the bench.pairwise
aggregation, and one SmolLM2 run of ``bench.pairwise``."""

from __future__ import annotations

import json
import math

import pytest
from conftest import require_model, require_module

from localjudge.backends.fake import FakeBackend
from localjudge.errors import ConfigError, TemplateError
from localjudge.judges import PairwiseJudge, PairwisePrompt, PairwiseResult, compare
from localjudge.judges.pairwise import VANILLA_AB_V1, format_signature

# A raw prompt whose text ends with the second slot's response, so the fake backend can script
# each order separately: the original order ends "...|y\n\n" (response_b = "y" in slot 2), the
# swapped order ends "...|x\n\n" (response_a = "x" in slot 2). FakeBackend matches the longest
# tail of token texts.
TAIL = PairwisePrompt("test-tail-v1", user="{instruction}|{response_1}|{response_2}")
ORIG = ("y", "\n", "\n")
SWAP = ("x", "\n", "\n")


def exact(v: float):
    """Exact up to the float rounding of FakeBackend's log/exp round trip (1e-12)."""
    return pytest.approx(v, abs=1e-12)


def scripted(orig: dict[str, float], swap: dict[str, float], **kw) -> PairwiseResult:
    """Compare response_a="x" with response_b="y"; ``orig`` / ``swap`` are the label
    probabilities (slot order: "A" = first slot) the judge gives in each order."""
    fb = FakeBackend({}, continuations={ORIG: orig, SWAP: swap})
    return compare("Pick.", "x", "y", fb, raw=True, prompt_template=TAIL, **kw)


# ---- swap arithmetic ----------------------------------------------------------------------
def test_both_orders_agree_gives_the_verdict_and_maps_swapped_probability_back():
    # original: P(slot1=A better) = 0.75 -> P(A) = 0.75
    # swapped: slot 1 holds B; P(label "A") = 0.125 is P(B better), so P(A) = P(label "B") = 0.875
    r = scripted({"A": 0.75, "B": 0.25}, {"A": 0.125, "B": 0.875})
    assert r.p_a_original == exact(0.75)
    assert r.p_a_swapped == exact(0.875)
    assert r.p_a_mean == exact(0.8125)  # (0.75 + 0.875) / 2
    assert r.verdict == "A" and r.position_consistent is True and r.error is None
    assert r.single_order_verdict == "A"
    assert (r.original.first, r.swapped.first) == ("A", "B")
    assert (r.original.p_first, r.swapped.p_first) == (exact(0.75), exact(0.125))
    assert (r.original.choice, r.swapped.choice) == ("A", "A")
    # A was in slot 1 originally and in slot 2 after the swap
    assert (r.original.first_slot_chosen, r.swapped.first_slot_chosen) == (True, False)
    assert (r.original.mass, r.swapped.mass) == (exact(1.0), exact(1.0))
    assert r.original.distribution.labels == ("A", "B")


def test_both_orders_agree_on_b():
    # original P(A) = 0.25 ; swapped P(A) = P(label "B") = 0.375 -> both pick B
    r = scripted({"A": 0.25, "B": 0.75}, {"A": 0.625, "B": 0.375})
    assert (r.p_a_original, r.p_a_swapped, r.p_a_mean) == (exact(0.25), exact(0.375), exact(0.3125))
    assert r.verdict == "B" and r.position_consistent is True
    assert (r.original.first_slot_chosen, r.swapped.first_slot_chosen) == (False, True)


def test_orders_disagree_is_a_tie_and_keeps_the_single_order_verdict():
    # a judge that always picks slot 1: original says A (0.75), swapped says B (P(A) = 0.25)
    r = scripted({"A": 0.75, "B": 0.25}, {"A": 0.75, "B": 0.25})
    assert (r.p_a_original, r.p_a_swapped, r.p_a_mean) == (exact(0.75), exact(0.25), exact(0.5))
    assert r.verdict == "tie" and r.position_consistent is False and r.error is None
    assert r.single_order_verdict == "A"
    assert (r.original.choice, r.swapped.choice) == ("A", "B")
    assert (r.original.first_slot_chosen, r.swapped.first_slot_chosen) == (True, True)


def test_probabilities_are_renormalised_over_the_two_labels():
    # original: A 0.5, B 0.25, filler 0.25 -> mass 0.75, P(A) = 0.5/0.75 = 2/3
    # swapped: A 0.125, B 0.5 -> mass 0.625, p_first = 0.2, P(A) = 0.5/0.625 = 0.8
    r = scripted({"A": 0.5, "B": 0.25}, {"A": 0.125, "B": 0.5}, min_mass=0.5)
    assert (r.original.mass, r.swapped.mass) == (exact(0.75), exact(0.625))
    assert r.p_a_original == exact(2 / 3)
    assert r.swapped.p_first == exact(0.2)
    assert r.p_a_swapped == exact(0.8)
    assert r.verdict == "A"


def test_exact_fifty_fifty_in_one_order_is_a_tie_not_a_first_slot_vote():
    r = scripted({"A": 0.5, "B": 0.5}, {"A": 0.125, "B": 0.875})
    assert r.original.choice == "tie" and r.original.first_slot_chosen is None
    assert r.verdict == "tie" and r.position_consistent is False
    assert r.single_order_verdict == "tie"


# ---- errors -------------------------------------------------------------------------------
def test_low_mass_order_is_a_recorded_error_not_a_verdict():
    # swapped order: A 0.25 + B 0.25 = mass 0.5 < min_mass 0.9
    r = scripted({"A": 0.75, "B": 0.25}, {"A": 0.25, "B": 0.25}, min_mass=0.9)
    assert r.verdict == "error" and r.error == "low_mass"
    assert r.position_consistent is None
    assert r.p_a_swapped is None and r.p_a_mean is None
    assert r.swapped.error == "low_mass" and "below min_mass" in r.swapped.message
    assert r.swapped.p_a is None and r.swapped.choice is None
    assert r.swapped.mass == exact(0.5) and r.swapped.distribution.mass == exact(0.5)  # kept
    # the original order is a valid single-order measurement on its own
    assert r.original.error is None and r.p_a_original == exact(0.75)
    assert r.single_order_verdict == "A"


def test_both_orders_low_mass_reports_the_original_orders_code():
    r = scripted({"A": 0.25}, {"B": 0.25}, min_mass=0.9)
    assert r.verdict == "error" and r.error == "low_mass"
    assert r.single_order_verdict is None and r.p_a_original is None


def test_zero_label_mass_is_an_error_even_with_min_mass_zero():
    r = scripted({"A": 0.75, "B": 0.25}, {}, min_mass=0.0)
    assert r.swapped.mass == 0.0 and r.swapped.error == "low_mass"
    assert r.verdict == "error"


def test_context_overflow_is_recorded_per_order():
    fb = FakeBackend({"A": 0.75, "B": 0.25}, n_ctx=64)
    r = compare("Pick the better one.", "x" * 40, "y" * 40, fb)
    assert r.verdict == "error" and r.error == "context_overflow"
    assert r.original.error == r.swapped.error == "context_overflow"
    assert r.original.distribution is None and r.original.mass is None


def test_model_without_chat_template_needs_raw():
    fb = FakeBackend({"A": 0.75, "B": 0.25}, chat_template=None)
    with pytest.raises(TemplateError, match="raw=True"):
        PairwiseJudge(fb)
    assert PairwiseJudge(fb, raw=True).compare("Pick.", "x", "y").p_a_original == exact(0.75)


# ---- prompts ------------------------------------------------------------------------------
def test_chat_prompt_puts_responses_in_slot_order_with_system_and_prefill():
    j = PairwiseJudge(FakeBackend({"A": 0.75, "B": 0.25}))
    prompt, system, prefill = j.render_inputs("Do it.", "first text", "second text")
    assert system == VANILLA_AB_V1.system and prefill == "Output ("
    assert prompt.index("# Output (A):\nfirst text") < prompt.index("# Output (B):\nsecond text")
    assert prompt.endswith('either "Output (A)" or "Output (B)":')
    r = j.compare("Do it.", "alpha", "beta")
    # two different prompts were scored, one per order
    assert r.original.distribution.prompt_sha256 != r.swapped.distribution.prompt_sha256


def test_raw_prompt_carries_the_system_text_and_ends_before_the_prefill():
    j = PairwiseJudge(FakeBackend({"A": 1.0}, chat_template=None), raw=True)
    prompt, system, prefill = j.render_inputs("Do it.", "a1", "b1")
    assert system is None and prefill == "Output ("
    assert prompt.startswith(VANILLA_AB_V1.system + "\n\n")
    assert prompt.endswith(":\n\n")
    j2 = PairwiseJudge(FakeBackend({"A": 1.0}, chat_template=None), raw=True, system="")
    assert j2.render_inputs("Do it.", "a1", "b1")[0].startswith("Select the Output (A)")


def test_custom_labels_appear_in_the_prompt_and_verdicts_stay_a_b():
    fb = FakeBackend({"1": 0.75, "2": 0.25})
    j = PairwiseJudge(fb, labels=("1", "2"))
    assert '"Output (1)" or "Output (2)"' in j.render_inputs("Do it.", "p", "q")[0]
    r = j.compare("Do it.", "p", "q")  # same tail both orders -> always slot 1
    assert r.labels == ("1", "2")
    assert (r.p_a_original, r.p_a_swapped, r.verdict) == (exact(0.75), exact(0.25), "tie")


def test_system_override_and_signature():
    j = PairwiseJudge(FakeBackend({"A": 0.75, "B": 0.25}), system="Be fair.", min_mass=0.5)
    assert j.render_inputs("Do it.", "p", "q")[1] == "Be fair."
    sig = j.signature()
    assert sig["judge"] == "pairwise" and sig["prompt_template"] == "llmbar-vanilla-ab-v1"
    assert sig["prompt_sha256"] == VANILLA_AB_V1.sha256 and len(sig["prompt_sha256"]) == 64
    assert sig["labels"] == ["A", "B"] and sig["params"]["min_mass"] == 0.5
    assert sig["system_sha256"] is not None
    line = format_signature(sig)
    assert line.startswith(
        f"judge:pairwise|prompt:llmbar-vanilla-ab-v1@{VANILLA_AB_V1.sha256[:8]}|"
    )
    assert "model:fake@" in line and "min_mass:0.5" in line and "prefill:Output (" in line


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"labels": ("A", "B", "C")}, "exactly two"),
        ({"labels": "AB"}, "single string"),
        ({"labels": ("A", "a")}, "overlap"),
        ({"min_mass": 1.5}, "min_mass"),
        ({"min_mass": True}, "min_mass"),
        ({"prompt_template": "not a template"}, "PairwisePrompt"),
        ({"boundary": "none"}, "boundary"),
    ],
)
def test_bad_judge_configuration_raises(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        PairwiseJudge(FakeBackend({"A": 0.75}), **kwargs)


def test_non_backend_and_backend_without_logprobs_raise():
    with pytest.raises(ConfigError, match="Backend"):
        PairwiseJudge("qwen")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="logprobs"):
        PairwiseJudge(FakeBackend({"A": 1.0}, supports_logprobs=False))


@pytest.mark.parametrize(
    "args, name",
    [
        (("", "x", "y"), "instruction"),
        (("i", " ", "y"), "response_a"),
        (("i", "x", None), "response_b"),
    ],
)
def test_empty_inputs_raise_naming_the_argument(args, name):
    with pytest.raises(ConfigError, match=name):
        PairwiseJudge(FakeBackend({"A": 1.0})).compare(*args)


@pytest.mark.parametrize(
    "user, match",
    [
        ("{instruction} {response_1}", "lacks"),
        ("{instruction} {response_1} {response_2} {reference}", "unknown"),
        ("{instruction} {response_1} {response_2} {0}", "unknown"),
        ("{instruction {response_1}", "malformed"),
    ],
)
def test_bad_prompt_template_raises(user, match):
    with pytest.raises(ConfigError, match=match):
        PairwisePrompt("bad-v1", user=user)


# ---- serialisation ------------------------------------------------------------------------
@pytest.mark.parametrize(
    "orig, swap, min_mass",
    [({"A": 0.75, "B": 0.25}, {"A": 0.125, "B": 0.875}, 0.9), ({"A": 0.75}, {"B": 0.25}, 0.9)],
)
def test_json_round_trip(orig, swap, min_mass):
    r = scripted(orig, swap, min_mass=min_mass)
    back = PairwiseResult.from_dict(json.loads(json.dumps(r.to_dict(), allow_nan=False)))
    assert back == r
    p = PairwisePrompt.from_dict(json.loads(json.dumps(VANILLA_AB_V1.to_dict())))
    assert p == VANILLA_AB_V1 and p.sha256 == VANILLA_AB_V1.sha256


# ---- bench aggregation --------------------------------------------------------------------
def test_bench_summarise_counts_ties_as_wrong_and_leaves_errors_out():
    from bench.pairwise import summarise

    agree_a = scripted({"A": 0.75, "B": 0.25}, {"A": 0.25, "B": 0.75})  # A in both orders
    first_slot = scripted({"A": 0.75, "B": 0.25}, {"A": 0.75, "B": 0.25})  # tie
    failed = scripted({"A": 0.75, "B": 0.25}, {"A": 0.25, "B": 0.25})  # swapped mass 0.5
    s = summarise(
        [agree_a, agree_a, first_slot, failed], ["A", "B", "B", "A"], seed=0, n_bootstrap=200
    )
    assert (s["n_items"], s["n_scored"], s["n_errors"]) == (4, 3, 1)
    assert s["order_errors"] == {"low_mass": 1}
    assert s["accuracy"] == pytest.approx(1 / 3)  # only item 1; the tie counts as wrong
    assert s["accuracy_non_tie"] == pytest.approx(1 / 2)  # items 1, 2
    assert s["tie_rate"] == pytest.approx(1 / 3)
    assert s["positional_agreement"] == pytest.approx(2 / 3)
    assert s["accuracy_single_order"] == pytest.approx(1 / 3)  # A, A, A vs gold A, B, B
    assert s["accuracy_swapped_order"] == pytest.approx(2 / 3)  # A, A, B vs gold A, B, B
    assert s["accuracy_llmbar"] == pytest.approx(1 / 2)
    # first-slot picks: item1 (T, F), item2 (T, F), item3 (T, T) -> 4 of 6
    assert s["first_slot_rate"] == pytest.approx(2 / 3)
    assert s["mean_p_shift"] == pytest.approx(0.5 / 3)  # |0.75-0.75|, same, |0.75-0.25|
    assert s["mean_mass"] == pytest.approx(7.5 / 8)  # seven orders at 1.0, one at 0.5
    assert s["min_mass_seen"] == exact(0.5)
    lo, hi = s["accuracy_ci"]
    assert 0.0 <= lo <= 1 / 3 <= hi <= 1.0
    empty = summarise([failed], ["A"], seed=0)
    assert empty["accuracy"] is None and empty["accuracy_ci"] is None and empty["n_errors"] == 1


# ---- real model ---------------------------------------------------------------------------
@pytest.mark.model
def test_bench_pairwise_main_on_smollm(tmp_path):
    require_module("llama_cpp")
    require_model("smollm2-135m-instruct")
    from bench.pairwise import main

    rc = main(
        [
            "--sets",
            "natural",
            "--models",
            "smollm2-135m-instruct",
            "--limit",
            "2",
            "--seed",
            "0",
            "--results-root",
            str(tmp_path),
            "--n-bootstrap",
            "100",
        ]
    )
    assert rc == 0
    (run,) = (tmp_path / "pairwise").iterdir()
    assert {p.name for p in run.iterdir()} == {"config.json", "items.jsonl", "summary.json"}
    summary = json.loads((run / "summary.json").read_text())
    assert summary["prompt_template"] == "llmbar-vanilla-ab-v1"
    assert summary["signatures"]["smollm2-135m-instruct"].startswith("judge:pairwise|prompt:")
    s = summary["results"]["smollm2-135m-instruct"]["natural"]
    expected = {
        "n_items",
        "n_scored",
        "n_errors",
        "order_errors",
        "accuracy",
        "accuracy_ci",
        "accuracy_non_tie",
        "tie_rate",
        "positional_agreement",
        "accuracy_single_order",
        "accuracy_swapped_order",
        "accuracy_llmbar",
        "first_slot_rate",
        "mean_p_shift",
        "mean_mass",
        "min_mass_seen",
        "gold_a_rate",
    }
    assert set(s) == expected
    assert s["n_items"] == 2 and s["n_scored"] + s["n_errors"] == 2
    assert 0.0 < s["min_mass_seen"] <= s["mean_mass"] <= 1.0
    for k in (
        "accuracy",
        "tie_rate",
        "positional_agreement",
        "accuracy_single_order",
        "first_slot_rate",
        "mean_p_shift",
    ):
        assert s[k] is None or 0.0 <= s[k] <= 1.0, k
    if s["n_scored"]:
        assert s["positional_agreement"] == pytest.approx(1 - s["tie_rate"])
    items = [json.loads(x) for x in (run / "items.jsonl").read_text().splitlines()]
    assert len(items) == 2 and {it["gold"] for it in items} <= {"A", "B"}
    for it in items:
        r = PairwiseResult.from_dict(it)
        assert r.verdict in ("A", "B", "tie", "error")
        for o in r.orders:
            assert o.mass is not None and 0.0 <= o.mass <= 1.0
            assert o.p_a is None or 0.0 <= o.p_a <= 1.0
    config = json.loads((run / "config.json").read_text())
    assert config["sets"]["natural"]["n_records"] == 100
    assert len(config["sets"]["natural"]["indices"]) == 2
    assert not math.isnan(s["mean_mass"])
