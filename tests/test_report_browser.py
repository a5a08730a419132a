"""The diagnosis report opens from disk in a real browser: headline numbers shown, every plot decoded.

Renders ``index.html`` in headless Chromium (Debian's ``chromium`` package;
``scripts/install_chromium.sh`` installs it in CI) and skips with the reason
when no Chromium is installed. A probe script is appended to a *copy* of the
page (the report itself holds no script); after load it records each image's
decoded size and the headline cells' text into the DOM, which ``--dump-dom``
prints.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from test_diagnose import _write_tiny

PROBE = """<script>
window.addEventListener('load', () => {
  const imgs = [...document.images].map(i => ({id: i.id, w: i.naturalWidth, h: i.naturalHeight, ok: i.complete}));
  const cells = {};
  document.querySelectorAll('#headline td[id]').forEach(td => { cells[td.id] = td.textContent.trim(); });
  const probe = document.createElement('pre');
  probe.id = 'probe';
  probe.textContent = JSON.stringify({imgs, cells, title: document.title,
                                      sheets: document.styleSheets.length});
  document.body.appendChild(probe);
});
</script>"""


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    pytest.skip("Chromium is not installed (scripts/install_chromium.sh installs Debian's chromium as root)")


def browser_flags(tmp_path: Path) -> list[str]:
    return ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
            f"--user-data-dir={tmp_path / 'chrome-profile'}"]


def render(tmp_path: Path, page: Path) -> dict:
    probe_page = page.with_name("probe.html")
    probe_page.write_text(page.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"), encoding="utf-8")
    cmd = [chromium(), *browser_flags(tmp_path), "--virtual-time-budget=10000", "--dump-dom", probe_page.as_uri()]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    m = re.search(r'<pre id="probe">(.*?)</pre>', r.stdout, flags=re.S)
    assert m, f"no probe output; chromium exit {r.returncode}: {r.stderr[-2000:]}"
    import html

    return json.loads(html.unescape(m.group(1)))


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("browser")
    qp = _write_tiny(tmp)
    from click.testing import CliRunner

    from toolkit.cli import main

    out = tmp / "reports" / "tiny"
    res = CliRunner().invoke(main, ["diagnose", "--qrels", str(qp), "--first-stage", str(tmp / "first.trec"),
                                    "--reranked", str(tmp / "rr.trec"), "--topics", str(tmp / "topics.tsv"),
                                    "--out", str(out)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return tmp, out


def test_report_renders_headline_and_plots(report):
    tmp, out = report
    summary = json.loads((out / "summary.json").read_text())
    seen = render(tmp, out / "index.html")
    assert seen["title"] == "Two-stage diagnosis: tiny"
    assert seen["sheets"] >= 1  # the inline stylesheet
    imgs = seen["imgs"]
    assert sorted(i["id"] for i in imgs) == ["plot-judged_hist", "plot-query_types", "plot-recall_vs_ndcg",
                                             "plot-stage_ndcg"]
    assert all(i["ok"] and i["w"] > 100 and i["h"] > 100 for i in imgs), imgs
    for row in summary["headline"]:
        for stage in ("first_stage", "reranked"):
            v = row[stage]
            if v is None:
                continue
            text = str(int(v)) if row["key"] == "num_q" else f"{v:.4f}"
            key = "first" if stage == "first_stage" else "reranked"
            assert seen["cells"][f"h-{row['key']}-{key}"] == text


def test_report_screenshot_is_not_blank(report):
    tmp, out = report
    shot = tmp / "shot.png"
    cmd = [chromium(), *browser_flags(tmp), "--window-size=1200,1600", f"--screenshot={shot}",
           (out / "index.html").as_uri()]
    subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert shot.exists() and shot.stat().st_size > 20_000
    import matplotlib.image as mpimg

    pixels = mpimg.imread(shot)
    assert pixels.std() > 0.05  # text, tables and plots, not an empty page
