"""Cross-backend agreement: the same GGUF through llama.cpp and through transformers.

Both backends render the same prompt text (same template, same token ids) and resolve the same
label token ids -- asserted exactly below via the signatures and ``prompt_sha256``. What differs
is arithmetic: ``HFBackend`` dequantises the Q4/Q5 weights once to float32 and runs float32
matmuls; llama.cpp keeps the weights quantised and quantises the activations to 8 bits for its
dot products. So the distributions agree closely but not exactly, and the test asserts a
tolerance on

* TVD = 0.5 · Σ_labels |p_llama − p_hf| over the renormalised label distributions, and
* |mass_llama − mass_hf|, the difference of the raw label mass.

Measured (transformers 5.24.0, torch 2.13.0 CPU, llama-cpp-python 0.3.36, this repository's
CASES; the JSON report under ``bench/results/cross_backend/`` has the numbers of each run):

==============================  ===================  =======  ========
model                           case                 TVD      |Δ mass|
==============================  ===================  =======  ========
smollm2-135m-instruct (Q4_1)    coherence-1-5        0.0195   0.0032
                                quality-0-10         0.0231   0.0001
                                yes-no               0.0161   0.0078
                                coherence-1-5-score  0.0134   0.0175
qwen2.5-coder-0.5b (Q5_0/Q4_K)  coherence-1-5        0.0157   0.0187
                                quality-0-10         0.0123   0.0001
                                yes-no               0.0121   0.0005
                                coherence-1-5-score  0.0120   0.0003
==============================  ===================  =======  ========

Tolerances: ``TVD_TOL = 0.05`` and ``MASS_TOL = 0.04``, about twice the largest measured values
(0.0231 and 0.0187), so a new llama.cpp or transformers build may move the numbers somewhat
without failing. They still catch real disagreements: scoring with the last prompt token
dropped, or without the prefill -- the kind of error a template, tokenisation or KV-cache bug
makes -- gave TVD 0.18 to 0.22 on SmolLM2 (same measurement, one backend perturbed).
"""

from __future__ import annotations

import datetime as _dt
import json
from pathlib import Path

import pytest
from _prompts import CASES, COHERENCE_PROMPT

from localjudge.models import DEFAULT_JUDGE, FAST_JUDGE

pytestmark = pytest.mark.model

TVD_TOL = 0.05
"""Largest allowed total variation distance between the renormalised label distributions."""

MASS_TOL = 0.04
"""Largest allowed absolute difference of the raw label mass (probability)."""

MODELS = [FAST_JUDGE, DEFAULT_JUDGE]

CROSS_CASES = [
    *CASES,
    # the plain G-Eval-style reading: 1-5 coherence with the prefill "Score:"
    {"id": "coherence-1-5-score", "prompt": COHERENCE_PROMPT.rsplit("\n\n", 1)[0],
     "labels": [1, 2, 3, 4, 5], "prefill": "Score:"},
]

REPORT_DIR = Path(__file__).resolve().parent.parent / "bench" / "results" / "cross_backend"


def tvd(p: tuple[float, ...], q: tuple[float, ...]) -> float:
    """Total variation distance 0.5 · Σ |p − q| of two distributions over the same labels."""
    if len(p) != len(q):
        raise ValueError(f"distributions over different label counts: {len(p)} vs {len(q)}")
    return 0.5 * sum(abs(a - b) for a, b in zip(p, q))


@pytest.fixture(scope="session")
def cross_report(hf_load_s):
    """Rows of measured distances; written as JSON when the session ends."""
    rows: list[dict] = []
    yield rows
    if not rows:
        return
    from localjudge.version import package_versions

    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    REPORT_DIR.mkdir(parents=True, exist_ok=True)
    out = REPORT_DIR / f"tvd-{stamp}.json"
    out.write_text(json.dumps({
        "produced_by": "tests/test_cross_backend.py",
        "tolerances": {"tvd": TVD_TOL, "mass": MASS_TOL},
        "hf_load_s": {k: round(v, 3) for k, v in hf_load_s.items()},
        "versions": package_versions("llama_cpp_python", "transformers", "torch", "gguf",
                                     "numpy"),
        "rows": rows,
    }, indent=1) + "\n")
    print(f"\ncross-backend report: {out}")


@pytest.mark.parametrize("case", CROSS_CASES, ids=[c["id"] for c in CROSS_CASES])
@pytest.mark.parametrize("model", MODELS)
def test_llama_cpp_and_hf_agree_on_the_same_gguf(cross_backends, cross_report, model, case):
    llama, hf = cross_backends(model)
    kw = {"prefill": case["prefill"], "min_mass": 0}
    a = llama.score_distribution(case["prompt"], case["labels"], **kw)
    b = hf.score_distribution(case["prompt"], case["labels"], **kw)
    # identical inputs: same file, template, label token ids and rendered prompt
    sa, sb = a.signature, b.signature
    assert sa.model_sha256 == sb.model_sha256
    assert sa.template_sha256 == sb.template_sha256
    assert sa.label_map == sb.label_map
    assert a.prompt_sha256 == b.prompt_sha256 and a.n_prompt_tokens == b.n_prompt_tokens
    d_tvd = tvd(a.probs, b.probs)
    d_mass = abs(a.mass - b.mass)
    print(f"\n{model} {case['id']}: TVD={d_tvd:.4f} |dmass|={d_mass:.4f} "
          f"mass llama={a.mass:.4f} hf={b.mass:.4f} argmax llama={a.argmax} hf={b.argmax}")
    cross_report.append({
        "model": model, "case": case["id"], "tvd": d_tvd, "abs_mass_diff": d_mass,
        "mass": {"llama_cpp": a.mass, "hf": b.mass},
        "argmax": {"llama_cpp": a.argmax, "hf": b.argmax},
        "expected": {"llama_cpp": a.expected, "hf": b.expected},
        "probs": {"llama_cpp": list(a.probs), "hf": list(b.probs)},
        "labels": list(a.labels),
        "signatures": {"llama_cpp": sa.format(short=True), "hf": sb.format(short=True)},
    })
    assert d_tvd <= TVD_TOL
    assert d_mass <= MASS_TOL
