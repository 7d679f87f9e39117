"""Lexical metrics: the golden values of issue 4, each re-derived by hand below.

R = "The cat sat on the mat."; A = "A feline rested upon the rug."; B = "The cat did not sit on
the mat."; C = "The cat sat on the". BLEU uses whitespace tokens (``tokenize="none"``), so R
has 6 tokens (``mat.`` is one), case-sensitive. ROUGE uses rouge-score's tokenizer
(lowercase, punctuation dropped): R = the cat sat on the mat (6 tokens).
"""

from __future__ import annotations

import json
import math

import pytest

from localjudge.errors import ConfigError
from localjudge.metrics.lexical import LexicalScorer, LexicalScores, lexical_scores

R = "The cat sat on the mat."
A = "A feline rested upon the rug."
B = "The cat did not sit on the mat."
C = "The cat sat on the"


@pytest.fixture(scope="module")
def scorer() -> LexicalScorer:
    return LexicalScorer()


# Hand arithmetic (Papineni et al. 2002, BLEU = BP * exp(mean log p_n)):
# A: p1 = 1/6 ("the"), p2 = 0/5 -> unsmoothed BLEU-4 = BLEU-2 = 0.
# B: p1 = 5/8 (The cat on the mat.), p2 = 3/7 (The cat / on the / the mat.), p3 = 1/6
#    (on the mat.), p4 = 0/5 -> BLEU-4 = 0; BLEU-2 = sqrt(5/8 * 3/7) = 0.51755; BP = 1 (8 > 6).
# C: p1..p4 = 5/5, 4/4, 3/3, 2/2 = 1; BP = exp(1 - 6/5) = e^-0.2 = 0.81873.
# Smoothed (Chen & Cherry 2014 method 3, "exp": the k-th zero order gets 1 / (2^k * total)):
# A: (1/6 * 1/(2*5) * 1/(4*4) * 1/(8*3))^(1/4) = (1/23040)^(1/4) = 0.081205
# B: (5/8 * 3/7 * 1/6 * 1/(2*5))^(1/4) = (1/224)^(1/4) = 0.258544
BLEU_GOLDEN = [
    # text, bleu4, bleu2, bleu4_smoothed
    (A, 0.0, 0.0, (1 / 23040) ** 0.25),
    (B, 0.0, math.sqrt(5 / 8 * 3 / 7), (5 / 8 * 3 / 7 * 1 / 6 * 1 / 10) ** 0.25),
    (C, math.exp(-0.2), math.exp(-0.2), math.exp(-0.2)),
]

# ROUGE F1 = 2PR/(P+R) over lowercase word tokens:
# A: unigram/LCS overlap "the" = 1 -> P = R = 1/6 -> F = 1/6; bigrams 0.
# B: LCS "the cat on the mat" = 5 (also 5 unigrams) -> P = 5/8, R = 5/6 -> F = 5/7 = 0.714286;
#    bigrams: the cat / on the / the mat = 3 -> P = 3/7, R = 3/5 -> F = 0.5.
# C: LCS = 5 -> P = 1, R = 5/6 -> F = 10/11 = 0.909091; bigrams 4 -> P = 1, R = 4/5 -> 8/9.
ROUGE_GOLDEN = [
    # text, rouge1, rouge2, rougeL
    (A, 1 / 6, 0.0, 1 / 6),
    (B, 5 / 7, 0.5, 5 / 7),
    (C, 10 / 11, 8 / 9, 10 / 11),
]


@pytest.mark.parametrize(("text", "bleu4", "bleu2", "bleu4s"), BLEU_GOLDEN)
def test_bleu_golden(
    scorer: LexicalScorer, text: str, bleu4: float, bleu2: float, bleu4s: float
) -> None:
    s = scorer.score(text, R)
    assert s.bleu4 == pytest.approx(bleu4, abs=1e-9)
    assert s.bleu2 == pytest.approx(bleu2, abs=1e-9)
    assert s.bleu4_smoothed == pytest.approx(bleu4s, abs=1e-9)


def test_issue_values_rounded(scorer: LexicalScorer) -> None:
    # The values as printed in issue 4.
    assert [round(scorer.score(t, R).bleu4, 4) for t in (A, B, C)] == [0.0, 0.0, 0.8187]
    assert [round(scorer.score(t, R).rouge_l_f1, 4) for t in (A, B, C)] == [0.1667, 0.7143, 0.9091]


@pytest.mark.parametrize(("text", "r1", "r2", "rl"), ROUGE_GOLDEN)
def test_rouge_golden(scorer: LexicalScorer, text: str, r1: float, r2: float, rl: float) -> None:
    s = scorer.score(text, R)
    assert s.rouge1_f1 == pytest.approx(r1, abs=1e-9)
    assert s.rouge2_f1 == pytest.approx(r2, abs=1e-9)
    assert s.rouge_l_f1 == pytest.approx(rl, abs=1e-9)


def test_argument_order_matters(scorer: LexicalScorer) -> None:
    # BLEU is asymmetric (brevity penalty only for short responses): swapping C and R must
    # give BP = 1 and p1 = 5/6 ... so not e^-0.2. Guards against swapped arguments.
    assert scorer.score(R, C).bleu4 != pytest.approx(math.exp(-0.2), abs=1e-6)


def test_signature_names_settings(scorer: LexicalScorer) -> None:
    p = scorer.signature.params
    assert "smooth:exp" in p["bleu4_smoothed"] and "tok:none" in p["bleu4_smoothed"]
    assert "smooth:none" in p["bleu4"] and "order:4" in p["bleu4"]
    assert "order:2" in p["bleu2"]
    assert "stemmer:no" in p["rouge"]
    assert scorer.signature.versions["sacrebleu"] != "absent"


@pytest.mark.parametrize(("response", "reference"), [("", R), ("   ", R), (A, ""), (A, " \n")])
def test_empty_text_raises(scorer: LexicalScorer, response: str, reference: str) -> None:
    with pytest.raises(ConfigError, match="empty"):
        scorer.score(response, reference)


def test_non_str_raises(scorer: LexicalScorer) -> None:
    with pytest.raises(ConfigError, match="must be str"):
        scorer.score(None, R)  # type: ignore[arg-type]


def test_json_round_trip() -> None:
    s = lexical_scores(B, R)
    back = LexicalScores.from_dict(json.loads(json.dumps(s.to_dict())))
    assert back == s
