"""Tests of ``localjudge.stats``: correlations against scipy and against a transcription of the
G-Eval SummEval meta-evaluation loop, bootstrap determinism and draws, κ against sklearn (when
installed) and hand arithmetic, agreement rate, tie counts, bad input.

Expected values come from scipy / sklearn called directly here, from an independent
re-implementation of the upstream loop, or from hand arithmetic written in comments; none is
produced by ``localjudge.stats`` itself.
"""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest
from conftest import require_module
from scipy.stats import kendalltau, pearsonr, spearmanr

from localjudge.errors import ConfigError
from localjudge.stats import (
    AgreementResult,
    ConfidenceInterval,
    CorrelationCI,
    KappaResult,
    PooledCorrelation,
    SummaryCorrelation,
    TieCount,
    agreement_rate,
    bootstrap_ci,
    cohen_kappa,
    count_ties,
    pooled_correlation,
    pooled_correlation_ci,
    summary_level_correlation,
    summary_level_correlation_ci,
)


# ---- reference: nlpyang/geval meta_eval_summeval.py (c03b505e), transcribed --------------------
def _upstream_summary(pred, human, doc_ids):
    """The upstream loop: dict by doc_id, skip len(set) <= 1, sum scipy coefficients, / count."""
    pred_scores: dict = {}
    human_scores: dict = {}
    for p, h, d in zip(pred, human, doc_ids):
        pred_scores.setdefault(d, []).append(p)
        human_scores.setdefault(d, []).append(h)
    res = {"pearson": 0.0, "spearman": 0.0, "kendalltau": 0.0}
    d_ctr = 0
    for d, ps in pred_scores.items():
        hs = human_scores[d]
        if len(set(hs)) <= 1 or len(set(ps)) <= 1:
            continue
        res["pearson"] += pearsonr(ps, hs)[0]
        res["spearman"] += spearmanr(ps, hs)[0]
        res["kendalltau"] += kendalltau(ps, hs)[0]
        d_ctr += 1
    return res["spearman"] / d_ctr, res["kendalltau"] / d_ctr, res["pearson"] / d_ctr, d_ctr


def _summeval_like(n_docs: int, n_per_doc: int, seed: int, noise: float = 0.8):
    """Human scores on a 1-5 grid (many ties), judge = human + noise; fixed seed."""
    rng = np.random.default_rng(seed)
    human = rng.integers(1, 6, size=n_docs * n_per_doc).astype(float)
    judge = np.round(human + rng.normal(0.0, noise, size=human.size), 2)
    groups = [f"doc{i}" for i in range(n_docs) for _ in range(n_per_doc)]
    return judge, human, groups


# ---- summary-level correlation -------------------------------------------------------------
def test_summary_level_hand_values_and_skip_counts():
    judge = [1, 2, 3] + [3, 2, 1] + [1, 2, 3] + [4, 4, 4] + [2] + [1, 2]
    human = [1, 2, 3] + [1, 2, 3] + [5, 5, 5] + [1, 2, 3] + [3] + [2, 1]
    groups = ["a"] * 3 + ["b"] * 3 + ["c"] * 3 + ["d"] * 3 + ["e"] + ["f"] * 2
    res = summary_level_correlation(judge, human, groups)
    # a: +1, b: -1, f (n=2, inverse): -1 on all three coefficients -> mean (1 - 1 - 1) / 3
    assert res.rho == pytest.approx(-1 / 3, abs=1e-12)
    assert res.tau == pytest.approx(-1 / 3, abs=1e-12)
    assert res.r == pytest.approx(-1 / 3, abs=1e-12)
    assert (res.n_groups, res.n_groups_used, res.n_groups_skipped) == (6, 3, 3)
    assert res.n_skipped_constant_human == 1  # c
    assert res.n_skipped_constant_judge == 1  # d
    assert res.n_skipped_too_few == 1  # e
    assert (res.n_items, res.n_missing, res.n_items_used) == (15, 0, 8)


