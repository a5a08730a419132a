"""Inside a diagnosis each result ``ranking.shared`` keeps is computed once: what ``diagnose`` lets go after the
per-run steps (``keep_shared(READ_AFTER_RUNS)``) is not asked for again (else it would be computed twice, and
a name in ``READ_AFTER_RUNS`` that no longer exists would show here as a second computation too)."""

from __future__ import annotations

import collections
import importlib.util
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "make_diagnose_bench.py"


def _inputs(tmp: Path) -> dict:
    spec = importlib.util.spec_from_file_location("make_diagnose_bench", SCRIPT)
    assert spec and spec.loader
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    return gen.make(tmp, queries=150, depth=200, rerank_depth=100, seed=3)


def test_no_shared_result_is_computed_twice(tmp_path, monkeypatch):
    import toolkit as ts
    import toolkit.data.ranking as ranking

    original = ranking.shared
    computed: collections.Counter = collections.Counter()
    held = []  # every frame asked about stays alive: no id is reused by another frame meanwhile

    def counting(name, frames, args, compute):
        held.append(frames)

        def counted():
            computed[(name, tuple(id(f) for f in frames), args)] += 1
            return compute()

        return original(name, frames, args, counted)

    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("toolkit") and getattr(module, "shared", None) is original:
            monkeypatch.setattr(module, "shared", counting)
    p = _inputs(tmp_path)
    let_go = []
    keep = ranking.keep_shared

    def keeping(names):
        let_go.extend(k[0] for k in ranking._SCOPES.stack[-1] if k[0] not in names)
        keep(names)

    import toolkit.diagnosis.diagnose as core

    monkeypatch.setattr(core, "keep_shared", keeping)
    diag = ts.diagnose(p["qrels"], {"first": p["first"]}, {r: p[r] for r in ("rr1", "rr2", "rr3")}).result
    assert len(diag.pipelines) == 3
    assert {"alignment", "classify"} <= set(let_go)  # the large per-run results are let go ...
    twice = sorted({k[0] for k, n in computed.items() if n > 1})
    assert not twice, f"computed more than once in one diagnosis: {twice}"  # ... and none is asked for again
    assert computed  # the counting saw the shared results


def test_keep_shared_lets_go_of_the_rest_inside_a_scope_only():
    from toolkit.data.ranking import keep_shared, shared, shared_sorts

    calls = []
    frame = object()

    def make(v):
        def compute():
            calls.append(v)
            return v

        return compute

    keep_shared({"a"})  # outside a scope: nothing to do, no error
    with shared_sorts():
        assert shared("a", (frame,), (), make(1)) == 1
        assert shared("b", (frame,), (), make(2)) == 2
        keep_shared({"a"})
        assert shared("a", (frame,), (), make(10)) == 1  # kept
        assert shared("b", (frame,), (), make(20)) == 20  # let go: computed again
    assert calls == [1, 2, 20]
