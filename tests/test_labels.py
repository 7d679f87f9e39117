"""Label normalisation, resolution to token ids and exact label probabilities (FakeBackend)."""

from __future__ import annotations

import math

import pytest

from localjudge.backends.fake import FakeBackend
from localjudge.errors import ConfigError, TokenizationError
from localjudge.labels import normalize_labels


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        (None, ("1", "2", "3", "4", "5")),
        (range(11), tuple(str(i) for i in range(11))),
        ([1, 2, 3], ("1", "2", "3")),
        (("Yes", "No"), ("Yes", "No")),
        (("A", "B"), ("A", "B")),
    ],
)
def test_normalize_labels_ok(labels, expected):
    assert normalize_labels(labels) == expected


@pytest.mark.parametrize(
    ("labels", "fragment"),
    [
        ([], "at least 2"),
        (["1"], "at least 2"),
        (["1", "1"], "duplicate"),
        (["1", ""], "empty"),
        (["1", " 2"], "whitespace"),
        ("12345", "single string"),
        ([1.5, 2], "str or int"),
        ([True, False], "str or int"),
        (["1", "01"], "overlap"),
        (["1", "1.0", "2"], "overlap"),
        (["Yes", "yes"], "overlap"),
    ],
)
def test_normalize_labels_errors_name_the_value(labels, fragment):
    with pytest.raises(ConfigError, match=fragment):
        normalize_labels(labels)


def _fb(**kw):
    return FakeBackend({"4": 0.5}, **kw)


def test_spellings_are_token_ids_with_and_without_space():
    fb = _fb()
    lm = fb.resolve_labels(range(1, 6))
    vocab = fb._vocab()
    for lab in lm.labels:
        texts = sorted("".join(vocab[t] for t in seq) for seq in lm.spellings[lab])
        # the fake vocab has "7" and " 7" as single tokens; " " + "7" is not canonical
        assert texts == sorted([lab, " " + lab])
        assert all(isinstance(t, int) for seq in lm.spellings[lab] for t in seq)


def test_ten_is_spelled_by_two_tokens():
    fb = _fb()
    lm = fb.resolve_labels(range(11))
    vocab = fb._vocab()
    assert any([vocab[t] for t in seq] == ["1", "0"] for seq in lm.spellings["10"])
    assert lm.max_len >= 2


def test_unresolvable_label_raises_at_setup():
    fb = _fb()
    with pytest.raises(TokenizationError, match="cannot be tokenised"):
        fb.resolve_labels(["1", "é"])


def test_exact_multi_token_label_probability():
    # Root: p("1") = 0.5, p(" 5") = 0.3, rest 0.2 on "\n".
    # After "1": p("0") = 0.4 (-> label 10), p(".") = 0.5 (non-digit: label 1 ends), rest "\n".
    # P(1) = 0.5 * (1 - 0.4) = 0.3 ; P(10) = 0.5 * 0.4 = 0.2 ; P(5) = 0.3 ; mass = 0.8
    fb = FakeBackend({"1": 0.5, " 5": 0.3}, continuations={("1",): {"0": 0.4, ".": 0.5}})
    d = fb.score_distribution("Rate it.", range(11), min_mass=0)
    raw = dict(zip(d.labels, (math.exp(x) for x in d.logprobs)))
    assert raw["1"] == pytest.approx(0.3, abs=1e-12)
    assert raw["10"] == pytest.approx(0.2, abs=1e-12)
    assert raw["5"] == pytest.approx(0.3, abs=1e-12)
    assert d.mass == pytest.approx(0.8, abs=1e-12)
    assert d.as_dict()["10"] == pytest.approx(0.25, abs=1e-12)
    # expected = (1*0.3 + 5*0.3 + 10*0.2) / 0.8 = 4.75
    assert d.expected == pytest.approx(4.75, abs=1e-12)


def test_other_digits_after_one_are_not_labels():
    # "1" then "5" is "15": neither 1 nor 10 on a 0-10 scale, so that mass is lost.
    # P(1) = 0.9 * (1 - 0.6) = 0.36 ; P(10) = 0.9 * 0.1 = 0.09 ; mass = 0.45
    fb = FakeBackend({"1": 0.9}, continuations={("1",): {"0": 0.1, "5": 0.5}})
    d = fb.score_distribution("Rate it.", range(11), min_mass=0)
    assert d.mass == pytest.approx(0.45, abs=1e-12)
    assert d.as_dict()["1"] == pytest.approx(0.8, abs=1e-12)


