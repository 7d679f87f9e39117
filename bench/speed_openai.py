"""``python -m bench.speed --backend openai --concurrency 1,2,4``: judging over HTTP.

Items per second of ``OpenAICompatBackend.score_batch`` against one local llama.cpp
``llama-server`` with ``--parallel`` slots (default: the largest pool size) at each request
pool size in ``--concurrency``, compared with the in-process ``LlamaCppBackend`` on the same
items: G-Eval's SummEval coherence prompt on the summaries of one article, prefill
``"Coherence (1-5): "``. Each configuration is timed ``--repeats`` times, interleaved, and the
median is reported, with the ratio to the in-process median of the same run.

Two server settings are measured for each pool size: ``cache_prompt`` off (every request
recomputes its prompt: a score never depends on what a slot held before) and on (a slot
reuses the KV cache of its previous prompt; the summaries of one article share ~90 % of the
prompt). Every slot is erased before each timed run and the server's host-memory prompt cache
is off, so a repeat never finds its own prompts cached. Next to the speed it reports the largest difference from the in-process backend in
expected score and in label logprob (nats): with several slots busy, llama.cpp evaluates
several sequences in one batch, which changes float reduction order (see
``localjudge.backends._blocks``), so the server is not bitwise reproducible at concurrency > 1.

``--server llama_cpp.server`` measures llama-cpp-python's server instead (one request at a
time behind a lock, so pool sizes > 1 only overlap HTTP with inference). ``--url`` measures an
existing server (e.g. vLLM); its model must be the same GGUF/weights for the diffs to mean
anything.

Timings on a shared 2-core machine are noisy. This is a benchmark, never a test.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from bench._common import make_run_dir, run_config, write_json, write_jsonl

PREFILL = "Coherence (1-5): "


def _max_diffs(recs: list[Any], ref: list[Any]) -> tuple[float | None, float | None]:
    de, dl = [], []
    for r, d in zip(recs, ref):
        x = r.distribution
        if x is None or x.expected is None or d.expected is None:
            continue
        de.append(abs(x.expected - d.expected))
        dl += [abs(a - b) for a, b in zip(x.logprobs, d.logprobs)
               if a > math.log(1e-3) and math.isfinite(b)]
    return (max(de) if de else None), (max(dl) if dl else None)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; prints items/s per configuration and writes bench/results/speed_openai."""
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(prog="python -m bench.speed --backend openai",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--backend", choices=["openai"], default="openai")
    ap.add_argument("--concurrency", default="1,2,4", help="comma-separated pool sizes")
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--server", choices=["llama-server", "llama_cpp.server"],
                    default="llama-server")
    ap.add_argument("--parallel", type=int, default=0,
                    help="llama-server slots (default: the largest pool size)")
    ap.add_argument("--replicas", type=int, default=1,
                    help="llama-server processes (each --threads/N threads); a pool of c "
                         "requests sends c/N to each")
    ap.add_argument("--url", default=None,
                    help="existing server(s), comma-separated replicas; default: start them")
    ap.add_argument("--served-model", default="judge", help="model name sent to --url")
    ap.add_argument("--n-ctx-per-slot", type=int, default=1536)
    ap.add_argument("--threads", type=int, default=2, help="threads, server and in-process")
    ap.add_argument("--doc", type=int, default=0)
    ap.add_argument("--limit", type=int, default=8, help="summaries of the article to judge")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0, help="jitter seed of the request pool")
    ap.add_argument("--results", type=Path, default=None)
    args = ap.parse_args(argv)
    pools = [int(x) for x in args.concurrency.split(",") if x.strip()]
    if not pools or min(pools) < 1:
        ap.error(f"--concurrency needs pool sizes >= 1, got {args.concurrency!r}")
    if args.repeats < 1 or args.limit < 1:
        ap.error(f"--repeats and --limit must be >= 1, got {args.repeats} and {args.limit}")
    if args.replicas < 1:
        ap.error(f"--replicas must be >= 1, got {args.replicas}")
    parallel = args.parallel or max(1, max(pools) // args.replicas)

    from bench.speed import _prompts
    from localjudge.backends.llama_cpp import LlamaCppBackend
    from localjudge.backends.openai_compat import OpenAICompatBackend
    from localjudge.models import model_path
    from localjudge.serving import LlamaCppPythonServer, LlamaServer

    prompts, doc_id = _prompts(args.doc)
    prompts = prompts[: args.limit]
    local = LlamaCppBackend(args.model, n_ctx=args.n_ctx_per_slot, n_threads=args.threads)
    local.score_distribution(prompts[0], prefill=PREFILL, min_mass=0)  # warm-up

    servers: list[Any] = []
    urls = args.url.split(",") if args.url else []
    label = f"openai -> {args.url}"
    n_rep = len(urls) or args.replicas
    if not urls:
        threads = max(1, args.threads // n_rep)
        for _ in range(n_rep):
            if args.server == "llama-server":
                servers.append(LlamaServer(
                    model_path(args.model), parallel=parallel,
                    n_ctx=parallel * args.n_ctx_per_slot, n_threads=threads,
                    alias=args.served_model))
            else:
                servers.append(LlamaCppPythonServer(
                    model_path(args.model), n_ctx=args.n_ctx_per_slot, n_threads=threads))
        label = (f"openai -> {n_rep} x llama-server -np {parallel} -t {threads}"
                 if args.server == "llama-server" else
                 f"openai -> {n_rep} x llama_cpp.server -t {threads}")
        try:
            for srv in servers:
                srv.start()
        except Exception:
            for srv in servers:
                srv.stop()
            raise
        urls = [srv.url for srv in servers]
    _, bos = local._bos()
    caches = [False, True] if args.server == "llama-server" and not args.url else [None]
    configs = [(c, cache) for c in pools for cache in caches]
    times: dict[Any, list[float]] = {("local", None): []}
    last: dict[Any, list[Any]] = {}
    errors: dict[Any, int] = {}
    sig = ""
    ref: list[Any] = []
    try:
        backends = {}
        for c, cache in configs:
            extra = {} if cache is None else {"cache_prompt": cache}
            backends[(c, cache)] = OpenAICompatBackend(
                urls, args.served_model, chat_template=local.chat_template, bos_token=bos,
                eos_token=local._eos_text(), max_concurrency=max(1, c // n_rep),
                seed=args.seed, extra_body=extra)
            backends[(c, cache)].score_batch(prompts[:1], prefill=PREFILL, min_mass=0)
            times[(c, cache)] = []
            errors[(c, cache)] = 0
        for rep in range(args.repeats):
            local.reset_cache()
            t0 = time.perf_counter()
            ref = [local.score_distribution(p, prefill=PREFILL, min_mass=0) for p in prompts]
            times[("local", None)].append(time.perf_counter() - t0)
            for key, srv in backends.items():
                for srv_proc in servers:
                    if isinstance(srv_proc, LlamaServer):
                        srv_proc.erase_slots()  # no repeat may hit the previous run's prompts
                t0 = time.perf_counter()
                recs = srv.score_batch(prompts, prefill=PREFILL, min_mass=0)
                times[key].append(time.perf_counter() - t0)
                errors[key] += sum(r.error is not None for r in recs)
                last[key] = recs
            print(f"[speed_openai] repeat {rep + 1}/{args.repeats} done", flush=True)
    finally:
        for srv_proc in servers:
            srv_proc.stop()

    n = len(prompts)
    local_med = statistics.median(times[("local", None)])
    rows: list[dict[str, Any]] = [{
        "backend": "llama_cpp (in process, prefix KV reuse)", "concurrency": 1,
        "cache_prompt": None, "n_items": n, "seconds_median": local_med,
        "items_per_s": n / local_med, "ratio_to_in_process": 1.0, "n_errors": 0,
        "max_abs_diff_expected": 0.0, "max_abs_diff_logprob": 0.0}]
    items: list[dict[str, Any]] = []
    for c, cache in configs:
        med = statistics.median(times[(c, cache)])
        de, dl = _max_diffs(last[(c, cache)], ref)
        rows.append({"backend": label, "concurrency": max(1, c // n_rep) * n_rep,
                     "cache_prompt": cache, "n_items": n,
                     "seconds_median": med, "items_per_s": n / med,
                     "ratio_to_in_process": (n / med) / (n / local_med),
                     "n_errors": errors[(c, cache)], "max_abs_diff_expected": de,
                     "max_abs_diff_logprob": dl})
        items += [{"concurrency": c, "cache_prompt": cache, **r.to_dict()}
                  for r in last[(c, cache)]]
        ok = [r.distribution for r in last[(c, cache)] if r.distribution is not None]
        if ok:
            sig = ok[0].signature.format(short=True)

    print(f"bench.speed --backend openai: SummEval {doc_id}, {n} summaries, {args.model}, "
          f"{args.threads} threads, median of {args.repeats} interleaved repeats")
    print(f"{'backend':42} {'pool':>4} {'cache':>5} {'s/run':>7} {'items/s':>8} {'x local':>7} "
          f"{'errors':>6} {'max|dE|':>8} {'max|dlp|':>8}")

    def fmt(v: float | None) -> str:
        return "-" if v is None else format(v, ".1e")

    print("pool: requests in flight; cache: llama-server's cache_prompt; x local: items/s "
          "relative to in process; max|dE|: largest expected-score difference and max|dlp|: "
          "largest label logprob difference (nats) from in process; -np/-t: slots/threads per "
          "server")
    for r in rows:
        cache = "-" if r["cache_prompt"] is None else ("on" if r["cache_prompt"] else "off")
        print(f"{r['backend']:42} {r['concurrency']:4d} {cache:>5} {r['seconds_median']:7.2f} "
              f"{r['items_per_s']:8.3f} {r['ratio_to_in_process']:7.2f} {r['n_errors']:6d} "
              f"{fmt(r['max_abs_diff_expected']):>8} {fmt(r['max_abs_diff_logprob']):>8}")
    local_sig = ref[0].signature.format(short=True)
    print(f"signature[llama_cpp]: {local_sig}")
    print(f"signature[openai]: {sig}")
    cfg = run_config(argv, experiment="speed_openai", seed=args.seed,
                     signatures={"llama_cpp": local_sig, "openai": sig},
                     packages=["llama_cpp_python", "numpy"],
                     extra={"doc_id": doc_id, "url": args.url, "pools": pools,
                            "server": None if args.url else args.server,
                            "parallel": parallel, "replicas": n_rep, "times_s": {str(k): v for k, v in
                                                              times.items()}})
    out = make_run_dir("speed_openai", cfg, root=args.results)
    write_json(out / "config.json", cfg)
    write_json(out / "summary.json", {"rows": rows})
    write_jsonl(out / "items.jsonl", items)
    print(f"results: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
