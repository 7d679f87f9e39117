"""sample_scores and temperature on the scripted FakeBackend: draws come from the full
distribution (non-label draws counted), SEM arithmetic, seed reproducibility."""

from __future__ import annotations

import math

import pytest

from localjudge.backends.fake import FakeBackend
from localjudge.errors import ConfigError
from localjudge.types import ScoreSamples


def _fb():
    # P(1) = 0.5*0.4 = 0.2 ; P(10) = 0.5*0.6 = 0.3 ; P(9) = 0.3 ; "\n" = 0.2 (non-label)
    return FakeBackend({"1": 0.5, "9": 0.3},
                       continuations={("1",): {"0": 0.6, ".": 0.4}, ("9",): {".": 1.0}})


def test_draws_follow_the_raw_distribution_and_count_non_labels():
    s = _fb().sample_scores("Rate.", range(11), n=20000, seed=1)
    freq = dict(zip(s.labels, (c / s.n for c in s.counts)))
    # binomial sd for p=0.3, n=20000 is 0.0032: 5 sd = 0.016
    assert freq["10"] == pytest.approx(0.3, abs=0.016)
    assert freq["9"] == pytest.approx(0.3, abs=0.016)
    assert freq["1"] == pytest.approx(0.2, abs=0.016)
    assert s.n_non_label / s.n == pytest.approx(0.2, abs=0.016)
    assert s.non_label_texts == {"\n": s.n_non_label}
    assert s.distribution.mass == pytest.approx(0.8)
    assert abs(s.gap_sem) < 5


def test_never_samples_from_the_renormalised_labels():
    # mass 0.1 on labels: renormalised sampling would give no non-label draws at all
    s = FakeBackend({"3": 0.1}).sample_scores("Rate.", n=2000, seed=0)
    assert s.n_non_label > 1700


def test_sem_arithmetic():
    exact = _fb().score_distribution("Rate.", range(11), min_mass=0)
    draws = ["1", "9", "10", "10", None]
    s = ScoreSamples.from_draws(exact, draws, {"\n": 1}, temperature=1.0, seed=0)
    # label draws 1, 9, 10, 10: mean 7.5 ; deviations -6.5, 1.5, 2.5, 2.5
    # sum sq = 42.25 + 2.25 + 6.25 + 6.25 = 57 ; sd = sqrt(57/3) = sqrt(19)
    sd = math.sqrt(19.0)
    assert s.mean == pytest.approx(7.5) and s.sd == pytest.approx(sd)
    assert s.sem["1"] == pytest.approx(sd)
    assert s.sem["3"] == pytest.approx(sd / math.sqrt(3))
    assert s.sem["5"] == pytest.approx(sd / math.sqrt(5))
    assert s.sem["n"] == pytest.approx(sd / 2)
    # exact expected = (0.2*1 + 0.3*9 + 0.3*10)/0.8 = 7.375 ; gap = 0.125 / (sd/2)
    assert s.gap_sem == pytest.approx(0.125 / (sd / 2))
    assert s.n_non_label == 1 and s.counts[10] == 2
    assert ScoreSamples.from_dict(s.to_dict()) == s


def test_seed_reproducibility():
    a = _fb().sample_scores("Rate.", range(11), n=200, seed=7)
    b = _fb().sample_scores("Rate.", range(11), n=200, seed=7)
    c = _fb().sample_scores("Rate.", range(11), n=200, seed=8)
    assert a.draws == b.draws and a.draws != c.draws


def test_temperature_sharpens_and_flattens_exactly():
    fb = FakeBackend({"2": 0.2, "4": 0.8})
    # at T: p_i ∝ p_i^(1/T) over the whole vocabulary ("\n" has 0, so labels keep all mass)
    d = fb.score_distribution("Rate.", temperature=0.5)
    assert d.as_dict()["4"] == pytest.approx(0.64 / (0.64 + 0.04))
    d2 = fb.score_distribution("Rate.", temperature=2.0)
    w2, w4 = math.sqrt(0.2), math.sqrt(0.8)
    assert d2.as_dict()["4"] == pytest.approx(w4 / (w2 + w4))
    assert d2.signature.params["temperature"] == 2.0


@pytest.mark.parametrize("kw", [{"n": 0}, {"n": 2.5}, {"n": 5, "temperature": 0},
                                {"n": 5, "temperature": -1.0}])
def test_bad_sampling_args(kw):
    with pytest.raises(ConfigError):
        _fb().sample_scores("Rate.", **kw)
