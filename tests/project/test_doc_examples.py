"""Every example of README.md and docs/*.md (and of each command's ``--help`` Examples), checked against the CLI,
run, and, for the examples below, run next to the equivalent ``toolkit`` call with the outputs compared; and every
relative link of those pages resolves (files and ``#anchors``).

The ``twostage`` examples are read from the pages: 4-space-indented lines and ``$ twostage`` lines in fenced
blocks (in docs/*.md also fenced lines starting with ``twostage``), backslash continuations joined, ``#`` comments
dropped. Every one must parse with the command it names (its options and arguments exist), so an example that
drifts from the CLI fails here.

Every example block (a shell block of ``twostage`` commands, a ```` ```python ```` block) also runs as written
(``test_every_docs_example_runs``), in a temporary folder beside ``../shared`` (a link to the real data folder)
that holds the DL19 runs and qrels by their file names; shown output (the lines after a ``$ twostage`` line, or a
```` ```text ```` block after a Python block) must match. A block that is not run carries ``<!-- not run: REASON
-->`` on the line above it; an unmarked block that cannot run fails. Blocks whose every command is run below on
small inputs count as run.

``RUN`` below lists the examples that are also run, each by its exact text in the pages (an edited example
fails until its check is updated), on substituted small inputs:

* DL19 examples (``eval``, ``compare``, ``diagnose``, ``fuse``): the DL19 runs of ../shared/data
  (``RUN_A``/``RUN_B`` = BM25/SPLADE++, ``BM25 RM3 TASB`` = those runs, CACM runs given to ``fuse`` = the DL19
  BM25 and SPLADE++ runs); ``diagnose``'s reranked run is BM25's top 100 reordered by SPLADE++'s scores (made
  without a model) and ``--permutations 500`` is appended (the default 10,000 costs time, not coverage);
* CACM examples (``index``, ``bm25`` plain/RM3/QL, ``eval ... cacm``, ``index --dense``, ``dense``,
  ``rerank --run ... --index``): a six-document JSONL corpus with three topics and hand-made qrels stands for
  CACM (``--collection cacm`` / ``--topics cacm`` / qrels ``cacm``);
* ``rerank --candidates``: the two-query candidates file of tests/support/samples.py for DL19's.

Every ``reports/...`` and ``indexes/...`` path goes to a temporary folder.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shlex
from pathlib import Path

import click
import numpy as np
import pandas as pd
import pytest
from doc_blocks import Block, anchors, blocks, output_mismatch, steps
from needs import required
from samples import write_tiny_corpus

import toolkit as ts

README = Path(__file__).resolve().parents[2] / "README.md"
DOCS = README.parent / "docs"
PAGES = [README, *sorted(DOCS.glob("*.md"))]


def _join_continuations(lines: list[tuple[int, str]]) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    pending: tuple[int, str] | None = None
    for number, text in lines:
        if pending is not None:
            number, text = pending[0], pending[1] + " " + text.strip()
        if text.rstrip().endswith("\\"):
            pending = (number, text.rstrip()[:-1].rstrip())
            continue
        pending = None
        out.append((number, text.strip()))
    return out


def readme_examples(text: str) -> list[tuple[int, str]]:
    """(line number, command text) of every ``twostage`` example in the README."""
    found: list[tuple[int, str]] = []
    fenced, current = False, None
    raw = text.splitlines()
    for i, line in enumerate(raw, 1):
        if line.startswith("```"):
            fenced = not fenced
            continue
        if current is not None:  # inside a continued example
            current.append((i, line))
            if not line.rstrip().endswith("\\"):
                found += _join_continuations(current)
                current = None
            continue
        if fenced and line.startswith("$ twostage "):
            found.append((i, line[2:].strip()))
        elif not fenced and line.startswith("    twostage "):
            current = [(i, line)]
            if not line.rstrip().endswith("\\"):
                found += _join_continuations(current)
                current = None
    return found


def help_examples() -> list[tuple[str, str]]:
    """(command, example) of the Examples block of every command's docstring."""
    from toolkit.cli import main

    out = []
    for name, cmd in _commands(main):
        doc = cmd.help or ""
        examples = doc.split("Examples:", 1)[1] if "Examples:" in doc else doc.split("Example:", 1)[-1]
        if "Example" not in doc:
            continue
        lines = [(0, ln) for ln in examples.splitlines() if ln.strip()]
        joined = _join_continuations([(n, ln) for n, ln in lines])
        out += [(name, t) for _, t in joined if t.startswith("twostage ")]
    return out


