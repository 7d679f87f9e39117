"""Model tier: one small real-model run per bench entry point (CPU, SmolLM2 / the default
model on a handful of items). Each asserts the run wrote its summary and that the numbers it
reports are internally consistent -- not the numbers themselves, which are the bench's job."""

from __future__ import annotations

import json
import math

import pytest
from conftest import SHARED_DATA, require_llama_server, require_model, require_module

pytestmark = pytest.mark.model


@pytest.fixture(autouse=True)
def _needs_models_and_data():
    require_module("llama_cpp")
    if not (SHARED_DATA / "summeval" / "summeval.jsonl").is_file():
        pytest.skip(f"shared data missing under {SHARED_DATA}")


def _run_dir(root, name):
    (d,) = list((root / name).iterdir())
    return d


def test_bench_summeval(tmp_path, capsys):
    require_model("smollm2-135m-instruct")
    from bench.summeval import main

    assert main(["--docs", "1", "--limit", "4", "--dimensions", "coherence", "--model",
                 "smollm2-135m-instruct", "--min-mass", "0", "--n-bootstrap", "50",
                 "--results", str(tmp_path)]) == 0
    d = _run_dir(tmp_path, "summeval")
    summary = json.loads((d / "summary.json").read_text())
    st = summary["coherence"]
    assert st["n_items"] == 4 and st["n_errors"] == 0
    rho = st["weighted"]["summary_level"]["rho"]
    assert rho is None or -1 <= rho <= 1
    assert (d / "judge_vs_human.png").stat().st_size > 0
    recs = [json.loads(x) for x in (d / "items-coherence.jsonl").read_text().splitlines()]
    assert len(recs) == 4
    assert "Spearman rho" in capsys.readouterr().out


def test_bench_variance(tmp_path, capsys):
    for m in ("qwen2.5-coder-0.5b-instruct", "smollm2-135m-instruct", "gemma3-270m"):
        require_model(m)
    from bench.variance import main

    assert main(["--docs", "1", "--limit", "2", "--n", "8", "--results", str(tmp_path)]) == 0
    s = json.loads((_run_dir(tmp_path, "variance") / "summary.json").read_text())
    part1 = s["samples_vs_expectation"]
    assert part1["n"] == 8 and sum(part1["counts"]) + part1["n_non_label"] == 8
    if part1["sd"] is not None:
        assert part1["sem"]["3"] == pytest.approx(part1["sd"] / math.sqrt(3))
    panels = {r["panel"]: r for r in s["panels"]}
    exact = panels["clones: exact expectation (one pass, k -> inf)"]
    single = next(r for name, r in panels.items() if name.startswith("single judge: qwen"))
    assert exact["bias"] == pytest.approx(single["bias"])  # the same expectation twice
    assert s["stability"]["max_abs_diff"] == 0.0  # canonical blocks: history-independent
    out = capsys.readouterr().out
    assert "SEM" in out and "diverse: mean of 3 families" in out


def test_bench_speed(tmp_path, capsys):
    require_model("smollm2-135m-instruct")
    from bench.speed import main

    assert main(["--models", "smollm2-135m-instruct", "--repeats", "1", "--limit", "3",
                 "--results", str(tmp_path)]) == 0
    rows = json.loads((_run_dir(tmp_path, "speed") / "summary.json").read_text())["rows"]
    (r,) = rows
    assert r["prompt_tokens"] > 300 and r["ratio_to_raw_forward"] > 0
    # prefix reuse decodes fewer tokens than three cold calls (timing is not asserted)
    assert r["prefix_reuse_tokens_decoded"] < r["cold_cache_tokens_decoded"]
    assert "ratio" in capsys.readouterr().out


def test_bench_speed_openai(tmp_path, capsys):
    """``bench.speed --backend openai`` against a real llama-server (4 slots): every item
    scored, the rows it prints are the configurations asked for, and with the prompt cache off
    the server agrees with the in-process backend (one slot per request: <= 2e-3 nats)."""
    require_model("smollm2-135m-instruct")
    require_llama_server()
    from bench.speed import main

    assert main(["--backend", "openai", "--concurrency", "1,2", "--limit", "2",
                 "--repeats", "1", "--results", str(tmp_path)]) == 0
    rows = json.loads((_run_dir(tmp_path, "speed_openai") / "summary.json").read_text())["rows"]
    assert [(r["concurrency"], r["cache_prompt"]) for r in rows[1:]] == [
        (1, False), (1, True), (2, False), (2, True)]
    assert all(r["n_errors"] == 0 and r["items_per_s"] > 0 for r in rows)
    for r in rows[1:]:
        if r["concurrency"] == 1:
            assert r["max_abs_diff_logprob"] < 2e-3
    assert "items/s" in capsys.readouterr().out


def test_bench_floor_and_ranking(tmp_path):
    require_model("all-minilm-l6-v2")
    from bench.floor import main as floor_main
    from bench.ranking import main as ranking_main

    assert floor_main(["--n-pairs", "30", "--n-bootstrap", "50", "--no-plot", "--results",
                       str(tmp_path)]) == 0
    assert ranking_main(["--limit", "6", "--n-bootstrap", "50", "--no-plot", "--no-geval",
                         "--results", str(tmp_path)]) == 0
    assert list((tmp_path / "floor").iterdir()) and list((tmp_path / "ranking").iterdir())
