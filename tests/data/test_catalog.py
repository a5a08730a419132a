"""Named collections: declared files and checksums, data folders, Cranfield quirks, named qrels/topics."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from types import MappingProxyType

import pytest

from toolkit.data import catalog
from toolkit.data.trec_io import read_qrels, sha256_file
from toolkit.errors import ChecksumError, ConfigError, InputFormatError


@pytest.fixture()
def cache(tmp_path, monkeypatch) -> Path:
    """A private download/derived-data cache per test."""
    monkeypatch.setenv("TWOSTAGE_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


# ------------------------------------------------------------ data folders
def test_data_dir_order(tmp_path, monkeypatch):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    monkeypatch.setenv("TWOSTAGE_DATA", str(b))
    assert catalog.data_dir(a) == a.resolve()  # explicit wins
    assert catalog.data_dir() == b.resolve()  # then $TWOSTAGE_DATA
    monkeypatch.setenv("TWOSTAGE_DATA", str(tmp_path / "missing"))
    assert catalog.data_dir() is None
    with pytest.raises(ConfigError, match=r"no data folder found.*TWOSTAGE_DATA"):
        catalog.data_dir(required=True)


def test_catalog_declares_every_file():
    assert catalog.collection_names() == ["cacm", "cranfield", "dl19-passage", "dl20-passage"]
    for coll in catalog.CATALOG.values():
        assert {"topics", "qrels"} <= set(coll.files)
        for df in coll.files.values():
            assert len(df.sha256) == 64 and df.url.startswith("https://") and df.size > 0


def test_unknown_collection_lists_known_names():
    with pytest.raises(ConfigError, match=r"unknown collection 'cacn'.*cacm, cranfield"):
        catalog.get_collection("cacn")


@pytest.mark.data
def test_declared_checksums_match_shared_data(shared_data):
    for coll in catalog.CATALOG.values():
        for df in coll.files.values():
            p = shared_data / df.path
            assert p.stat().st_size == df.size, p
            assert sha256_file(p) == df.sha256, p


def test_missing_file_without_network_says_where_to_put_it(tmp_path, cache):
    empty = tmp_path / "data"
    empty.mkdir()
    with pytest.raises(ConfigError, match=r"cacm/qrels\.cacm\.txt not found.*raw\.githubusercontent\.com.*sha256"):
        catalog.collection_file("cacm", "qrels", empty)


def test_failed_download_is_a_clear_error(tmp_path, cache, monkeypatch):
    def offline(df, dest):
        raise OSError("Name or service not known")

    monkeypatch.setattr(catalog, "_download", offline)
    empty = tmp_path / "data"
    empty.mkdir()
    with pytest.raises(ConfigError, match=r"could not be downloaded.*Name or service not known.*with no network, copy"):
        catalog.collection_file("cacm", "qrels", empty, download=True)


def test_download_is_checked_against_the_catalogue(tmp_path, cache, monkeypatch):
    def wrong_bytes(df, dest):
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text("1 0 CACM-0001 1\n")

    monkeypatch.setattr(catalog, "_download", wrong_bytes)
    empty = tmp_path / "data"
    empty.mkdir()
    with pytest.raises(ChecksumError, match="differs from the catalogue"):
        catalog.collection_file("cacm", "qrels", empty, download=True)
    assert not (cache / "data" / "cacm" / "qrels.cacm.txt").exists()  # the bad download is removed


@pytest.fixture()
def file_server():
    """A local HTTP server: ``served[path] = (status, headers, body)``; yields (its base URL, served)."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    served: dict[str, tuple[int, dict[str, str], bytes]] = {}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            status, headers, body = served.get(self.path, (404, {}, b""))
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", served
    server.shutdown()
    server.server_close()


