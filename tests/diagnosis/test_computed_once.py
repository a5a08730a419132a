"""Inside a diagnosis each result its workspace keeps is computed once: what ``diagnose`` lets go after the
per-run steps (``work.keep_only(READ_AFTER_RUNS)``) is not asked for again (else it would be computed twice, and
a name in ``READ_AFTER_RUNS`` that no longer exists would show here as a second computation too); and every step
of it computes in that workspace, none without one (a call site that forgot to pass it)."""

from __future__ import annotations

import collections
import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "make_diagnose_bench.py"


def _inputs(tmp: Path) -> dict:
    spec = importlib.util.spec_from_file_location("make_diagnose_bench", SCRIPT)
    assert spec and spec.loader
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    return gen.make(tmp, queries=150, depth=200, rerank_depth=100, seed=3)


def test_no_shared_result_is_computed_twice_and_none_outside_the_workspace(tmp_path, monkeypatch):
    import toolkit as ts
    from toolkit.data import workspace

    original_once, original_keep = workspace.Workspace.once, workspace.Workspace.keep_only
    computed: collections.Counter = collections.Counter()
    held = []  # every key object asked about stays alive: no identity is reused by another object meanwhile
    let_go = []
    outside = []  # what was computed with no workspace while the diagnosis ran

    def counting(self, name, keys, args, compute):
        held.append(keys)

        def counted():
            computed[(name, tuple(id(k) for k in keys), args)] += 1
            return compute()

        return original_once(self, name, keys, args, counted)

    def keeping(self, names):
        let_go.extend(k[0] for k in self._memo if k[0] not in names)
        original_keep(self, names)

    nothing = type(workspace.NO_WORKSPACE)

    def without(name):
        plain = getattr(nothing, name)

        def record(self, *args, **kwargs):
            outside.append(f"{name} {args[0]}" if name in ("once", "has") else name)
            return plain(self, *args, **kwargs)

        return record

    monkeypatch.setattr(workspace.Workspace, "once", counting)
    monkeypatch.setattr(workspace.Workspace, "keep_only", keeping)
    for name in ("once", "has", "is_ordered", "mark_ordered"):
        monkeypatch.setattr(nothing, name, without(name))
    p = _inputs(tmp_path)
    diag = ts.diagnose(p["qrels"], {"first": p["first"]}, {r: p[r] for r in ("rr1", "rr2", "rr3")}).result
    assert len(diag.pipelines) == 3
    assert {"alignment", "classify"} <= set(let_go)  # the large per-run results are let go ...
    twice = sorted({k[0] for k, n in computed.items() if n > 1})
    assert not twice, f"computed more than once in one diagnosis: {twice}"  # ... and none is asked for again
    assert computed  # the counting saw the shared results
    assert sorted(set(outside)) == []  # every step was handed the diagnosis's workspace
