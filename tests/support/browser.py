"""Headless Chromium driven through Selenium, for the tests that open a report (Debian's ``chromium`` and
``chromium-driver``; ``scripts/install_chromium.sh`` installs them in CI; a test skips with the reason when
they are missing). Every network request is refused (an unreachable proxy and no host resolution)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest


def chromium(tmp_path: Path):
    """A started Chrome webdriver (the caller quits it), or a skip saying what is missing."""
    chrome = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
    driver = shutil.which("chromedriver")
    if not chrome or not driver:
        pytest.skip(
            "Chromium or chromedriver is not installed (scripts/install_chromium.sh installs Debian's "
            "chromium and chromium-driver as root)"
        )
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install .[test])")
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = chrome
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1300,1600",
        "--proxy-server=http://127.0.0.1:9",
        "--host-resolver-rules=MAP * ~NOTFOUND",
        f"--user-data-dir={tmp_path / 'profile'}",
    ):
        opts.add_argument(flag)
    return webdriver.Chrome(service=Service(executable_path=driver), options=opts)
