"""What differs between two experiment result folders: the file, settings, versions, configurations, numbers."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from toolkit.errors import InputFormatError


def _load(folder: Path) -> tuple[dict, pd.DataFrame]:
    meta, table = folder / "experiment.json", folder / "results.csv"
    for p in (meta, table):
        if not p.is_file():
            raise InputFormatError(str(p), None, "no such file (not an experiment result folder)")
    import io

    from toolkit.guard.readers import read_input, read_json_object

    return read_json_object(meta), pd.read_csv(io.BytesIO(read_input(table)))  # through the inputs door


def _flat(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out |= _flat(v, f"{prefix}{k}.")
        else:
            out[f"{prefix}{k}"] = v
    return out


def experiment_diff(a: str | Path, b: str | Path, tolerance: float = 0.0) -> list[str]:
    """Lines naming each difference between result folders ``a`` and ``b`` (empty: they agree)."""
    (ma, ta), (mb, tb) = _load(Path(a)), _load(Path(b))
    lines = []
    if ma["experiment"]["text"] != mb["experiment"]["text"]:
        lines.append("experiment file: the texts differ")
    for section in ("settings", "versions"):
        fa, fb = _flat(ma.get(section, {})), _flat(mb.get(section, {}))
        for k in sorted(set(fa) | set(fb)):
            if fa.get(k) != fb.get(k):
                lines.append(f"{section} {k}: {fa.get(k)!r} vs {fb.get(k)!r}")
    ca = {c["config"]: c for c in ma["configurations"]}
    cb = {c["config"]: c for c in mb["configurations"]}
    for name in [n for n in ca if n not in cb]:
        lines.append(f"configuration {name}: only in {a}")
    for name in [n for n in cb if n not in ca]:
        lines.append(f"configuration {name}: only in {b}")
    for name in [n for n in ca if n in cb]:
        for key in ("parameters", "input", "cache_key", "index", "topics", "hits"):
            if ca[name].get(key) != cb[name].get(key):
                lines.append(f"configuration {name}: {key} {ca[name].get(key)!r} vs {cb[name].get(key)!r}")
    ia, ib = ta.set_index("config"), tb.set_index("config")
    numbers = [c for c in ia.columns if c in ib.columns and pd.api.types.is_numeric_dtype(ia[c])]
    for name in [n for n in ia.index if n in ib.index]:
        for col in numbers:
            x, y = ia.at[name, col], ib.at[name, col]
            if pd.isna(x) and pd.isna(y):
                continue
            if pd.isna(x) or pd.isna(y) or abs(float(x) - float(y)) > tolerance:
                lines.append(f"result {name} {col}: {x!r} vs {y!r}")
    return lines
