"""Model tier: LlamaCppBackend on the real SmolLM2-135M-Instruct (and Gemma 3 270M) on CPU.

Every value is cross-checked against an independent computation with raw llama-cpp-python:
a separate ``Llama(logits_all=True)`` evaluates the same token ids with llama-cpp-python's own
``eval`` (prompt in ``n_batch`` = block-size chunks, each continuation token on its own, which
is the canonical grouping LlamaCppBackend documents), and the label probabilities are recomputed
from its logits with numpy (softmax in float64), chain rule and boundary rule by hand.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from _prompts import CASES, COHERENCE_PROMPT
from conftest import require_model

from localjudge import ContextOverflowError, TemplateError
from localjudge.models import model_path

pytestmark = pytest.mark.model
GOLDEN = Path(__file__).parent / "golden" / "smollm2_llama_cpp.json"

# Tolerance vs the independent raw computation: same GGUF, same llama.cpp build, same grouping
# of tokens into decode calls, so only the float64 softmax order differs (measured ~1e-15).
RAW_ATOL = 1e-9


@pytest.fixture(scope="module")
def raw_llama():
    import llama_cpp

    return llama_cpp.Llama(model_path=str(model_path("smollm2-135m-instruct")), n_ctx=2048,
                           n_batch=128, logits_all=True, verbose=False)


def _raw_probs(raw, ids, suffix=()):
    raw.reset()
    raw.eval(ids)
    for t in suffix:
        raw.eval([t])
    n = len(ids) + len(suffix)
    x = np.asarray(raw.scores[n - 1], dtype=np.float64)
    p = np.exp(x - x.max())
    return p / p.sum()


def test_rendered_prompt_matches_llama_cpp_python_own_formatter(smollm_llama):
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    fmt = Jinja2ChatFormatter(template=smollm_llama.chat_template, eos_token="<|im_end|>",
                              bos_token="<|im_start|>", add_generation_prompt=True)
    msgs = [{"role": "user", "content": "Rate it."}]
    ref = fmt(messages=msgs).prompt
    assert smollm_llama.render("Rate it.") == ref


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_distribution_matches_raw_llama_cpp_logits(smollm_llama, raw_llama, case):
    d = smollm_llama.score_distribution(case["prompt"], case["labels"], prefill=case["prefill"],
                                        min_mass=0)
    text = smollm_llama.render(case["prompt"], prefill=case["prefill"])
    ids = raw_llama.tokenize(text.encode(), add_bos=False, special=True)
    p0 = _raw_probs(raw_llama, ids)
    lm = smollm_llama.resolve_labels(case["labels"])
    want = {}
    for lab in lm.labels:
        total = 0.0
        for seq in lm.spellings[lab]:
            p = 1.0
            for k, tid in enumerate(seq):
                p *= float((p0 if k == 0 else _raw_probs(raw_llama, ids, seq[:k]))[tid])
            if lab == "1" and "10" in lm.labels:
                # "1" followed by another digit is not the label 1 (exact boundary rule)
                nxt = _raw_probs(raw_llama, ids, seq)
                digit = [i for i, t in enumerate(smollm_llama._vocab()) if t[:1].isdigit()]
                p *= 1.0 - float(nxt[digit].sum())
            total += p
        want[lab] = total
    got = dict(zip(d.labels, (math.exp(x) for x in d.logprobs)))
    for lab in lm.labels:
        assert got[lab] == pytest.approx(want[lab], abs=RAW_ATOL), lab
    assert d.mass == pytest.approx(sum(want.values()), abs=RAW_ATOL)
    top_raw = int(np.argmax(p0))
    assert d.top_tokens[0].token_id == top_raw
    assert d.top_tokens[0].prob == pytest.approx(float(p0[top_raw]), abs=RAW_ATOL)


def test_golden_values(smollm_llama):
    golden = json.loads(GOLDEN.read_text())
    for case in golden["cases"]:
        d = smollm_llama.score_distribution(case["prompt"], case["labels"],
                                            prefill=case["prefill"], min_mass=0)
        exp = case["expected"]
        sig = exp["signature"]
        # signature first: drift in model, template or label map fails loudly, by name
        assert d.signature.model_sha256 == sig["model_sha256"], "model file changed"
        assert d.signature.template_sha256 == sig["template_sha256"], "chat template changed"
        assert d.signature.label_map_sha256 == sig["label_map_sha256"], "label map changed"
        assert d.prompt_sha256 == exp["prompt_sha256"], "rendered prompt changed"
        assert d.probs == pytest.approx(exp["probs"], abs=golden["atol"])
        assert d.mass == pytest.approx(exp["mass"], abs=golden["atol"])
        assert d.argmax == exp["argmax"]


def test_results_do_not_depend_on_what_was_scored_before(smollm_llama):
    from localjudge.backends.llama_cpp import LlamaCppBackend

    case = CASES[1]  # 0-10: multi-token label "10" and the boundary rule
    kw = {"prefill": case["prefill"], "min_mass": 0}
    fresh = LlamaCppBackend("smollm2-135m-instruct", n_ctx=2048)
    a = fresh.score_distribution(case["prompt"], case["labels"], **kw)
    busy = LlamaCppBackend("smollm2-135m-instruct", n_ctx=2048)
    busy.score_distribution(case["prompt"] + " Be strict.", case["labels"], **kw)
    busy.score_distribution(case["prompt"], [1, 2, 3, 4, 5], **kw)
    busy.generate(case["prompt"], max_tokens=5, prefill="Score:")
    b = busy.score_distribution(case["prompt"], case["labels"], **kw)
    assert b.probs == a.probs and b.mass == a.mass  # bitwise, not approximately


def test_prefix_reuse_gives_identical_results_and_skips_work(smollm_llama):
    from localjudge.backends.llama_cpp import LlamaCppBackend

    article = "Source Text:\n\n" + " ".join(
        f"Sentence {i} of the article says that the council met on day {i}." for i in range(40))
    prompts = [article + "\n\n" + COHERENCE_PROMPT.replace("sunny", w)
               for w in ("sunny", "rainy", "cold")]
    fresh = []
    for p in prompts:
        b = LlamaCppBackend("smollm2-135m-instruct", n_ctx=2048)
        fresh.append(b.score_distribution(p, prefill="Coherence (1-5):", min_mass=0))
    reuse = LlamaCppBackend("smollm2-135m-instruct", n_ctx=2048)
    before = reuse.n_decoded_tokens
    got = [reuse.score_distribution(p, prefill="Coherence (1-5):", min_mass=0) for p in prompts]
    n_reuse = reuse.n_decoded_tokens - before
    for a, b in zip(fresh, got):
        assert b.probs == a.probs and b.mass == a.mass
    n_prompt = got[0].n_prompt_tokens
    assert n_prompt > 500
    # the article (the shared prefix) is processed once, then only the last blocks
    assert n_reuse < n_prompt + 2 * (n_prompt - got[0].n_prompt_tokens + 2 * reuse.block_size)


def test_generate_is_deterministic_and_greedy_matches_llama_cpp(smollm_llama, raw_llama):
    a = smollm_llama.generate("Name three colours.", max_tokens=12, temperature=0.8, seed=7)
    b = smollm_llama.generate("Name three colours.", max_tokens=12, temperature=0.8, seed=7)
    assert a == b
    greedy = smollm_llama.generate("Name three colours.", max_tokens=12)
    text = smollm_llama.render("Name three colours.")
    raw_llama.reset()
    ref = raw_llama.create_completion(text, max_tokens=12, temperature=0.0, top_k=1)
    assert greedy == ref["choices"][0]["text"]


def test_context_overflow_on_real_model():
    from localjudge.backends.llama_cpp import LlamaCppBackend

    b = LlamaCppBackend("smollm2-135m-instruct", n_ctx=128)
    with pytest.raises(ContextOverflowError) as ei:
        b.score_distribution("word " * 300)
    # llama.cpp pads the context to a multiple of 256; the error reports the real window
    assert ei.value.n_ctx == b.n_ctx >= 128 and ei.value.n_prompt_tokens > b.n_ctx


def test_base_model_without_chat_template():
    require_model("gemma3-270m")
    from localjudge.backends.llama_cpp import LlamaCppBackend

    b = LlamaCppBackend("gemma3-270m", n_ctx=512)
    assert b.chat_template is None
    with pytest.raises(TemplateError, match="no chat template"):
        b.score_distribution("Rate it.")
    d = b.score_distribution("Review: great film, loved it.\nRating (1-5):", raw=True,
                             min_mass=0)
    assert d.signature.template_sha256 == "raw"
    assert 0.0 < d.mass <= 1.0