def _served_qrels(monkeypatch, base: str, body: bytes, size: int | None = None) -> catalog.DataFile:
    """cacm's qrels declared at the local server, with ``body``'s sha256 and ``size`` (default its length)."""
    import dataclasses
    import hashlib

    coll = catalog.CATALOG["cacm"]
    df = catalog.DataFile(
        "cacm/qrels.cacm.txt", hashlib.sha256(body).hexdigest(), f"{base}/qrels.cacm.txt", size or len(body)
    )
    changed = dataclasses.replace(coll, files={**coll.files, "qrels": df})
    monkeypatch.setattr(catalog, "CATALOG", MappingProxyType({**catalog.CATALOG, "cacm": changed}))
    return df


def test_download_goes_through_the_client_whole_and_checked(tmp_path, cache, monkeypatch, file_server):
    base, served = file_server
    body = b"1 0 CACM-0001 1\n" * 1000
    _served_qrels(monkeypatch, base, body)
    served["/qrels.cacm.txt"] = (200, {}, body)
    empty = tmp_path / "data"
    empty.mkdir()
    path = catalog.collection_file("cacm", "qrels", empty, download=True)
    assert path == cache / "data" / "cacm" / "qrels.cacm.txt" and path.read_bytes() == body
    # other bytes than declared: refused by the client before anything lands in the cache
    path.unlink()
    served["/qrels.cacm.txt"] = (200, {}, body.replace(b"0001", b"0002", 1))
    with pytest.raises(ChecksumError, match=r"qrels\.cacm\.txt: the download's sha256 .* differs from the expected"):
        catalog.collection_file("cacm", "qrels", empty, download=True)
    assert [p for p in cache.rglob("*") if p.is_file()] == []


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ((200, {}, b"x" * 5000), "answer of 5,000 bytes, larger than 4,000 bytes"),  # more than declared
        ((302, {"Location": "http://192.0.2.1/qrels"}, b""), "HTTP 302: redirected to 'http://192.0.2.1/qrels'"),
        ((404, {}, b""), "HTTP 404"),
    ],
)
def test_a_download_that_is_not_the_declared_file_is_refused(tmp_path, cache, monkeypatch, file_server, answer, reason):
    base, served = file_server
    _served_qrels(monkeypatch, base, b"y" * 4000)
    served["/qrels.cacm.txt"] = answer
    empty = tmp_path / "data"
    empty.mkdir()
    with pytest.raises(ConfigError, match=r"could not be downloaded from http://127\.0\.0\.1") as err:
        catalog.collection_file("cacm", "qrels", empty, download=True)
    assert reason in str(err.value), str(err.value)
    assert [p for p in cache.rglob("*") if p.is_file()] == []


def test_a_short_download_is_a_failed_request(tmp_path, file_server):
    from toolkit.guard.client import RequestFailed, download

    base, served = file_server
    served["/f"] = (200, {}, b"abc")
    with open(tmp_path / "f", "wb") as fh, pytest.raises(RequestFailed, match="held 3 bytes, not the 10 expected"):
        download(f"{base}/f", fh, size=10, retries=0)
    with open(tmp_path / "f", "wb") as fh:
        assert download(f"{base}/f", fh, size=3, retries=0) == 3
    assert (tmp_path / "f").read_bytes() == b"abc"


@pytest.mark.data
def test_corrupt_file_in_data_folder(tmp_path, cache, shared_data):
    data = tmp_path / "data"
    (data / "cacm").mkdir(parents=True)
    text = (shared_data / "cacm" / "qrels.cacm.txt").read_text()
    (data / "cacm" / "qrels.cacm.txt").write_text(text.replace("CACM-1410", "CACM-1411", 1))
    with pytest.raises(ChecksumError, match=r"qrels\.cacm\.txt: sha256"):
        catalog.resolve_qrels("cacm", data)


# ---------------------------------------------------------------- Cranfield
def test_smart_records_handle_crlf_and_multiline_fields():
    text = ".I 001\r\n.T\r\nfirst title\r\n.W\r\nline one\r\nline two  \r\n.I 004\r\n.W\r\nsecond\r\n"
    recs = catalog._smart_records(text, "x")
    assert recs == [("001", {"T": "first title", "W": "line one line two"}), ("004", {"W": "second"})]


