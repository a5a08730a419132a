"""guard.escape.csv_table: the text pandas' to_csv gives (through csv_frame and csv_newlines), to the byte."""

import numpy as np
import pandas as pd
import pytest

from toolkit.guard.escape import CSV_LINE_END, csv_frame, csv_newlines, csv_table


def _pandas(frame: pd.DataFrame) -> str:
    return csv_newlines(csv_frame(frame).to_csv(index=False, lineterminator=CSV_LINE_END))


def _floats(n: int) -> np.ndarray:
    rng = np.random.default_rng(4)
    x = np.concatenate(
        [
            rng.standard_normal(n) * 10.0 ** rng.integers(-330, 300, n),
            rng.random(n),
            np.round(rng.random(n), 3),
            rng.integers(-(10**17), 10**17, n).astype(float),
        ]
    )
    x[:12] = [0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, 1e16, 1e15, 9999999999999998.0, 1e-4, 9.999e-5, np.nan]
    return x


@pytest.mark.parametrize("text_dtype", [object, "str"])
def test_csv_text_equals_pandas(text_dtype):
    x = _floats(2500)
    n = len(x)
    texts = np.array(
        ["q1", "a,b", 'say "x"', "line\nbreak", "cr\r\nlf", "=SUM(A1)", "-1.5", "+x", "@a", "\tt", "", "é"]
    )
    frame = pd.DataFrame(
        {
            "system": pd.Series(np.resize(texts, n), dtype=text_dtype),
            "value": x,
            "count": np.arange(n, dtype=np.int64) - 7,
            "=odd name": np.resize([1.5, np.nan], n),
            "missing": pd.Series(np.resize(np.array(["a", None], dtype=object), n), dtype=text_dtype),
        }
    )
    assert csv_table(frame) == _pandas(frame)
    mixed = pd.DataFrame({"m": pd.Series([None, 1.25, "x", 3, float("nan")], dtype=object), "f": [1.0] * 5})
    assert csv_table(mixed) == _pandas(mixed)


def test_csv_text_edges_and_other_columns_equal_pandas():
    one = pd.DataFrame({"only": pd.Series(["", "a", None], dtype=object)})
    empty = pd.DataFrame({"a": pd.Series([], dtype=np.float64), "b": pd.Series([], dtype=object)})
    other = pd.DataFrame({"b": [True, False], "i32": np.array([1, 2], np.int32), "f": [0.1, 0.2]})
    for frame in (one, empty, other, pd.DataFrame()):
        assert csv_table(frame) == _pandas(frame)