def _commands(group: click.Group, prefix: str = "") -> list[tuple[str, click.Command]]:
    out = []
    for name, cmd in group.commands.items():
        if isinstance(cmd, click.Group):
            out += _commands(cmd, f"{prefix}{name} ")
        else:
            out.append((prefix + name, cmd))
    return out


def parse(example: str) -> click.Context:
    """The click context the example's argv gives (options and arguments checked; nothing is run)."""
    from toolkit.cli import main

    args = shlex.split(example, comments=True)
    assert args[0] == "twostage", example
    args = args[1:]
    cmd: click.Command = main
    parent = main.make_context("twostage", [], resilient_parsing=True)
    while isinstance(cmd, click.Group):
        name, args = args[0], args[1:]
        sub = cmd.get_command(parent, name)
        assert sub is not None, f"no command {name!r} in: {example}"
        cmd = sub
    try:
        return cmd.make_context(cmd.name or "", args, parent=parent)
    except click.BadParameter as exc:
        if "does not exist" not in exc.message:  # an input file absent here is not a drifted example
            raise
        return parent


EXAMPLES = readme_examples(README.read_text(encoding="utf-8"))


def test_the_readme_and_the_docs_have_their_examples():
    commands = {shlex.split(t, comments=True)[1] for _, t in [*EXAMPLES, *DOCS_EXAMPLES]}
    want = {"eval", "compare", "diagnose", "fuse", "rerank", "bm25", "index", "dense", "reproduce", "experiment"}
    assert want <= commands, sorted(want - commands)
    readme = {shlex.split(t, comments=True)[1] for _, t in EXAMPLES}
    assert {"eval", "compare", "rerank", "diagnose"} <= readme, readme  # the tour


@pytest.mark.parametrize("line, example", EXAMPLES, ids=[f"L{n}" for n, _ in EXAMPLES])
def test_every_readme_example_parses(line, example):
    parse(example)


@pytest.mark.parametrize("command, example", help_examples())
def test_every_help_example_parses(command, example):
    parse(example)


# ------------------------------------------------------------------ running the examples


@pytest.fixture(scope="module")
def small(tmp_path_factory, msmarco) -> dict[str, Path]:
    """The substituted inputs, by the README's names for them."""
    from samples import CANDIDATES

    folder = tmp_path_factory.mktemp("readme")
    runs = msmarco / "runs"
    corpus, topics = write_tiny_corpus(folder)
    qrels = folder / "qrels.tiny.txt"
    qrels.write_text("1 0 d1 1\n1 0 d2 1\n2 0 d3 1\n2 0 d6 1\n3 0 d5 1\n")
    candidates = folder / "candidates.json"
    candidates.write_text(json.dumps(CANDIDATES))
    return {
        "run.dl19.bm25.top100.txt": runs / "run.dl19.bm25.top100.txt",
        "qrels.dl19-passage.txt": msmarco / "qrels.dl19-passage.txt",
        "../shared/data/msmarco-passage/qrels.dl19-passage.txt": msmarco / "qrels.dl19-passage.txt",
        "RUN_A": runs / "run.dl19.bm25.top100.txt",
        "RUN_B": runs / "run.dl19.splade-pp-ed.top100.txt",
        "BM25": runs / "run.dl19.bm25.top100.txt",
        "RM3": runs / "run.dl19.bm25-rm3.top100.txt",
        "TASB": runs / "run.dl19.tasb.top100.txt",
        "bm25.txt": runs / "run.dl19.bm25.top100.txt",
        "splade.txt": runs / "run.dl19.splade-pp-ed.top100.txt",
        "rr.txt": runs / "run.dl19.tasb.top100.txt",
        "reports/runs/cacm.bm25.trec<fuse>": runs / "run.dl19.bm25.top100.txt",
        "reports/runs/cacm.minilm.trec<fuse>": runs / "run.dl19.splade-pp-ed.top100.txt",
        "reports/runs/dl19.bm25.minilm.trec": _splade_order(runs, folder),
        "../shared/data/msmarco-passage/candidates/dl19.bm25.top100.json": candidates,
        "cacm<collection>": corpus,
        "cacm<topics>": topics,
        "cacm<qrels>": qrels,
        "folder": folder,
    }


