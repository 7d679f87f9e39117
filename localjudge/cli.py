"""The ``localjudge`` command line.

Commands:
    ``localjudge summeval``  judge the 16 system summaries of one SummEval article for one aspect
                             with a local model; print each distribution, raw mass, argmax and
                             expected score, then the Spearman ρ / Kendall τ-b with the human
                             scores of that article; write one JSONL record per item.
    ``localjudge geval``     G-Eval over a JSONL file of test cases (``LLMTestCase`` fields per
                             line), one JSONL record per (case, metric); resumable.
    ``localjudge models``    list the embedded model manifests and whether they are fetched.

Records are appended as each item finishes; a re-run with the same ``--out`` resumes and only
judges the items that have no record yet (``--overwrite`` starts over). Per-item failures (low
mass, context overflow, backend errors) are recorded per item with their error code and never
counted as a score.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from importlib import resources
from pathlib import Path
from typing import Any

from localjudge.errors import LocalJudgeError, LowMassError
from localjudge.models import DEFAULT_JUDGE, list_manifests
from localjudge.records import read_jsonl_records
from localjudge.signature import sha256_json

__all__ = ["SUMMEVAL_PROMPTS", "main"]

SUMMEVAL_PROMPTS = {"coherence": "summeval_coherence_v1"}
"""Aspect -> versioned prompt template in ``localjudge/prompts`` (G-Eval's SummEval prompts,
Liu et al. 2023, arXiv 2303.16634, repository file ``prompts/summeval/coh_detailed.txt``)."""

PREFILL = {"coherence": "Coherence (1-5): "}
"""Assistant prefill per aspect; the trailing space raises the label mass (see GEval.prefill)."""


def _load_prompt(name: str) -> str:
    return resources.files("localjudge.prompts").joinpath(f"{name}.txt").read_text("utf-8")


def _read_summeval(path: Path, doc: str) -> list[dict[str, Any]]:
    if not path.is_file():
        raise SystemExit(f"error: SummEval file not found: {path}")
    rows = [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]
    doc_ids: list[str] = []
    for r in rows:
        if r["doc_id"] not in doc_ids:
            doc_ids.append(r["doc_id"])
    if doc.isdigit():
        i = int(doc)
        if not 0 <= i < len(doc_ids):
            raise SystemExit(f"error: --doc {doc} out of range: the file has {len(doc_ids)} articles")
        doc_id = doc_ids[i]
    elif doc in doc_ids:
        doc_id = doc
    else:
        raise SystemExit(f"error: --doc {doc!r} is neither an index nor a doc_id in {path}")
    return [r for r in rows if r["doc_id"] == doc_id]


def _fmt_dist(d: dict[str, Any]) -> str:
    return " ".join(f"{lab}:{p:.3f}" for lab, p in zip(d["labels"], d["probs"]))


def cmd_summeval(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from localjudge.backends import load_backend
    from localjudge.stats import count_ties, pooled_correlation

    if args.aspect not in SUMMEVAL_PROMPTS:
        raise SystemExit(f"error: --aspect {args.aspect!r}; available: {sorted(SUMMEVAL_PROMPTS)}")
    items = _read_summeval(Path(args.data), args.doc)
    template_name = SUMMEVAL_PROMPTS[args.aspect]
    template = _load_prompt(template_name)
    out = Path(args.out)
    kw = {"n_ctx": args.n_ctx} if args.n_ctx else {}
    backend = load_backend(args.backend, args.model, **kw)
    prefill = PREFILL[args.aspect]
    bsig = backend.signature(range(1, 6))
    config = {"model_sha256": bsig.model_sha256, "template_sha256": bsig.template_sha256,
              "label_map_sha256": bsig.label_map_sha256, "prompt_template": template_name,
              "prefill": prefill, "min_mass": args.min_mass, "backend": bsig.backend}
    config_sha256 = sha256_json(config)
    done: dict[str, dict[str, Any]] = {}
    if out.exists() and not args.overwrite:
        for rec in read_jsonl_records(out):
            if "doc_id" not in rec or "system_id" not in rec:
                raise SystemExit(f"error: {out} holds records that are not from "
                                 "`localjudge summeval`; use another --out")
            if rec.get("config_sha256") != config_sha256:
                raise SystemExit(
                    f"error: {out} holds records made with a different configuration (model, "
                    "chat template, prompt, prefill or min_mass); resuming would mix them. "
                    "Use another --out, or --overwrite to start over")
            if rec["error"] is None:  # failed items are judged again
                done[f"{rec['doc_id']}|{rec['system_id']}"] = rec
    elif out.exists():
        out.unlink()  # --overwrite, after the model loaded and the arguments were checked
    out.parent.mkdir(parents=True, exist_ok=True)
    todo = [r for r in items if f"{r['doc_id']}|{r['system_id']}" not in done]
    print(f"SummEval doc {items[0]['doc_id']}: {len(items)} summaries, aspect {args.aspect}, "
          f"{len(items) - len(todo)} already in {out}, {len(todo)} to judge")
    with out.open("a", encoding="utf-8") as f:
        for r in tqdm(todo, desc="judging", unit="summary", file=sys.stderr):
            prompt = template.replace("{{Document}}", r["source"]).replace(
                "{{Summary}}", r["system_output"])
            rec: dict[str, Any] = {
                "doc_id": r["doc_id"], "system_id": r["system_id"], "aspect": args.aspect,
                "human": r["scores"][args.aspect], "prompt_template": template_name,
                "prefill": prefill, "distribution": None, "error": None, "message": None,
                "config_sha256": config_sha256,
            }
            t0 = time.perf_counter()
            try:
                d = backend.score_distribution(prompt, range(1, 6), prefill=prefill,
                                               min_mass=args.min_mass)
                rec["distribution"] = d.to_dict()
            except LowMassError as err:
                rec["distribution"] = err.distribution.to_dict()
                rec["error"], rec["message"] = err.code, str(err)
            except LocalJudgeError as err:
                rec["error"], rec["message"] = err.code, str(err)
            rec["seconds"] = round(time.perf_counter() - t0, 4)
            f.write(json.dumps(rec) + "\n")
            f.flush()
            done[f"{r['doc_id']}|{r['system_id']}"] = rec
    print(f"\n{'system':7} {'human':>6} {'mass':>7} {'argmax':>6} {'expected':>8}  distribution")
    exp_s, arg_s, hum_s = [], [], []
    sig = None
    n_err = 0
    for r in items:
        rec = done[f"{r['doc_id']}|{r['system_id']}"]
        d = rec["distribution"]
        if rec["error"]:
            n_err += 1
            mass = f"{d['mass']:.4f}" if d else "-"
            print(f"{r['system_id']:7} {rec['human']:6.3f} {mass:>7} {'-':>6} {'-':>8}  "
                  f"ERROR {rec['error']}: {rec['message'][:80]}")
            continue
        sig = d["signature"]
        print(f"{r['system_id']:7} {rec['human']:6.3f} {d['mass']:7.4f} {d['argmax']:>6} "
              f"{d['expected']:8.4f}  {_fmt_dist(d)}")
        exp_s.append(d["expected"])
        arg_s.append(float(d["argmax"]))
        hum_s.append(rec["human"])
    print(f"\nscored {len(exp_s)} of {len(items)} (errors: {n_err}; errors are not scores)")
    if len(exp_s) >= 2:
        w = pooled_correlation(exp_s, hum_s)
        a = pooled_correlation(arg_s, hum_s)
        tw, ta = count_ties(exp_s), count_ties(arg_s)
        if w.undefined_reason:
            print(f"Spearman rho (expected score vs human {args.aspect}): undefined "
                  f"({w.undefined_reason})")
        else:
            print(f"Spearman rho (expected score vs human {args.aspect}): {w.rho:.4f}")
            print(f"Kendall tau-b (expected score vs human {args.aspect}): {w.tau:.4f}")
        print(f"tied pairs: expected scores {tw.n_tied_pairs}, argmax scores {ta.n_tied_pairs} "
              f"(of {tw.n_pairs})")
        if a.undefined_reason:
            print(f"Spearman rho (argmax score vs human): undefined ({a.undefined_reason}: "
                  f"{len(set(arg_s))} distinct argmax value(s)); the expectation breaks the ties")
        else:
            print(f"Spearman rho (argmax score vs human): {a.rho:.4f}")
    else:
        print("too few scored items for a correlation")
    if sig:
        from localjudge.signature import Signature

        print(f"signature: {Signature.from_dict(sig).format()}")
    print(f"records: {out}")
    return 0


def cmd_geval(args: argparse.Namespace) -> int:
    from localjudge.backends import load_backend
    from localjudge.errors import ConfigError
    from localjudge.judges.geval import GEval, LLMTestCase, Rubric
    from localjudge.judges.runner import evaluate

    src = Path(args.input)
    if not src.is_file():
        raise SystemExit(f"error: --input file not found: {src}")
    cases = []
    for i, line in enumerate(src.read_text("utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            cases.append(LLMTestCase.from_dict(json.loads(line)))
        except (ValueError, ConfigError) as err:
            raise SystemExit(f"error: {src}:{i}: {err}") from None
    rubric = None
    if args.rubric:
        rows = json.loads(Path(args.rubric).read_text("utf-8"))
        rubric = [Rubric(tuple(r["score_range"]), r["expected_outcome"]) for r in rows]
    score_range = None
    if args.score_range:
        try:
            lo, hi = (int(x) for x in args.score_range.split(","))
        except ValueError:
            raise SystemExit(f"error: --score-range must be LO,HI, got {args.score_range!r}") \
                from None
        score_range = (lo, hi)
    steps = [s.strip() for s in args.steps.split("|")] if args.steps else None
    if args.backend == "openai":
        if not args.url:
            raise SystemExit("error: --backend openai needs --url (comma-separated replicas)")
        kw: dict[str, object] = {"max_concurrency": max(1, args.workers),
                                 "chat_prefill": args.chat_prefill}
        if args.chat_template:
            kw["chat_template"] = Path(args.chat_template).read_text("utf-8")
        if args.api_key_env:
            key = os.environ.get(args.api_key_env)
            if not key:
                raise SystemExit(f"error: environment variable {args.api_key_env} is empty")
            kw["api_key"] = key
        urls = [u.strip() for u in args.url.split(",") if u.strip()]
        model = args.model if args.model != DEFAULT_JUDGE else "judge"
        backend = load_backend("openai", urls if len(urls) > 1 else urls[0], model, **kw)
    else:
        if args.workers != 1:
            raise SystemExit("error: --workers > 1 needs --backend openai (an in-process "
                             "model judges one item at a time)")
        backend = load_backend(args.backend, args.model)
    metric = GEval(args.name, criteria=args.criteria, evaluation_steps=steps,
                   evaluation_params=[p.strip() for p in args.params.split(",")],
                   rubric=rubric, score_range=score_range, threshold=args.threshold,
                   strict_mode=args.strict, model=backend, min_mass=args.min_mass,
                   include_reason=args.reason)
    recs = evaluate(cases, [metric], out=args.out, resume=not args.overwrite,
                    show_progress=True, max_workers=args.workers)
    scored = [r for r in recs if r.error is None]
    errors: dict[str, int] = {}
    for r in recs:
        if r.error:
            errors[r.error] = errors.get(r.error, 0) + 1
    print(f"{metric.name}: {len(recs)} cases, {len(scored)} scored, "
          f"{sum(r.success for r in recs)} passed (threshold {metric.threshold}"
          f"{', strict' if metric.strict_mode else ''}), errors: {errors or 0}")
    if scored:
        mean = sum(r.score for r in scored if r.score is not None) / len(scored)
        print(f"mean score (scored cases only): {mean:.4f}")
    print(f"evaluation steps: {list(metric.evaluation_steps or ())}")
    print(f"records: {args.out}")
    return 0


def cmd_models(args: argparse.Namespace) -> int:
    for m in list_manifests():
        state = "fetched" if m.path.is_file() else "not fetched"
        print(f"{m.name:30} family={m.family:8} template={'yes' if m.chat_template else 'no':3} "
              f"{m.license:20} {state}  {m.path}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="localjudge", description=__doc__.splitlines()[0])
    ap.add_argument("-v", "--verbose", action="store_true")
    sub = ap.add_subparsers(dest="command", required=True)
    s = sub.add_parser("summeval", help="judge the 16 summaries of one SummEval article")
    s.add_argument("--data", default="../shared/data/summeval/summeval.jsonl")
    s.add_argument("--doc", default="0", help="article index (0-99) or doc_id")
    s.add_argument("--aspect", default="coherence", choices=sorted(SUMMEVAL_PROMPTS))
    s.add_argument("--backend", default="llama_cpp", choices=["llama_cpp", "hf"])
    s.add_argument("--model", default=DEFAULT_JUDGE, help="manifest name, GGUF path or HF id")
    s.add_argument("--n-ctx", type=int, default=None)
    s.add_argument("--min-mass", type=float, default=0.9)
    s.add_argument("--out", default="results/summeval.jsonl")
    s.add_argument("--overwrite", action="store_true", help="start over instead of resuming")
    s.set_defaults(func=cmd_summeval)
    g = sub.add_parser("geval", help="G-Eval over a JSONL file of test cases")
    g.add_argument("--input", required=True, help="JSONL, one LLMTestCase per line")
    g.add_argument("--out", required=True, help="JSONL records (resumed if it exists)")
    g.add_argument("--name", default="Quality", help="metric name (form field)")
    g.add_argument("--criteria", default=None)
    g.add_argument("--steps", default=None, help="evaluation steps separated by '|'")
    g.add_argument("--params", default="input,actual_output")
    g.add_argument("--score-range", default=None, help="LO,HI (default 1,5)")
    g.add_argument("--rubric", default=None, help="JSON file: [{score_range, expected_outcome}]")
    g.add_argument("--threshold", type=float, default=0.5)
    g.add_argument("--strict", action="store_true")
    g.add_argument("--reason", action="store_true", help="generate a short rationale")
    g.add_argument("--min-mass", type=float, default=0.9)
    g.add_argument("--backend", default="llama_cpp", choices=["llama_cpp", "hf", "openai"])
    g.add_argument("--model", default=DEFAULT_JUDGE,
                   help="manifest name, GGUF path or HF id; with --backend openai the served "
                        "model name (default 'judge')")
    g.add_argument("--url", default=None,
                   help="--backend openai: server root(s), comma-separated replicas")
    g.add_argument("--workers", type=int, default=1,
                   help="items judged at once (--backend openai only)")
    g.add_argument("--chat-template", default=None,
                   help="--backend openai: file with the model's Jinja chat template "
                        "(default: llama.cpp's /props, else the server's chat endpoint)")
    g.add_argument("--chat-prefill", default="error", choices=["error", "continue", "scan"],
                   help="--backend openai in chat mode: how to handle G-Eval's prefill")
    g.add_argument("--api-key-env", default=None,
                   help="--backend openai: name of the environment variable with the API key")
    g.add_argument("--overwrite", action="store_true")
    g.set_defaults(func=cmd_geval)
    m = sub.add_parser("models", help="list embedded model manifests")
    m.set_defaults(func=cmd_models)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING)
    try:
        return int(args.func(args))
    except LocalJudgeError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
