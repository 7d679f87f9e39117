"""``localjudge.bertscore``: the import path issue 4 names; the implementation lives in
``localjudge.metrics.bertscore`` (STYLE.md layout). Importing this module imports torch only
when a scorer is constructed."""

from localjudge.metrics.bertscore import *
from localjudge.metrics.bertscore import __all__  # noqa: F401