def _splade_order(runs: Path, folder: Path) -> Path:
    """BM25's top 100 reordered by SPLADE++'s scores: a reranked run made without a model."""
    bm = ts.Run.read(runs / "run.dl19.bm25.top100.txt").to_frame()
    sp = ts.Run.read(runs / "run.dl19.splade-pp-ed.top100.txt").frame.set_index(["query_id", "doc_id"])["score"]
    s = sp.reindex(pd.MultiIndex.from_frame(bm[["query_id", "doc_id"]])).to_numpy()
    bm["score"] = np.where(np.isnan(s), bm["score"].to_numpy() - 1e6, s)
    path = folder / "splade-order.txt"
    ts.Run.from_frame(bm, tag="splade-order").write(path)
    return path


def substitute(example: str, small: dict, work: Path) -> list[str]:
    """The example's argv with the small inputs in place of the README's and every output in ``work``."""
    args = shlex.split(example, comments=True)[1:]
    out = []
    for i, a in enumerate(args):
        prev = args[i - 1] if i else ""
        name, sep, path = a.partition("=")
        if prev == "--out":  # an output, even one another example reads as its input: never a shared file
            out.append(str(work / a))
        elif sep and "/" not in name and path in small:  # NAME=RUN
            out.append(f"{name}={small[path]}")
        elif a == "cacm" and prev in ("--collection", "--topics"):
            out.append(str(small[f"cacm<{prev[2:]}>"]))
        elif a == "cacm" and args[0] == "eval":
            out.append(str(small["cacm<qrels>"]))
        elif args[0] == "fuse" and f"{a}<fuse>" in small:
            out.append(str(small[f"{a}<fuse>"]))
        elif a in small:
            out.append(str(small[a]))
        elif a.startswith(("reports/", "indexes/")):
            out.append(str(work / a))
        else:
            out.append(a)
    return out


def _out(argv: list[str]) -> Path:
    return Path(argv[argv.index("--out") + 1])


def _dl19(argv: list[str]) -> dict:
    return {"complete": "-c" in argv, "relevance_level": int(argv[argv.index("-l") + 1]) if "-l" in argv else 1}


def _measures(argv: list[str]) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv) if a == "-m"]


def check_eval(res, argv, small, work):
    qrels, run = argv[-2], argv[-1]
    gain = argv[argv.index("--gain") + 1] if "--gain" in argv else "linear"
    ev = ts.evaluate(qrels, run, _measures(argv), gain=gain, **_dl19(argv))
    assert res.stdout == ev.to_trec_eval()


def _runs_of(argv: list[str]) -> dict[str, str]:
    from toolkit.cli.options import named_runs

    skip_next = {"--qrels", "-m", "-l", "--out", "--format", "--baseline"}
    runs, i = [], 0
    while i < len(argv[1:]):
        a = argv[1:][i]
        if a in skip_next:
            i += 2
            continue
        if not a.startswith("-"):
            runs.append(a)
        i += 1
    return named_runs(tuple(runs), bare_name=str)


def _compare(argv):
    baselines = [argv[i + 1] for i, a in enumerate(argv) if a == "--baseline"] or None
    qrels = argv[argv.index("--qrels") + 1]
    return ts.compare(qrels, _runs_of(argv), baseline=baselines, measures=_measures(argv), **_dl19(argv))


