"""docs/notebooks/quickstart.ipynb is a test: executed headless (nbclient, an ipykernel), its printed numbers
asserted (DL19 BM25 nDCG@10 0.5058 at -c, the decomposition's ceiling 0.8922, the comparison table), and its
HTML (nbconvert) opened in headless Chromium to check that the inline tables and plots are shown."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from needs import lacking, required

REPO = Path(__file__).resolve().parents[2]
NOTEBOOK = REPO / "docs" / "notebooks" / "quickstart.ipynb"


@pytest.fixture(scope="module")
def executed(msmarco, tmp_path_factory):
    nbformat = required("nbformat", "the notebooks run through nbclient (pip install .[test])")
    nbclient = required("nbclient", "the notebooks run through nbclient (pip install .[test])")
    required("ipykernel", "the notebooks run on an IPython kernel (pip install .[test])")
    folder = tmp_path_factory.mktemp("notebook")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    env = {
        "TWOSTAGE_DATA": str(msmarco.parent),
        "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
    }
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)  # the kernel inherits them: this checkout's toolkit, the data folder
    try:
        nbclient.NotebookClient(
            nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(folder)}}
        ).execute()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return nb, folder


def _streams(nb) -> str:
    return "".join(
        o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "stream"
    )


def test_numbers_in_the_outputs(executed):
    nb, _ = executed
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert errors == []
    text = _streams(nb)
    assert "DL19 BM25 nDCG@10 0.5058" in text
    assert "ceiling 0.8922" in text
    assert "| splade | **0.7308**†▲ | **0.6390**†▲ |" in text  # nDCG@10, R@100: the order asked
    assert "ndcg_cut_10           \tall\t0.5058" in text  # trec_eval's own line
    html = [
        o["data"]["text/html"]
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.outputs
        if "text/html" in o.get("data", {})
    ]
    assert any("Evaluation" in h and "0.5058" in h for h in html)
    assert any('<img class="plot"' in h and "0.8922" in h for h in html)  # the Diagnosis' inline plots
    assert "image/png" in nb.cells[-1].outputs[0]["data"]  # the figure returned by plot_depth_curve()


def _browser(tmp_path: Path):
    chrome = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
    driver = shutil.which("chromedriver")
    if not chrome or not driver:
        lacking("Chromium or chromedriver is not installed (scripts/install_chromium.sh installs them)")
    webdriver = required("selenium.webdriver", "selenium drives Chromium (pip install .[test])")
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = chrome
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--proxy-server=http://127.0.0.1:9",
        "--host-resolver-rules=MAP * ~NOTFOUND",
        "--window-size=1300,1600",
        f"--user-data-dir={tmp_path / 'profile'}",
    ):
        opts.add_argument(flag)
    return webdriver.Chrome(service=Service(executable_path=driver), options=opts)


def test_html_shows_tables_and_plots_in_a_browser(executed):
    nb, folder = executed
    from nbconvert import HTMLExporter

    body, _ = HTMLExporter().from_notebook_node(nb)
    page = folder / "quickstart.html"
    page.write_text(body, encoding="utf-8")
    driver = _browser(folder)
    try:
        driver.get(page.as_uri())
        imgs = driver.execute_script(
            "return [...document.images].map(i => ({w: i.naturalWidth, h: i.naturalHeight, ok: i.complete}))"
        )
        assert len(imgs) >= 3 and all(i["ok"] and i["w"] > 100 and i["h"] > 100 for i in imgs), imgs
        tables = driver.execute_script(
            "return [...document.querySelectorAll('.jp-OutputArea-output table')].map(t => t.innerText)"
        )
        assert len(tables) >= 5
        assert any("0.5058" in t for t in tables) and any("0.8922" in t for t in tables)
        assert any("0.7308" in t for t in tables)  # the comparison
    finally:
        driver.quit()
