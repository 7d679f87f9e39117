"""The localjudge version and version lookup for signatures."""

from __future__ import annotations

from importlib import metadata

__all__ = ["__version__", "package_versions"]

__version__ = "0.1.0"


def package_versions(*dists: str) -> dict[str, str]:
    """``{"localjudge": __version__, dist: version, ...}``; ``"absent"`` if not installed."""
    out = {"localjudge": __version__}
    for d in dists:
        try:
            out[d] = metadata.version(d)
        except metadata.PackageNotFoundError:
            out[d] = "absent"
    return out
