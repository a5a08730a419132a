#!/usr/bin/env python3
"""Differential fuzzer: random valid qrels and runs through ``twostage eval`` and a trec_eval binary.

    python scripts/fuzz_eval.py --trec-eval PATH --generation 9|10 [--cases N] [--seed S] [--max-shown K]

Each case is one invocation holding many queries: graded labels, negative labels (pooled, unjudged),
ties and near-ties of scores (equal as 32-bit floats, not as doubles), queries missing from the run and
run queries without judgments, shallow and deep runs, numeric and text ids, comment lines (10), and a
random option set: ``-q -n -c -l -M -J -N -Z``, ``-R qrels|qrels_prefs|qrels_jg|prefs``, measures with
random parameters or their defaults, nicknames. twostage runs in-process (``toolkit.cli``, so this
checkout's code) with ``--no-provenance --trec-eval G``; the binary in a subprocess. Outputs must be
equal byte for byte, or both commands must refuse the input (non-zero exit).

A case that falls under a deliberate difference (``toolkit.evaluation.differences``) is skipped and
counted under that difference's name; any other difference is a mismatch, shrunk to a minimal
reproducer (drop queries, then lines, then measures, while it still differs) and printed as the
qrels, the run and the command. Exit status 1 when a mismatch was found.
"""

from __future__ import annotations

import argparse
import collections
import random
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from toolkit.evaluation.differences import BY_NAME  # noqa: E402
from toolkit.measures.registry import REGISTRY, Params  # noqa: E402

PLACEHOLDER_SCORES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, -1.0)
LABELS = (-1, 0, 0, 0, 0, 1, 1, 1, 2, 2, 3, 4)
GAINS = (-1.0, 0.0, 0.5, 1.0, 2.0, 3.5, 9.0)
NDCG_FAMILY = ("dcg", "ideal_dcg", "ndcg")


@dataclass
class Case:
    """One invocation: the files' lines and the arguments (options and measures, files last)."""

    qrels: list[str]
    run: list[str]
    options: list[str]
    measures: list[str]
    rel_format: str = "qrels"
    zscores: list[str] | None = None
    meta: dict = field(default_factory=dict)

    def args(self, folder: Path) -> list[str]:
        """The command line for both programs, writing the files into ``folder``."""
        (folder / "qrels").write_text("".join(line + "\n" for line in self.qrels))
        (folder / "run").write_text("".join(line + "\n" for line in self.run))
        out = list(self.options)
        if self.rel_format != "qrels":
            out += ["-R", self.rel_format]
        if self.zscores is not None:
            (folder / "zscores").write_text("".join(line + "\n" for line in self.zscores))
            out += ["-Z", str(folder / "zscores")]
        for m in self.measures:
            out += ["-m", m]
        return [*out, str(folder / "qrels"), str(folder / "run")]

    def command(self) -> str:
        return " ".join(["trec_eval", *self.args_text(), "qrels", "run"])

    def args_text(self) -> list[str]:
        out = list(self.options) + (["-R", self.rel_format] if self.rel_format != "qrels" else [])
        out += ["-Z", "zscores"] if self.zscores is not None else []
        for m in self.measures:
            out += ["-m", m]
        return out


# ------------------------------------------------------------------ generation
def _qid(rng: random.Random, i: int) -> str:
    # numeric ids of different lengths and text ids: trec_eval orders queries by strcmp
    return rng.choice((str(i + 1), str(100 + 7 * i), f"q{i}", f"Q{i:02d}"))


def _docs(rng: random.Random, n: int) -> list[str]:
    pool = [f"d{i}" for i in range(40)] + [f"D{i:02d}" for i in range(10)] + ["a", "zz", "doc-3", "X_1"]
    return rng.sample(pool, min(n, len(pool)))


def _score(rng: random.Random, style: str) -> str:
    if style == "ties":
        return repr(rng.choice(PLACEHOLDER_SCORES))
    if style == "near":  # distinct doubles that are one 32-bit float
        return repr(1.0 + rng.choice((0.0, 1e-9, 2e-9, 3e-8)))
    return f"{rng.uniform(-5, 20):.{rng.choice((1, 3, 6))}f}"


