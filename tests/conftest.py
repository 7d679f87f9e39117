"""Shared fixtures.

Model-tier tests (``@pytest.mark.model``) need fetched weights. Without them they are skipped,
unless ``LOCALJUDGE_REQUIRE_MODELS=1`` (set by ``make test`` / CI), where a missing model fails.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = REPO.parent / "shared" / "data"


def require_model(name: str) -> Path:
    """Verified path of an embedded model, or skip/fail when it is not fetched."""
    from localjudge.errors import ModelFileError
    from localjudge.models import model_path

    try:
        return model_path(name)
    except ModelFileError as err:
        if os.environ.get("LOCALJUDGE_REQUIRE_MODELS") == "1":
            pytest.fail(f"required model missing: {err}")
        pytest.skip(f"model not fetched: {err}")


def require_module(name: str, env: str = "LOCALJUDGE_REQUIRE_MODELS"):
    """Import ``name``, or skip -- or fail when ``$env`` is ``"1"`` (``make test`` sets
    ``LOCALJUDGE_REQUIRE_MODELS``; ``make test-integrations`` sets
    ``LOCALJUDGE_REQUIRE_DEEPEVAL``), so a missing install step cannot pass as a skip."""
    import importlib

    try:
        return importlib.import_module(name)
    except ImportError as err:
        if os.environ.get(env) == "1":
            pytest.fail(f"required module {name!r} missing ({env}=1): {err}")
        pytest.skip(f"module {name!r} not installed: {err}", allow_module_level=True)


def require_llama_server() -> Path:
    """The ``llama-server`` binary, or skip -- or fail under ``LOCALJUDGE_REQUIRE_MODELS=1``."""
    from localjudge.errors import ConfigError
    from localjudge.serving import llama_server_binary

    try:
        return llama_server_binary()
    except ConfigError as err:
        if os.environ.get("LOCALJUDGE_REQUIRE_MODELS") == "1":
            pytest.fail(f"llama-server binary missing: {err}")
        pytest.skip(str(err))


@pytest.fixture(scope="session")
def smollm_llama():
    """SmolLM2-135M-Instruct through LlamaCppBackend (loaded once per session)."""
    require_module("llama_cpp")
    require_model("smollm2-135m-instruct")
    from localjudge.backends.llama_cpp import LlamaCppBackend

    return LlamaCppBackend("smollm2-135m-instruct", n_ctx=2048)


# ---- HFBackend and cross-backend fixtures (hf_ / cross_ prefixes) ---------------------------
def _hf_available() -> None:
    for mod in ("torch", "transformers", "gguf"):
        require_module(mod)


@pytest.fixture(scope="session")
def hf_load_s() -> dict[str, float]:
    """Load times in seconds of the session's HF backends, by model name (for reports)."""
    return {}


@pytest.fixture(scope="session")
def hf_smollm(hf_load_s):
    """SmolLM2-135M-Instruct (the GGUF) through HFBackend, loaded once per session."""
    import time

    _hf_available()
    require_model("smollm2-135m-instruct")
    from localjudge.backends.hf import HFBackend

    t0 = time.perf_counter()
    b = HFBackend("smollm2-135m-instruct", n_ctx=2048)
    hf_load_s["smollm2-135m-instruct"] = time.perf_counter() - t0
    return b


@pytest.fixture(scope="session")
def cross_backends(request, hf_load_s):
    """``get(name) -> (LlamaCppBackend, HFBackend)`` on the same GGUF, each loaded once per
    session (SmolLM2 reuses ``smollm_llama`` / ``hf_smollm``)."""
    import time

    pairs: dict[str, tuple] = {}

    def get(name: str):
        if name not in pairs:
            require_module("llama_cpp")
            _hf_available()
            require_model(name)
            if name == "smollm2-135m-instruct":
                pairs[name] = (request.getfixturevalue("smollm_llama"),
                               request.getfixturevalue("hf_smollm"))
            else:
                from localjudge.backends.hf import HFBackend
                from localjudge.backends.llama_cpp import LlamaCppBackend

                llama = LlamaCppBackend(name, n_ctx=2048)
                t0 = time.perf_counter()
                hf = HFBackend(name, n_ctx=2048)
                hf_load_s[name] = time.perf_counter() - t0
                pairs[name] = (llama, hf)
        return pairs[name]

    return get
