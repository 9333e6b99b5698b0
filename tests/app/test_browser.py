"""A real browser: `streamlit run app.py` headless on a free localhost port, driven by Debian's
chromium through selenium/chromedriver; saves a screenshot under tests/artifacts/."""

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
CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(not (CHROMIUM and DRIVER), reason="needs Debian's chromium and chromium-driver")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def server():
    port = _free_port()
    proc = subprocess.Popen(
        [
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
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
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


def test_the_page_shows_recommendations_and_the_chart_without_errors(server):
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
        "--window-size=1600,2400",
        f"--user-data-dir={tempfile.mkdtemp(prefix='chromium-')}",
    ):
        opts.add_argument(flag)
    driver = webdriver.Chrome(service=Service(DRIVER), options=opts)
    try:
        driver.get(server)
        wait = WebDriverWait(driver, 150)
        wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, ".js-plotly-plot")))
        wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, '[data-testid="stDataFrame"]')))
        time.sleep(1.0)
        out = ROOT / "tests" / "artifacts"
        out.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(out / "dashboard.png"))
        body = driver.find_element(By.TAG_NAME, "body").text
        assert "Recommendations" in body
        assert not driver.find_elements(By.CSS_SELECTOR, '[data-testid="stException"]')
        assert "Traceback" not in body
    finally:
        driver.quit()