def _query(rng: random.Random, qid: str, all_negative: bool) -> tuple[list[tuple], list[str]]:
    judged = _docs(rng, rng.randint(1, 25))
    labels = [rng.choice(LABELS) for _ in judged]
    if all_negative:
        labels = [-1] * len(labels)
    elif all(lab < 0 for lab in labels):
        labels[0] = 0
    depth = rng.choice((rng.randint(1, 5), rng.randint(5, 30), rng.randint(30, 120)))
    retrieved = _docs(rng, rng.randint(1, depth)) + [f"u{j}" for j in range(max(0, depth - 54))]
    style = rng.choice(("ties", "ties", "near", "spread"))
    run = [
        f"{qid} Q0 {d} {rng.randint(0, 999)} {_score(rng, style)} {rng.choice(('tag', 'tag', 'T2'))}" for d in retrieved
    ]
    return [(qid, d, lab) for d, lab in zip(judged, labels)], run


def _params(rng: random.Random, fam: str, depth: int) -> str | None:
    """A random parameter text for a family, or None for its defaults."""
    spec = REGISTRY[fam]
    if spec.params is Params.NONE or rng.random() < 0.45:
        return None
    if spec.params is Params.LONG_CUTOFFS:
        return ",".join(str(c) for c in sorted(rng.sample(range(1, depth + 6), rng.randint(1, 3))))
    if spec.params is Params.DOUBLE_CUTOFFS:
        top = 2.5 if fam == "Rprec_mult" else 1.0
        cuts = sorted({round(rng.uniform(0, top), rng.choice((1, 2, 3))) for _ in range(rng.randint(1, 4))})
        cuts = [c for c in cuts if c > 0 or fam != "Rprec_mult"] or [0.5]
        return ",".join(repr(c) for c in cuts)
    if spec.params is Params.PAIRS:
        return _pairs(rng, fam)
    return _double_params(rng, fam)


def _pairs(rng: random.Random, fam: str) -> str:
    parts = []
    if fam.startswith("rbp"):
        parts.append(f"p={rng.choice((0.5, 0.8, 0.9, 0.95))}")
        if fam == "rbp_resid":
            return parts[0]
    levels = rng.sample(range(5), rng.randint(0 if parts else 1, 3))
    parts += [f"{lvl}={rng.choice(GAINS):g}" for lvl in levels]
    return ",".join(parts)


def _double_params(rng: random.Random, fam: str) -> str:
    if fam == "utility":
        return ",".join(f"{rng.choice((-2, -1, -0.5, 0, 0.5, 1, 2)):g}" for _ in range(4))
    if fam == "set_F":
        return f"{rng.choice((0.25, 0.5, 1.0, 2.0)):g}"
    if fam == "relstring":
        return str(rng.randint(1, 30))
    return ",".join(f"{rng.uniform(0, 1):.2f}" for _ in range(rng.randint(1, 4)))  # 11pt_avg points


def _measures(rng: random.Random, generation: int, rel_format: str, depth: int) -> list[str]:
    reads = "prefs" if rel_format in ("prefs", "qrels_prefs") else rel_format
    fams = [f for f, s in REGISTRY.items() if s.rel_format in (reads, "any") and 0 < s.since <= generation]
    if rel_format == "qrels" and rng.random() < 0.15:
        return [rng.choice(("official", "all_trec", "set"))] + (["relstring.15"] if rng.random() < 0.3 else [])
    if rel_format != "qrels" and rng.random() < 0.5:
        return [{"prefs": "all_prefs", "qrels_prefs": "all_prefs", "qrels_jg": "qrels_jg"}[rel_format]]
    chosen = rng.sample(fams, min(len(fams), rng.randint(1, 10)))
    out = []
    for fam in chosen:
        p = _params(rng, fam, depth)
        out.append(fam if p is None else f"{fam}.{p}")
    if rng.random() < 0.04:  # a family named twice (a known difference)
        fam = rng.choice(chosen)
        out.append(f"{fam}.{_params(rng, fam, depth) or ''}".rstrip("."))
    return out


def _options(rng: random.Random, rel_format: str, depth: int) -> list[str]:
    opts = []
    if rng.random() < 0.6:
        opts.append("-q")
    if rng.random() < 0.08:
        opts.append("-n")
    if rng.random() < 0.4:
        opts.append("-c")
    if rng.random() < 0.3:
        opts.append(f"-l{rng.choice((0, 2, 3, 3, 100000) if rng.random() < 0.1 else (0, 2, 3))}")
    if rng.random() < 0.2:
        opts += ["-M", str(rng.randint(1, max(1, depth)))]
    if rng.random() < 0.2 and rel_format != "prefs":
        opts.append("-J")
    if rng.random() < 0.15:
        opts += ["-N", str(rng.randint(0, 2000))]
    return opts


