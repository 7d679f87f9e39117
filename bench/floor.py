"""``python -m bench.floor``: BERTScore's score on unrelated text (the "floor"), per layer.

1. The six unrelated sentences of issue 4 against "The cat sat on the mat.": each F1, and n,
   mean, min, max at the chosen layer (published: roberta-large layer 17 mean 0.8659).
2. A large-sample floor: ``--n-pairs`` (default 1,000) random pairs of real sentences from
   *different* SummEval articles (``../shared/data/summeval/summeval_references.jsonl``, all 11
   references per article, split into sentences), fixed ``--seed``; mean and 95% percentile
   bootstrap CI of P, R and F at every layer of the encoder.
3. A rescale baseline file (per-layer mean P/R/F of those pairs) in two forms:
   ``baseline.json`` (records the model and its weights sha256; ``BERTScorer(baseline=...)``
   refuses it for another encoder) and ``baseline.tsv`` (``bert_score``'s ``LAYER,P,R,F``).
   This is the paper's recipe (Zhang et al. 2019, arXiv 1904.09675, "Baseline Rescaling":
   average BERTScore of random unrelated pairs), on SummEval news sentences instead of
   Common Crawl, so it is comparable in spirit, not in value, to ``bert_score``'s files.
4. The signature of every printed number.
5. ``floor_by_layer.png``: the floor (mean and CI) by layer.

Sentence split rule: the SummEval texts are tokenized (``" . "``); a sentence ends after a
``.``, ``!`` or ``?`` token followed by whitespace. Sentences under ``--min-words`` words are
dropped. Sampling: for each pair, two distinct articles uniformly at random, then one
sentence uniformly from each (response from the first, reference from the second).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench._common import (
    bootstrap_ci,
    make_run_dir,
    run_config,
    shared_data_dir,
    write_json,
    write_jsonl,
)

__all__ = [
    "PUBLISHED_MEAN_ROBERTA_L17",
    "REFERENCE",
    "UNRELATED",
    "main",
    "sample_pairs",
    "split_sentences",
]

REFERENCE = "The cat sat on the mat."
"""The reference of step 1."""

UNRELATED = (
    "Quarterly revenue in the Asia-Pacific segment declined by four percent.",
    "Install the dependency and restart the daemon to apply the new configuration.",
    "She has never been to Lisbon in the winter.",
    "The compiler emits a warning for unreachable branches.",
    "Photosynthesis converts light energy into chemical energy in plant cells.",
    "He bought two kilograms of unsalted butter.",
)
"""The six unrelated sentences of step 1 (issue 4)."""

PUBLISHED_MEAN_ROBERTA_L17 = 0.8659
"""Mean F1 of the six sentences with roberta-large layer 17 (issue 4), for comparison."""

_SENT_END = re.compile(r"(?<=[.!?])\s+")


def split_sentences(text: str, min_words: int) -> list[str]:
    """Split tokenized SummEval text after ``.``/``!``/``?`` + whitespace; keep >= min_words."""
    out = []
    for s in _SENT_END.split(text.strip()):
        s = s.strip()
        if len(s.split()) >= min_words:
            out.append(s)
    return out


def sample_pairs(
    rows: Sequence[dict[str, Any]], n_pairs: int, *, seed: int, min_words: int
) -> list[dict[str, Any]]:
    """``n_pairs`` (response, reference) sentence pairs from two distinct articles.

    Deterministic for fixed ``rows``, ``n_pairs``, ``seed`` and ``min_words``.
    """
    pools: list[tuple[str, list[str]]] = []
    for r in rows:
        sents: list[str] = []
        for ref in r["references"]:
            for s in split_sentences(ref, min_words):
                if s not in sents:
                    sents.append(s)
        if sents:
            pools.append((r["doc_id"], sents))
    if len(pools) < 2:
        raise ValueError("need sentences from at least two articles")
    rng = np.random.default_rng(seed)
    pairs = []
    for k in range(n_pairs):
        a, b = rng.choice(len(pools), size=2, replace=False)
        sa = pools[a][1][int(rng.integers(len(pools[a][1])))]
        sb = pools[b][1][int(rng.integers(len(pools[b][1])))]
        pairs.append(
            {
                "index": k,
                "response_doc": pools[a][0],
                "reference_doc": pools[b][0],
                "response": sa,
                "reference": sb,
            }
        )
    return pairs


def _parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m bench.floor", description=__doc__.split("\n")[0])
    ap.add_argument(
        "--model",
        default="all-minilm-l6-v2",
        help="embedded name, model folder or cached HF id (default all-minilm-l6-v2)",
    )
    ap.add_argument(
        "--layer",
        type=int,
        default=None,
        help="layer for step 1 (default: the model's default layer)",
    )
    ap.add_argument("--n-pairs", type=int, default=1000, help="random pairs (default 1000)")
    ap.add_argument(
        "--limit", type=int, default=None, help="cap on the number of random pairs (smoke runs)"
    )
    ap.add_argument("--seed", type=int, default=0, help="sampling and bootstrap seed")
    ap.add_argument("--min-words", type=int, default=4, help="shortest sentence kept (words)")
    ap.add_argument("--n-bootstrap", type=int, default=2000, help="bootstrap resamples")
    ap.add_argument("--batch-size", type=int, default=64, help="texts per forward pass")
    ap.add_argument("--device", default="cpu")
    ap.add_argument(
        "--data", type=Path, default=shared_data_dir() / "summeval" / "summeval_references.jsonl"
    )
    ap.add_argument("--results", type=Path, default=None, help="results root (bench/results)")
    ap.add_argument("--no-plot", action="store_true", help="skip the PNG")
    return ap.parse_args(argv)


def _plot(
    path: Path,
    layers: list[int],
    stats: dict[str, list[tuple[float, float, float]]],
    six_mean: list[float],
    title: str,
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for key, color in (("P", "tab:blue"), ("R", "tab:orange"), ("F", "tab:green")):
        m = np.array([s[0] for s in stats[key]])
        lo = np.array([s[1] for s in stats[key]])
        hi = np.array([s[2] for s in stats[key]])
        ax.plot(layers, m, marker="o", color=color, label=f"{key}: random pairs (mean, 95% CI)")
        ax.fill_between(layers, lo, hi, color=color, alpha=0.25)
    ax.plot(
        layers,
        six_mean,
        marker="x",
        linestyle="--",
        color="black",
        label="F: six unrelated sentences (mean)",
    )
    ax.set_xlabel("layer (0 = embedding output)")
    ax.set_ylabel("BERTScore on unrelated text (raw)")
    ax.set_title(title, fontsize=9)
    ax.set_xticks(layers)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    """Run the floor experiment; print the numbers with their signature; return 0.

    Args:
        argv: command-line arguments (default ``sys.argv[1:]``).
    """
    args = _parse(argv)
    argv_list = list(sys.argv[1:] if argv is None else argv)
    from localjudge.metrics.bertscore import BERTScoreBaseline, BERTScorer

    if args.n_pairs < 1 or (args.limit is not None and args.limit < 1):
        print("--n-pairs and --limit must be >= 1", file=sys.stderr)
        return 2
    scorer = BERTScorer(args.model, args.layer, batch_size=args.batch_size, device=args.device)
    sig = scorer.signature()
    layer = scorer.layer
    layers = list(range(scorer.n_layers + 1))

    # ---- 1. six unrelated sentences ------------------------------------------------------
    six = scorer.score(list(UNRELATED), [REFERENCE] * len(UNRELATED), alignment=False)
    f_six = np.array([r.f1 for r in six])
    six_by_layer = scorer.raw_scores_by_layer(list(UNRELATED), [REFERENCE] * len(UNRELATED))
    print(
        f"== 1. six unrelated sentences vs {REFERENCE!r}: model {scorer.model_name}, "
        f"layer {layer}, raw F1"
    )
    for s, f in zip(UNRELATED, f_six):
        print(f"  F1={f:.4f}  {s}")
    print(
        f"  n={f_six.size} mean={f_six.mean():.4f} min={f_six.min():.4f} "
        f"max={f_six.max():.4f}   (published roberta-large L17 mean: "
        f"{PUBLISHED_MEAN_ROBERTA_L17})"
    )
    print(
        "  mean F1 by layer: "
        + "  ".join(f"L{k}={six_by_layer[k, :, 2].mean():.4f}" for k in layers)
    )

    # ---- 2. large-sample floor -----------------------------------------------------------
    data_bytes = args.data.read_bytes()
    rows = [json.loads(line) for line in data_bytes.decode("utf-8").splitlines() if line.strip()]
    n_pairs = min(args.n_pairs, args.limit) if args.limit else args.n_pairs
    pairs = sample_pairs(rows, n_pairs, seed=args.seed, min_words=args.min_words)
    scores = scorer.raw_scores_by_layer(
        [p["response"] for p in pairs], [p["reference"] for p in pairs]
    )  # (L+1, n, 3)
    stats: dict[str, list[tuple[float, float, float]]] = {"P": [], "R": [], "F": []}
    for k in layers:
        for j, key in enumerate("PRF"):
            stats[key].append(
                bootstrap_ci(scores[k, :, j], seed=args.seed + k, n_resamples=args.n_bootstrap)
            )
    print(
        f"\n== 2. large-sample floor: {n_pairs} random sentence pairs from different "
        f"SummEval articles (seed {args.seed}); mean [95% bootstrap CI]"
    )
    print("  layer  P                         R                         F")
    for k in layers:
        cells = "  ".join(
            f"{stats[key][k][0]:.4f} [{stats[key][k][1]:.4f}, {stats[key][k][2]:.4f}]"
            for key in "PRF"
        )
        mark = "  <- default layer" if k == layer else ""
        print(f"  {k:>5}  {cells}{mark}")

    # ---- 3. baseline file ----------------------------------------------------------------
    data_sha = hashlib.sha256(data_bytes).hexdigest()
    baseline = BERTScoreBaseline(
        values={k: (stats["P"][k][0], stats["R"][k][0], stats["F"][k][0]) for k in layers},
        model=scorer.model_name,
        model_sha256=scorer.model_sha256,
        meta={
            "method": "mean raw P/R/F of random sentence pairs from different articles",
            "data": str(args.data.name),
            "data_sha256": data_sha,
            "n_pairs": n_pairs,
            "seed": args.seed,
            "min_words": args.min_words,
        },
    )
    config = run_config(
        argv_list,
        experiment="floor",
        seed=args.seed,
        signatures={"bertscore": sig.to_dict()},
        packages=("torch", "transformers", "tokenizers", "numpy", "matplotlib"),
        device=args.device,
        extra={
            "data": str(args.data),
            "data_sha256": data_sha,
            "n_pairs": n_pairs,
            "min_words": args.min_words,
            "n_bootstrap": args.n_bootstrap,
        },
    )
    run_dir = make_run_dir(
        "floor", {"signature": sig.to_dict(), "argv": argv_list}, root=args.results
    )
    json_path = baseline.write_json(run_dir / "baseline.json")
    tsv_path = baseline.write_tsv(run_dir / "baseline.tsv")
    rescaled = BERTScorer(
        args.model, layer, baseline=json_path, batch_size=args.batch_size, device=args.device
    )
    six_r = np.array(
        [
            r.f1_rescaled
            for r in rescaled.score(list(UNRELATED), [REFERENCE] * len(UNRELATED), alignment=False)
        ],
        dtype=float,
    )
    print(f"\n== 3. baseline written: {json_path}\n                      {tsv_path}")
    print(
        f"  check: six sentences rescaled with it at layer {layer}: mean F1 "
        f"{six_r.mean():+.4f} (min {six_r.min():+.4f}, max {six_r.max():+.4f})"
    )

    # ---- 4. signature --------------------------------------------------------------------
    print(f"\n== 4. signature\n  {sig.format()}")

    # ---- 5. plot + files -----------------------------------------------------------------
    if not args.no_plot:
        png = run_dir / "floor_by_layer.png"
        _plot(
            png,
            layers,
            stats,
            [float(six_by_layer[k, :, 2].mean()) for k in layers],
            f"BERTScore floor by layer: {scorer.model_name}, {n_pairs} random SummEval "
            f"sentence pairs, seed {args.seed}",
        )
        print(f"\n== 5. plot: {png}")
    items: list[dict[str, Any]] = []
    for i, s in enumerate(UNRELATED):
        items.append(
            {
                "kind": "six",
                "index": i,
                "response": s,
                "reference": REFERENCE,
                "result": six[i].to_dict(),
                "p_by_layer": six_by_layer[:, i, 0],
                "r_by_layer": six_by_layer[:, i, 1],
                "f1_by_layer": six_by_layer[:, i, 2],
            }
        )
    for p in pairs:
        i = p["index"]
        items.append(
            {
                "kind": "random",
                **p,
                "p_by_layer": scores[:, i, 0],
                "r_by_layer": scores[:, i, 1],
                "f1_by_layer": scores[:, i, 2],
            }
        )
    summary = {
        "signature": sig.to_dict(),
        "signature_line": sig.format(),
        "layer": layer,
        "six": {
            "n": int(f_six.size),
            "mean": float(f_six.mean()),
            "min": float(f_six.min()),
            "max": float(f_six.max()),
            "f1": f_six,
            "mean_f1_by_layer": [float(six_by_layer[k, :, 2].mean()) for k in layers],
            "rescaled_mean_f1": float(six_r.mean()),
            "published_roberta_large_l17_mean": PUBLISHED_MEAN_ROBERTA_L17,
        },
        "random_pairs": {
            "n": n_pairs,
            "by_layer": {
                str(k): {
                    key: {"mean": stats[key][k][0], "ci95": [stats[key][k][1], stats[key][k][2]]}
                    for key in "PRF"
                }
                for k in layers
            },
        },
        "baseline": {"json": json_path.name, "tsv": tsv_path.name},
    }
    write_json(run_dir / "config.json", config)
    write_jsonl(run_dir / "items.jsonl", items)
    write_json(run_dir / "summary.json", summary)
    print(f"  results: {run_dir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
