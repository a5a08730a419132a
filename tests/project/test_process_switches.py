"""The toolkit leaves its caller's process as it found it: torch's thread count and TF32 flags, faiss's thread
count, matplotlib's backend and the caller's open figures, the warnings' filters and display, the root logger,
arrow's default memory pool, the loggers it quietens, the umask and the environment are the same after a call of
``ts.rerank``, ``ts.index(dense=True)``, ``ts.dense``, ``Diagnosis.plot_*`` and a command run in-process
(``CliRunner().invoke(main, ...)``) as before it. Each is recorded in a fresh Python process, before ``toolkit``
is imported (an import may not change them either), and after each call."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from needs import optional, required

REPO = Path(__file__).resolve().parents[2]
SUPPORT = REPO / "tests" / "support"

SCRIPT = textwrap.dedent(
    """
    import json, logging, os, sys, warnings
    from pathlib import Path

    import faiss, matplotlib, pyarrow as pa, torch

    # what other libraries change when they are first imported (warnings filters, torch's compiler cache folder)
    # is theirs, not the toolkit's: they are imported first, as a caller of the toolkit has them
    import scipy.sparse, scipy.special, scipy.stats, sympy, torch._dynamo, transformers
    from transformers import BertModel, BertTokenizerFast

    folder = Path(sys.argv[1])
    # the caller's own settings, each unlike what the toolkit uses, so that a change shows
    torch.set_num_threads(3)
    faiss.omp_set_num_threads(3)
    matplotlib.use("svg")
    import matplotlib.pyplot as plt

    mine = plt.figure()
    warnings.filterwarnings("ignore", message="the caller's own filter")

    def umask():
        for line in open("/proc/self/status"):
            if line.startswith("Umask:"):
                return line.split()[1]

    def state():
        root = logging.getLogger()
        return {
            "torch threads": torch.get_num_threads(),
            "tf32": [
                torch.get_float32_matmul_precision(),
                torch.backends.cuda.matmul.allow_tf32,
                torch.backends.cudnn.allow_tf32,
            ],
            "faiss threads": faiss.omp_get_max_threads(),
            "backend": matplotlib.get_backend(),
            "figures": plt.get_fignums(),
            "filters": [repr(f) for f in warnings.filters],
            "showwarning": repr(warnings.showwarning),
            "root": [repr(root.handlers), root.level],
            "loggers": {n: logging.getLogger(n).level for n in ("faiss.loader", "httpx", "httpcore", "toolkit")},
            "pool": pa.default_memory_pool().backend_name,
            "umask": umask(),
            "environ": dict(os.environ),
        }

    before = state()
    changed = {}

    def check(call, run):
        run()
        after = state()
        changed[call] = {k: difference(before[k], after[k]) for k in before if after[k] != before[k]}

    def difference(was, now):  # what changed: the keys of a dict, the entries of a list, or both values
        if isinstance(was, dict):
            return {k: [was.get(k), now.get(k)] for k in {*was, *now} if was.get(k) != now.get(k)}
        if isinstance(was, list) and all(isinstance(x, str) for x in [*was, *now]):
            return {"gone": [x for x in was if x not in now], "new": [x for x in now if x not in was]}
        return [was, now]

    import toolkit as ts
    from click.testing import CliRunner
    from samples import write_tiny_corpus
    from tiny_models import save_tiny_bert, save_tiny_bi_encoder

    from toolkit.cli import main

    check("import toolkit", lambda: None)
    corpus, topics = write_tiny_corpus(folder)
    words = sorted({w for line in corpus.read_text().splitlines() for w in json.loads(line)["contents"].split()})
    words += sorted({w for line in topics.read_text().splitlines() for w in line.split("\\t")[1].split()})
    encoder = save_tiny_bert(folder / "encoder", sorted(set(words)), seed=1)
    bi = save_tiny_bi_encoder(folder / "bi", sorted(set(words)), seed=2)
    qrels = folder / "qrels.txt"
    qrels.write_text("1 0 d1 1\\n1 0 d2 1\\n2 0 d3 1\\n2 0 d6 1\\n3 0 d5 1\\n")
    first = folder / "first.trec"
    first.write_text("".join(
        f"{q} Q0 d{j} {j} {10 - j} first\\n" for q in ("1", "2", "3") for j in range(1, 7)
    ))
    reranked = folder / "reranked.trec"
    reranked.write_text("".join(
        f"{q} Q0 d{j} {r} {10 - r} reranked\\n"
        for q in ("1", "2", "3") for r, j in enumerate((3, 1, 2, 4, 5, 6), start=1)
    ))

    dense = folder / "dense"
    check("ts.index(dense=True)", lambda: ts.index(
        str(corpus), dense, dense=True, encoder=str(encoder), device="cpu", threads=1
    ))
    check("ts.dense", lambda: ts.dense(dense, str(topics), hits=3, device="cpu", threads=1))
    check("ts.rerank", lambda: ts.rerank(
        str(first), model=str(bi), corpus=str(corpus), topics=str(topics), depth=4, device="cpu"
    ))
    made = {}
    check("ts.diagnose", lambda: made.update(diagnosis=ts.diagnose(
        qrels, {"first": first}, {"reranked": reranked}, depth=3, measure="P.3"
    )))
    check("Diagnosis.plot_decomposition", made["diagnosis"].plot_decomposition)
    check("Diagnosis.plot_depth_curve", made["diagnosis"].plot_depth_curve)
    result = {}

    def command():
        res = CliRunner().invoke(main, ["eval", str(qrels), str(first), "-m", "P.5"])
        result.update(code=res.exit_code, output=res.output)

    check("twostage eval (CliRunner)", command)
    assert plt.fignum_exists(mine.number)
    print(json.dumps({"changed": changed, "command": result}))
    """
)


def test_calls_leave_the_process_switches_as_they_were(tmp_path):
    for module in ("torch", "faiss", "matplotlib", "transformers"):
        required(module, "the [pyserini] and [rerank] extras are not installed")
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    env |= {
        "PYTHONPATH": os.pathsep.join([str(REPO), str(SUPPORT)]),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "TWOSTAGE_CACHE": str(tmp_path / "cache"),
    }
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path)], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["command"]["code"] == 0 and "P_5" in out["command"]["output"], out["command"]
    assert out["changed"] == {call: {} for call in out["changed"]}, out["changed"]
    assert list(out["changed"]) == [
        "import toolkit",
        "ts.index(dense=True)",
        "ts.dense",
        "ts.rerank",
        "ts.diagnose",
        "Diagnosis.plot_decomposition",
        "Diagnosis.plot_depth_curve",
        "twostage eval (CliRunner)",
    ]


def test_library_warnings_show_at_every_call_under_the_callers_filters():
    """A ``TwostageWarning`` is issued with a registry of its own: Python's "default" action (once per line)
    shows it at every call, the caller's "ignore" and "error" still decide, and no filter is installed."""
    import warnings

    import pytest

    from toolkit import notices
    from toolkit.errors import TwostageWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.resetwarnings()
        warnings.simplefilter("default")
        installed = list(warnings.filters)
        for _ in range(3):
            notices.warn("the same words from the same line")
        assert [str(w.message) for w in caught] == ["the same words from the same line"] * 3
        assert {w.filename for w in caught} == {__file__}  # the caller's line, not the toolkit's
        warnings.filterwarnings("ignore", category=TwostageWarning)
        notices.warn("the same words from the same line")
        assert len(caught) == 3
        warnings.filterwarnings("error", category=TwostageWarning)
        with pytest.raises(TwostageWarning, match="refused"):
            notices.warn("refused")
        assert warnings.filters[2:] == installed


def test_the_umask_is_read_without_being_set(monkeypatch):
    """``current_umask`` reads the process's umask at each call, on Linux without setting it (``os.umask`` is
    never called), so no thread can see it changed."""
    from toolkit.guard.preflight import current_umask

    if not Path("/proc/self/status").is_file():
        optional("no /proc/self/status on this system: the umask is read by setting it and setting it back")
    saved = os.umask(0o027)
    try:

        def refused(mask):
            raise AssertionError("os.umask called")

        monkeypatch.setattr(os, "umask", refused)
        assert current_umask() == 0o027
        monkeypatch.undo()
        os.umask(0o002)
        assert current_umask() == 0o002
    finally:
        os.umask(saved)