def _prefs_lines(rng: random.Random, rows: list[tuple]) -> list[str]:
    """Preferences ``qid jg jsg docno rel_level``: each document once per judgment group (no contradictions)."""
    out = []
    for qid, doc, lab in rows:
        jg = rng.choice(("1", "2"))
        jsg = rng.choice(("A", "B", "0"))
        out.append(f"{qid} {jg} {jsg} {doc} {max(lab, 0) if rng.random() < 0.9 else rng.choice((0.5, 1.5))}")
    return sorted(set(out), key=out.index)


def generate(rng: random.Random, generation: int) -> Case:
    nq = rng.choice((1, 2, 4, 8, 16, 30))
    qids = list(dict.fromkeys(_qid(rng, i) for i in range(nq)))
    rel_format = rng.choices(("qrels", "qrels_prefs", "qrels_jg", "prefs"), (0.7, 0.1, 0.1, 0.1))[0]
    qrels_rows, run, depth = [], [], 1
    p_missing = rng.choice((0.0, 0.0, 0.25))
    for i, qid in enumerate(qids):
        rows, lines = _query(rng, qid, all_negative=rng.random() < 0.004)
        qrels_rows += rows
        if i == 0 or rng.random() > p_missing:  # at least one common query
            run += lines
            depth = max(depth, len(lines))
    for j in range(rng.choice((0, 0, 1, 2))):  # run queries without judgments
        run += _query(rng, f"extra{j}", False)[1]
    if not any(line.split()[0] == qids[0] for line in run):  # at least one common query
        run.append(f"{qids[0]} Q0 d0 1 1.0 tag")
    rng.shuffle(run)  # trec_eval reads lines in any order
    qrels = _qrels_lines(rng, qrels_rows, rel_format)
    case = Case(qrels, run, _options(rng, rel_format, depth), _measures(rng, generation, rel_format, depth), rel_format)
    if generation == 10 and p_missing and "-c" not in case.options and rng.random() < 0.8:
        case.options.append("-c")  # without it trec_eval 10 stops (a known difference): keep most such cases
    if rel_format == "qrels" and rng.random() < 0.1:
        case.zscores = _zscores(rng, case, qids, generation)
    if rng.random() < (0.05 if generation == 10 else 0.01):
        case.qrels.insert(rng.randint(0, len(case.qrels) - 1), "# a comment line")
        case.run.insert(rng.randint(0, len(case.run)), "# another")
        if rng.random() < 0.1:
            case.qrels.append("# a comment as the last line")
    return case


def _qrels_lines(rng: random.Random, rows: list[tuple], rel_format: str) -> list[str]:
    if rel_format == "prefs":
        return _prefs_lines(rng, rows)
    if rel_format == "qrels_jg":
        return [f"{q} {rng.choice(('1', '2', '3'))} {d} {lab}" for q, d, lab in rows]
    return [f"{q} {rng.choice(('0', 'Q0', '1'))} {d} {lab}" for q, d, lab in rows]


def _zscores(rng: random.Random, case: Case, qids: list[str], generation: int) -> list[str]:
    """Means and standard deviations for every (query, printed measure), a few dropped now and then."""
    from toolkit.measures.names import parse_measures

    # one line per printed name: two parameters can print one name, and a repeated line is an input error
    names = list(
        dict.fromkeys(m.name for m in parse_measures(case.measures, generation) if m.spec.value_type != "string")
    )
    lines = [f"{q} {name} {rng.uniform(0, 2):.4f} {rng.choice((0.0, 0.5, 1.0, 2.5))}" for q in qids for name in names]
    if rng.random() < 0.3 and lines:
        lines = rng.sample(lines, max(1, len(lines) - rng.randint(1, 3)))
    return lines


# ------------------------------------------------------------------ known differences
def known_difference(case: Case, generation: int) -> str | None:
    """The name of the deliberate difference this case falls under (``differences.BY_NAME``), or None."""
    for name, applies in KNOWN.items():
        if generation in BY_NAME[name].generations and applies(case, generation):
            return name
    return None


def _qrels_queries(case: Case) -> dict[str, list[int]]:
    out: dict[str, list[int]] = collections.defaultdict(list)
    for line in case.qrels:
        if line.startswith("#"):
            continue
        parts = line.split()
        if case.rel_format != "prefs":
            out[parts[0]].append(int(parts[3]))
    return out


def _run_queries(case: Case) -> set[str]:
    return {line.split()[0] for line in case.run if not line.startswith("#")}