def check_compare(res, argv, small, work):
    cmp = _compare(argv)
    fmt = argv[argv.index("--format") + 1] if "--format" in argv else "text"
    want = {"json": cmp.to_json, "latex": cmp.to_latex, "markdown": cmp.to_markdown, "text": cmp.to_text}[fmt]()
    assert res.stdout == want
    if "--out" in argv:
        cmp.write(work / "api-compare")
        assert (work / "api-compare" / "compare.json").read_text() == (_out(argv) / "compare.json").read_text()


def check_diagnose(res, argv, small, work):
    first = dict(a.split("=", 1) for a in [argv[argv.index("--first-stage") + 1]])
    reranked = dict(a.split("=", 1) for a in [argv[argv.index("--reranked") + 1]])
    out = _out(argv)
    name = argv[argv.index("--name") + 1] if "--name" in argv else None  # else both default to the runs' names
    d = ts.diagnose("dl19-passage", first, reranked, permutations=500, name=name, depth_as="--depth")
    d.write(work / "api-diagnose")
    for name in ("per_query.csv", "pairs.csv", "report.md", "summary.json"):
        assert (work / "api-diagnose" / name).read_text() == (out / name).read_text(), name
    assert res.stdout.strip() == str(out / "index.html")


def check_fuse(res, argv, small, work):
    runs = [a for a in argv[1:] if not a.startswith("-") and a not in ("rrf", str(_out(argv)))]
    ts.fuse(runs, method="rrf").write(work / "api-fused.trec")
    assert (work / "api-fused.trec").read_bytes() == _out(argv).read_bytes()


def _same_sidecar(api: Path, cli: Path) -> None:
    volatile = ("command", "argv", "run", "seconds", "search_seconds", "created")
    a, c = (json.loads(Path(f"{p}.meta.json").read_text()) for p in (api, cli))
    assert {k: v for k, v in a.items() if k not in volatile} == {k: v for k, v in c.items() if k not in volatile}


def check_index(res, argv, small, work):
    out = _out(argv)
    dense = "--dense" in argv
    options = {"dense": True, "encoder": argv[argv.index("--encoder") + 1], "device": "auto"} if dense else {}
    assert ts.index(argv[argv.index("--collection") + 1], out, **options) == out
    assert (out / "index.meta.json").exists() and res.stdout.strip() == str(out)


def check_bm25(res, argv, small, work):
    flags = {"rm3": "--rm3" in argv, "qld": "--qld" in argv}
    if "--mu" in argv:
        flags["mu"] = float(argv[argv.index("--mu") + 1])
    hits = int(argv[argv.index("--hits") + 1]) if "--hits" in argv else 1000
    run = ts.bm25(argv[argv.index("--index") + 1], argv[argv.index("--topics") + 1], hits=hits, **flags)
    run.write(work / "api.trec", depth=hits)
    assert (work / "api.trec").read_bytes() == _out(argv).read_bytes()
    _same_sidecar(work / "api.trec", _out(argv))


def check_dense(res, argv, small, work):
    run = ts.dense(argv[argv.index("--index") + 1], argv[argv.index("--topics") + 1], device="auto")
    run.write(work / "api.trec", depth=1000)
    assert (work / "api.trec").read_bytes() == _out(argv).read_bytes()
    _same_sidecar(work / "api.trec", _out(argv))


def check_rerank(res, argv, small, work):
    keys = {"--candidates": "candidates", "--run": "run", "--topics": "topics", "--index": "index"}
    given = {keys[a]: argv[i + 1] for i, a in enumerate(argv) if a in keys}
    out = _out(argv)
    run = ts.rerank(model=argv[argv.index("--model") + 1], batch_size=64, device="auto", tag=out.stem, **given)
    run.write(work / "api.trec")
    assert (work / "api.trec").read_bytes() == out.read_bytes()


