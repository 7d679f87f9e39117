"""Backends behind one API: ``score_distribution``, ``generate``, ``render``, ``signature``.

``load_backend(name, model, **kw)`` imports the backend module lazily, so ``import localjudge``
never imports torch or llama_cpp.

Registry: ``"llama_cpp"`` -> ``LlamaCppBackend`` (``[llama]`` extra), ``"hf"`` -> ``HFBackend``
(``[hf]`` extra), ``"fake"`` -> ``FakeBackend`` (tests).
"""

from __future__ import annotations

import importlib
from typing import Any

from localjudge.backends.base import Backend
from localjudge.errors import ConfigError

__all__ = ["BACKENDS", "Backend", "load_backend"]

BACKENDS: dict[str, str] = {
    "llama_cpp": "localjudge.backends.llama_cpp:LlamaCppBackend",
    "hf": "localjudge.backends.hf:HFBackend",
    "fake": "localjudge.backends.fake:FakeBackend",
    "openai": "localjudge.backends.openai_compat:OpenAICompatBackend",
}
_EXTRA = {"llama_cpp": "llama", "hf": "hf", "fake": "", "openai": ""}


def load_backend(name: str, *args: Any, **kwargs: Any) -> Backend:
    """Construct a backend by registry name.

    Raises:
        ConfigError: unknown name, or its extra is not installed (names the pip extra).
    """
    if name not in BACKENDS:
        raise ConfigError(f"unknown backend {name!r}; choose one of {sorted(BACKENDS)}")
    mod_name, cls_name = BACKENDS[name].split(":")
    try:
        mod = importlib.import_module(mod_name)
    except ImportError as err:
        raise ConfigError(
            f"backend {name!r} needs the [{_EXTRA[name]}] extra: pip install "
            f"'localjudge[{_EXTRA[name]}]' ({err})"
        ) from err
    cls = getattr(mod, cls_name)
    backend: Backend = cls(*args, **kwargs)
    return backend
