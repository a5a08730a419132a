"""What every first-stage retriever returns (``SearchResult``) and the checks they share."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from toolkit.data.records import DOC_ID, QUERY_ID, SCORE, Run
from toolkit.errors import ConfigError

DEFAULT_HITS = 1000


@dataclass(frozen=True)
class SearchResult:
    run: Run
    empty_queries: tuple[str, ...]
    params: dict
    seconds: float
    queries: int

    def describe(self) -> str:
        return f"{self.queries} queries, {len(self.run)} hits, {self.seconds:.2f}s"


def validate_hits(hits: int) -> None:
    if hits < 1:
        raise ConfigError(f"--hits must be >= 1, not {hits}")


def results_frame(rows_q: list[str], rows_d: list[str], rows_s: list[float]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            QUERY_ID: pd.array(rows_q, dtype="str"),
            DOC_ID: pd.array(rows_d, dtype="str"),
            SCORE: np.asarray(rows_s, dtype=np.float64),
        }
    )