#: The examples that are run, by their README text, with the check of their ``toolkit`` equivalent.
RUN = {
    "twostage eval -c -m 'AP(rel=2)@1000' -m 'P(rel=2,judged_only=True)@10' -m nDCG@10 -m RR@10 dl19-passage "
    "run.dl19.bm25.top100.txt": check_eval,
    "twostage eval -c -m ndcg_cut.10 --gain exp qrels.dl19-passage.txt run.dl19.bm25.top100.txt": check_eval,
    "twostage compare --qrels ../shared/data/msmarco-passage/qrels.dl19-passage.txt RUN_A RUN_B -m ndcg_cut.10 "
    "--format json": check_compare,
    "twostage compare --qrels dl19-passage -c BM25 RM3 TASB -m ndcg_cut.10 -m recall.100 -l 2 "
    "--out reports/cmp": check_compare,
    "twostage diagnose --qrels dl19-passage --first-stage bm25=run.dl19.bm25.top100.txt "
    "--reranked minilm=reports/runs/dl19.bm25.minilm.trec --out reports/dl19-minilm": check_diagnose,
    "twostage fuse --method rrf reports/runs/cacm.bm25.trec reports/runs/cacm.minilm.trec "
    "--out reports/runs/cacm.rrf.trec": check_fuse,
}

#: The CACM walk-through, in README order (each step reads what the one before wrote), on the tiny corpus.
CACM_STEPS = {
    "twostage index --collection cacm --out indexes/cacm        # Lucene: positions, docvectors, raw": check_index,
    "twostage bm25 --index indexes/cacm --topics cacm --hits 1000 --out reports/runs/cacm.bm25.trec": check_bm25,
    "twostage bm25 --index indexes/cacm --topics cacm --hits 1000 --rm3 --out reports/runs/cacm.bm25-rm3.trec": (
        check_bm25
    ),
    "twostage bm25 --index indexes/cacm --topics cacm --qld --mu 1000 --out reports/runs/cacm.qld.trec": check_bm25,
    "twostage eval -m map -m P.30 cacm reports/runs/cacm.bm25.trec                # qrels by name": check_eval,
    "twostage index --collection cacm --dense --encoder all-MiniLM-L6-v2 --out indexes/cacm.minilm": check_index,
    "twostage dense --index indexes/cacm.minilm --topics cacm --out reports/runs/cacm.minilm.trec": check_dense,
}

#: The help examples that are run too: compare's NAME=RUN with --format latex, and the same as markdown.
COMPARE_NAMED = (
    "twostage compare --qrels dl19-passage -c -l 2 bm25=bm25.txt splade=splade.txt rr=rr.txt "
    "--baseline bm25 --baseline splade -m nDCG@10 -m R@100 --format latex"
)

RERANK = (
    "twostage rerank --candidates ../shared/data/msmarco-passage/candidates/dl19.bm25.top100.json "
    "--model all-MiniLM-L6-v2 --out reports/runs/dl19.bm25.minilm.trec"
)


def _readme_texts() -> set[str]:
    return {t for _, t in [*EXAMPLES, *DOCS_EXAMPLES]}


def _raw_readme_lines() -> set[str]:
    return {ln.strip() for page in PAGES for ln in page.read_text(encoding="utf-8").splitlines()}


def test_every_run_example_is_still_in_the_pages():
    texts = _readme_texts()
    missing = [e for e in [*RUN, RERANK] if e not in texts]
    lines = _raw_readme_lines()
    missing += [e for e in CACM_STEPS if e not in lines]
    assert not missing, f"README/docs examples changed; update tests/project/test_doc_examples.py: {missing}"
    assert COMPARE_NAMED in {t for _, t in help_examples()}


def _run(cli, argv: list[str]):
    res = cli(*argv)
    assert res.exit_code == 0, res.output
    return res


@pytest.mark.parametrize("example", list(RUN), ids=[e.split()[1] + f"-{i}" for i, e in enumerate(RUN)])
def test_readme_example_equals_its_api_call(cli, small, tmp_path, example):
    argv = substitute(example, small, tmp_path)
    if argv[0] == "diagnose":
        argv += ["--permutations", "500"]
    RUN[example](_run(cli, argv), argv, small, tmp_path)


@pytest.mark.parametrize("fmt", ["latex", "markdown"])
def test_compare_named_runs_paper_table_equals_the_api(cli, small, tmp_path, fmt):
    argv = substitute(COMPARE_NAMED.replace("--format latex", f"--format {fmt}"), small, tmp_path)
    check_compare(_run(cli, argv), argv, small, tmp_path)


