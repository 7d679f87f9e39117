"""localjudge: judge LLM outputs with local models through logprob scoring.

Importing this package imports neither torch nor llama_cpp; backends load lazily
(``load_backend("llama_cpp", "qwen2.5-coder-0.5b-instruct")``).
"""

from localjudge.backends import Backend, load_backend
from localjudge.errors import (
    BackendError,
    ConfigError,
    ContextOverflowError,
    LocalJudgeError,
    LowMassError,
    ModelFileError,
    TemplateError,
    TokenizationError,
)
from localjudge.labels import DEFAULT_LABELS, LabelMap, normalize_labels
from localjudge.signature import Signature
from localjudge.types import Message, ScoreDistribution, TopToken
from localjudge.version import __version__

__all__ = [
    "DEFAULT_LABELS",
    "Backend",
    "BackendError",
    "ConfigError",
    "ContextOverflowError",
    "LabelMap",
    "LocalJudgeError",
    "LowMassError",
    "Message",
    "ModelFileError",
    "ScoreDistribution",
    "Signature",
    "TemplateError",
    "TokenizationError",
    "TopToken",
    "__version__",
    "load_backend",
    "normalize_labels",
]