def test_smart_text_before_first_record_is_an_error():
    with pytest.raises(InputFormatError, match=r"x:1: expected a '\.I <id>' line first"):
        catalog._smart_records("junk\n.I 1\n", "x")


@pytest.mark.data
def test_cranfield_conversion(shared_data, cache):
    conv = catalog.convert_cranfield(shared_data)
    docs = (conv.corpus_dir / "cranfield.jsonl").read_text().splitlines()
    assert len(docs) == 1400
    topics = conv.topics.read_text().splitlines()
    assert len(topics) == 225
    # printed labels 001, 002, 004, ... are renumbered by position, as cranqrel numbers them
    assert topics[2].startswith("3\twhat problems of heat conduction in composite slabs")
    assert topics[-1].startswith("225\t")
    labels = (conv.qrels.parent / "topics.labels.tsv").read_text().splitlines()
    assert labels[2] == "3\t004" and labels[-1] == "225\t365"
    qrels = conv.qrels.read_text().splitlines()
    assert len(qrels) == 1837 and qrels[0] == "1 0 184 2"
    assert all(not line.endswith((" ", "\r")) for line in qrels)  # CRLF and trailing spaces gone
    assert any("renumbered 1..225" in n for n in conv.notes)
    assert any("1->4, 2->3, 3->2, 4->1, -1->0" in n for n in conv.notes)
    # second call reuses the converted files
    assert catalog.convert_cranfield(shared_data).notes == conv.notes


@pytest.mark.data
def test_cranfield_qrels_by_name_apply_the_graded_map(shared_data, cache):
    source = catalog.resolve_qrels("cranfield", shared_data)
    assert source.relevance_map_name == "cranfield"
    q = source.read()
    # 128 complete answers (code 1) become the highest grade; the 225 -1 codes become 0
    assert q.label_counts() == {0: 225, 1: 363, 2: 734, 3: 387, 4: 128}
    assert q.query_ids[:3] == ["1", "10", "100"] and len(q.query_ids) == 225


@pytest.mark.data
def test_cranfield_eval_reports_the_mapping(cli, shared_data, cache, tmp_path):
    run = tmp_path / "run.trec"
    run.write_text("1 Q0 184 1 2.0 t\n1 Q0 29 2 1.0 t\n3 Q0 5 1 1.0 t\n")
    res = cli("eval", "-m", "ndcg_cut.10", "--data-dir", str(shared_data), "cranfield", str(run))
    assert res.exit_code == 0, res.output
    assert "cranfield" in res.output  # provenance names the relevance map


@pytest.mark.data
def test_named_qrels_keep_their_map_in_diagnose_and_reproduce(cli, shared_data, cache, tmp_path):
    from types import SimpleNamespace

    from toolkit.reproduction.runner import Runner

    run = tmp_path / "run.trec"  # query 1: codes 2, 2, 3 in the raw file; the map turns them into 3, 3, 2
    run.write_text("1 Q0 29 1 3.0 t\n1 Q0 184 2 2.0 t\n1 Q0 12 3 1.0 t\n1 Q0 52 4 0.5 t\n")
    qrels_file = catalog.resolve_qrels("cranfield", shared_data).path
    mapped = json.loads(
        cli(
            "eval", "--format", "json", "-m", "ndcg_cut.10", "--data-dir", str(shared_data), "cranfield", str(run)
        ).stdout
    )["all"]["ndcg_cut_10"]
    unmapped = json.loads(cli("eval", "--format", "json", "-m", "ndcg_cut.10", str(qrels_file), str(run)).stdout)
    assert mapped != pytest.approx(unmapped["all"]["ndcg_cut_10"])  # the map matters for this run
    res = cli(
        "diagnose",
        "--qrels",
        "cranfield",
        "--data-dir",
        str(shared_data),
        "--first-stage",
        str(run),
        "--reranked",
        str(run),
        "--depth",
        "4",  # the run as its own rerank: the first stage's order, no depth to detect
        "--no-complete",
        "--out",
        str(tmp_path / "report"),
    )
    assert res.exit_code == 0, res.output
    headline = json.loads((tmp_path / "report" / "summary.json").read_text())["headline"]
    assert next(h for h in headline if h["key"] == "ndcg_cut_10")["reranked"] == pytest.approx(mapped, abs=1e-12)
    # a reproduction row may name the collection by an alias; it gets the same map
    runner = Runner(spec=None, data=shared_data, work=tmp_path, indexes=tmp_path)
    source = runner._qrels(SimpleNamespace(qrels="cran"))
    assert source.path == qrels_file and source.relevance_map_name == "cranfield"