def _families(case: Case) -> list[str]:
    return [m.partition(".")[0] for m in case.measures]


def _missing_without_c(case: Case, generation: int) -> bool:
    judged = set(_qrels_queries(case)) if case.rel_format != "prefs" else {line.split()[0] for line in case.qrels}
    return "-c" not in case.options and bool(judged - _run_queries(case))


def _zscore_gap(case: Case, generation: int) -> bool:
    if case.zscores is None:
        return False
    from toolkit.measures.names import parse_measures

    # trec_eval looks every per-query value up, relstring's too, so a string measure is a gap as well
    names = [m.name for m in parse_measures(case.measures, generation) if m.family != "runid"]
    have = {tuple(line.split()[:2]) for line in case.zscores}
    return any((q, n) not in have for q in _qrels_queries(case) for n in names)


KNOWN = {
    "comment-lines-under-9": lambda c, g: any(x.startswith("#") for x in c.qrels + c.run),
    "comment-last-qrels-line": lambda c, g: bool(c.qrels) and c.qrels[-1].startswith("#"),
    "repeated-family": lambda c, g: len(_families(c)) != len(set(_families(c))),
    "huge-relevance-level": lambda c, g: "-l100000" in c.options,
    "missing-query-without-c": _missing_without_c,
    "zscore-exact-lookup": _zscore_gap,
    "qrels-prefs-negative-labels": lambda c, g: (
        c.rel_format == "qrels_prefs"
        and any(v < 0 for labs in _qrels_queries(c).values() for v in labs)
        and (g == 10 or any(m.startswith(("prefs_avgjg_Rnonrel", "all_prefs")) for m in c.measures))
    ),
    "negative-labels-only": lambda c, g: any(all(v < 0 for v in labs) for labs in _qrels_queries(c).values()),
    "ndcg-family-parameters-twice": lambda c, g: (
        len([m for m in c.measures if m.partition(".")[0] in NDCG_FAMILY]) >= 2
        and any("." in m for m in c.measures if m.partition(".")[0] in NDCG_FAMILY)
    ),
}

#: Known differences confined to some output lines: the case is compared without those lines, and counted
#: under the name when only they differed.
KNOWN_LINES = {
    "rbp-uninitialised-range": lambda name: (
        name.lstrip("Z").startswith("rbp") and not name.lstrip("Z").startswith("rbp_resid")
    ),
}


def without(text: str, drop) -> str:
    return "".join(line for line in text.splitlines(keepends=True) if not drop(line.split("\t")[0].strip()))


def known_lines(ours: tuple, theirs: tuple) -> str | None:
    """The KNOWN_LINES name whose lines are the only difference between two successful outputs, or None."""
    if ours[0] != 0 or theirs[0] != 0:
        return None
    for name, drop in KNOWN_LINES.items():
        if without(ours[1], drop) == without(theirs[1], drop):
            return name
    return None


# ------------------------------------------------------------------ running
def run_twostage(args: list[str], generation: int) -> tuple[int, str]:
    """(exit status, stdout) of ``twostage eval --no-provenance --trec-eval G ARGS``, in this process."""
    from click.testing import CliRunner

    from toolkit.cli import main

    res = CliRunner().invoke(main, ["eval", "--no-provenance", "--trec-eval", str(generation), *args])
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        return 99, f"twostage raised {type(res.exception).__name__}: {res.exception}"
    return res.exit_code, res.stdout


