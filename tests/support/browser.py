"""Headless Chromium driven through Selenium, for the tests that open a report (Debian's ``chromium`` and
``chromium-driver``; ``scripts/install_chromium.sh`` installs them in CI; a test skips with the reason when
they are missing). Every network request is refused (an unreachable proxy and no host resolution); the
browser's console is recorded (``console_errors``)."""

from __future__ import annotations

import shutil
from pathlib import Path

from needs import lacking, required


def chromium(tmp_path: Path):
    """A started Chrome webdriver (the caller quits it), or a skip saying what is missing."""
    chrome = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
    driver = shutil.which("chromedriver")
    if not chrome or not driver:
        lacking(
            "Chromium or chromedriver is not installed (scripts/install_chromium.sh installs Debian's "
            "chromium and chromium-driver as root)"
        )
    webdriver = required("selenium.webdriver", "selenium is not installed (pip install .[test])")
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
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # the console, for ``console_errors``
    return webdriver.Chrome(service=Service(executable_path=driver), options=opts)


def console_errors(driver) -> list[str]:
    """The console's errors (level SEVERE: an exception thrown, a script refused, ``console.error``) since the
    last call: reading the log empties it."""
    return [e["message"] for e in driver.get_log("browser") if e.get("level") == "SEVERE"]


#: What a page does once loaded: whether a payload ran (``window.pwned``), the elements with an ``on*``
#: attribute, the ``javascript:`` links, and each table's rows as their cell counts (a colspan counting its
#: columns), after every image has loaded or failed (so any ``onerror`` ran) and every element has had a
#: mouse over it and the focus (so any ``onmouseover``/``onfocus`` ran).
_PROBE = """
const done = arguments[0];
Promise.all([...document.images].map(i => i.complete ? 0 : new Promise(r => { i.onload = i.onerror = r; })))
  .then(() => {
    for (const e of document.querySelectorAll('*')) {
      for (const kind of ['mouseover', 'mouseenter', 'focus']) e.dispatchEvent(new Event(kind, {bubbles: true}));
    }
    setTimeout(() => done({
      pwned: window.pwned === undefined ? null : String(window.pwned),
      handlers: [...document.querySelectorAll('*')].filter(e => [...e.attributes]
        .some(a => a.name.startsWith('on'))).length,
      js: [...document.querySelectorAll('a[href]')].filter(a => a.protocol === 'javascript:').length,
      rows: [...document.querySelectorAll('table')].map(t => [...t.rows].map(r => [...r.cells]
        .reduce((n, c) => n + c.colSpan, 0))),
    }), 50);
  });
"""


def probe(driver, url: str) -> dict:
    """Open ``url`` and say what it did (``_PROBE``'s keys, and ``console``: the console's errors meanwhile)."""
    from selenium.webdriver.support.ui import WebDriverWait

    console_errors(driver)  # what an earlier page logged is not this one's
    driver.get(url)
    WebDriverWait(driver, 20).until(lambda d: d.execute_script("return document.readyState") == "complete")
    state = driver.execute_async_script(_PROBE)
    return state | {"console": console_errors(driver)}