def test_summary_level_with_ties_matches_scipy_per_document():
    # doc x, ties on both sides:
    #   tau-b by hand: pairs (0,1) tie in judge, (1,2) tie in human, other 4 concordant
    #   -> (4 - 0) / sqrt((6 - 1) * (6 - 1)) = 0.8
    #   Spearman by hand: ranks judge [1.5, 1.5, 3, 4], human [1, 2.5, 2.5, 4];
    #   centred: [-1, -1, .5, 1.5] and [-1.5, 0, 0, 1.5]; 3.75 / sqrt(4.5 * 4.5) = 5/6
    #   Pearson by hand: centred [-.75, -.75, .25, 1.25], [-1, 0, 0, 1]; 2 / sqrt(2.75 * 2)
    # doc y, perfect agreement: 1, 1, 1
    judge = [1, 1, 2, 3, 2, 3, 4]
    human = [1, 2, 2, 3, 1, 2, 3]
    groups = ["x"] * 4 + ["y"] * 3
    res = summary_level_correlation(judge, human, groups)
    assert res.tau == pytest.approx((0.8 + 1.0) / 2, abs=1e-12)
    assert res.rho == pytest.approx((5 / 6 + 1.0) / 2, abs=1e-12)
    assert res.r == pytest.approx((2 / math.sqrt(5.5) + 1.0) / 2, abs=1e-12)
    assert res.tau == pytest.approx(
        (kendalltau([1, 1, 2, 3], [1, 2, 2, 3])[0] + kendalltau([2, 3, 4], [1, 2, 3])[0]) / 2,
        abs=1e-12,
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_summary_level_matches_upstream_loop(seed):
    judge, human, groups = _summeval_like(12, 6, seed)
    judge[0:6] = 3.0  # doc0: constant judge
    human[6:12] = 4.0  # doc1: constant human
    rho, tau, r, n_used = _upstream_summary(list(judge), list(human), groups)
    res = summary_level_correlation(judge, human, groups)
    assert (res.rho, res.tau, res.r) == pytest.approx((rho, tau, r), abs=1e-12)
    assert res.n_groups_used == n_used
    assert res.n_skipped_constant_judge >= 1 and res.n_skipped_constant_human >= 1
    assert res.n_groups_used + res.n_groups_skipped == 12


def test_summary_level_group_order_does_not_matter_up_to_rounding():
    judge, human, groups = _summeval_like(8, 5, 3)
    perm = np.random.default_rng(9).permutation(len(judge))
    a = summary_level_correlation(judge, human, groups)
    b = summary_level_correlation(judge[perm], human[perm], [groups[i] for i in perm])
    assert (a.rho, a.tau, a.r) == pytest.approx((b.rho, b.tau, b.r), abs=1e-12)


def test_missing_judge_scores_are_excluded_and_counted_not_zero():
    judge = [1.0, None, 2.0, 3.0, float("nan"), 4.0, 1.0, 2.0]
    human = [1.0, 5.0, 2.0, 3.0, 5.0, 1.0, 2.0, 3.0]
    groups = ["a"] * 5 + ["b"] * 3
    res = summary_level_correlation(judge, human, groups)
    # a keeps items 0, 2, 3 -> judge [1, 2, 3] vs human [1, 2, 3]: +1
    # b: judge [4, 1, 2] vs human [1, 2, 3]
    b_rho = spearmanr([4, 1, 2], [1, 2, 3])[0]
    assert res.rho == pytest.approx((1.0 + b_rho) / 2, abs=1e-12)
    assert (res.n_items, res.n_missing, res.n_items_used) == (8, 2, 6)
    as_zero = summary_level_correlation(
        [0.0 if v is None or math.isnan(v) else v for v in judge], human, groups
    )
    assert as_zero.rho != pytest.approx(res.rho)

    pooled = pooled_correlation(judge, human)
    keep = [i for i, v in enumerate(judge) if v is not None and not math.isnan(v)]
    jk, hk = [judge[i] for i in keep], [human[i] for i in keep]
    assert pooled.rho == pytest.approx(spearmanr(jk, hk)[0], abs=1e-12)
    assert pooled.tau == pytest.approx(kendalltau(jk, hk)[0], abs=1e-12)
    assert pooled.r == pytest.approx(pearsonr(jk, hk)[0], abs=1e-12)
    assert (pooled.n_items, pooled.n_missing, pooled.undefined_reason) == (8, 2, None)


def test_missing_scores_can_make_a_group_too_small():
    judge = [1.0, None, None, 1.0, 2.0, 3.0]
    human = [1.0, 2.0, 3.0, 3.0, 2.0, 1.0]
    res = summary_level_correlation(judge, human, ["a"] * 3 + ["b"] * 3)
    assert res.n_skipped_too_few == 1 and res.n_groups_used == 1
    assert res.rho == pytest.approx(-1.0, abs=1e-12)


def test_no_usable_group_gives_nan_with_counts():
    res = summary_level_correlation([1, 2, 3, 4], [2, 2, 3, 3], ["a", "a", "b", "b"])
    assert math.isnan(res.rho) and math.isnan(res.tau) and math.isnan(res.r)
    assert (res.n_groups_used, res.n_skipped_constant_human) == (0, 2)


def test_pooled_matches_scipy_with_ties():
    judge, human, _ = _summeval_like(10, 8, 5)
    judge = np.round(judge)  # argmax-like: heavy ties on both sides
    res = pooled_correlation(judge, human)
    assert res.rho == pytest.approx(spearmanr(judge, human)[0], abs=1e-12)
    assert res.tau == pytest.approx(kendalltau(judge, human)[0], abs=1e-12)
    assert res.r == pytest.approx(pearsonr(judge, human)[0], abs=1e-12)


def test_pooled_hand_values_with_ties():
    res = pooled_correlation([1, 1, 2, 3], [1, 2, 2, 3])  # hand values as above
    assert (res.rho, res.tau, res.r) == pytest.approx((5 / 6, 0.8, 2 / math.sqrt(5.5)), abs=1e-12)


@pytest.mark.parametrize(
    ("judge", "human", "reason"),
    [
        ([2, 2, 2], [1, 2, 3], "constant_judge"),
        ([1, 2, 3], [4, 4, 4], "constant_human"),
        ([1, None, None], [1, 2, 3], "too_few_items"),
    ],
)
def test_pooled_undefined_is_nan_with_reason(judge, human, reason):
    res = pooled_correlation(judge, human)
    assert math.isnan(res.rho) and math.isnan(res.tau) and math.isnan(res.r)
    assert res.undefined_reason == reason


# ---- bootstrap -----------------------------------------------------------------------------
def test_bootstrap_mean_matches_the_former_bench_algorithm():
    # The algorithm bench._common.bootstrap_ci had before the move, inlined.
    x = np.array([0.1, 0.5, 0.2, 0.9, 0.4, 0.4, 0.7])
    rng = np.random.default_rng(7)
    means = x[rng.integers(0, x.size, size=(500, x.size))].mean(axis=1)
    low, high = np.quantile(means, [0.025, 0.975])
    ci = bootstrap_ci(x, seed=7, n_resamples=500)
    assert (ci.estimate, ci.low, ci.high) == (float(x.mean()), float(low), float(high))
    assert (ci.n_resamples, ci.n_undefined, ci.seed, ci.level) == (500, 0, 7, 0.95)

    from bench._common import bootstrap_ci as bench_bootstrap_ci

    assert bench_bootstrap_ci(x, seed=7, n_resamples=500) == (ci.estimate, ci.low, ci.high)


def test_bootstrap_custom_statistic_and_undefined_resamples():
    x = np.array([1.0, 2.0, 3.0, 4.0, 10.0])
    by_mean = bootstrap_ci(x, seed=3, n_resamples=300)
    by_call = bootstrap_ci(x, seed=3, n_resamples=300, statistic=np.mean)
    assert (by_call.low, by_call.high) == pytest.approx((by_mean.low, by_mean.high), abs=1e-12)

    def nan_if_has_ten(v):
        return math.nan if (v == 10.0).any() else float(np.median(v))

    ci = bootstrap_ci(x, seed=3, n_resamples=300, statistic=nan_if_has_ten)
    assert math.isnan(ci.estimate)
    # P(a resample of 5 misses the 10) = (4/5)^5 ~ 0.33: about 2/3 are undefined
    assert 150 < ci.n_undefined < 250
    assert 1.0 <= ci.low <= ci.high <= 4.0


def test_bootstrap_constant_sample_has_zero_width():
    ci = bootstrap_ci([2.0] * 6, seed=0, n_resamples=50)
    assert (ci.estimate, ci.low, ci.high) == (2.0, 2.0, 2.0)


def test_summary_level_ci_follows_documented_group_resampling():
    judge, human, groups = _summeval_like(8, 5, 11)
    human[0:5] = 3.0  # one constant document, resampled like the others
    n_res = 40
    ci = summary_level_correlation_ci(judge, human, groups, seed=5, n_resamples=n_res)
    # Reference: the documented draws, then the upstream loop on each resample of documents.
    docs = list(dict.fromkeys(groups))
    rows = {d: [i for i, g in enumerate(groups) if g == d] for d in docs}
    idx = np.random.default_rng(5).integers(0, len(docs), size=(n_res, len(docs)))
    reps = []
    for row in idx:
        j, h, g = [], [], []
        for k, di in enumerate(row):  # a document drawn twice enters twice (renamed)
            j += [judge[i] for i in rows[docs[di]]]
            h += [human[i] for i in rows[docs[di]]]
            g += [f"{k}"] * len(rows[docs[di]])
        reps.append(_upstream_summary(j, h, g)[:3])
    reps_arr = np.array(reps)
    point = summary_level_correlation(judge, human, groups)
    for k, name in enumerate(("rho", "tau", "r")):
        got = getattr(ci, name)
        low, high = np.quantile(reps_arr[:, k], [0.025, 0.975])
        assert (got.low, got.high) == pytest.approx((low, high), abs=1e-12)
        assert got.estimate == getattr(point, name)
    assert (ci.unit, ci.n_units) == ("group", 8)


def test_pooled_ci_follows_documented_item_resampling():
    judge, human, _ = _summeval_like(5, 6, 12)
    judge = list(judge)
    judge[3] = None  # excluded before resampling
    n_res = 30
    ci = pooled_correlation_ci(judge, human, seed=2, n_resamples=n_res)
    keep = [i for i, v in enumerate(judge) if v is not None]
    j = np.array([judge[i] for i in keep])
    h = human[keep]
    idx = np.random.default_rng(2).integers(0, j.size, size=(n_res, j.size))
    reps = np.array([[spearmanr(j[r], h[r])[0], kendalltau(j[r], h[r])[0]] for r in idx])
    for k, name in enumerate(("rho", "tau")):
        low, high = np.quantile(reps[:, k], [0.025, 0.975])
        got = getattr(ci, name)
        assert (got.low, got.high) == pytest.approx((low, high), abs=1e-12)
    assert (ci.unit, ci.n_units) == ("item", 29)


def test_bootstrap_is_deterministic_and_seed_dependent():
    judge, human, groups = _summeval_like(20, 6, 4)
    a = summary_level_correlation_ci(judge, human, groups, seed=0, n_resamples=300)
    b = summary_level_correlation_ci(judge, human, groups, seed=0, n_resamples=300)
    c = summary_level_correlation_ci(judge, human, groups, seed=1, n_resamples=300)
    assert a == b
    assert (a.rho.low, a.rho.high) != (c.rho.low, c.rho.high)
    p = pooled_correlation_ci(judge, human, seed=0, n_resamples=100)
    q = pooled_correlation_ci(judge, human, seed=0, n_resamples=100)
    s = pooled_correlation_ci(judge, human, seed=1, n_resamples=100)
    assert p == q
    assert (p.tau.low, p.tau.high) != (s.tau.low, s.tau.high)
    m0 = bootstrap_ci(judge, seed=0, n_resamples=200)
    m1 = bootstrap_ci(judge, seed=1, n_resamples=200)
    assert m0 == bootstrap_ci(judge, seed=0, n_resamples=200)
    assert (m0.low, m0.high) != (m1.low, m1.high)


def test_ci_contains_point_estimate_on_reasonable_data():
    judge, human, groups = _summeval_like(40, 8, 6)
    s = summary_level_correlation_ci(judge, human, groups, seed=0, n_resamples=500)
    p = pooled_correlation_ci(judge, human, seed=0, n_resamples=200)
    for ci in (s.rho, s.tau, s.r, p.rho, p.tau, p.r):
        assert ci.low < ci.estimate < ci.high
        assert ci.high - ci.low < 0.5
        assert ci.n_undefined == 0
    assert s.rho.estimate > 0.3  # judge = human + noise


def test_summary_ci_counts_resamples_without_usable_documents():
    # one usable document of four: P(resample misses it) = (3/4)^4 ~ 0.32
    judge = [1, 2, 3, 4, 4, 4, 1, 2, 3, 1, 2, 3]
    human = [1, 2, 3, 1, 2, 3, 5, 5, 5, 2, 2, 2]
    groups = ["u"] * 3 + ["cj"] * 3 + ["ch"] * 3 + ["ch2"] * 3
    ci = summary_level_correlation_ci(judge, human, groups, seed=0, n_resamples=400)
    assert 80 < ci.rho.n_undefined < 180
    assert (ci.rho.estimate, ci.rho.low, ci.rho.high) == pytest.approx((1.0, 1.0, 1.0))


# ---- agreement and κ -------------------------------------------------------------------------
def test_agreement_rate_exact_tolerance_and_missing():
    res = agreement_rate([1, 2, 3, None, 5], [1, 2, 4, 4, 3])
    assert (res.n_agree, res.n_items, res.n_missing) == (2, 5, 1)
    assert res.rate == pytest.approx(2 / 4)
    within1 = agreement_rate([1, 2, 3, None, 5], [1, 2, 4, 4, 3], tolerance=1)
    assert within1.rate == pytest.approx(3 / 4)  # |3-4| = 1 counts, |5-3| = 2 does not
    assert agreement_rate(["A", "B", "B"], ["A", "B", "A"]).rate == pytest.approx(2 / 3)
    assert math.isnan(agreement_rate([None, None], [1, 2]).rate)


def test_kappa_hand_arithmetic():
    judge, human = [1, 2, 3, 3], [1, 2, 3, 2]
    # confusion (judge row, human col): (1,1) (2,2) (3,3) (3,2), one each; n = 4
    # judge marginals [1, 1, 2], human marginals [1, 2, 1]
    # unweighted: p_o = 3/4, p_e = (1*1 + 1*2 + 2*1) / 16 = 5/16
    #   kappa = (3/4 - 5/16) / (1 - 5/16) = 7/11
    un = cohen_kappa(judge, human)
    assert un.kappa == pytest.approx(7 / 11, abs=1e-12)
    assert un.observed_disagreement == pytest.approx(1 / 4)
    assert un.expected_disagreement == pytest.approx(11 / 16)
    # linear, w = |i-j| / 2: D_o = (1/2) / 4 = 1/8
    #   E = outer([1,1,2], [1,2,1]) / 4; sum w*E = (.25+.25) + (.125+.125) + (.5+.5) = 1.75
    #   D_e = 1.75 / 4 = 7/16 -> kappa = 1 - (1/8) / (7/16) = 5/7
    assert cohen_kappa(judge, human, weights="linear").kappa == pytest.approx(5 / 7, abs=1e-12)
    # quadratic, w = (i-j)^2 / 4: D_o = (1/4) / 4 = 1/16
    #   sum w*E = (.125+.25) + (.0625+.0625) + (.5+.25) = 1.25 -> D_e = 5/16 -> kappa = 4/5
    assert cohen_kappa(judge, human, weights="quadratic").kappa == pytest.approx(0.8, abs=1e-12)


def test_kappa_undefined_when_no_disagreement_is_expected():
    res = cohen_kappa([3, 3, 3], [3, 3, 3])  # p_e = 1: kappa = 0/0
    assert math.isnan(res.kappa)


def test_kappa_excludes_missing_and_uses_given_scale():
    judge = [1, None, 3, 5, 5, 3, 1]
    human = [1, 2, 3, 4, 5, 1, 3]
    res = cohen_kappa(judge, human, weights="linear", labels=range(1, 6))
    assert (res.n_items, res.n_missing, res.labels) == (7, 1, (1, 2, 3, 4, 5))
    # only 1, 3, 4, 5 observed: by default 1 and 3 are then one category apart (as in sklearn);
    # with the full scale they are two apart, so the weighted kappa differs
    gap = cohen_kappa([1, 3, 5, 5], [1, 3, 4, 5], weights="linear")
    full = cohen_kappa([1, 3, 5, 5], [1, 3, 4, 5], weights="linear", labels=[1, 2, 3, 4, 5])
    assert gap.labels == (1, 3, 4, 5) and gap.kappa != pytest.approx(full.kappa)


@pytest.mark.parametrize("weights", [None, "linear", "quadratic"])
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_kappa_matches_sklearn(weights, seed):
    metrics = require_module("sklearn.metrics")
    rng = np.random.default_rng(seed)
    human = rng.integers(1, 6, size=60)
    judge = np.clip(human + rng.integers(-2, 3, size=60), 1, 5)
    judge_with_missing = [None if i % 13 == 0 else int(v) for i, v in enumerate(judge)]
    keep = [i for i, v in enumerate(judge_with_missing) if v is not None]
    expected = metrics.cohen_kappa_score(
        judge[keep], human[keep], weights=weights, labels=[1, 2, 3, 4, 5]
    )
    res = cohen_kappa(judge_with_missing, list(human), weights=weights, labels=range(1, 6))
    assert res.kappa == pytest.approx(expected, abs=1e-12)
    assert res.n_missing == 60 - len(keep)
    # default labels = sorted observed union, as sklearn's labels=None
    assert cohen_kappa(judge, human, weights=weights).kappa == pytest.approx(
        metrics.cohen_kappa_score(judge, human, weights=weights), abs=1e-12
    )


def test_kappa_matches_sklearn_on_string_labels():
    metrics = require_module("sklearn.metrics")
    a = ["yes", "no", "yes", "yes", "no", "maybe", "no"]
    b = ["yes", "no", "no", "yes", "no", "yes", "maybe"]
    assert cohen_kappa(a, b).kappa == pytest.approx(metrics.cohen_kappa_score(a, b), abs=1e-12)


# ---- ties ----------------------------------------------------------------------------------
def test_count_ties_hand_values():
    t = count_ties([3, 3, 4, 3, None, 4, 5])
    # values 3 x3, 4 x2, 5 x1 over 6 scored items: distinct 3, tied items 6 - 3 = 3
    # tied pairs 3*2/2 + 2*1/2 = 4 of 6*5/2 = 15
    assert (t.n_items, t.n_distinct, t.n_tied_items, t.n_tied_pairs, t.n_pairs) == (
        6,
        3,
        3,
        4,
        15,
    )
    assert (t.n_missing, t.n_groups) == (1, None)
    assert t.tied_pair_fraction == pytest.approx(4 / 15)


def test_count_ties_within_groups():
    # a: [3, 3, 4] -> 1 tied item, 1 tied pair of 3; b: [3, 4] -> 0 of 1 (3 vs a's 3 not a tie)
    t = count_ties([3, 3, 4, 3, 4], groups=["a", "a", "a", "b", "b"])
    assert (t.n_distinct, t.n_tied_items, t.n_tied_pairs, t.n_pairs, t.n_groups) == (
        4,
        1,
        1,
        4,
        2,
    )


def test_argmax_scores_tie_more_than_expected_scores():
    probs = np.array(
        [
            [0.05, 0.10, 0.60, 0.20, 0.05],
            [0.05, 0.15, 0.50, 0.25, 0.05],
            [0.10, 0.10, 0.40, 0.30, 0.10],
            [0.00, 0.05, 0.45, 0.45, 0.05],
            [0.02, 0.08, 0.30, 0.55, 0.05],
            [0.01, 0.04, 0.35, 0.50, 0.10],
        ]
    )
    argmax = probs.argmax(axis=1) + 1  # [3, 3, 3, 3, 4, 4]
    expected = probs @ np.arange(1, 6)  # 3.05, 3.10, 3.20, 3.45, 3.53, 3.64: all distinct
    ta, te = count_ties(argmax), count_ties(expected)
    assert (ta.n_tied_items, ta.n_tied_pairs) == (4, 7)  # 6 - 2; 4*3/2 + 2*1/2
    assert (te.n_tied_items, te.n_tied_pairs) == (0, 0)


# ---- JSON round-trip -----------------------------------------------------------------------
def test_results_round_trip_through_json():
    judge, human, groups = _summeval_like(6, 4, 8)
    objs = [
        summary_level_correlation(judge, human, groups),
        pooled_correlation(judge, human),
        summary_level_correlation_ci(judge, human, groups, seed=0, n_resamples=20),
        bootstrap_ci(judge, seed=0, n_resamples=20),
        agreement_rate(np.round(judge), human, tolerance=1),
        cohen_kappa([1, 2, 3], [1, 2, 2], weights="linear"),
        count_ties(judge, groups=groups),
        pooled_correlation([1, 1, 1], [1, 2, 3]),  # NaN fields
    ]
    types = [
        SummaryCorrelation,
        PooledCorrelation,
        CorrelationCI,
        ConfidenceInterval,
        AgreementResult,
        KappaResult,
        TieCount,
        PooledCorrelation,
    ]
    for obj, cls in zip(objs, types):
        back = cls.from_dict(json.loads(json.dumps(obj.to_dict())))
        assert isinstance(back, cls)
        assert json.dumps(back.to_dict()) == json.dumps(obj.to_dict())


# ---- bad input -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: summary_level_correlation([1, 2], [1, 2, 3], ["a", "a", "a"]), "length mismatch"),
        (lambda: summary_level_correlation([1], [1], ["a"]), "at least 2 items, got 1"),
        (lambda: pooled_correlation([1, 2], [1]), "length mismatch"),
        (lambda: pooled_correlation([1, 2], [1, None]), r"human\[1\] is missing"),
        (lambda: pooled_correlation([1, "x"], [1, 2]), r"judge\[1\] is not a number: 'x'"),
        (lambda: pooled_correlation([1, math.inf], [1, 2]), r"judge\[1\] is infinite"),
        (lambda: pooled_correlation("12", "12"), "must be a sequence"),
        (lambda: pooled_correlation(np.ones((2, 2)), np.ones((2, 2))), "must be 1-d"),
        (lambda: summary_level_correlation([1, 2], [1, 2], [["a"], ["b"]]), "not hashable"),
        (lambda: bootstrap_ci([], seed=0), "non-empty"),
        (lambda: bootstrap_ci([1.0, math.nan], seed=0), r"values\[1\] is not finite"),
        (lambda: bootstrap_ci([1.0, 2.0], seed=-1), "seed must be a non-negative int, got -1"),
        (lambda: bootstrap_ci([1.0, 2.0], seed=0, n_resamples=0), "n_resamples must be >= 1"),
        (lambda: bootstrap_ci([1.0, 2.0], seed=0, level=1.0), r"level must be in \(0, 1\)"),
        (
            lambda: summary_level_correlation_ci([1, 2], [1, 2], ["a", "a"], seed=0, level=95),
            "level must be in",
        ),
        (lambda: pooled_correlation_ci([1, 2], [1, 2], seed=1.5), "seed must be"),
        (lambda: cohen_kappa([1, 2], [1, 2], weights="cubic"), "weights must be one of"),
        (lambda: cohen_kappa([1, 7], [1, 2], labels=[1, 2, 3]), "judge label 7 is not in"),
        (lambda: cohen_kappa([1, 2], [1, 2], labels=[1, 2, 2]), "contains 2 twice"),
        (lambda: cohen_kappa([1, "a"], [1, 2]), "cannot be sorted"),
        (lambda: cohen_kappa([1, 2], [1, None]), r"human\[1\] is missing"),
        (lambda: agreement_rate([1, 2], [1, 2], tolerance=-1), "tolerance must be"),
        (lambda: agreement_rate(["a", "b"], ["a", "b"], tolerance=1), "not a number"),
        (lambda: count_ties([1]), "at least 2 items"),
        (lambda: count_ties([1, 2, 3], groups=["a", "b"]), "length mismatch"),
    ],
)
def test_bad_input_raises_config_error(call, match):
    with pytest.raises(ConfigError, match=match):
        call()


def test_pooled_ci_counts_constant_resamples_without_scipy_warnings():
    # judge has a single 2 among five items: P(resample misses it) = (4/5)^5 ~ 0.33 -> constant
    judge, human = [1, 2, 1, 1, 1], [1, 2, 3, 4, 5]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ci = pooled_correlation_ci(judge, human, seed=0, n_resamples=300)
    assert 60 < ci.rho.n_undefined < 140
    assert ci.rho.n_undefined == ci.tau.n_undefined == ci.r.n_undefined
