"""``python -m bench.variance``: sampled juries against one exact expectation; clones against a
diverse panel; judge stability.

1. **Samples vs expectation** on one real SummEval item with the default model: ``--n`` (30)
   real samples of the score at T = 1.0 (``Backend.sample_scores``: drawn from the full
   next-token distribution, non-label draws counted) -- histogram, mean, sd, SEM for k = 1, 3, 5
   and n -- against the probability-weighted expectation of one ``score_distribution`` pass at
   the same T, and their gap in SEM units. A jury of clones is a Monte-Carlo estimate of what
   one forward pass gives exactly. (Published: 30 samples gave 2.8333, SEM 0.0692, against an
   expectation of 2.8934.) A PNG shows the sampled histogram against the exact distribution.
2. **Clones vs a diverse panel** (PoLL, Verga et al. 2024, arXiv 2404.18796) on ``--docs``
   SummEval articles (coherence, G-Eval prompt): panel 1 is three sampled draws of the default
   model (clones); panel 2 is three families -- Qwen2.5 (default), SmolLM2 and Gemma 3 (base
   model, raw prompt + prefill). For each: summary-level Spearman ρ with the humans, bias (mean
   pooled score minus mean human score, 1-5 scale), the between-judge variance and the variance
   of the pooled score. Clones shrink variance and keep the bias of the one model's
   expectation; only family diversity moves the bias.
3. **Stability**: the same judge twice on the same items (a second, freshly loaded backend,
   items in reverse order); largest and mean absolute difference of the 0-1 score; the judge is
   flagged unfit for fine comparisons when the largest difference exceeds 0.05.

Small judges put less mass on the labels than the library default ``min_mass=0.9`` accepts;
the panel therefore uses ``--panel-min-mass`` (default 0.1) and reports each judge's mass and
errors -- raise it to see which judges the library would refuse.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np

from bench._common import make_run_dir, run_config, write_json, write_jsonl
from bench.summeval import SUMMEVAL, load_items, select_docs
from localjudge.judges.geval import GEval
from localjudge.models import DEFAULT_JUDGE
from localjudge.stats import summary_level_correlation

PANEL = [("qwen2.5-coder-0.5b-instruct", False), ("smollm2-135m-instruct", False),
         ("gemma3-270m", True)]
"""The diverse panel: (manifest, raw). Gemma 3 270M is a base model without a chat template."""

UNFIT_MAX_DIFF = 0.05
"""Largest 0-1 score difference between two runs above which a judge is unfit (issue 5)."""


def _metric(backend: Any, raw: bool, min_mass: float, seed: int) -> GEval:
    d = SUMMEVAL["coherence"]
    return GEval(d.name, criteria=d.criteria, evaluation_steps=list(d.steps),
                 evaluation_params=list(d.params), score_range=d.score_range, model=backend,
                 raw=raw, min_mass=min_mass, seed=seed)


def part1(backend: Any, case: Any, n: int, temperature: float, seed: int,
          out: Path) -> dict[str, Any]:
    m = _metric(backend, False, 0.0, seed)
    s = backend.sample_scores(m.form_prompt(case), range(1, 6), n=n, temperature=temperature,
                              seed=seed, prefill=m.prefill)
    print(f"\n== 1. {n} samples at T={temperature} vs one exact pass ({case.case_id})")
    hist = " ".join(f"{lab}:{c}" for lab, c in zip(s.labels, s.counts))
    print(f"  histogram {hist}  non-label draws: {s.n_non_label} {s.non_label_texts or ''}")
    sd = s.sd if s.sd is not None else math.nan
    print(f"  n={s.n}  mean={s.mean:.4f}  sd={sd:.4f}  SEM(k=1)={s.sem['1'] or math.nan:.4f}  "
          f"SEM(k=3)={s.sem['3'] or math.nan:.4f}  SEM(k=5)={s.sem['5'] or math.nan:.4f}  "
          f"SEM(n)={s.sem['n'] or math.nan:.4f}")
    d = s.distribution
    print(f"  exact expectation at T={temperature}: {d.expected:.4f} (raw label mass "
          f"{d.mass:.4f}); sampled mean - expectation = {s.mean - d.expected:+.4f} = "
          f"{s.gap_sem:+.2f} SEM")
    _plot_part1(out / "samples_vs_exact.png", s)
    return s.to_dict()


def _plot_part1(path: Path, s: Any) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = list(s.labels) + ["other"]
    sampled = [c / s.n for c in s.counts] + [s.n_non_label / s.n]
    raw = [math.exp(lp) if lp > -math.inf else 0.0 for lp in s.distribution.logprobs]
    exact = raw + [max(0.0, 1.0 - s.distribution.mass)]
    x = np.arange(len(labels))
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.bar(x - 0.2, sampled, 0.4, label=f"sampled (n={s.n}, T={s.temperature})")
    ax.bar(x + 0.2, exact, 0.4, label="exact (one forward pass)")
    ax.set_xticks(x, labels)
    ax.set_ylabel("probability")
    ax.set_title(f"sampled mean {s.mean:.3f} vs expectation {s.expected:.3f} "
                 f"({s.gap_sem:+.2f} SEM)", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _var_of_draw(d: Any) -> float:
    e = d.expected
    return math.fsum(p * (float(lab) - e) ** 2 for lab, p in zip(d.labels, d.probs))


def part2(items: list[dict[str, Any]], default: Any, seed: int, panel_min_mass: float,
          temperature: float) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    from localjudge.backends import load_backend

    human = [float(it["human"]["coherence"]) for it in items]
    groups = [it["doc_id"] for it in items]
    mean_h = statistics.fmean(human)
    # clones: three independent draws of the default model per item, plus its exact expectation
    m0 = _metric(default, False, 0.0, seed)
    clone_draws: list[list[float | None]] = []
    exact: list[float | None] = []
    var_draw: list[float] = []
    for i, it in enumerate(items):
        s = default.sample_scores(m0.form_prompt(it["case"]), range(1, 6), n=3,
                                  temperature=temperature, seed=seed * 100003 + i,
                                  prefill=m0.prefill)
        clone_draws.append([None if x is None else float(x) for x in s.draws])
        exact.append(s.distribution.expected)
        var_draw.append(_var_of_draw(s.distribution))
    # diverse panel: each family's exact expectation
    panel_scores: dict[str, list[float | None]] = {}
    panel_mass: dict[str, list[float | None]] = {}
    for name, raw in PANEL:
        b = default if name == DEFAULT_JUDGE else load_backend("llama_cpp", name)
        m = _metric(b, raw, panel_min_mass, seed)
        sc, ms = [], []
        for it in items:
            m.measure(it["case"])
            r = m.result
            sc.append(None if r is None else r.raw_score)
            ms.append(None if r is None else r.mass)
        panel_scores[f"{name} ({b.family})"] = sc
        panel_mass[f"{name} ({b.family})"] = ms

    def pooled(rows: list[list[float | None]]) -> tuple[list[float | None], list[float]]:
        out, var = [], []
        for row in rows:
            ok = [x for x in row if x is not None]
            out.append(statistics.fmean(ok) if ok else None)
            if len(ok) > 1:
                var.append(statistics.pvariance(ok))
        return out, var

    def row(name: str, k: int, scores: list[float | None], between: float | None,
            var_pooled: float | None, mass: float | None = None) -> dict[str, Any]:
        sl = summary_level_correlation(scores, human, groups)
        ok = [x for x in scores if x is not None]
        return {"panel": name, "k": k, "rho": sl.rho, "docs_used": sl.n_groups_used,
                "bias": (statistics.fmean(ok) - mean_h) if ok else None,
                "between_var": between, "var_pooled": var_pooled,
                "n_missing": sl.n_missing, "mean_mass": mass}

    rows = []
    c1 = [d[0] for d in clone_draws]
    c3, c3var = pooled(clone_draws)
    mean_var_draw = statistics.fmean(var_draw)
    rows.append(row("clones: 1 sampled draw of the default model", 1, c1, None, mean_var_draw))
    rows.append(row("clones: mean of 3 sampled draws", 3, c3,
                    statistics.fmean(c3var) if c3var else None, mean_var_draw / 3))
    rows.append(row("clones: exact expectation (one pass, k -> inf)", 0, exact, 0.0, 0.0))
    for name, sc in panel_scores.items():
        ms = [x for x in panel_mass[name] if x is not None]
        rows.append(row(f"single judge: {name}", 1, sc, None, None,
                        statistics.fmean(ms) if ms else None))
    d3, d3var = pooled([list(t) for t in zip(*panel_scores.values())])
    between = statistics.fmean(d3var) if d3var else None
    rows.append(row("diverse: mean of 3 families", 3, d3, between,
                    None if between is None else between / 3))
    per_item = [{"case_id": it["case"].case_id, "human": h, "clone_draws": cd, "exact": e,
                 **{f"panel:{k}": v[i] for k, v in panel_scores.items()}}
                for i, (it, h, cd, e) in enumerate(zip(items, human, clone_draws, exact))]
    print(f"\n== 2. clones vs diverse panel: {len({*groups})} SummEval articles, {len(items)} "
          f"summaries, coherence; mean human score {mean_h:.3f}")
    print(f"  {'panel':58} {'k':>3} {'rho':>7} {'bias':>7} {'between var':>11} "
          f"{'var pooled':>10} {'mass':>6} {'missing':>7}")
    for r in rows:
        def f(x: Any, w: int = 7, p: int = 3) -> str:
            ok = isinstance(x, float) and not math.isnan(x)
            return f"{x:{w}.{p}f}" if ok else f"{'-':>{w}}"
        k = "inf" if r["k"] == 0 else str(r["k"])
        print(f"  {r['panel']:58} {k:>3} {f(r['rho'])} {f(r['bias'])} {f(r['between_var'], 11)} "
              f"{f(r['var_pooled'], 10)} {f(r['mean_mass'], 6)} {r['n_missing']:>7}")
    return rows, per_item


def part3(items: list[dict[str, Any]], default: Any, model: str, seed: int) -> dict[str, Any]:
    from localjudge.backends import load_backend

    m1 = _metric(default, False, 0.0, seed)
    first = {}
    for it in items:
        m1.measure(it["case"])
        first[it["case"].case_id] = m1.score
    other = load_backend("llama_cpp", model)
    m2 = _metric(other, False, 0.0, seed)
    diffs = []
    for it in reversed(items):
        m2.measure(it["case"])
        a, b = first[it["case"].case_id], m2.score
        if a is not None and b is not None:
            diffs.append(abs(a - b))
    largest = max(diffs) if diffs else math.nan
    mean = statistics.fmean(diffs) if diffs else math.nan
    unfit = largest > UNFIT_MAX_DIFF
    print(f"\n== 3. stability: {model}, {len(diffs)} items judged twice (fresh backend, reverse "
          f"order): largest |diff| {largest:.3g}, mean {mean:.3g} on the 0-1 scale -> "
          f"{'UNFIT for fine comparisons' if unfit else 'fit'} (threshold {UNFIT_MAX_DIFF})")
    return {"n": len(diffs), "max_abs_diff": largest, "mean_abs_diff": mean, "unfit": unfit,
            "threshold": UNFIT_MAX_DIFF}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(prog="python -m bench.variance",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="default")
    ap.add_argument("--n", type=int, default=30, help="samples in part 1")
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--item", type=int, default=0, help="SummEval item index for part 1")
    ap.add_argument("--docs", type=int, default=3, help="SummEval articles for parts 2-3")
    ap.add_argument("--limit", type=int, default=None, help="cap on items in parts 2-3")
    ap.add_argument("--panel-min-mass", type=float, default=0.1)
    ap.add_argument("--results", type=Path, default=None, help="results root (bench/results)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--parts", default="1,2,3")
    args = ap.parse_args(argv)

    from localjudge.backends import load_backend

    model = DEFAULT_JUDGE if args.model == "default" else args.model
    default = load_backend("llama_cpp", model)
    all_items, _ = load_items("summeval")
    items = select_docs(all_items, args.docs, args.seed)[: args.limit]
    parts = {p.strip() for p in args.parts.split(",")}
    sig = _metric(default, False, 0.0, args.seed).signature()
    cfg = run_config(argv, experiment="variance", seed=args.seed, signatures={"default": sig},
                     packages=["llama_cpp_python", "numpy", "scipy"],
                     extra={"model": model, "n_items": len(items), "panel": PANEL,
                            "panel_min_mass": args.panel_min_mass})
    out = make_run_dir("variance", cfg, root=args.results)
    write_json(out / "config.json", cfg)
    summary: dict[str, Any] = {}
    if "1" in parts:
        summary["samples_vs_expectation"] = part1(default, all_items[args.item]["case"], args.n,
                                                  args.temperature, args.seed, out)
    if "2" in parts:
        rows, per_item = part2(items, default, args.seed, args.panel_min_mass,
                               args.temperature)
        summary["panels"] = rows
        write_jsonl(out / "items.jsonl", per_item)
    if "3" in parts:
        summary["stability"] = part3(items, default, model, args.seed)
    from localjudge.signature import Signature

    print(f"\nsignature: judge:geval-Coherence|steps:{sig['steps_sha256'][:8]}|"
          f"{Signature.from_dict(sig['backend']).format(short=True)}")
    write_json(out / "summary.json", summary)
    print(f"results: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