def test_readme_rerank_candidates_equals_the_api(cli, small, tmp_path, minilm):
    argv = substitute(RERANK, small, tmp_path) + ["--no-progress"]
    check_rerank(_run(cli, argv), argv, small, tmp_path)


def test_readme_cacm_walkthrough_equals_the_api(cli, small, tmp_path, minilm, monkeypatch):
    """index, bm25 (plain, RM3, QL), eval, index --dense, dense, then rerank --run --index, in README order."""
    required("pyserini", "the [pyserini] extra is not installed")
    monkeypatch.chdir(tmp_path)
    for example, check in CACM_STEPS.items():
        argv = substitute(re.sub(r"\s+#.*$", "", example), small, tmp_path)
        if argv[0] in ("index", "dense"):
            argv.append("--no-progress")
        check(_run(cli, argv), argv, small, tmp_path)
    rerank = sorted({e for e in _readme_texts() if e.startswith("twostage rerank --run ") and "indexes/cacm" in e})
    assert len(rerank) == 1
    run = tmp_path / "reports/runs/cacm.bm25.top100.trec"
    run.parent.mkdir(parents=True, exist_ok=True)
    ts.bm25(tmp_path / "indexes/cacm", str(small["cacm<topics>"]), hits=100).write(run)
    argv = substitute(rerank[0], small, tmp_path) + ["--no-progress"]
    check_rerank(_run(cli, argv), argv, small, tmp_path)


# ------------------------------------------------------------------ the pages under docs/


def docs_examples() -> list[tuple[str, str]]:
    """(page:line, command) of every ``twostage`` example in docs/*.md: as in the README, plus lines of fenced
    blocks that start with ``twostage `` (continuations joined; ```` ```text ```` blocks show output or a synopsis)."""
    out: list[tuple[str, str]] = []
    for page in sorted(DOCS.glob("*.md")):
        text = page.read_text(encoding="utf-8")
        found = readme_examples(text)
        fence: str | None = None  # the open fence's info string
        current = None
        for i, line in enumerate(text.splitlines(), 1):
            if line.lstrip().startswith("```"):
                fence = line.lstrip()[3:].strip() if fence is None else None
                continue
            if current is not None:
                current.append((i, line))
                if not line.rstrip().endswith("\\"):
                    found += _join_continuations(current)
                    current = None
                continue
            if fence is not None and fence != "text" and line.lstrip().startswith("twostage "):
                current = [(i, line.lstrip())]
                if not line.rstrip().endswith("\\"):
                    found += _join_continuations(current)
                    current = None
        out += [(f"{page.name}:{n}", t) for n, t in sorted(set(found))]
    return out


DOCS_EXAMPLES = docs_examples()


def test_the_docs_pages_have_examples():
    pages = {where.split(":")[0] for where, _ in DOCS_EXAMPLES}
    assert {"statistics.md", "judging.md", "security.md", "diagnosis-depth.md"} <= pages, sorted(pages)


@pytest.mark.parametrize("where, example", DOCS_EXAMPLES, ids=[w for w, _ in DOCS_EXAMPLES])
def test_every_docs_example_parses(where, example):
    parse(example)


def test_every_relative_link_in_the_readme_and_docs_resolves():
    """``[text](path)`` and ``[text](path#anchor)`` links (web addresses aside) name files that exist, and an
    anchor names a heading of that page (GitHub's ids), ``#anchor`` one of the page itself."""
    missing = []
    for page in PAGES:
        text = re.sub(r"^\s*```.*?^\s*```", "", page.read_text(encoding="utf-8"), flags=re.M | re.S)
        text = re.sub(r"``.*?``|`[^`\n]*`", "", text)  # code shows link syntax, it is not a link
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            file, _, anchor = target.partition("#")
            path = (page.parent / file).resolve() if file else page
            if not path.exists():
                missing.append(f"{page.name}: {target}")
            elif anchor and path.suffix == ".md" and anchor not in anchors(path):
                missing.append(f"{page.name}: {target} (no heading #{anchor} in {path.name})")
    assert not missing, missing


