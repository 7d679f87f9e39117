"""``python -m bench.ranking``: do reference-based metrics rank a paraphrase above a truncation
above a negation?

1. Three sentences (issue 4). R = "The cat sat on the mat."; A = "A feline rested upon the
   rug." (correct paraphrase), B = "The cat did not sit on the mat." (negation, wrong),
   C = "The cat sat on the" (truncated). Human ranking A > C > B. Table: BLEU-4, smoothed
   BLEU-4, BLEU-2, ROUGE-1/2/L F1, BERTScore P/R/F raw and rescaled (baseline from
   ``--baseline``, else the newest ``bench.floor`` baseline for the same encoder weights), and
   G-Eval when llama-cpp-python and the default judge are available; each metric's implied
   ranking and whether it matches A > C > B.

   The G-Eval row (three-sentence table and, with ``--geval``, the scaled set) is the localjudge ``GEval`` metric on
   ``load_backend("llama_cpp", "qwen2.5-coder-0.5b-instruct")`` with ``GEVAL_CRITERIA`` and the
   fixed ``GEVAL_STEPS`` (Liu et al. 2023, arXiv 2303.16634, section 2); it reports the
   probability-weighted score sum_s s * p(s) over labels 1-5.

2. Scaled (does the negation error wash out with more samples?). From SummEval
   (``../shared/data/summeval/summeval_references.jsonl``, 11 human references per article),
   ``--per-article`` ordered pairs (i, j), i != j, of references per article, drawn with
   ``--seed``: R = reference i, A = reference j (another human reference, same article),
   B = ``negate(R)``, C = ``truncate(R, keep)``. Items whose R has no negation site are
   skipped and counted. Per metric: the fraction of items ordered strictly A > C > B, the
   pairwise fractions, and the per-item Spearman correlation of the three scores with the
   intended order (A=3, C=2, B=1; average ranks for ties; 0 when all three scores tie),
   averaged over items; 95% percentile bootstrap CIs over items. BERTScore is reported at
   every layer (rescaling is monotone, so it cannot change an ordering).

Negation rule (``negate``): scan R's whitespace tokens left to right; at the first token that
is (case-insensitively) one of ``AUXILIARIES`` and is not already followed by "not"/"n't",
insert "not" after it. Truncation rule (``truncate``): keep the first
``max(1, floor(keep * n))`` of R's n whitespace tokens (default keep = 0.8), always dropping
at least one.

3. Outputs: the tables (printed and ``tables.md``), ``ranking_scaled.png`` and the run files.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench._common import (
    RESULTS_ROOT,
    bootstrap_ci,
    make_run_dir,
    run_config,
    shared_data_dir,
    write_json,
    write_jsonl,
)

__all__ = [
    "AUXILIARIES",
    "CANDIDATES",
    "GEVAL_CRITERIA",
    "GEVAL_STEPS",
    "HUMAN_ORDER",
    "REFERENCE",
    "implied_ranking",
    "main",
    "negate",
    "spearman_with_intended",
    "truncate",
]

REFERENCE = "The cat sat on the mat."
"""R of the three-sentence experiment."""

CANDIDATES = {
    "A": "A feline rested upon the rug.",
    "B": "The cat did not sit on the mat.",
    "C": "The cat sat on the",
}
"""A: correct paraphrase; B: negation (wrong); C: truncated."""

HUMAN_ORDER = ("A", "C", "B")
"""The intended ranking, best first."""

AUXILIARIES = (
    "is",
    "are",
    "was",
    "were",
    "has",
    "have",
    "had",
    "will",
    "would",
    "can",
    "could",
    "should",
    "may",
    "might",
    "must",
    "does",
    "do",
    "did",
)
"""Tokens after which ``negate`` inserts "not"."""

GEVAL_CRITERIA = (
    "Correctness - the actual output states the same facts as the expected output (the "
    "reference). A paraphrase with the same meaning is fully correct; a candidate that "
    "contradicts the reference, for example by negating it, is wrong; a candidate that leaves "
    "facts out is partly correct."
)
"""G-Eval criteria for the ranking experiment (Liu et al. 2023, section 2)."""

GEVAL_STEPS = [
    "Read the expected output and note the facts it states.",
    "Read the actual output and check each fact: stated, missing, or contradicted.",
    "Assign a Correctness score from 1 to 5.",
]
"""Fixed evaluation steps (given, so the column does not depend on generated steps)."""

GEVAL_MODEL = "qwen2.5-coder-0.5b-instruct"
"""Judge model of the G-Eval column."""

_TIE = 1e-12


def negate(text: str) -> str | None:
    """Insert one "not" after the first auxiliary verb (see module docstring); None if none."""
    toks = text.split()
    for i, t in enumerate(toks):
        if t.lower() in AUXILIARIES:
            nxt = toks[i + 1].lower() if i + 1 < len(toks) else ""
            if nxt in ("not", "n't"):
                continue
            return " ".join([*toks[: i + 1], "not", *toks[i + 1 :]])
    return None


def truncate(text: str, keep: float) -> str:
    """The first ``max(1, floor(keep * n))`` whitespace tokens, dropping at least one."""
    toks = text.split()
    n_keep = min(max(1, math.floor(keep * len(toks))), len(toks) - 1)
    return " ".join(toks[: max(1, n_keep)])


def implied_ranking(scores: dict[str, float]) -> str:
    """``"C > B > A"`` from name -> score (higher is better); ties shown as ``=``."""
    names = sorted(scores, key=lambda k: (-scores[k], k))
    out = names[0]
    for prev, cur in itertools.pairwise(names):
        out += (" = " if abs(scores[prev] - scores[cur]) <= _TIE else " > ") + cur
    return out


def _matches(scores: dict[str, float]) -> bool:
    a, c, b = (scores[k] for k in HUMAN_ORDER)
    return a - c > _TIE and c - b > _TIE


def spearman_with_intended(s_a: float, s_c: float, s_b: float) -> float:
    """Spearman rho of (s_A, s_C, s_B) with the intended (3, 2, 1); 0 if all three tie.

    Average ranks for ties (Spearman 1904; same as ``scipy.stats.spearmanr``).
    """
    from scipy.stats import rankdata

    x = np.array([s_a, s_c, s_b], dtype=float)
    if np.ptp(x) <= _TIE:
        return 0.0
    rx = rankdata(np.round(x, 12))
    ry = np.array([3.0, 2.0, 1.0])
    rx = rx - rx.mean()
    ry = ry - ry.mean()
    return float((rx * ry).sum() / math.sqrt((rx * rx).sum() * (ry * ry).sum()))


# --------------------------------------------------------------------------------------------


def _parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m bench.ranking", description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="all-minilm-l6-v2", help="BERTScore encoder")
    ap.add_argument("--layer", type=int, default=None, help="BERTScore layer (model default)")
    ap.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="rescale baseline (default: newest bench.floor baseline.json for the "
        "same encoder weights, if any)",
    )
    ap.add_argument(
        "--geval",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="add the G-Eval column (needs llama-cpp-python and the judge weights)",
    )
    ap.add_argument("--seed", type=int, default=0, help="item sampling and bootstrap seed")
    ap.add_argument("--limit", type=int, default=None, help="cap on scaled items")
    ap.add_argument("--per-article", type=int, default=3, help="(R, A) pairs per article")
    ap.add_argument(
        "--truncate-keep",
        type=float,
        default=0.8,
        help="fraction of R's words kept in C (default 0.8)",
    )
    ap.add_argument("--n-bootstrap", type=int, default=2000)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--device", default="cpu")
    ap.add_argument(
        "--data", type=Path, default=shared_data_dir() / "summeval" / "summeval_references.jsonl"
    )
    ap.add_argument("--results", type=Path, default=None, help="results root (bench/results)")
    ap.add_argument("--no-plot", action="store_true")
    return ap.parse_args(argv)


def _find_baseline(model_sha256: str, root: Path) -> Path | None:
    """Newest ``floor/*/baseline.json`` whose model_sha256 matches, or None."""
    for p in sorted((root / "floor").glob("*/baseline.json"), reverse=True):
        try:
            if json.loads(p.read_text()).get("model_sha256") == model_sha256:
                return p
        except (OSError, ValueError):
            continue
    return None


