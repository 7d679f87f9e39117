"""Model manifests, sha256 verification and the errors for missing / corrupt files."""

from __future__ import annotations

import hashlib

import pytest
from conftest import require_module

from localjudge.errors import ConfigError, ModelFileError
from localjudge.models import file_sha256, list_manifests, load_manifest, verify_file


def test_manifests_are_complete():
    names = {m.name for m in list_manifests()}
    assert {"qwen2.5-coder-0.5b-instruct", "smollm2-135m-instruct", "gemma3-270m"} <= names
    for m in list_manifests():
        assert len(m.sha256) == 64 and m.size > 0 and m.license and m.family and m.sources
        for s in m.sources:
            assert s["package"] and s["version"] and s["member"]
    assert load_manifest("gemma3-270m").chat_template is False
    assert load_manifest("qwen2.5-coder-0.5b-instruct").chat_template is True


def test_unknown_manifest_lists_known_names():
    with pytest.raises(ConfigError, match="unknown model 'nope'.*smollm2"):
        load_manifest("nope")


def test_sha256_mismatch_names_file_and_expected_digest(tmp_path):
    p = tmp_path / "m.gguf"
    p.write_bytes(b"not a model")
    want = "0" * 64
    with pytest.raises(ModelFileError) as ei:
        verify_file(p, want)
    err = ei.value
    assert str(p) in str(err) and want in str(err)
    assert err.actual_sha256 == hashlib.sha256(b"not a model").hexdigest()


def test_missing_file_names_file_and_expected_digest(tmp_path):
    p = tmp_path / "absent.gguf"
    with pytest.raises(ModelFileError, match=f"{p}.*{'a' * 64}"):
        verify_file(p, "a" * 64)


def test_digest_is_recomputed_when_the_file_changes(tmp_path, monkeypatch):
    monkeypatch.setenv("LOCALJUDGE_CACHE", str(tmp_path / "cache"))
    p = tmp_path / "f.bin"
    p.write_bytes(b"one")
    assert file_sha256(p) == hashlib.sha256(b"one").hexdigest()
    p.write_bytes(b"two!")
    assert file_sha256(p) == hashlib.sha256(b"two!").hexdigest()


def test_backend_missing_model_file(tmp_path):
    require_module("llama_cpp")
    from localjudge.backends.llama_cpp import LlamaCppBackend

    p = tmp_path / "missing.gguf"
    with pytest.raises(ModelFileError, match="missing.gguf"):
        LlamaCppBackend(p, sha256="b" * 64)
    p.write_bytes(b"GGUF garbage")
    with pytest.raises(ModelFileError, match="b" * 64):
        LlamaCppBackend(p, sha256="b" * 64)
