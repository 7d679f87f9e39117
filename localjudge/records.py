"""Append-only JSONL result files that survive interruption.

A run appends one JSON record per line and flushes after each, so an interrupted run leaves
at most one partial last line. ``read_jsonl_records`` drops (and truncates away) such a partial
last line so the next append starts on a fresh line; any other unreadable line is an error
naming the file and line, never skipped silently.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from localjudge.errors import ConfigError

__all__ = ["read_jsonl_records"]


def read_jsonl_records(path: str | Path) -> list[dict[str, Any]]:
    """Records of a JSONL result file, in file order.

    Args:
        path: the file (must exist).

    Returns:
        One dict per complete line.

    Raises:
        ConfigError: a line other than an interrupted last line is not a JSON object (the
            message names file and line), or the file is not UTF-8.
    """
    p = Path(path)
    try:
        data = p.read_bytes().decode("utf-8")
    except UnicodeDecodeError as err:
        raise ConfigError(f"{p} is not a UTF-8 JSONL results file: {err}") from None
    lines = data.split("\n")
    records: list[dict[str, Any]] = []
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError as err:
            if i == len(lines) and not data.endswith("\n"):
                # partial last line of an interrupted run: cut it off, it will be redone
                with p.open("r+b") as f:
                    f.truncate(len(data[: len(data) - len(line)].encode("utf-8")))
                break
            raise ConfigError(f"{p}:{i} is not valid JSON ({err}); fix or remove the line, "
                              "or start over with a new output file") from None
        if not isinstance(rec, dict):
            raise ConfigError(f"{p}:{i} is not a JSON object: {line[:80]!r}")
        records.append(rec)
    return records