def test_the_api_page_names_real_keywords():
    """docs/api.md's table of ``twostage eval`` flags and ``ts.evaluate`` keywords names only real parameters, and
    the keywords it lists for compare and diagnose exist."""
    import inspect

    page = (DOCS / "api.md").read_text(encoding="utf-8")
    table = page.split("| `twostage eval` | `ts.evaluate(...)` |", 1)[1].split("\n\n", 1)[0]
    named = {k for row in table.splitlines()[2:] for k in re.findall(r"`(\w+)`", row.split("|")[2])}
    params = set(inspect.signature(ts.evaluate).parameters)
    assert len(named) >= 15 and named <= params, sorted(named - params)
    for verb in ("compare", "diagnose"):
        section = page.split(f"## {verb.title()}\n", 1)[1].split("\n## ", 1)[0].split("```")[-1]
        listed = set(re.findall(r"`([a-z_]+)`", section))  # the prose after the example: its keywords
        params = set(inspect.signature(getattr(ts, verb)).parameters)
        assert len(listed) >= 8 and listed <= params, (verb, sorted(listed - params))


def test_the_anchor_rules_are_githubs(tmp_path):
    page = tmp_path / "p.md"
    page.write_text(
        "# One `--device` default: `auto`\n## Python: `import toolkit as ts`\n```\n# not a heading\n```\n"
        "## The main job: `scripts/demo.sh`\n## Notes\n## Notes\n"
    )
    assert anchors(page) == {
        "one---device-default-auto",
        "python-import-toolkit-as-ts",
        "the-main-job-scriptsdemosh",
        "notes",
        "notes-1",
    }


# ------------------------------------------------------------------ every example runs

EXAMPLE_BLOCKS: list[Block] = [b for page in PAGES for b in blocks(page) if b.is_example]

#: Commands run on substituted small inputs above (next to their ``ts.`` call): a block of these alone counts as run.
SUBSTITUTED = {*RUN, *(re.sub(r"\s+#.*$", "", e) for e in CACM_STEPS), RERANK}


def _covered(block: Block) -> bool:
    """Every command of the block is run on small inputs by the tests above, and it shows no output to check."""
    commands = [s for s in steps(block) if s.kind != "set"]
    substituted = SUBSTITUTED | {e for e in _readme_texts() if e.startswith("twostage rerank --run ")}
    return all(s.kind == "run" and re.sub(r"\s+#.*$", "", s.text) in substituted and not s.output for s in commands)


def _work(tmp_path: Path, shared_data: Path, msmarco: Path) -> Path:
    """A folder beside ``../shared/data`` (a link to the real data) holding the DL19 runs and qrels by name."""
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "data").symlink_to(shared_data, target_is_directory=True)
    work = tmp_path / "work"
    work.mkdir()
    for f in [*sorted((msmarco / "runs").glob("run.dl19.*")), msmarco / "qrels.dl19-passage.txt"]:
        (work / f.name).symlink_to(f)
    return work


