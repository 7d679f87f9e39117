"""``python -m bench.summeval``: G-Eval against human judgments on SummEval and Topical-Chat.

Runs the localjudge ``GEval`` metric with G-Eval's own criteria and evaluation steps (Liu et al.
2023, arXiv 2303.16634; prompts of the nlpyang/geval repository, ``prompts/summeval/*_detailed``
and ``prompts/topical_chat/*``) on real data from ``../shared/data``:

* ``--data summeval``: 100 CNN/DM articles x 16 summaries, expert scores (1-5; fluency is asked
  on 1-3 as in G-Eval, the human scale stays 1-5 -- rank correlation does not care);
* ``--data topical_chat``: 60 dialogues x 6 responses (USR), naturalness / coherence /
  engagingness 1-3, groundedness 0-1.

For each dimension it prints the summary-level Spearman ρ and Kendall τ-b (per document, then
averaged, documents with constant human or judge scores skipped: G-Eval's meta-evaluation) with
bootstrap CIs over documents, for the probability-weighted score and for the argmax score, and
the number of tied scores of each -- measuring the claim that weighting breaks argmax ties and
raises rank correlation. Pooled correlations are reported too. Failed measurements (low mass,
overflow) are excluded and counted, never scored as 0. A PNG plots judge vs human per dimension.

Each run writes ``bench/results/summeval/<utc>-<sig8>/`` (config.json, items.jsonl,
summary.json, the plot). ``--out-dir DIR`` reuses a folder: an interrupted run resumes there
without re-judging finished items.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench._common import make_run_dir, run_config, shared_data_dir, write_json
from localjudge.judges.geval import GEval, GEvalResult, LLMTestCase, LLMTestCaseParams
from localjudge.judges.runner import evaluate
from localjudge.models import DEFAULT_JUDGE
from localjudge.stats import (
    count_ties,
    pooled_correlation,
    summary_level_correlation,
    summary_level_correlation_ci,
)

IN, OUT, CTX = (LLMTestCaseParams.INPUT, LLMTestCaseParams.ACTUAL_OUTPUT,
                LLMTestCaseParams.CONTEXT)


@dataclass(frozen=True)
class Dimension:
    """One judged aspect: its G-Eval criteria, steps, scale and fields."""

    name: str
    criteria: str
    steps: tuple[str, ...]
    score_range: tuple[int, int]
    params: tuple[LLMTestCaseParams, ...]


SUMMEVAL = {
    "coherence": Dimension(
        "Coherence",
        "the collective quality of all sentences. We align this dimension with the DUC quality "
        "question of structure and coherence whereby \"the summary should be well-structured "
        "and well-organized. The summary should not just be a heap of related information, but "
        "should build from sentence to a coherent body of information about a topic.\"",
        ("Read the news article carefully and identify the main topic and key points.",
         ("Read the summary and compare it to the news article. Check if the summary covers the "
         "main topic and key points of the news article, and if it presents them in a clear "
         "and logical order."),
         ("Assign a score for coherence on a scale of 1 to 5, where 1 is the lowest and 5 is "
         "the highest based on the Evaluation Criteria.")),
        (1, 5), (IN, OUT)),
    "consistency": Dimension(
        "Consistency",
        "the factual alignment between the summary and the summarized source. A factually "
        "consistent summary contains only statements that are entailed by the source document. "
        "Annotators were also asked to penalize summaries that contained hallucinated facts.",
        ("Read the news article carefully and identify the main facts and details it presents.",
         ("Read the summary and compare it to the article. Check if the summary contains any "
         "factual errors that are not supported by the article."),
         "Assign a score for consistency based on the Evaluation Criteria."),
        (1, 5), (IN, OUT)),
    "fluency": Dimension(
        "Fluency",
        "the quality of the summary in terms of grammar, spelling, punctuation, word choice, "
        "and sentence structure. 1: Poor. The summary has many errors that make it hard to "
        "understand or sound unnatural. 2: Fair. The summary has some errors that affect the "
        "clarity or smoothness of the text, but the main points are still comprehensible. "
        "3: Good. The summary has few or no errors and is easy to read and follow.",
        ("Read the summary and evaluate its fluency based on the given criteria.",
         "Assign a fluency score from 1 to 3."),
        (1, 3), (OUT,)),
    "relevance": Dimension(
        "Relevance",
        "selection of important content from the source. The summary should include only "
        "important information from the source document. Annotators were instructed to "
        "penalize summaries which contained redundancies and excess information.",
        ("Read the summary and the source document carefully.",
         ("Compare the summary to the source document and identify the main points of the "
         "article."),
         ("Assess how well the summary covers the main points of the article, and how much "
         "irrelevant or redundant information it contains."),
         "Assign a relevance score from 1 to 5."),
        (1, 5), (IN, OUT)),
}

TOPICAL_CHAT = {
    "naturalness": Dimension(
        "Naturalness",
        "Is the response naturally written, like something a person would naturally say?",
        ("Read the conversation history and the response.",
         "Judge whether the response sounds like something a person would naturally say.",
         "Assign a naturalness score from 1 to 3."),
        (1, 3), (IN, OUT)),
    "coherence": Dimension(
        "Coherence",
        "Does the response serve as a valid continuation of the conversation history?",
        ("Read the conversation history carefully.",
         "Read the response and judge whether it continues the conversation sensibly.",
         "Assign a coherence score from 1 to 3."),
        (1, 3), (IN, OUT)),
    "engagingness": Dimension(
        "Engagingness",
        "Is the response dull or interesting?",
        ("Read the conversation history and the response.",
         "Judge whether the response is dull or interesting.",
         "Assign an engagingness score from 1 to 3."),
        (1, 3), (IN, OUT)),
    "groundedness": Dimension(
        "Groundedness",
        "Given the fact that this response is conditioned on, does the response use that fact?",
        ("Read the conversation history, the fact and the response.",
         "Judge whether the response uses the fact.",
         "Assign 1 if it uses the fact and 0 if it does not."),
        (0, 1), (IN, CTX, OUT)),
}


def load_items(data: str) -> tuple[list[dict[str, Any]], dict[str, Dimension]]:
    """Items as ``{"doc_id", "case", "human": {dim: score}}`` in file order, and dimensions."""
    root = shared_data_dir()
    if data == "summeval":
        path = root / "summeval" / "summeval.jsonl"
        rows = [json.loads(x) for x in path.read_text("utf-8").splitlines() if x.strip()]
        items = [{"doc_id": r["doc_id"],
                  "case": LLMTestCase(input=r["source"], actual_output=r["system_output"],
                                      name=f"{r['doc_id']}|{r['system_id']}"),
                  "human": r["scores"]} for r in rows]
        return items, SUMMEVAL
    if data == "topical_chat":
        path = root / "topical_chat_usr" / "topical_chat.json"
        rows = json.loads(path.read_text("utf-8"))
        doc_ids: dict[str, str] = {}
        items = []
        for r in rows:
            doc = doc_ids.setdefault(r["source"], f"tc-{len(doc_ids):02d}")
            items.append({"doc_id": doc,
                          "case": LLMTestCase(input=r["source"], context=[r["context"]],
                                              actual_output=r["system_output"],
                                              name=f"{doc}|{r['system_id']}"),
                          "human": r["scores"]})
        return items, TOPICAL_CHAT
    raise SystemExit(f"error: --data must be summeval or topical_chat, got {data!r}")


def select_docs(items: list[dict[str, Any]], n_docs: int, seed: int) -> list[dict[str, Any]]:
    """Items of ``n_docs`` documents drawn with ``seed`` (file order kept within and across)."""
    docs = list(dict.fromkeys(it["doc_id"] for it in items))
    if n_docs >= len(docs):
        return items
    rng = np.random.default_rng(seed)
    keep = {docs[i] for i in rng.choice(len(docs), size=n_docs, replace=False)}
    return [it for it in items if it["doc_id"] in keep]


def _fmt_ci(ci: Any) -> str:
    if math.isnan(ci.estimate):
        return "   n/a"
    return f"{ci.estimate:6.3f} [{ci.low:6.3f}, {ci.high:6.3f}]"


def analyse(recs: list[GEvalResult], items: list[dict[str, Any]], dim: str, seed: int,
            n_bootstrap: int) -> dict[str, Any]:
    """Correlations (weighted and argmax), ties and error counts for one dimension."""
    human = [float(it["human"][dim]) for it in items]
    groups = [it["doc_id"] for it in items]
    out: dict[str, Any] = {"n_items": len(recs),
                           "n_errors": sum(r.error is not None for r in recs),
                           "errors": sorted({r.error for r in recs if r.error})}
    for kind, vals in (("weighted", [r.raw_score for r in recs]),
                       ("argmax", [r.argmax_score for r in recs])):
        sl = summary_level_correlation(vals, human, groups)
        ci = summary_level_correlation_ci(vals, human, groups, seed=seed,
                                          n_resamples=n_bootstrap)
        pooled = pooled_correlation(vals, human)
        ties = count_ties(vals, groups=groups)
        out[kind] = {"summary_level": sl.to_dict(), "summary_level_ci": ci.to_dict(),
                     "pooled": pooled.to_dict(), "ties": ties.to_dict()}
    masses = [r.mass for r in recs if r.mass is not None]
    out["mass_min"] = min(masses) if masses else None
    out["mass_median"] = float(np.median(masses)) if masses else None
    return out


def plot(path: Path, results: dict[str, dict[str, Any]], title: str) -> None:
    """Scatter of judge (weighted) vs human per dimension."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    dims = list(results)
    fig, axes = plt.subplots(1, len(dims), figsize=(4 * len(dims), 3.6), squeeze=False)
    for ax, dim in zip(axes[0], dims):
        pts = results[dim]["points"]
        xs = [p[0] for p in pts if p[1] is not None]
        ys = [p[1] for p in pts if p[1] is not None]
        ax.scatter(xs, ys, s=10, alpha=0.6, label="weighted")
        ys_a = [p[2] for p in pts if p[2] is not None]
        xs_a = [p[0] for p in pts if p[2] is not None]
        ax.scatter(xs_a, ys_a, s=8, alpha=0.4, marker="x", label="argmax")
        rho = results[dim]["stats"]["weighted"]["summary_level"]["rho"]
        ax.set_title(dim if rho is None or math.isnan(rho) else f"{dim} (summary ρ={rho:.3f})")
        ax.set_xlabel("human")
        ax.set_ylabel("judge")
        ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(prog="python -m bench.summeval",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="summeval", choices=["summeval", "topical_chat"])
    ap.add_argument("--dimensions", default=None,
                    help="comma list (default: all of the data set's dimensions)")
    ap.add_argument("--docs", type=int, default=5, help="documents to judge (seeded draw)")
    ap.add_argument("--model", default="default", help="'default', a manifest name or a path")
    ap.add_argument("--backend", default="llama_cpp", choices=["llama_cpp", "hf"])
    ap.add_argument("--min-mass", type=float, default=0.9)
    ap.add_argument("--results", type=Path, default=None, help="results root (bench/results)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--limit", type=int, default=None, help="cap on items (after --docs)")
    ap.add_argument("--n-bootstrap", type=int, default=1000)
    ap.add_argument("--out-dir", default=None, help="reuse this folder (resume)")
    args = ap.parse_args(argv)

    from localjudge.backends import load_backend

    items, dims_all = load_items(args.data)
    dims = list(dims_all) if args.dimensions is None else [
        d.strip() for d in args.dimensions.split(",")]
    unknown = [d for d in dims if d not in dims_all]
    if unknown:
        raise SystemExit(f"error: unknown dimensions {unknown} for {args.data}; "
                         f"choose from {sorted(dims_all)}")
    items = select_docs(items, args.docs, args.seed)[: args.limit]
    model = DEFAULT_JUDGE if args.model == "default" else args.model
    backend = load_backend(args.backend, model)
    metrics = {d: GEval(dims_all[d].name, criteria=dims_all[d].criteria,
                        evaluation_steps=list(dims_all[d].steps),
                        evaluation_params=list(dims_all[d].params),
                        score_range=dims_all[d].score_range, model=backend,
                        min_mass=args.min_mass, seed=args.seed) for d in dims}
    sigs = {d: m.signature() for d, m in metrics.items()}
    cfg = run_config(argv, experiment="summeval", seed=args.seed, signatures=sigs,
                     packages=["llama_cpp_python", "numpy", "scipy"],
                     extra={"data": args.data, "docs": args.docs, "n_items": len(items),
                            "dimensions": dims, "model": model, "min_mass": args.min_mass})
    out_dir = (Path(args.out_dir) if args.out_dir
               else make_run_dir("summeval", sigs, root=args.results))
    out_dir.mkdir(parents=True, exist_ok=True)
    write_json(out_dir / "config.json", cfg)
    n_docs = len({it["doc_id"] for it in items})
    print(f"bench.summeval: {args.data}, {n_docs} documents, {len(items)} items, "
          f"dimensions {dims}, model {model}")
    results: dict[str, dict[str, Any]] = {}
    for d in dims:
        recs = evaluate([it["case"] for it in items], [metrics[d]],
                        out=out_dir / f"items-{d}.jsonl", show_progress=True)
        stats = analyse(recs, items, d, args.seed, args.n_bootstrap)
        results[d] = {"stats": stats,
                      "points": [(float(it["human"][d]), r.raw_score, r.argmax_score)
                                 for it, r in zip(items, recs)]}
    print(f"\nsummary-level correlation (per document, then mean; {args.n_bootstrap} bootstrap "
          f"resamples of documents, 95% CI)")
    print(f"{'dimension':13} {'score':8} {'Spearman rho [CI]':26} {'Kendall tau-b [CI]':26} "
          f"{'docs used':>9} {'tied pairs':>10} {'pooled rho':>10} {'errors':>6}")
    for d in dims:
        st = results[d]["stats"]
        for kind in ("weighted", "argmax"):
            k = st[kind]
            sl, ci = k["summary_level"], k["summary_level_ci"]
            from localjudge.stats import ConfidenceInterval

            rho_ci = ConfidenceInterval.from_dict(ci["rho"])
            tau_ci = ConfidenceInterval.from_dict(ci["tau"])
            pooled = k["pooled"]["rho"]
            print(f"{d:13} {kind:8} {_fmt_ci(rho_ci):26} {_fmt_ci(tau_ci):26} "
                  f"{sl['n_groups_used']:>4}/{sl['n_groups']:<4} "
                  f"{k['ties']['n_tied_pairs']:>10} "
                  f"{float('nan') if pooled is None else pooled:10.3f} {st['n_errors']:>6}")
    for d, m in metrics.items():
        from localjudge.signature import Signature

        print(f"signature[{d}]: judge:geval-{m.name}|prompt:{sigs[d]['prompt_template']}|"
              f"steps:{sigs[d]['steps_sha256'][:8]}|"
              f"{Signature.from_dict(sigs[d]['backend']).format(short=True)}")
    write_json(out_dir / "summary.json", {d: results[d]["stats"] for d in dims})
    plot(out_dir / "judge_vs_human.png", results,
         f"G-Eval ({model}) vs human, {args.data}, {n_docs} docs")
    print(f"results: {out_dir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
