"""A full disk or a read-only folder while Java builds a Lucene index: one ``Error:`` line
naming the index folder and the fix, not Anserini's "Anserini IndexCollection failed: Exception in thread main
java.nio.file.NoSuchFileException ..." with a Java trace in the log; the partial build is removed.

The file systems are real: tmpfs mounts (root only; skipped with the reason elsewhere). To fail inside Java
after every check Python makes, the folder Java writes the index into is mounted, full-size 64 KiB or read-only,
just before Java starts (the writable ``--out`` passed the preflight). The end-to-end case puts ``--out`` on a
200 KiB file system that the 1.5 MB corpus fills, wherever the build then fails (Java's index files or the log).
"""

from __future__ import annotations

import json
import subprocess

import pytest
from needs import lacking, optional, required


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    required("pyserini", "Lucene indexing needs the [pyserini] extra")
    from toolkit.jvm import find_java

    try:
        find_java()
    except Exception as exc:  # no Java >= 21 here
        lacking(f"no Java for Anserini: {exc}")
    path = tmp_path_factory.mktemp("corpus") / "docs.jsonl"
    with open(path, "w") as fh:
        for i in range(3000):
            words = " ".join(f"w{(i * 7 + j) % 997} term{j}" for j in range(40))
            fh.write(json.dumps({"id": f"d{i}", "contents": words}) + "\n")
    return path


@pytest.fixture
def mounts():
    made = []

    def mount(path, options: str) -> None:
        path.mkdir(parents=True, exist_ok=True)
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True, text=True)
        if r.returncode:
            optional(f"cannot mount a tmpfs here ({r.stderr.strip() or r.returncode}): needs root")
        made.append(path)

    yield mount
    for path in reversed(made):
        subprocess.run(["umount", str(path)], check=False)


@pytest.mark.parametrize(
    ("options", "said"),
    [
        ("size=64k", "no space left on the device; free space there or write the output elsewhere"),
        ("ro,size=64k", "read-only file system; write the output to a folder on a writable file system"),
    ],
)
def test_java_failing_to_write_the_index_is_one_line(cli, corpus, mounts, monkeypatch, tmp_path, options, said):
    import toolkit.retrieval.indexing as indexing

    real = indexing._index_command
    targets = []

    def index_command(java, corpus_, target, *args):  # the folder Java writes into, mounted as it starts
        mounts(target, options)
        targets.append(target)
        return real(java, corpus_, target, *args)

    monkeypatch.setattr(indexing, "_index_command", index_command)
    out = tmp_path / "index"
    res = cli("index", "--collection", corpus, "--out", out, "--no-progress")
    assert res.exit_code == 1, res.output
    assert res.stderr.strip().splitlines()[-1] == f"Error: {out}: {said}"
    assert "Exception" not in res.stderr and "java." not in res.stderr and "Anserini" not in res.stderr
    assert targets and not out.exists()
    # the partial build is removed (all but the mount point, which cannot be removed while mounted)
    assert [p.name for p in targets[0].parent.iterdir()] == ["lucene"]


def test_a_full_disk_under_the_index_folder_leaves_nothing(cli, corpus, mounts, tmp_path):
    disk = tmp_path / "disk"
    mounts(disk, "size=200k")
    out = disk / "index"
    res = cli("index", "--collection", corpus, "--out", out, "--no-progress")
    assert res.exit_code == 1, res.output
    assert res.stderr.strip().splitlines()[-1] == (
        f"Error: {out}: no space left on the device; free space there or write the output elsewhere"
    )
    assert [p.name for p in disk.iterdir()] == [".index.lock"]  # the build lock's file stays (by design)
