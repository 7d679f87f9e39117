"""``python -m bench.speed_openai --backend openai --concurrency 1,2,4``: judging over HTTP.

Items per second of ``OpenAICompatBackend.score_batch`` against one local OpenAI-compatible
server at each request-pool size in ``--concurrency``, compared with the in-process
``LlamaCppBackend`` on the same items (G-Eval's SummEval coherence prompt on the summaries of
one article, prefill ``"Coherence (1-5): "``), plus the largest difference in expected score
between the two (a correctness check, not a speed number).

The server is ``--url`` if given (e.g. a C++ ``llama-server --parallel 4``, or vLLM), else
this module starts ``python -m llama_cpp.server`` (llama-cpp-python's ``[server]`` extra) on a
free 127.0.0.1 port. That server runs one model behind one lock: requests are served one at a
time, so pool sizes above 1 only overlap HTTP and client work with inference; parallel slots
need ``llama-server --parallel N`` or vLLM. Its logprob path also computes a log-softmax over
the whole ``n_ctx x n_vocab`` score matrix per request, so keep ``--server-n-ctx`` small.

Timings on a shared 2-core machine are noisy. This is a benchmark, never a test.
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from bench._common import make_run_dir, run_config, write_json, write_jsonl

PREFILL = "Coherence (1-5): "


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start_server(model: Path, n_ctx: int, n_threads: int) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--host",
         "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx), "--n_batch", "128",
         "--n_threads", str(n_threads)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    for _ in range(360):
        if proc.poll() is not None:
            raise SystemExit(f"llama_cpp.server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url + "/v1/models", timeout=2):
                return proc, url
        except OSError:
            time.sleep(0.5)
    proc.terminate()
    raise SystemExit("llama_cpp.server did not start within 180 s")


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; prints items/s per pool size and writes bench/results/speed_openai."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", choices=["openai"], default="openai")
    ap.add_argument("--concurrency", default="1,2,4", help="comma-separated pool sizes")
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--url", default=None, help="existing server; default: start one")
    ap.add_argument("--served-model", default="judge", help="model name sent to --url")
    ap.add_argument("--server-n-ctx", type=int, default=1024)
    ap.add_argument("--server-n-threads", type=int, default=2)
    ap.add_argument("--doc", type=int, default=0)
    ap.add_argument("--limit", type=int, default=8, help="summaries of the article to judge")
    ap.add_argument("--seed", type=int, default=0, help="jitter seed of the request pool")
    ap.add_argument("--results", type=Path, default=None)
    args = ap.parse_args(argv)
    pools = [int(x) for x in args.concurrency.split(",") if x.strip()]

    from bench.speed import _prompts
    from localjudge.backends.llama_cpp import LlamaCppBackend
    from localjudge.backends.openai_compat import OpenAICompatBackend
    from localjudge.models import model_path

    prompts, doc_id = _prompts(args.doc)
    prompts = prompts[: args.limit]
    local = LlamaCppBackend(args.model, n_ctx=args.server_n_ctx,
                            n_threads=args.server_n_threads)
    local.score_distribution(prompts[0], prefill=PREFILL, min_mass=0)  # warm-up
    local.reset_cache()
    t0 = time.perf_counter()
    ref = [local.score_distribution(p, prefill=PREFILL, min_mass=0) for p in prompts]
    local_s = time.perf_counter() - t0

    proc = None
    url = args.url
    if url is None:
        proc, url = _start_server(model_path(args.model), args.server_n_ctx,
                                  args.server_n_threads)
    _, bos = local._bos()
    rows: list[dict[str, Any]] = [{
        "backend": "llama_cpp (in process)", "concurrency": 1, "n_items": len(prompts),
        "seconds": local_s, "items_per_s": len(prompts) / local_s, "n_errors": 0,
        "max_abs_diff_expected": 0.0}]
    items: list[dict[str, Any]] = []
    sig = ""
    try:
        for c in pools:
            srv = OpenAICompatBackend(url, args.served_model, chat_template=local.chat_template,
                                      bos_token=bos, eos_token=local._eos_text(),
                                      max_concurrency=c, seed=args.seed)
            srv.score_batch(prompts[:1], prefill=PREFILL, min_mass=0)  # warm-up
            t0 = time.perf_counter()
            recs = srv.score_batch(prompts, prefill=PREFILL, min_mass=0)
            dt = time.perf_counter() - t0
            diffs = [abs(r.distribution.expected - d.expected) for r, d in zip(recs, ref)
                     if r.distribution is not None and r.distribution.expected is not None
                     and d.expected is not None]
            rows.append({"backend": "openai -> llama_cpp.server" if args.url is None
                         else f"openai -> {url}", "concurrency": c, "n_items": len(prompts),
                         "seconds": dt, "items_per_s": len(prompts) / dt,
                         "n_errors": sum(r.error is not None for r in recs),
                         "max_abs_diff_expected": max(diffs) if diffs else None})
            items += [{"concurrency": c, **r.to_dict()} for r in recs]
            ok = [r.distribution for r in recs if r.distribution is not None]
            if ok:
                sig = ok[0].signature.format(short=True)
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=30)

    print(f"{'backend':34} {'pool':>4} {'items':>5} {'seconds':>8} {'items/s':>8} "
          f"{'errors':>6} {'max|dE|':>8}")
    for r in rows:
        d = r["max_abs_diff_expected"]
        print(f"{r['backend']:34} {r['concurrency']:4d} {r['n_items']:5d} {r['seconds']:8.2f} "
              f"{r['items_per_s']:8.3f} {r['n_errors']:6d} "
              f"{'-' if d is None else format(d, '.1e'):>8}")
    local_sig = ref[0].signature.format(short=True)
    print(f"signature[llama_cpp]: {local_sig}")
    print(f"signature[openai]: {sig}")
    cfg = run_config(sys.argv[1:] if argv is None else argv, experiment="speed_openai",
                     seed=args.seed, signatures={"llama_cpp": local_sig, "openai": sig},
                     packages=["llama_cpp_python", "numpy"],
                     extra={"doc_id": doc_id, "url": args.url, "pools": pools})
    out = make_run_dir("speed_openai", cfg, root=args.results)
    write_json(out / "config.json", cfg)
    write_json(out / "summary.json", {"rows": rows})
    write_jsonl(out / "items.jsonl", items)
    print(f"results: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