def _split_digit_vocab():
    # like Qwen2 / SmolLM2: no " 7" token, so " 7" is spelled " " + "7"
    from localjudge.backends.fake import _default_vocab

    return [t for t in _default_vocab() if not (len(t) == 2 and t[0] == " " and t[1].isdigit())]


def test_space_then_digit_path_is_summed():
    # " " then "4": p = 0.6 * 0.5 = 0.3 ; plus single token "4" 0.2 -> P(4) = 0.5
    fb = FakeBackend({" ": 0.6, "4": 0.2}, continuations={(" ",): {"4": 0.5, "2": 0.5}},
                     vocab=_split_digit_vocab())
    d = fb.score_distribution("Rate it.", min_mass=0)
    raw = dict(zip(d.labels, (math.exp(x) for x in d.logprobs)))
    assert raw["4"] == pytest.approx(0.5, abs=1e-12)
    assert raw["2"] == pytest.approx(0.3, abs=1e-12)
    assert d.mass == pytest.approx(0.8, abs=1e-12)


def test_boundary_all_excludes_ten_from_label_one_on_a_1_5_scale():
    # 1-5 scale; the model writes "1" then "0" (meaning 10) with 0.5.
    fb = FakeBackend({"1": 0.8, "3": 0.2},
                     continuations={("1",): {"0": 0.5}, ("3",): {".": 1.0}})
    prefix_only = fb.score_distribution("Rate it.", min_mass=0)
    exact = fb.score_distribution("Rate it.", min_mass=0, boundary="all")
    assert prefix_only.mass == pytest.approx(1.0, abs=1e-12)  # "10" counted as "1"
    assert exact.mass == pytest.approx(0.6, abs=1e-12)  # 0.8 * 0.5 + 0.2
    assert exact.as_dict()["1"] == pytest.approx(0.4 / 0.6, abs=1e-12)


def test_pruned_prefix_mass_is_reported():
    fb = FakeBackend({"1": 1e-9, "2": 0.99}, continuations={("1",): {"0": 0.5}})
    d = fb.score_distribution("Rate it.", range(11), min_mass=0)
    assert d.pruned_mass == pytest.approx(1e-9, rel=1e-9)
    assert d.as_dict()["10"] == 0.0


def test_word_labels():
    fb = FakeBackend({" Yes": 0.7, "No": 0.25})
    d = fb.score_distribution("Is it good?", ["Yes", "No"])
    assert d.argmax == "Yes"
    assert d.expected is None
    assert d.mass == pytest.approx(0.95, abs=1e-12)
    assert d.expectation({"Yes": 1.0, "No": 0.0}) == pytest.approx(0.7 / 0.95, abs=1e-12)


@pytest.mark.parametrize(
    ("labels", "script", "expected"),
    [
        # "A" then "+" is "A+", never also "A": P(A) = 1*(1-0.5) = 0.5, P(A+) = 0.5
        (["A", "A+", "B", "B+"], ({"A": 1.0}, {("A",): {"+": 0.5, "\n": 0.5}}),
         {"A": 0.5, "A+": 0.5}),
        # "1" "." "5" is "1.5": P(1) = 1*(1 - p(".")) = 0, P(1.5) = 1
        (["1", "1.5", "2", "2.5"], ({"1": 1.0}, {("1",): {".": 1.0}, ("1", "."): {"5": 1.0}}),
         {"1": 0.0, "1.5": 1.0}),
    ],
)
def test_label_followed_by_another_labels_continuation_is_not_counted_twice(
        labels, script, expected):
    fb = FakeBackend(script[0], continuations=script[1])
    d = fb.score_distribution("Grade it.", labels, min_mass=0)
    raw = dict(zip(d.labels, (math.exp(x) for x in d.logprobs)))
    for lab, p in expected.items():
        assert raw[lab] == pytest.approx(p, abs=1e-12)
    assert d.mass <= 1.0 + 1e-12