def _expand(text: str, env: dict[str, str]) -> str:
    return re.sub(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", lambda m: env.get(m.group(1), m.group(0)), text)


def run_shell(block: Block, cli, env: dict[str, str]) -> list[str]:
    """Run the block's steps in the current folder; the problems found (empty when it ran as shown)."""
    import glob

    problems = []
    for step in steps(block):
        if step.kind == "set":
            name, value = step.text.removeprefix("export ").strip().split("=", 1)
            env[name] = _expand(value, env)
            continue
        argv = []
        for a in shlex.split(_expand(step.text, env), comments=True)[1:]:
            argv += sorted(glob.glob(a)) or [a] if any(c in a for c in "*?[") else [a]
        res = cli(*argv)
        error_shown = any(ln.startswith("Error:") for ln in step.output)
        if (res.exit_code != 0) != error_shown:
            problems.append(f"`{step.text}` exited {res.exit_code}:\n{res.output[-3000:]}")
            continue
        why = output_mismatch(step.output, res.output if error_shown else res.stdout)
        if why:
            problems.append(f"`{step.text}`: {why}")
    return problems


def _page_shell_blocks(block: Block) -> list[Block]:
    """The shell blocks above ``block`` on its page."""
    return [b for b in blocks(block.page) if b.kind == "shell" and b.line < block.line]


def run_python(block: Block) -> list[str]:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        exec(compile("\n".join(block.lines), block.where, "exec"), {"__name__": "__docs__"})
    why = output_mismatch(block.output or [], buf.getvalue())
    return [f"printed output: {why}"] if why else []


#: the blocks run below: not those marked ``<!-- not run: REASON -->``, nor the shell blocks whose commands run
#: on small inputs in test_readme_example_equals_its_api_call / the walk-through (left out here, not skipped)
RUN_BLOCKS = [b for b in EXAMPLE_BLOCKS if not b.not_run and not (b.kind == "shell" and _covered(b))]


def test_the_docs_have_runnable_examples():
    kinds = {(b.page.name, b.kind) for b in RUN_BLOCKS}
    assert {("README.md", "shell"), ("README.md", "python"), ("api.md", "python"), ("evaluate.md", "shell")} <= kinds


@pytest.mark.parametrize("block", RUN_BLOCKS, ids=[b.where for b in RUN_BLOCKS])
def test_every_docs_example_runs(block, shared_data, msmarco, cli, tmp_path, monkeypatch):
    """Each example runs as written (or is marked ``<!-- not run: REASON -->``), and shows what it printed."""
    other = [s.text for s in steps(block) if s.kind == "other"] if block.kind == "shell" else []
    assert not other, f"{block.where}: {other} cannot run here; mark the block <!-- not run: REASON -->"
    work = _work(tmp_path, shared_data, msmarco)
    monkeypatch.chdir(work)
    data = str(tmp_path / "shared" / "data")
    monkeypatch.setenv("TWOSTAGE_DATA", data)
    if block.kind == "python":
        problems = run_python(block)
    else:
        env = dict(os.environ, TWOSTAGE_DATA=data)
        for earlier in _page_shell_blocks(block):  # a page reads as one shell session: its variables carry on
            for step in steps(earlier):
                if step.kind == "set":
                    name, value = step.text.removeprefix("export ").strip().split("=", 1)
                    env[name] = _expand(value, env)
        problems = run_shell(block, cli, env)
    assert not problems, f"{block.where} (fix it, or mark it <!-- not run: REASON -->): " + "\n".join(problems)


def test_the_block_reader_finds_markers_outputs_and_steps(tmp_path):
    page = tmp_path / "p.md"
    page.write_text(
        "Text.\n\n<!-- not run: needs a server -->\n    twostage judge --model m\n\n"
        "```python\nprint(1)\n```\n\n```text\n1\n```\n\n"
        "```\n$ twostage eval -m P.5 q r\nP_5 all 0.2000     # a note\n...\n```\n\n"
        "    R=runs\n    twostage eval q $R/a \\\n        -m P.5\n    ray start --head\n"
    )
    found = blocks(page)
    assert [(b.kind, b.line, b.not_run, b.is_example) for b in found] == [
        ("shell", 4, "needs a server", True),
        ("python", 6, None, True),
        ("text", 10, None, False),
        ("shell", 14, None, True),
        ("shell", 20, None, True),
    ]
    assert found[1].output == ["1"]
    assert [(s.kind, s.text, s.output) for s in steps(found[3])] == [
        ("run", "twostage eval -m P.5 q r", ["P_5 all 0.2000     # a note", "..."])
    ]
    assert [(s.kind, s.text) for s in steps(found[4])] == [
        ("set", "R=runs"),
        ("run", "twostage eval q $R/a -m P.5"),
        ("other", "ray start --head"),
    ]
    assert output_mismatch(["P_5 all 0.2000     # a note", "..."], "P_5\tall\t0.2000\nmore\n") is None
    assert output_mismatch(["P_5 all 0.2000"], "P_5\tall\t0.2000\nmore\n") is not None  # unshown extra line
    assert output_mismatch(["# run: .../a.txt sha256:ab"], "# run: /x/y/a.txt sha256:ab\n") is None
    assert output_mismatch(["P_5 all 0.3000"], "P_5 all 0.2000\n") is not None
