"""``python -m bench.pairwise``: pairwise judging with position swap on LLMBar.

Runs ``localjudge.judges.pairwise.PairwiseJudge`` (LLMBar "Vanilla" prompt with letter labels,
``VANILLA_AB_V1``) with each embedded judge model on the LLMBar sets named by ``--sets``
(``../shared/data/llmbar/<set>.json``: Natural and the four Adversarial sets, or any other file
of that folder; records ``{"input", "output_1", "output_2", "label": 1|2}``). LLMBar: Zeng et
al. 2024, "Evaluating Large Language Models at Evaluating Instruction Following", ICLR 2024,
arXiv 2310.07641. Models with a chat template are prompted through it; Gemma 3 270M (a base
model without one) gets the same text as a plain completion prompt (``raw=True``) ending in the
same prefill ``"Output ("`` (system text, user text and prefill joined by blank lines).

Per model and set it reports, over the items where both orders were read (``n_scored``):

* ``accuracy``: share of swap verdicts equal to the gold label; a tie (orders disagree) counts
  as wrong; ``accuracy_ci``: percentile-bootstrap 95% CI over items (seeded);
* ``accuracy_non_tie`` (over items with an A/B verdict) and ``tie_rate``;
* ``positional_agreement``: share of items whose verdict survives the swap (LLMBar's
  "positional agreement rate"; equals ``1 - tie_rate`` except for exact 50/50 answers);
* ``accuracy_single_order``: accuracy of the original-order verdict alone (what a judge that
  does not swap reports; an exact 50/50 counts as wrong); ``accuracy_llmbar``: the mean of the
  original-order and swapped-order accuracies (the paper's accuracy, README caveat);
* ``first_slot_rate``: the position bias, the share of single-order verdicts (both orders of
  every scored item, ``2 * n_scored`` verdicts) that pick the response in the first slot;
  0.5 = no positional preference, 1.0 = always the first slot (Zheng et al. 2023, MT-Bench,
  arXiv 2306.05685 §3.3); because every item is shown both ways, the gold labels are balanced
  over slots and this rate does not depend on the set's label balance;
* ``mean_p_shift``: mean |P(A better | original) - P(A better | swapped)| in [0, 1];
* ``mean_mass`` / ``min_mass_seen``: raw label mass over every order that was read (failed
  low-mass orders included: the mass is the diagnosis);
* ``n_errors`` (items with a failed order: low mass, context overflow) -- left out of every
  rate above, never counted as a tie or as wrong.

Items: the whole set, or with ``--limit N`` a seeded draw of N items (``--seed``), kept in file
order. Each run writes ``bench/results/pairwise/<utc>-<sig8>/`` with ``config.json``,
``items.jsonl`` (one ``PairwiseResult`` per model x item, with gold label and correctness) and
``summary.json``; no resume (runs are short with ``--limit``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
from collections.abc import Sequence
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
from localjudge.judges.pairwise import PairwiseJudge, PairwiseResult, format_signature

DEFAULT_SETS = "natural"
DEFAULT_MODELS = "qwen2.5-coder-0.5b-instruct,smollm2-135m-instruct,gemma3-270m"
LLMBAR_SETS = (
    "natural",
    "adversarial_neighbor",
    "adversarial_gptinst",
    "adversarial_gptout",
    "adversarial_manual",
)
"""LLMBar proper (Natural + the four Adversarial subsets); other files of the folder work too."""

GOLD = {1: "A", 2: "B"}
"""LLMBar ``label`` -> verdict: ``output_1`` is passed as response_a, ``output_2`` as response_b."""


def llmbar_dir() -> Path:
    """``../shared/data/llmbar``."""
    return shared_data_dir() / "llmbar"


def load_set(name: str) -> tuple[list[dict[str, Any]], Path]:
    """Records of ``<llmbar>/<name>.json`` (a JSON list) and the file path.

    Raises:
        SystemExit: no such file, or a record without the LLMBar fields.
    """
    path = llmbar_dir() / f"{name}.json"
    if not path.is_file():
        known = sorted(p.stem for p in llmbar_dir().glob("*.json"))
        raise SystemExit(f"error: no LLMBar set {name!r} ({path}); known: {known}")
    rows = json.loads(path.read_text("utf-8"))
    for i, r in enumerate(rows):
        if not {"input", "output_1", "output_2", "label"} <= set(r) or r["label"] not in GOLD:
            raise SystemExit(f"error: {path} record {i} is not an LLMBar record: {sorted(r)}")
    return rows, path


def select_indices(n: int, limit: int | None, seed: int) -> list[int]:
    """All indices, or ``limit`` of them drawn without replacement with ``seed``, sorted."""
    if limit is None or limit >= n:
        return list(range(n))
    rng = np.random.default_rng(seed)
    return sorted(int(i) for i in rng.choice(n, size=limit, replace=False))


def _rate(k: int, n: int) -> float | None:
    return k / n if n else None


def summarise(
    results: Sequence[PairwiseResult], gold: Sequence[str], *, seed: int, n_bootstrap: int = 1000
) -> dict[str, Any]:
    """Aggregate pairwise results against gold verdicts (``"A"`` / ``"B"``).

    Args:
        results: one result per item.
        gold: the gold verdict of each item, same order, ``"A"`` or ``"B"``.
        seed: seed of the accuracy bootstrap.
        n_bootstrap: bootstrap resamples.

    Returns:
        The statistics of the module docstring; rates are ``None`` when their denominator is 0.

    Raises:
        ValueError: ``results`` and ``gold`` differ in length.
    """
    if len(results) != len(gold):
        raise ValueError(f"{len(results)} results but {len(gold)} gold labels")
    ok = [(r, g) for r, g in zip(results, gold) if r.verdict != "error"]
    n = len(ok)
    correct = [r.verdict == g for r, g in ok]
    non_tie = [(r, g) for r, g in ok if r.verdict in ("A", "B")]
    single = [r.single_order_verdict == g for r, g in ok]
    swapped = [r.swapped.choice == g for r, g in ok]
    first = [o.first_slot_chosen for r, _ in ok for o in r.orders]
    masses = [o.mass for r in results for o in r.orders if o.mass is not None]
    shifts = [abs(r.p_a_original - r.p_a_swapped) for r, _ in ok]  # type: ignore[operator]
    errors: dict[str, int] = {}
    for r in results:
        for o in r.orders:
            if o.error is not None:
                errors[o.error] = errors.get(o.error, 0) + 1
    acc = _rate(sum(correct), n)
    ci = None
    if n:
        _, lo, hi = bootstrap_ci(
            np.asarray(correct, dtype=float), seed=seed, n_resamples=n_bootstrap
        )
        ci = [lo, hi]
    acc_single = _rate(sum(single), n)
    acc_swapped = _rate(sum(swapped), n)
    return {
        "n_items": len(results),
        "n_scored": n,
        "n_errors": len(results) - n,
        "order_errors": errors,
        "accuracy": acc,
        "accuracy_ci": ci,
        "accuracy_non_tie": _rate(sum(r.verdict == g for r, g in non_tie), len(non_tie)),
        "tie_rate": _rate(sum(r.verdict == "tie" for r, _ in ok), n),
        "positional_agreement": _rate(sum(bool(r.position_consistent) for r, _ in ok), n),
        "accuracy_single_order": acc_single,
        "accuracy_swapped_order": acc_swapped,
        "accuracy_llmbar": None
        if acc_single is None or acc_swapped is None
        else (acc_single + acc_swapped) / 2.0,
        "first_slot_rate": _rate(sum(f is True for f in first), len(first)),
        "mean_p_shift": float(np.mean(shifts)) if shifts else None,
        "mean_mass": float(np.mean(masses)) if masses else None,
        "min_mass_seen": float(min(masses)) if masses else None,
        "gold_a_rate": _rate(sum(g == "A" for g in gold), len(gold)),
    }


def _f(x: float | None, width: int = 6, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return f"{'n/a':>{width}}"
    return f"{x:{width}.{digits}f}"


def print_table(summary: dict[str, dict[str, dict[str, Any]]]) -> None:
    """One row per (model, set)."""
    head = (
        f"{'model':28} {'set':22} {'n':>4} {'err':>4} {'acc':>6} {'acc95% CI':>15} "
        f"{'acc!tie':>7} {'tie':>6} {'agree':>6} {'acc1ord':>7} {'accLB':>6} "
        f"{'slot1':>6} {'|dP|':>6} {'mass':>6}"
    )
    print(head)
    print("-" * len(head))
    for model, sets in summary.items():
        for name, s in sets.items():
            ci = s["accuracy_ci"]
            ci_s = f"[{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "n/a"
            print(
                f"{model:28} {name:22} {s['n_items']:>4} {s['n_errors']:>4} "
                f"{_f(s['accuracy'])} {ci_s:>15} {_f(s['accuracy_non_tie'], 7)} "
                f"{_f(s['tie_rate'])} {_f(s['positional_agreement'])} "
                f"{_f(s['accuracy_single_order'], 7)} {_f(s['accuracy_llmbar'])} "
                f"{_f(s['first_slot_rate'])} {_f(s['mean_p_shift'])} {_f(s['mean_mass'])}"
            )
    print(
        "acc: swap verdict vs gold (tie = wrong); acc!tie: on A/B verdicts only; agree: "
        "verdict survives the swap; acc1ord: original order only; accLB: mean of the two "
        "single-order accuracies (LLMBar); slot1: share of single-order verdicts picking the "
        "first slot (0.5 = unbiased); |dP|: mean |P(A|orig) - P(A|swapped)|; mass: mean raw "
        "label mass. Rates exclude the err items."
    )


def _file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; returns 0 (the exit status)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(
        prog="python -m bench.pairwise", description=(__doc__ or "").splitlines()[0]
    )
    ap.add_argument(
        "--sets",
        default=DEFAULT_SETS,
        help=f"comma list of LLMBar files (default {DEFAULT_SETS}; LLMBar proper: "
        f"{','.join(LLMBAR_SETS)})",
    )
    ap.add_argument("--models", default=DEFAULT_MODELS, help="comma list of manifest names")
    ap.add_argument("--backend", default="llama_cpp", choices=["llama_cpp", "hf"])
    ap.add_argument(
        "--limit", type=int, default=None, help="judge a seeded draw of at most N items per set"
    )
    ap.add_argument("--seed", type=int, default=0, help="seed of the item draw and bootstrap")
    ap.add_argument("--min-mass", type=float, default=0.9)
    ap.add_argument("--n-ctx", type=int, default=4096)
    ap.add_argument("--n-bootstrap", type=int, default=1000)
    ap.add_argument(
        "--results-root", default=None, help=f"where run folders go (default {RESULTS_ROOT})"
    )
    args = ap.parse_args(argv)
    if args.limit is not None and args.limit < 1:
        raise SystemExit(f"error: --limit must be >= 1, got {args.limit}")

    from localjudge.backends import load_backend
    from localjudge.models import load_manifest

    sets = [s.strip() for s in args.sets.split(",") if s.strip()]
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    if not sets or not models:
        raise SystemExit("error: --sets and --models must name at least one each")
    manifests = {m: load_manifest(m) for m in models}  # ConfigError on unknown names
    data = {s: load_set(s) for s in sets}
    picks = {s: select_indices(len(data[s][0]), args.limit, args.seed) for s in sets}

    judges: dict[str, PairwiseJudge] = {}
    sigs: dict[str, dict[str, Any]] = {}
    backends: dict[str, Any] = {}
    for m in models:
        backends[m] = load_backend(args.backend, m, n_ctx=args.n_ctx)
        judges[m] = PairwiseJudge(
            backends[m], min_mass=args.min_mass, raw=not manifests[m].chat_template
        )
        sigs[m] = judges[m].signature()
    cfg = run_config(
        argv,
        experiment="pairwise",
        seed=args.seed,
        signatures=sigs,
        packages=["llama_cpp_python", "numpy"],
        extra={
            "sets": {
                s: {
                    "file": str(data[s][1]),
                    "sha256": _file_sha256(data[s][1]),
                    "n_records": len(data[s][0]),
                    "indices": picks[s],
                }
                for s in sets
            },
            "models": models,
            "backend": args.backend,
            "limit": args.limit,
            "min_mass": args.min_mass,
            "n_ctx": args.n_ctx,
            "raw": {m: not manifests[m].chat_template for m in models},
        },
    )
    root = Path(args.results_root) if args.results_root else None
    out_dir = make_run_dir(
        "pairwise", {"config": {k: cfg[k] for k in ("argv", "sets")}, "signatures": sigs}, root=root
    )
    write_json(out_dir / "config.json", cfg)
    print(
        f"bench.pairwise: sets {sets}, models {models}, items per set "
        f"{ {s: len(picks[s]) for s in sets} }, seed {args.seed}"
    )

    records: list[dict[str, Any]] = []
    summary: dict[str, dict[str, dict[str, Any]]] = {}
    for m in models:
        summary[m] = {}
        for s in sets:
            rows = data[s][0]
            results: list[PairwiseResult] = []
            gold: list[str] = []
            for k, i in enumerate(picks[s]):
                r = rows[i]
                res = judges[m].compare(r["input"], r["output_1"], r["output_2"])
                g = GOLD[r["label"]]
                results.append(res)
                gold.append(g)
                records.append(
                    {
                        "model": m,
                        "set": s,
                        "index": i,
                        "gold": g,
                        "correct": None if res.verdict == "error" else res.verdict == g,
                        "correct_single_order": None
                        if res.verdict == "error"
                        else res.single_order_verdict == g,
                        **res.to_dict(),
                    }
                )
                print(
                    f"  {m} {s} [{k + 1}/{len(picks[s])}] #{i} gold {g} verdict "
                    f"{res.verdict:5} P(A) orig {_f(res.p_a_original, 5, 3)} swapped "
                    f"{_f(res.p_a_swapped, 5, 3)}",
                    file=sys.stderr,
                    flush=True,
                )
            summary[m][s] = summarise(results, gold, seed=args.seed, n_bootstrap=args.n_bootstrap)
    write_jsonl(out_dir / "items.jsonl", records)
    lines = {m: format_signature(sigs[m]) for m in models}
    write_json(
        out_dir / "summary.json",
        {
            "results": summary,
            "signatures": lines,
            "seed": args.seed,
            "limit": args.limit,
            "min_mass": args.min_mass,
            "prompt_template": sigs[models[0]]["prompt_template"],
        },
    )
    print()
    print_table(summary)
    print()
    for m in models:
        print(f"signature[{m}]: {lines[m]}")
    print(f"results: {out_dir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