def _geval_scorer() -> tuple[Callable[[str, str], dict[str, Any]] | None, str, Any]:
    """(score function, note, signature) for the G-Eval column, or (None, why, None)."""
    try:
        import llama_cpp  # noqa: F401
    except ImportError as err:
        return (
            None,
            f"G-Eval column skipped: llama_cpp is not importable ({err}; pip install '.[llama]')",
            None,
        )
    from localjudge.backends import load_backend
    from localjudge.errors import LocalJudgeError
    from localjudge.judges.geval import GEval, LLMTestCase, LLMTestCaseParams

    try:
        backend = load_backend("llama_cpp", GEVAL_MODEL)
    except LocalJudgeError as err:
        return None, f"G-Eval column skipped: {err}", None
    metric = GEval(
        "Correctness",
        criteria=GEVAL_CRITERIA,
        evaluation_steps=GEVAL_STEPS,
        evaluation_params=[LLMTestCaseParams.EXPECTED_OUTPUT, LLMTestCaseParams.ACTUAL_OUTPUT],
        model=backend,
        min_mass=0.0,
    )

    def score(response: str, reference: str) -> dict[str, Any]:
        metric.measure(LLMTestCase(actual_output=response, expected_output=reference))
        r = metric.result
        if r is None or r.error is not None or r.distribution is None:
            raise LocalJudgeError(f"G-Eval failed: {None if r is None else r.message}")
        return {
            "score": float(r.raw_score),
            "mass": float(r.distribution.mass),
            "probs": [float(p) for p in r.distribution.probs],
            "signature": r.signature,
        }

    note = (
        f"G-Eval column: localjudge GEval metric on {GEVAL_MODEL} (llama_cpp), "
        "probability-weighted score over labels 1-5, prefill 'Correctness (1-5):'"
    )
    return score, note, _SigDict(metric.signature())


