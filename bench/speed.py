"""``python -m bench.speed``: cost of ``score_distribution`` on the embedded GGUF models.

For a G-Eval-sized prompt (G-Eval's SummEval coherence prompt with a real article and summary,
``../shared/data/summeval``) and each model it reports, measured side by side in one run:

* prompt tokens;
* seconds per ``score_distribution`` call on a cold KV cache (median of ``--repeats``);
* seconds of a raw llama-cpp-python forward pass over the same tokens (``Llama.eval`` with
  ``logits_all=False``, n_batch 512, then reading the last logits), interleaved with the above;
* their ratio (goal: overhead at most 10%, i.e. ratio <= 1.10);
* judging the 16 summaries of one article with KV-prefix reuse against the same 16 calls on a
  cold cache each time: total seconds, tokens actually decoded, speed-up;
* peak RSS of the process (``ru_maxrss``).

``--backend openai --concurrency 1,2,4`` runs ``bench.speed_openai`` instead: items per second
over HTTP against a local ``llama-server`` with parallel slots, next to the in-process backend.

Timings on a shared 2-core machine are noisy: read the ratios and medians, not single times.
This is a benchmark, never a test.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench._common import make_run_dir, run_config, shared_data_dir, write_json

PROMPT_FILE = Path(__file__).resolve().parent.parent / "localjudge" / "prompts" / \
    "summeval_coherence_v1.txt"
PREFILL = "Coherence (1-5): "


def _prompts(doc: int) -> tuple[list[str], str]:
    path = shared_data_dir() / "summeval" / "summeval.jsonl"
    rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    doc_ids = list(dict.fromkeys(r["doc_id"] for r in rows))
    items = [r for r in rows if r["doc_id"] == doc_ids[doc]]
    tmpl = PROMPT_FILE.read_text()
    return [tmpl.replace("{{Document}}", r["source"]).replace("{{Summary}}", r["system_output"])
            for r in items], doc_ids[doc]


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def bench_model(name: str, prompts: list[str], repeats: int) -> dict[str, Any]:
    import llama_cpp

    from localjudge.backends.llama_cpp import LlamaCppBackend
    from localjudge.models import model_path

    backend = LlamaCppBackend(name)
    raw = llama_cpp.Llama(model_path=str(model_path(name)), n_ctx=backend.n_ctx, n_batch=512,
                          logits_all=False, verbose=False)
    text = backend.render(prompts[0], prefill=PREFILL)
    ids = backend._encode_prompt(text)

    def raw_forward() -> float:
        raw.reset()
        raw._ctx.kv_cache_seq_rm(0, 0, -1)
        t = time.perf_counter()
        raw.eval(ids)
        logits = np.ctypeslib.as_array(raw._ctx.get_logits_ith(-1), shape=(raw.n_vocab(),))
        _ = float(logits.max())
        return time.perf_counter() - t

    def ours() -> float:
        backend.reset_cache()
        t = time.perf_counter()
        backend.score_distribution(prompts[0], prefill=PREFILL, min_mass=0)
        return time.perf_counter() - t

    raw_forward(), ours()  # warm-up (page cache, thread pools)
    t_raw: list[float] = []
    t_ours: list[float] = []
    for _ in range(repeats):  # interleaved, side by side
        t_raw.append(raw_forward())
        t_ours.append(ours())
    med_raw, med_ours = statistics.median(t_raw), statistics.median(t_ours)

    backend.reset_cache()
    n0 = backend.n_decoded_tokens
    t = time.perf_counter()
    for p in prompts:
        backend.reset_cache()
        backend.score_distribution(p, prefill=PREFILL, min_mass=0)
    cold_s = time.perf_counter() - t
    cold_tokens = backend.n_decoded_tokens - n0

    backend.reset_cache()
    n0 = backend.n_decoded_tokens
    t = time.perf_counter()
    dists = [backend.score_distribution(p, prefill=PREFILL, min_mass=0) for p in prompts]
    warm_s = time.perf_counter() - t
    warm_tokens = backend.n_decoded_tokens - n0
    return {
        "model": name,
        "signature": dists[0].signature.format(short=True),
        "prompt_tokens": len(ids),
        "score_distribution_s_median": med_ours,
        "raw_forward_s_median": med_raw,
        "ratio_to_raw_forward": med_ours / med_raw,
        "overhead_goal_met": med_ours / med_raw <= 1.10,
        "score_distribution_s_all": t_ours,
        "raw_forward_s_all": t_raw,
        "n_items_prefix_test": len(prompts),
        "cold_cache_s": cold_s,
        "prefix_reuse_s": warm_s,
        "prefix_reuse_speedup": cold_s / warm_s,
        "cold_cache_tokens_decoded": cold_tokens,
        "prefix_reuse_tokens_decoded": warm_tokens,
        "peak_rss_mb": _peak_rss_mb(),
    }


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--backend", choices=["llama_cpp", "openai"], default="llama_cpp")
    known, _ = pre.parse_known_args(argv)
    if known.backend == "openai":
        from bench.speed_openai import main as main_openai

        return main_openai(argv)
    ap = argparse.ArgumentParser(
        prog="python -m bench.speed", description=__doc__.splitlines()[0],
        epilog="With --backend openai the options are --concurrency, --replicas, --server, "
               "--parallel, --url, --limit, --repeats ...: see "
               "`python -m bench.speed --backend openai --help`.")
    ap.add_argument("--backend", choices=["llama_cpp", "openai"], default="llama_cpp",
                    help="openai: judging over HTTP, see bench.speed_openai")
    ap.add_argument("--models", default="qwen2.5-coder-0.5b-instruct,smollm2-135m-instruct")
    ap.add_argument("--doc", type=int, default=0, help="SummEval article index")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--limit", type=int, default=16, help="summaries in the prefix-reuse test")
    ap.add_argument("--results", type=Path, default=None, help="results root (bench/results)")
    ap.add_argument("--seed", type=int, default=0, help="unused (no randomness); recorded")
    args = ap.parse_args(argv)
    prompts, doc_id = _prompts(args.doc)
    prompts = prompts[: args.limit]
    rows = [bench_model(m, prompts, args.repeats) for m in args.models.split(",")]
    print(f"bench.speed: G-Eval coherence prompt, SummEval {doc_id}, {len(prompts)} summaries, "
          f"median of {args.repeats} interleaved repeats")
    hdr = (f"{'model':30} {'tokens':>6} {'call s':>7} {'raw s':>7} {'ratio':>6} "
           f"{f'cold{len(prompts)} s':>8} {f'reuse{len(prompts)} s':>9} {'speedup':>7} "
           f"{'tok cold/reuse':>15} {'RSS MB':>7}")
    print(hdr)
    for r in rows:
        print(f"{r['model']:30} {r['prompt_tokens']:6d} {r['score_distribution_s_median']:7.3f} "
              f"{r['raw_forward_s_median']:7.3f} {r['ratio_to_raw_forward']:6.3f} "
              f"{r['cold_cache_s']:8.2f} {r['prefix_reuse_s']:9.2f} "
              f"{r['prefix_reuse_speedup']:7.2f} "
              f"{r['cold_cache_tokens_decoded']:>7d}/{r['prefix_reuse_tokens_decoded']:<7d} "
              f"{r['peak_rss_mb']:7.0f}")
    for r in rows:
        print(f"signature[{r['model']}]: {r['signature']}")
    cfg = run_config(argv, experiment="speed", seed=args.seed,
                     signatures={r["model"]: r["signature"] for r in rows},
                     packages=["llama_cpp_python", "numpy"], extra={"doc_id": doc_id})
    out = make_run_dir("speed", cfg, root=args.results)
    write_json(out / "config.json", cfg)
    write_json(out / "summary.json", {"rows": rows})
    print(f"results: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
