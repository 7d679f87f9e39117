"""Model tier: the main job (``localjudge summeval``) on real SummEval data with SmolLM2,
including resume after an interruption and per-item error records."""

from __future__ import annotations

import json

import pytest
from conftest import SHARED_DATA, require_model, require_module

from localjudge.cli import main

pytestmark = pytest.mark.model
SUMMEVAL = SHARED_DATA / "summeval" / "summeval.jsonl"


def _run(out, *extra):
    return main(["summeval", "--data", str(SUMMEVAL), "--doc", "0", "--model",
                 "smollm2-135m-instruct", "--out", str(out), *extra])


def test_summeval_main_job_records_and_resume(tmp_path, capsys):
    require_module("llama_cpp")
    require_model("smollm2-135m-instruct")
    if not SUMMEVAL.is_file():
        pytest.skip(f"shared data missing: {SUMMEVAL}")
    out = tmp_path / "r.jsonl"
    assert _run(out, "--min-mass", "0") == 0
    text = capsys.readouterr().out
    recs = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(recs) == 16 and len({r["system_id"] for r in recs}) == 16
    for r in recs:
        d = r["distribution"]
        assert r["error"] is None and 0 < d["mass"] <= 1
        assert abs(sum(d["probs"]) - 1) < 1e-9
        assert d["signature"]["model_sha256"].startswith("b179c952")
        assert 1 <= d["expected"] <= 5
    assert "Spearman rho (expected score vs human coherence)" in text
    # interrupted run: keep 10 records, re-run -> only the 6 missing are judged, none twice
    out.write_text("\n".join(out.read_text().splitlines()[:10]) + "\n")
    assert _run(out, "--min-mass", "0") == 0
    assert "10 already in" in capsys.readouterr().out
    again = [json.loads(x) for x in out.read_text().splitlines()]
    assert sorted(r["system_id"] for r in again) == sorted(r["system_id"] for r in recs)
    by_id = {r["system_id"]: r for r in recs}
    for r in again:  # deterministic: the same numbers as the first run
        assert r["distribution"]["probs"] == by_id[r["system_id"]]["distribution"]["probs"]


def test_low_mass_items_are_errors_not_scores(tmp_path, capsys):
    require_module("llama_cpp")
    require_model("smollm2-135m-instruct")
    if not SUMMEVAL.is_file():
        pytest.skip(f"shared data missing: {SUMMEVAL}")
    out = tmp_path / "r.jsonl"
    assert _run(out, "--min-mass", "0.999") == 0
    recs = [json.loads(x) for x in out.read_text().splitlines()]
    low = [r for r in recs if r["error"] == "low_mass"]
    assert low, "SmolLM2 never puts 99.9% of its mass on 1-5 here"
    for r in low:
        assert r["distribution"]["mass"] < 0.999  # the refused distribution is kept
        assert "below min_mass" in r["message"]
    assert f"errors: {len(low)}" in capsys.readouterr().out


def test_resume_refuses_records_of_another_configuration(tmp_path):
    require_module("llama_cpp")
    require_model("smollm2-135m-instruct")
    if not SUMMEVAL.is_file():
        pytest.skip(f"shared data missing: {SUMMEVAL}")
    out = tmp_path / "r.jsonl"
    assert _run(out, "--min-mass", "0") == 0
    before = out.read_text()
    with pytest.raises(SystemExit, match="different configuration"):
        _run(out, "--min-mass", "0.5")
    assert out.read_text() == before  # nothing lost
    # a bad model with --overwrite is an error (exit 2) and must not delete the file
    assert main(["summeval", "--data", str(SUMMEVAL), "--model", "no-such-model", "--out",
                 str(out), "--overwrite"]) == 2
    assert out.read_text() == before
