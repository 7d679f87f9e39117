"""Exception hierarchy of localjudge.

Every error names the problem and the offending value. Configuration problems raise at set-up
(constructor or call entry); per-item problems in a batch are recorded per item by the caller
(see ``localjudge.cli``) and never turned into a score of 0.

Hierarchy::

    LocalJudgeError
    ├── ConfigError(ValueError)        bad arguments
    │   └── ModelFileError             missing model file, or sha256 differs from the manifest
    ├── TemplateError                  no chat template, or the template failed / was refused
    ├── TokenizationError(ConfigError) a label cannot be tokenised, or two labels overlap
    ├── LowMassError                   label mass below ``min_mass``; carries the distribution
    └── BackendError                   inference failed
        ├── ContextOverflowError       prompt longer than the context window
        └── ParseFailureError          generated text could not be parsed (steps, fallback)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from localjudge.types import ScoreDistribution

__all__ = [
    "BackendError",
    "ConfigError",
    "ContextOverflowError",
    "LocalJudgeError",
    "LowMassError",
    "ModelFileError",
    "ParseFailureError",
    "TemplateError",
    "TokenizationError",
]


class LocalJudgeError(Exception):
    """Base class of every error raised by localjudge.

    ``code`` is the short machine-readable name stored in result records
    (``low_mass``, ``context_overflow``, ``backend_error``, ...).
    """

    code = "error"


class ConfigError(LocalJudgeError, ValueError):
    """Bad argument or configuration; raised in ``__init__`` or at call entry."""

    code = "config_error"


class ModelFileError(ConfigError):
    """A model file is missing, or its sha256 differs from the expected digest.

    Attributes:
        path: the file that was looked for or hashed.
        expected_sha256: the digest the manifest (or caller) pinned, or None.
        actual_sha256: the digest found on disk, or None when the file is missing.
    """

    code = "model_file"

    def __init__(
        self,
        message: str,
        *,
        path: str,
        expected_sha256: str | None = None,
        actual_sha256: str | None = None,
    ) -> None:
        super().__init__(message)
        self.path = path
        self.expected_sha256 = expected_sha256
        self.actual_sha256 = actual_sha256


class TemplateError(LocalJudgeError):
    """The model has no chat template, or rendering it failed or was refused by the sandbox."""

    code = "template_error"


class TokenizationError(ConfigError):
    """A label cannot be tokenised, or two labels share a token sequence."""

    code = "tokenization_error"


class BackendError(LocalJudgeError):
    """Inference failed inside the backend (raised ``from`` the original error)."""

    code = "backend_error"


class ContextOverflowError(BackendError):
    """The prompt (plus the label tokens) does not fit in the model's context window.

    Attributes:
        n_prompt_tokens: tokens in the rendered prompt.
        n_needed_tokens: prompt tokens plus the longest label continuation.
        n_ctx: the context window of the loaded model.
    """

    code = "context_overflow"

    def __init__(self, *, n_prompt_tokens: int, n_needed_tokens: int, n_ctx: int,
                 what: str = "the longest label") -> None:
        super().__init__(
            f"prompt needs {n_needed_tokens} tokens ({n_prompt_tokens} prompt tokens plus "
            f"{what}) but the context window is n_ctx={n_ctx}; localjudge never "
            "truncates silently: shorten the input or load the model with a larger n_ctx"
        )
        self.n_prompt_tokens = n_prompt_tokens
        self.n_needed_tokens = n_needed_tokens
        self.n_ctx = n_ctx


class LowMassError(LocalJudgeError):
    """The raw probability mass on the labels is below ``min_mass``.

    The full distribution (with the mass and the top non-label tokens) is attached, so nothing
    is lost: ``err.distribution`` can be stored with the error.

    Attributes:
        mass: raw label mass in [0, 1], before renormalisation.
        min_mass: the threshold that was applied.
        distribution: the ``ScoreDistribution`` that was refused.
    """

    code = "low_mass"

    def __init__(self, distribution: ScoreDistribution, min_mass: float) -> None:
        top = ", ".join(
            f"{t.text!r} {t.prob:.4f}" for t in distribution.top_tokens if not t.is_label
        )
        super().__init__(
            f"label mass {distribution.mass:.4f} is below min_mass={min_mass} for labels "
            f"{list(distribution.labels)}; top non-label tokens: {top or '(none)'}. "
            "The expectation over renormalised noise would be meaningless, so no score is given; "
            "check the chat template and the prefill"
        )
        self.mass = distribution.mass
        self.min_mass = min_mass
        self.distribution = distribution

    def to_dict(self) -> dict[str, Any]:
        """Error record with the refused distribution, JSON-serialisable."""
        return {
            "error": self.code,
            "message": str(self),
            "distribution": self.distribution.to_dict(),
        }


class ParseFailureError(BackendError):
    """Generated text could not be parsed (evaluation steps, or the parsed-score fallback)."""

    code = "parse_failure"
