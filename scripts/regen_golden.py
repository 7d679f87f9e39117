#!/usr/bin/env python3
"""Regenerate tests/golden/*.json by running the code (review the diff before committing).

Golden values are produced by localjudge and cross-checked in the tests against an independent
computation (raw llama-cpp-python logits with ``logits_all=True``). Never edit them by hand.

Usage: python scripts/regen_golden.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from _prompts import CASES

from localjudge.backends.llama_cpp import LlamaCppBackend


def main() -> int:
    b = LlamaCppBackend("smollm2-135m-instruct", n_ctx=2048)
    out = {"produced_by": "scripts/regen_golden.py", "model": "smollm2-135m-instruct",
           "backend": "llama_cpp", "rtol": 0.0, "atol": 1e-6, "cases": []}
    for case in CASES:
        d = b.score_distribution(case["prompt"], case["labels"], prefill=case["prefill"],
                                 min_mass=0)
        out["cases"].append({**case, "expected": d.to_dict()})
    path = ROOT / "tests" / "golden" / "smollm2_llama_cpp.json"
    path.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
