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


@pytest.fixture(scope="session")
def smollm_llama():
    """SmolLM2-135M-Instruct through LlamaCppBackend (loaded once per session)."""
    pytest.importorskip("llama_cpp")
    require_model("smollm2-135m-instruct")
    from localjudge.backends.llama_cpp import LlamaCppBackend

    return LlamaCppBackend("smollm2-135m-instruct", n_ctx=2048)