def run_binary(binary: str, args: list[str]) -> tuple[int, str]:
    try:
        proc = subprocess.run([binary, *args], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return 124, "timed out"
    return proc.returncode, proc.stdout


def differs(case: Case, binary: str, generation: int) -> tuple[bool, tuple, tuple]:
    """(do they disagree, twostage's (status, stdout), the binary's)."""
    with tempfile.TemporaryDirectory(prefix="fuzz-eval-") as tmp:
        args = case.args(Path(tmp))
        ours = run_twostage(args, generation)
        theirs = run_binary(binary, args)
    same = ours == theirs or (ours[0] != 0 and theirs[0] != 0 and ours[0] != 99)
    return not same, ours, theirs


# ------------------------------------------------------------------ shrinking
def shrink(case: Case, binary: str, generation: int) -> Case:
    """Drop queries, then lines, then measures and options, while the case still differs (and is not a known one)."""

    def still(c: Case) -> bool:
        if not set(_qrels_queries(c)) & _run_queries(c) and c.rel_format != "prefs":
            return False  # the generator always leaves a query in common: keep the reproducer to the same kind
        try:
            bad, ours, theirs = differs(c, binary, generation)
            return bad and known_difference(c, generation) is None and known_lines(ours, theirs) is None
        except Exception:  # a shrunk case can become invalid (no measure left): not a reproducer
            return False

    for qid in sorted({line.split()[0] for line in case.qrels + case.run if not line.startswith("#")}):
        trial = replace(
            case,
            qrels=[x for x in case.qrels if x.split()[0] != qid],
            run=[x for x in case.run if x.split()[0] != qid],
        )
        if trial.qrels and trial.run and still(trial):
            case = trial
    for which in ("qrels", "run", "zscores"):
        i = 0
        while case.__dict__[which] is not None and i < len(case.__dict__[which]):
            lines = case.__dict__[which]
            trial = replace(case, **{which: lines[:i] + lines[i + 1 :]})
            if (which == "zscores" or trial.__dict__[which]) and still(trial):
                case = trial
            else:
                i += 1
    for key in ("measures", "options"):
        i = 0
        while i < len(case.__dict__[key]):
            items = case.__dict__[key]
            trial = replace(case, **{key: items[:i] + items[i + 1 :]})
            if (key == "options" or trial.measures) and still(trial):
                case = trial
            else:
                i += 1
    return case


def reproducer(case: Case, binary: str, generation: int) -> str:
    _, ours, theirs = differs(case, binary, generation)
    parts = ["qrels:", *case.qrels, "run:", *case.run]
    if case.zscores is not None:
        parts += ["zscores:", *case.zscores]
    parts += [
        f"command: {case.command()}   (twostage eval --trec-eval {generation} ...)",
        f"trec_eval (exit {theirs[0]}):",
        theirs[1].rstrip(),
        f"twostage (exit {ours[0]}):",
        ours[1].rstrip(),
    ]
    return "\n".join(parts)


# ------------------------------------------------------------------ the loop
@dataclass
class Summary:
    cases: int = 0
    agreed: int = 0
    both_refused: int = 0
    known: collections.Counter = field(default_factory=collections.Counter)
    known_differed: collections.Counter = field(default_factory=collections.Counter)
    mismatches: list = field(default_factory=list)
    lines_compared: int = 0
    seconds: float = 0.0

    def text(self, generation: int) -> str:
        known = (
            ", ".join(f"{k} {v} ({self.known_differed[k]} differed)" for k, v in sorted(self.known.items())) or "none"
        )
        return (
            f"trec_eval {generation}: {self.cases} cases, {self.agreed} identical ({self.lines_compared} output lines), "
            f"{self.both_refused} refused by both, known differences skipped: {known}; "
            f"{len(self.mismatches)} mismatches; {self.seconds:.1f} s"
        )


def fuzz(binary: str, generation: int, cases: int, seed: int, shrink_first: int = 3, log=None) -> Summary:
    """Run ``cases`` seeded cases; the first ``shrink_first`` mismatches are shrunk to reproducers."""
    start = time.perf_counter()
    summary = Summary()
    for i in range(cases):
        case = generate(random.Random(f"{seed}:{i}"), generation)
        summary.cases += 1
        name = known_difference(case, generation)
        bad, ours, theirs = differs(case, binary, generation)
        name = name or (known_lines(ours, theirs) if bad else None)
        if name:  # counted, and whether it differed at all: an entry that never differs is stale
            summary.known[name] += 1
            summary.known_differed[name] += bad
            continue
        if not bad:
            if ours[0] == 0:
                summary.agreed += 1
                summary.lines_compared += ours[1].count("\n")
            else:
                summary.both_refused += 1
            continue
        if len(summary.mismatches) < shrink_first:
            small = shrink(case, binary, generation)
            summary.mismatches.append((i, reproducer(small, binary, generation)))
            if log:
                log(f"case {i} (seed {seed}) differs; minimal reproducer:\n{summary.mismatches[-1][1]}\n")
        else:
            summary.mismatches.append((i, None))
    summary.seconds = time.perf_counter() - start
    return summary


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trec-eval", required=True, help="path of a trec_eval binary")
    ap.add_argument("--generation", type=int, choices=(9, 10), required=True, help="its generation")
    ap.add_argument("--cases", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-shown", type=int, default=3, help="mismatches shrunk and printed")
    a = ap.parse_args(argv)
    summary = fuzz(a.trec_eval, a.generation, a.cases, a.seed, a.max_shown, log=print)
    print(summary.text(a.generation))
    return 1 if summary.mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
