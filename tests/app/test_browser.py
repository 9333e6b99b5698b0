"""A real browser: `streamlit run app.py` headless on a free localhost port, driven by Debian's
chromium through selenium/chromedriver at 1600 px. One walk through the pages a capacity owner
reads (first page, a what-if that breaks the SLO, side by side, time series, validation), each
opened from a shareable URL; screenshots go to tests/artifacts/."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

selenium = pytest.importorskip("selenium")
from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions as ec  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "artifacts"
CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(not (CHROMIUM and DRIVER), reason="needs Debian's chromium and chromium-driver")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server():
    port = _free_port()
    cmd = [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(ROOT / "app.py"),
        "--server.headless",
        "true",
        "--server.address",
        "127.0.0.1",
        "--server.port",
        str(port),
        "--browser.gatherUsageStats",
        "false",
        "--server.fileWatcherType",
        "none",
    ]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).status == 200:
                break
        except OSError:
            time.sleep(0.5)
    try:
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=20)


@pytest.fixture(scope="module")
def driver():
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1600,1100",
        f"--user-data-dir={tempfile.mkdtemp(prefix='chromium-')}",
    ):
        opts.add_argument(flag)
    d = webdriver.Chrome(service=Service(DRIVER), options=opts)
    yield d
    d.quit()


def _open(driver, url: str, text: str) -> str:
    driver.get(url)
    wait = WebDriverWait(driver, 180)
    wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, '[data-testid="stAppViewContainer"]')))
    wait.until(lambda d: text in d.find_element(By.TAG_NAME, "body").text)
    wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, ".js-plotly-plot")))
    time.sleep(1.5)  # let charts finish drawing
    return driver.find_element(By.TAG_NAME, "body").text


def _shot(driver, name: str, scroll_to: str | None = None) -> None:
    if scroll_to:
        el = driver.find_element(By.XPATH, f"//*[contains(text(), {scroll_to!r})]")
        driver.execute_script("arguments[0].scrollIntoView({block: 'start'});", el)
        time.sleep(0.8)
    OUT.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(OUT / name))


def _clean(driver, body: str) -> None:
    assert not driver.find_elements(By.CSS_SELECTOR, '[data-testid="stException"]')
    assert "Traceback" not in body
    assert "None" not in body.splitlines()  # no stray magic output


def test_pages_a_capacity_owner_reads(server, driver):
    body = _open(driver, server, "Recommendations")
    _clean(driver, body)
    assert "MoE capacity planner" in body
    assert not any(b.is_displayed() for b in driver.find_elements(By.CSS_SELECTOR, '[data-testid="stAppDeployButton"]'))
    _shot(driver, "1_first_page.png")
    scroller = driver.find_element(By.CSS_SELECTOR, '[data-testid="stDataFrame"] .dvn-scroller')
    sizes = driver.execute_script(
        "const e = arguments[0]; return [e.scrollWidth, e.clientWidth, e.scrollHeight, e.clientHeight];", scroller
    )
    assert sizes[0] <= sizes[1] + 2, f"the table hides columns at 1600 px: {sizes}"
    assert sizes[2] <= sizes[3] + 2, f"the table scrolls inside itself: {sizes}"

    body = _open(driver, f"{server}/?kv=bf16", "FAIL: ")  # a BF16 KV cache breaks the plan's SLO
    _clean(driver, body)
    _shot(driver, "2_what_if_slo_breach.png", "What if")
    _shot(driver, "3_side_by_side.png", "Side by side")

    body = _open(driver, f"{server}/?ts=True", "requests waiting")
    _clean(driver, body)
    _shot(driver, "4_time_series.png", "simulated:")

    body = _open(driver, f"{server}/?page=Validation", "Validation against published results")
    _clean(driver, body)
    assert "input tokens" not in body  # no question panel on the validation page
    _shot(driver, "5_validation.png")
