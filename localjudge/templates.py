"""Chat-template rendering in a sandboxed Jinja environment.

Chat templates come from model files (GGUF metadata ``tokenizer.chat_template`` or a Hugging Face
``tokenizer_config.json``) and are untrusted input. They are rendered with
``jinja2.sandbox.ImmutableSandboxedEnvironment`` the way Hugging Face transformers does
(``trim_blocks=True, lstrip_blocks=True``, ``raise_exception``, ``tojson``, ``strftime_now``),
so that a template cannot reach Python internals: calling unsafe attributes
(``__subclasses__``, ``__globals__`` ...) or mutating objects raises ``TemplateError``, and a
bare unsafe attribute (``{{ ''.__class__ }}``) renders as undefined (empty), as in Jinja's
sandbox. Any other failure while rendering (division by zero, recursion, oversized ranges) is
a ``TemplateError`` too. Not covered: a template that loops for a very long time (the sandbox
has no time limit); llama.cpp and transformers share that limitation.

Both backends render through this module, so the llama.cpp and transformers backends see
the same prompt text for the same messages.
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Sequence
from functools import lru_cache
from typing import Any, NoReturn

from localjudge.errors import ConfigError, TemplateError
from localjudge.types import Message

__all__ = ["build_messages", "render_chat"]


def _raise_exception(message: str) -> NoReturn:
    raise TemplateError(f"chat template raised: {message}")


def _tojson(x: Any, ensure_ascii: bool = False, indent: int | None = None,
            separators: Any = None, sort_keys: bool = False) -> str:
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def _strftime_now(fmt: str) -> str:
    # Only used by templates that print today's date. Fixed date so renders are reproducible.
    return _dt.date(2024, 1, 1).strftime(fmt)


@lru_cache(maxsize=16)
def _compile(template: str) -> Any:
    from jinja2 import TemplateError as JinjaTemplateError
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    try:
        return env.from_string(template)
    except (JinjaTemplateError, ArithmeticError, LookupError, TypeError, ValueError,
            RecursionError, MemoryError) as err:  # Jinja folds constants at compile time
        raise TemplateError(f"chat template does not compile: {type(err).__name__}: {err}") \
            from err


def build_messages(
    messages: Sequence[Message], *, system: str | None = None
) -> list[Message]:
    """Prepend an optional system message.

    Raises:
        ConfigError: ``system`` given while the messages already start with a system message.
    """
    out = list(messages)
    if system is not None:
        if not system.strip():
            raise ConfigError(f"system message is empty: {system!r}")
        if out and out[0].role == "system":
            raise ConfigError("system= given but the messages already start with a system message")
        out.insert(0, Message("system", system))
    return out


def render_chat(
    template: str,
    messages: Sequence[Message],
    *,
    bos_token: str = "",
    eos_token: str = "",
    add_generation_prompt: bool = True,
) -> str:
    """Render ``messages`` with a chat template, sandboxed.

    Args:
        template: the Jinja chat template text from the model file.
        messages: the conversation; a trailing assistant prefill is *not* part of it (the
            backend appends the prefill after the generation prompt).
        bos_token, eos_token: special-token texts exposed to the template.
        add_generation_prompt: end with the assistant turn header (default True).

    Returns:
        The rendered prompt text, special tokens as text.

    Raises:
        TemplateError: the template does not compile, raises, or is refused by the sandbox.
    """
    from jinja2 import TemplateError as JinjaTemplateError
    from jinja2.exceptions import SecurityError

    compiled = _compile(template)
    try:
        return str(
            compiled.render(
                messages=[m.to_dict() for m in messages],
                add_generation_prompt=add_generation_prompt,
                bos_token=bos_token,
                eos_token=eos_token,
                tools=None,
                documents=None,
            )
        )
    except SecurityError as err:
        raise TemplateError(f"chat template refused by the sandbox: {err}") from err
    except TemplateError:
        raise
    except (JinjaTemplateError, ArithmeticError, LookupError, TypeError, ValueError,
            AttributeError, RecursionError, MemoryError) as err:
        # a template is untrusted input: any failure while rendering it is a TemplateError
        raise TemplateError(f"chat template failed to render: {type(err).__name__}: {err}") from err
