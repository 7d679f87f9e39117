"""Adapters that plug localjudge into other evaluation frameworks.

``localjudge.integrations.deepeval.LocalJudgeModel``: a DeepEval custom model (needs the
``[deepeval]`` extra). Nothing is imported here: importing ``localjudge`` or this package never
imports a third-party framework; each adapter module imports its framework when it is imported.
"""

__all__: list[str] = []