class _SigDict(dict):  # type: ignore[type-arg]
    """A GEval signature (a dict) with the ``to_dict`` the run config expects."""

    def to_dict(self) -> dict[str, Any]:
        return dict(self)

    def format(self) -> str:
        from localjudge.signature import Signature

        backend = Signature.from_dict(self["backend"]).format(short=True)
        return (f"judge:geval-{self['name']}|prompt:{self['prompt_template']}|"
                f"steps:{self['steps_sha256'][:8]}|{backend}")


def _fmt(x: float | None) -> str:
    return "   n/a" if x is None else f"{x:6.4f}"


def _three_sentences(
    lex: Any, scorer: Any, geval: Any
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    names = list(CANDIDATES)
    texts = [CANDIDATES[k] for k in names]
    lx = {k: lex.score(CANDIDATES[k], REFERENCE) for k in names}
    bs = dict(zip(names, scorer.score(texts, [REFERENCE] * 3)))
    rows: list[tuple[str, Callable[[str], float | None]]] = [
        ("BLEU-4", lambda k: lx[k].bleu4),
        ("BLEU-4 smoothed (exp)", lambda k: lx[k].bleu4_smoothed),
        ("BLEU-2", lambda k: lx[k].bleu2),
        ("ROUGE-1 F1", lambda k: lx[k].rouge1_f1),
        ("ROUGE-2 F1", lambda k: lx[k].rouge2_f1),
        ("ROUGE-L F1", lambda k: lx[k].rouge_l_f1),
        ("BERTScore P", lambda k: bs[k].precision),
        ("BERTScore R", lambda k: bs[k].recall),
        ("BERTScore F", lambda k: bs[k].f1),
    ]
    if scorer.baseline is not None:
        rows += [
            ("BERTScore P rescaled", lambda k: bs[k].precision_rescaled),
            ("BERTScore R rescaled", lambda k: bs[k].recall_rescaled),
            ("BERTScore F rescaled", lambda k: bs[k].f1_rescaled),
        ]
    ge: dict[str, dict[str, Any]] = {}
    if geval is not None:
        ge = {k: geval(CANDIDATES[k], REFERENCE) for k in names}
        rows.append(("G-Eval (qwen2.5-coder-0.5b)", lambda k: ge[k]["score"]))
    table = []
    for name, get in rows:
        vals = {k: get(k) for k in names}
        clean = {k: float(v) for k, v in vals.items() if v is not None}
        table.append(
            {
                "metric": name,
                **{k: vals[k] for k in names},
                "ranking": implied_ranking(clean),
                "matches": _matches(clean),
            }
        )
    extra = {
        "lexical": {k: v.to_dict() for k, v in lx.items()},
        "bertscore": {k: v.to_dict() for k, v in bs.items()},
        "geval": {k: {kk: vv for kk, vv in v.items() if kk != "signature"} for k, v in ge.items()},
    }
    return table, extra


def _build_items(
    rows: Sequence[dict[str, Any]], *, seed: int, per_article: int, keep: float, limit: int | None
) -> tuple[list[dict[str, Any]], int]:
    rng = np.random.default_rng(seed)
    items: list[dict[str, Any]] = []
    n_skipped = 0
    for r in rows:
        refs = r["references"]
        all_pairs = [(i, j) for i in range(len(refs)) for j in range(len(refs)) if i != j]
        pick = rng.choice(len(all_pairs), size=min(per_article, len(all_pairs)), replace=False)
        for p in sorted(int(x) for x in pick):
            i, j = all_pairs[p]
            neg = negate(refs[i])
            if neg is None:
                n_skipped += 1
                continue
            items.append(
                {
                    "doc_id": r["doc_id"],
                    "ref_index": i,
                    "a_index": j,
                    "R": refs[i],
                    "A": refs[j],
                    "B": neg,
                    "C": truncate(refs[i], keep),
                }
            )
            if limit is not None and len(items) >= limit:
                return items, n_skipped
    return items, n_skipped


def _scaled_metrics(
    items: list[dict[str, Any]], lex: Any, scorer: Any, geval: Any = None
) -> tuple[dict[str, np.ndarray], list[str]]:
    """metric name -> array (n_items, 3) of scores for (A, C, B); G-Eval (expected score,
    1-5) included when ``geval`` is given (one judge call per candidate, with progress)."""
    out: dict[str, list[list[float]]] = {}
    names = ["BLEU-4", "BLEU-4 smoothed (exp)", "BLEU-2", "ROUGE-1 F1", "ROUGE-2 F1", "ROUGE-L F1"]
    fields = ["bleu4", "bleu4_smoothed", "bleu2", "rouge1_f1", "rouge2_f1", "rouge_l_f1"]
    for n in names:
        out[n] = []
    for it in items:
        sc = [lex.score(it[k], it["R"]) for k in HUMAN_ORDER]
        for n, f in zip(names, fields):
            out[n].append([getattr(s, f) for s in sc])
    resp = [it[k] for it in items for k in HUMAN_ORDER]
    refs = [it["R"] for it in items for _ in HUMAN_ORDER]
    by_layer = scorer.raw_scores_by_layer(resp, refs)  # (L+1, 3n, 3)
    n_items = len(items)
    arrays = {k: np.array(v, dtype=float) for k, v in out.items()}
    layer = scorer.layer
    for j, comp in enumerate("PRF"):
        arrays[f"BERTScore {comp} (L{layer})"] = by_layer[layer, :, j].reshape(n_items, 3)
    for k in range(by_layer.shape[0]):
        if k != layer:
            arrays[f"BERTScore F (L{k})"] = by_layer[k, :, 2].reshape(n_items, 3)
    if geval is not None:
        from tqdm import tqdm

        g = [[geval(it[k], it["R"])["score"] for k in HUMAN_ORDER]
             for it in tqdm(items, desc="G-Eval (scaled)", unit="item", file=sys.stderr)]
        arrays[f"G-Eval ({GEVAL_MODEL.split('-instruct')[0]})"] = np.array(g, dtype=float)
    order = list(arrays)
    return arrays, order


def _summarise(
    arrays: dict[str, np.ndarray], order: list[str], *, seed: int, n_boot: int
) -> list[dict[str, Any]]:
    rows = []
    for m, name in enumerate(order):
        x = arrays[name]
        a, c, b = x[:, 0], x[:, 1], x[:, 2]
        match = ((a - c > _TIE) & (c - b > _TIE)).astype(float)
        rho = np.array([spearman_with_intended(*row) for row in x])
        rows.append(
            {
                "metric": name,
                "match": bootstrap_ci(match, seed=seed + m, n_resamples=n_boot),
                "spearman": bootstrap_ci(rho, seed=seed + 1000 + m, n_resamples=n_boot),
                "a_gt_b": float((a - b > _TIE).mean()),
                "c_gt_b": float((c - b > _TIE).mean()),
                "a_gt_c": float((a - c > _TIE).mean()),
                "mean_scores": {"A": float(a.mean()), "C": float(c.mean()), "B": float(b.mean())},
            }
        )
    return rows


def _plot(path: Path, rows: list[dict[str, Any]], title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [r["metric"] for r in rows]
    y = np.arange(len(rows))
    fig, axes = plt.subplots(1, 2, figsize=(10, 0.35 * len(rows) + 1.6), sharey=True)
    for ax, key, label, lim in (
        (axes[0], "match", "fraction ordered A > C > B", (0.0, 1.0)),
        (axes[1], "spearman", "mean Spearman with A > C > B", (-1.05, 1.05)),
    ):
        m = np.array([r[key][0] for r in rows])
        lo = np.array([r[key][1] for r in rows])
        hi = np.array([r[key][2] for r in rows])
        ax.barh(y, m, xerr=[m - lo, hi - m], color="tab:blue", alpha=0.7, capsize=2)
        ax.set_xlim(*lim)
        ax.set_xlabel(f"{label} (95% CI)")
        ax.axvline(0, color="black", lw=0.8)
        ax.grid(axis="x", alpha=0.3)
    axes[0].set_yticks(y)
    axes[0].set_yticklabels(names, fontsize=8)
    axes[0].invert_yaxis()
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    """Run both ranking experiments; print tables with signatures; return 0.

    Args:
        argv: command-line arguments (default ``sys.argv[1:]``).
    """
    args = _parse(argv)
    argv_list = list(sys.argv[1:] if argv is None else argv)
    from localjudge.metrics.bertscore import BERTScorer
    from localjudge.metrics.lexical import LexicalScorer

    if args.limit is not None and args.limit < 1:
        print("--limit must be >= 1", file=sys.stderr)
        return 2
    if not 0.0 < args.truncate_keep < 1.0:
        print("--truncate-keep must be in (0, 1)", file=sys.stderr)
        return 2
    lex = LexicalScorer()
    probe = BERTScorer(args.model, args.layer, batch_size=args.batch_size, device=args.device)
    baseline = args.baseline
    notes: list[str] = []
    if baseline is None:
        baseline = _find_baseline(probe.model_sha256, args.results or RESULTS_ROOT)
        if baseline is None:
            notes.append(
                "rescaled BERTScore rows skipped: no baseline; run python -m "
                "bench.floor first or pass --baseline"
            )
    scorer = (
        BERTScorer(
            args.model,
            probe.layer,
            baseline=baseline,
            batch_size=args.batch_size,
            device=args.device,
        )
        if baseline is not None
        else probe
    )
    geval, gnote, gsig = (None, "G-Eval column off (--no-geval)", None)
    if args.geval:
        geval, gnote, gsig = _geval_scorer()
    notes.append(gnote)

    # ---- 1. three sentences --------------------------------------------------------------
    table, extra = _three_sentences(lex, scorer, geval)
    print(f"== 1. three sentences: R = {REFERENCE!r}; human ranking A > C > B")
    for k, v in CANDIDATES.items():
        print(f"  {k} = {v!r}")
    head = f"  {'metric':<28} {'A':>6} {'B':>6} {'C':>6}  {'implied ranking':<15} match"
    print(head)
    for r in table:
        print(
            f"  {r['metric']:<28} {_fmt(r['A'])} {_fmt(r['B'])} {_fmt(r['C'])}  "
            f"{r['ranking']:<15} {'yes' if r['matches'] else 'no'}"
        )
    for n in notes:
        print(f"  note: {n}")
    print(f"  signature (lexical):   {lex.signature.format()}")
    print(f"  signature (BERTScore): {scorer.signature().format()}")
    if gsig is not None:
        print(f"  signature (G-Eval):    {gsig.format()}")
    print("  alignment (BERTScore, response -> reference):")
    for k in CANDIDATES:
        al = extra["bertscore"][k]["alignment"]
        print(
            f"    {k}: "
            + ", ".join(f"{a['token']!r}->{a['matched_token']!r} {a['cos']:.3f}" for a in al)
        )

    # ---- 2. scaled -----------------------------------------------------------------------
    data_bytes = args.data.read_bytes()
    rows = [json.loads(line) for line in data_bytes.decode("utf-8").splitlines() if line.strip()]
    items, n_skipped = _build_items(
        rows,
        seed=args.seed,
        per_article=args.per_article,
        keep=args.truncate_keep,
        limit=args.limit,
    )
    arrays, order = _scaled_metrics(items, lex, scorer, geval)
    summary_rows = _summarise(arrays, order, seed=args.seed, n_boot=args.n_bootstrap)
    print(
        f"\n== 2. scaled: {len(items)} SummEval items (seed {args.seed}, "
        f"{args.per_article} per article, C keeps {args.truncate_keep:.0%} of R's words, "
        f"{n_skipped} skipped: no auxiliary to negate)"
    )
    print(
        f"  {'metric':<28} {'A>C>B [95% CI]':<24} {'Spearman [95% CI]':<26} "
        f"{'A>B':>5} {'C>B':>5} {'A>C':>5}"
    )
    md = [
        "| metric | A>C>B [95% CI] | Spearman [95% CI] | A>B | C>B | A>C |",
        "|---|---|---|---|---|---|",
    ]
    for r in summary_rows:
        mt, sp = r["match"], r["spearman"]
        m_s = f"{mt[0]:.3f} [{mt[1]:.3f}, {mt[2]:.3f}]"
        s_s = f"{sp[0]:+.3f} [{sp[1]:+.3f}, {sp[2]:+.3f}]"
        print(
            f"  {r['metric']:<28} {m_s:<24} {s_s:<26} {r['a_gt_b']:5.3f} {r['c_gt_b']:5.3f} "
            f"{r['a_gt_c']:5.3f}"
        )
        md.append(
            f"| {r['metric']} | {m_s} | {s_s} | {r['a_gt_b']:.3f} | {r['c_gt_b']:.3f} | "
            f"{r['a_gt_c']:.3f} |"
        )
    print(f"  signature (BERTScore): {scorer.signature().format()}")
    print(f"  signature (lexical):   {lex.signature.format()}")

    # ---- 3. files ------------------------------------------------------------------------
    data_sha = hashlib.sha256(data_bytes).hexdigest()
    sigs: dict[str, Any] = {
        "bertscore": scorer.signature().to_dict(),
        "lexical": lex.signature.to_dict(),
    }
    if gsig is not None:
        sigs["geval"] = gsig.to_dict()
    # Re-creatable from config.json alone: pin an auto-discovered baseline in the command.
    effective_argv = argv_list
    if args.baseline is None and baseline is not None:
        effective_argv = [*argv_list, "--baseline", str(baseline)]
    config = run_config(
        effective_argv,
        experiment="ranking",
        seed=args.seed,
        signatures=sigs,
        packages=(
            "torch",
            "transformers",
            "tokenizers",
            "numpy",
            "scipy",
            "sacrebleu",
            "rouge-score",
            "matplotlib",
            "llama_cpp_python",
        ),
        device=args.device,
        extra={
            "data": str(args.data),
            "data_sha256": data_sha,
            "baseline": None if baseline is None else str(baseline),
            "baseline_sha256": None if scorer.baseline is None else scorer.baseline.sha256,
            "per_article": args.per_article,
            "truncate_keep": args.truncate_keep,
            "n_bootstrap": args.n_bootstrap,
            "limit": args.limit,
            "geval": {
                "on": geval is not None,
                "criteria": GEVAL_CRITERIA,
                "evaluation_steps": GEVAL_STEPS,
                "model": GEVAL_MODEL,
            },
        },
    )
    run_dir = make_run_dir("ranking", {"signatures": sigs, "argv": argv_list}, root=args.results)
    records: list[dict[str, Any]] = [
        {"kind": "three", "reference": REFERENCE, "candidates": CANDIDATES, **extra}
    ]
    for i, it in enumerate(items):
        records.append(
            {
                "kind": "scaled",
                "index": i,
                **it,
                "scores": {
                    name: dict(zip(HUMAN_ORDER, arrays[name][i].tolist())) for name in order
                },
            }
        )
    (run_dir / "tables.md").write_text(
        "## Three sentences\n\n| metric | A | B | C | ranking | matches A > C > B |\n"
        "|---|---|---|---|---|---|\n"
        + "".join(
            f"| {r['metric']} | {_fmt(r['A'])} | {_fmt(r['B'])} | {_fmt(r['C'])} | "
            f"{r['ranking']} | {'yes' if r['matches'] else 'no'} |\n"
            for r in table
        )
        + f"\n## Scaled ({len(items)} items)\n\n"
        + "\n".join(md)
        + "\n"
    )
    if not args.no_plot:
        png = run_dir / "ranking_scaled.png"
        _plot(
            png,
            summary_rows,
            f"A (other human ref) > C (truncated) > B (negated): "
            f"{len(items)} SummEval items, seed {args.seed}",
        )
        print(f"\n== 3. plot: {png}")
    write_json(run_dir / "config.json", config)
    write_jsonl(run_dir / "items.jsonl", records)
    write_json(
        run_dir / "summary.json",
        {
            "three_sentences": table,
            "scaled": summary_rows,
            "n_items": len(items),
            "n_skipped": n_skipped,
            "notes": notes,
        },
    )
    print(f"  results: {run_dir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