# ---------------------------------------------------------- named qrels/topics
@pytest.mark.data
@pytest.mark.parametrize("name, queries", [("cacm", 52), ("dl19-passage", 43), ("dl20", 54)])
def test_qrels_by_name(shared_data, name, queries):
    q = read_qrels(catalog.resolve_qrels(name, shared_data).path)
    assert len(q.query_ids) == queries


@pytest.mark.data
@pytest.mark.parametrize(
    "name, count, first",
    [
        (
            "cacm",
            64,
            (
                "1",
                "What articles exist which deal with TSS (Time Sharing System), an operating system for IBM computers?",
            ),
        ),
        ("dl19-passage", 43, None),
        ("dl20-passage", 200, None),
    ],
)
def test_topics_by_name(shared_data, name, count, first):
    t = catalog.resolve_topics(name, shared_data)
    assert len(t) == count
    if first:
        assert t.topics[0] == first


def test_unknown_names_are_config_errors(tmp_path):
    with pytest.raises(ConfigError, match=r"qrels file .*nope\.txt does not exist"):
        catalog.resolve_qrels(str(tmp_path / "nope.txt"))
    with pytest.raises(ConfigError, match=r"topics file .*nope\.tsv does not exist"):
        catalog.resolve_topics(str(tmp_path / "nope.tsv"))


@pytest.mark.data
def test_eval_qrels_by_collection_name(cli, shared_data, monkeypatch, tmp_path):
    monkeypatch.setenv("TWOSTAGE_DATA", str(shared_data))
    run = tmp_path / "run.trec"
    run.write_text("1 Q0 CACM-1410 1 3.0 t\n1 Q0 CACM-0001 2 2.0 t\n")
    res = cli("eval", "-m", "map", "-m", "P.30", "--no-provenance", "cacm", str(run))
    assert res.exit_code == 0, res.output
    assert res.stdout.split() == ["map", "all", f"{1 / 5:.4f}", "P_30", "all", f"{1 / 30:.4f}"]  # 1 of 5, rank 1


@pytest.mark.data
def test_seed_pyserini_cache(shared_data, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    seeded = catalog.seed_pyserini_cache(shared_data)
    names = sorted(p.name for p in seeded)
    assert "qrels.dl19-passage.txt" in names and "topics.dl20.txt" in names
    target = tmp_path / ".cache" / "pyserini" / "topics-and-qrels"
    assert sha256_file(target / "qrels.dl19-passage.txt") == catalog.CATALOG["dl19-passage"].files["qrels"].sha256
    # idempotent
    assert catalog.seed_pyserini_cache(shared_data) == seeded


@pytest.mark.data
def test_cacm_html_folder(shared_data, cache):
    folder = catalog.cacm_html_folder(shared_data)
    files = sorted(os.listdir(folder))
    assert len(files) == 3204 and files[0] == "CACM-0001.html" and files[-1] == "CACM-3204.html"
    assert catalog.cacm_html_folder(shared_data) == folder
    shutil.rmtree(folder)


def test_pyserini_names_are_read_without_the_jvm():
    assert "dl21-passage" in catalog.pyserini_names("qrels")
    assert "msmarco-passage-dev-subset" in catalog.pyserini_names("topics")
    assert "no-such-topics" not in catalog.pyserini_names("topics")
