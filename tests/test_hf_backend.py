"""HFBackend: resolution and errors (default tier), and on the real SmolLM2 GGUF (``model``).

The model-tier tests check HFBackend against LlamaCppBackend on the same GGUF file for
everything that must be identical (rendered prompt, token ids, label spellings, vocabulary
texts) and against itself for KV-cache reuse, history independence and the conversion cache.
Numerical agreement of the distributions across backends is in ``test_cross_backend.py``.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest
from _prompts import CASES, COHERENCE_PROMPT
from conftest import require_model, require_module

from localjudge import ConfigError, ModelFileError, TemplateError

FAST = "smollm2-135m-instruct"

# KV reuse vs a fresh computation: the brief's bound. With the canonical block grouping the two
# run identical float32 operations, so the measured difference is exactly 0.
KV_ATOL = 1e-5


@pytest.fixture(scope="module")
def hf_mod():
    require_module("torch")
    require_module("transformers")
    from localjudge.backends import hf

    return hf


# ---- default tier: no model weights ---------------------------------------------------------
def test_import_localjudge_does_not_import_torch():
    code = ("import sys, localjudge, localjudge.backends; "
            "bad = [m for m in ('torch', 'transformers', 'llama_cpp') if m in sys.modules]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_registry_points_at_hf_backend(hf_mod):
    from localjudge.backends import BACKENDS

    mod, cls = BACKENDS["hf"].split(":")
    assert mod == hf_mod.__name__ and getattr(hf_mod, cls).name == "hf"


def test_missing_gguf_names_file_and_expected_digest(hf_mod, tmp_path):
    p = tmp_path / "absent.gguf"
    with pytest.raises(ModelFileError) as ei:
        hf_mod.HFBackend(str(p), sha256="ab" * 32)
    assert str(p) in str(ei.value) and "ab" * 32 in str(ei.value)
    assert ei.value.expected_sha256 == "ab" * 32


def test_gguf_sha256_mismatch_is_refused_before_loading(hf_mod, tmp_path):
    p = tmp_path / "model.gguf"
    p.write_bytes(b"not really a gguf")
    with pytest.raises(ModelFileError) as ei:
        hf_mod.HFBackend(str(p), sha256="0" * 64)
    assert "sha256 mismatch" in str(ei.value) and "0" * 64 in str(ei.value)
    assert ei.value.actual_sha256 == hashlib.sha256(b"not really a gguf").hexdigest()


def test_model_id_not_in_local_cache_is_a_model_file_error(hf_mod, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelFileError, match="never downloads"):
        hf_mod.HFBackend("localjudge-tests/no-such-model-xyz")


@pytest.mark.parametrize("kw, match", [
    ({"dtype": "float8"}, "dtype must be one of"),
    ({"n_ctx": 4}, "n_ctx must be an int >= 16"),
    ({"block_size": 0}, "block_size must be an int >= 1"),
    ({"revision": "main"}, "revision='main' applies to Hugging Face model ids only"),
])
def test_bad_arguments_raise_config_error(hf_mod, tmp_path, kw, match):
    p = tmp_path / "m.gguf"
    p.write_bytes(b"x")
    with pytest.raises(ConfigError, match=match):
        hf_mod.HFBackend(str(p), **kw)


def test_manifest_sha256_must_match_manifest(hf_mod):
    with pytest.raises(ConfigError, match="differs from manifest"):
        hf_mod.HFBackend(FAST, sha256="1" * 64)


# ---- model tier: SmolLM2-135M-Instruct GGUF -------------------------------------------------
@pytest.mark.model
def test_chat_template_comes_from_gguf_and_render_matches_llama_cpp(hf_smollm, smollm_llama):
    assert hf_smollm.chat_template == smollm_llama.chat_template  # GGUF metadata template
    convos = [
        ("Rate it.", None, None),
        (COHERENCE_PROMPT, "You are a strict judge.", "Coherence (1-5):"),
        ([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"},
          {"role": "user", "content": "Score this: 2+2=4"}], None, "Score:"),
    ]
    for prompt, system, prefill in convos:
        a = hf_smollm.render(prompt, system=system, prefill=prefill)
        b = smollm_llama.render(prompt, system=system, prefill=prefill)
        assert a == b
        assert hf_smollm._encode_prompt(a) == smollm_llama._encode_prompt(b)
    assert hf_smollm._bos() == smollm_llama._bos()
    assert hf_smollm._eos_text() == smollm_llama._eos_text()


@pytest.mark.model
@pytest.mark.parametrize("labels", [range(11), None, ["Yes", "No"]],
                         ids=["0-10", "1-5", "yes-no"])
def test_label_spellings_match_llama_cpp(hf_smollm, smollm_llama, labels):
    a = hf_smollm.resolve_labels(labels)
    b = smollm_llama.resolve_labels(labels)
    assert a.spellings == b.spellings and a.sha256 == b.sha256


@pytest.mark.model
def test_vocab_texts_and_special_ids_match_llama_cpp(hf_smollm, smollm_llama):
    t0 = time.perf_counter()
    texts = hf_smollm._vocab_texts()
    elapsed = time.perf_counter() - t0
    assert len(texts) == hf_smollm.n_vocab == smollm_llama.n_vocab == 49152
    assert texts == smollm_llama._vocab_texts()
    assert hf_smollm._special_ids() == smollm_llama._special_ids()
    word = hf_smollm._tokenize(" the", special=False)  # a space-prefixed token ("Ġthe")
    assert len(word) == 1 and texts[word[0]] == " the"
    seven = hf_smollm._tokenize(" 7", special=False)  # SmolLM2 splits it: " ", "7"
    assert [texts[i] for i in seven] == [" ", "7"]
    assert all(texts[i] == "" for i in hf_smollm._special_ids())
    assert elapsed < 5.0  # one batched Rust decode: ~0.05 s here


@pytest.mark.model
def test_tokenize_parses_special_text_only_when_asked(hf_smollm, smollm_llama):
    text = "<|im_start|>user\nhi"
    with_special = hf_smollm._tokenize(text, special=True)
    plain = hf_smollm._tokenize(text, special=False)
    assert with_special[0] == 1  # <|im_start|>, and no BOS is prepended
    assert 1 not in plain and hf_smollm._decode(plain) == text
    assert with_special == smollm_llama._tokenize(text, special=True)
    assert plain == smollm_llama._tokenize(text, special=False)


@pytest.mark.model
def test_kv_reuse_matches_fresh_computation(hf_smollm):
    b = hf_smollm
    article = "Source Text:\n\n" + " ".join(
        f"Sentence {i} of the article says that the council met on day {i}." for i in range(24))
    seq_a = b._encode_prompt(b.render(article + "\n\n" + COHERENCE_PROMPT,
                                      prefill="Coherence (1-5):"))
    seq_b = b._encode_prompt(b.render(article + "\n\n" + COHERENCE_PROMPT.replace("sunny", "cold"),
                                      prefill="Coherence (1-5):"))
    assert len(seq_a) > 3 * b.block_size and seq_a != seq_b
    b.reset_cache()
    fresh_a = b._next_token_logprobs(seq_a).copy()
    b.reset_cache()
    fresh_prefix = b._next_token_logprobs(seq_a[:-1]).copy()
    b.reset_cache()
    b._next_token_logprobs(seq_b)
    n0 = b.n_decoded_tokens
    reused = b._next_token_logprobs(seq_a)  # shares the article with seq_b
    n_run = b.n_decoded_tokens - n0
    assert reused.shape == (b.n_vocab,) and reused.dtype == np.float64
    assert float(np.abs(reused - fresh_a).max()) <= KV_ATOL
    assert n_run < b.block_size + (len(seq_a) % b.block_size) + 1  # the article was not rerun
    # a prefix of the cached sequence: cache cropped, the last block run again
    n1 = b.n_decoded_tokens
    assert float(np.abs(b._next_token_logprobs(seq_a[:-1]) - fresh_prefix).max()) <= KV_ATOL
    assert b.n_decoded_tokens - n1 <= b.block_size
    np.testing.assert_allclose(np.exp(reused).sum(), 1.0, atol=1e-9)


@pytest.mark.model
def test_results_do_not_depend_on_what_was_scored_before(hf_smollm):
    case = CASES[1]  # 0-10: multi-token label "10" and the boundary rule
    kw = {"prefill": case["prefill"], "min_mass": 0}
    hf_smollm.reset_cache()
    a = hf_smollm.score_distribution(case["prompt"], case["labels"], **kw)
    hf_smollm.score_distribution(case["prompt"] + " Be strict.", case["labels"], **kw)
    hf_smollm.score_distribution(case["prompt"], [1, 2, 3, 4, 5], **kw)
    hf_smollm.generate(case["prompt"], max_tokens=5, prefill="Score:")
    b = hf_smollm.score_distribution(case["prompt"], case["labels"], **kw)
    assert b.probs == a.probs and b.mass == a.mass  # bitwise, not approximately


@pytest.mark.model
def test_greedy_generation_matches_transformers_generate(hf_smollm):
    import torch

    got = hf_smollm.generate("Name three colours.", max_tokens=12)
    ids = hf_smollm._encode_prompt(hf_smollm.render("Name three colours."))
    with torch.inference_mode():
        out = hf_smollm._model.generate(torch.tensor([ids]), max_new_tokens=12, do_sample=False,
                                        attention_mask=torch.ones(1, len(ids), dtype=torch.long))
    new = [int(t) for t in out[0, len(ids):] if int(t) not in hf_smollm._eog_ids()]
    assert got == hf_smollm._decode(new)


@pytest.mark.model
def test_signature_names_gguf_and_records_dtype(hf_smollm, smollm_llama):
    s = hf_smollm.signature(range(11))
    r = smollm_llama.signature(range(11))
    assert s.backend == "hf" and s.model == r.model == FAST
    assert s.model_sha256 == r.model_sha256  # the GGUF's sha256, verified against the manifest
    assert s.template_sha256 == r.template_sha256 and s.label_map_sha256 == r.label_map_sha256
    assert {"transformers", "torch", "gguf", "numpy"} <= set(s.versions)
    assert s.versions["dtype"] == "float32" and s.versions["device"] == "cpu"


@pytest.mark.model
def test_conversion_is_cached_by_gguf_sha256(hf_mod, tmp_path, monkeypatch):
    """A fresh cache: the first load converts (~20 s), the second loads the saved folder."""
    gguf = require_model(FAST)
    monkeypatch.setenv("LOCALJUDGE_CACHE", str(tmp_path))
    first = hf_mod.HFBackend(str(gguf), n_ctx=256)
    assert first.loaded_from_conversion_cache is False
    digest = first.model_sha256
    assert first.load_dir == tmp_path / "models" / "hf-converted" / digest[:16]
    marker = json.loads((first.load_dir / "localjudge-conversion.json").read_text())
    assert marker["gguf_sha256"] == digest and "model.safetensors" in marker["files"]
    ids = first._encode_prompt(first.render("Rate it.", prefill="Score:"))
    lp_first = first._next_token_logprobs(ids)
    del first
    second = hf_mod.HFBackend(str(gguf.parent), gguf_file=gguf.name, n_ctx=256)
    assert second.loaded_from_conversion_cache is True
    assert second.model_sha256 == digest
    assert np.array_equal(second._next_token_logprobs(ids), lp_first)
    # a changed file invalidates the cached conversion (it would be converted again)
    cfg = second.load_dir / "config.json"
    cfg.write_text(cfg.read_text().replace('"llama"', '"llama" '))
    assert not hf_mod._conversion_is_complete(second.load_dir, digest)
    del second
    shutil.rmtree(tmp_path / "models", ignore_errors=True)  # 0.5 GB; pytest keeps tmp dirs


@pytest.mark.model
def test_local_folder_without_chat_template(hf_mod, hf_smollm, tmp_path):
    """Path (c): a transformers folder. A tiny random Llama with SmolLM2's tokenizer files and
    no chat template: TemplateError unless raw=True; sha256 over the weight files' sha256s."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    d = tmp_path / "tiny-llama"
    cfg = LlamaConfig(vocab_size=49152, hidden_size=16, intermediate_size=32,
                      num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                      max_position_embeddings=256, tie_word_embeddings=True)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        LlamaForCausalLM(cfg).save_pretrained(str(d))
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(hf_smollm.load_dir / name, d / name)
    weights = hashlib.sha256((d / "model.safetensors").read_bytes()).hexdigest()
    want = hashlib.sha256(f"{weights}  model.safetensors\n".encode()).hexdigest()

    b = hf_mod.HFBackend(str(d))
    assert b.chat_template is None and b.loaded_from_conversion_cache is False
    assert b.n_ctx == 256 and b.n_vocab == 49152
    assert b.model_sha256 == want == hf_mod.model_dir_sha256(d)
    with pytest.raises(TemplateError, match="no chat template"):
        b.score_distribution("Rate it.")
    dist = b.score_distribution("Text: fine.\nScore (1-5):", raw=True, min_mass=0)
    assert dist.signature.template_sha256 == "raw" and dist.signature.model_sha256 == want
    with pytest.raises(ModelFileError, match="sha256 mismatch") as ei:
        hf_mod.HFBackend(str(d), sha256="2" * 64)
    assert str(d) in str(ei.value) and "2" * 64 in str(ei.value)
    with pytest.raises(ConfigError, match="revision"):
        hf_mod.HFBackend(str(d), revision="main")
