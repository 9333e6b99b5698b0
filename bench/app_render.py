"""Dashboard first-render time: start `streamlit run app.py` fresh, open it in headless chromium,
time until the recommendations table and the Pareto chart are on the page. Run 1 fills Python's
bytecode and Streamlit's disk cache; runs 2-3 are what a user sees after that. Prints a table,
saves bench/results/app_render.json.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait

ROOT = Path(__file__).resolve().parents[1]


def render_once() -> float:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streamlit",
            "run",
            str(ROOT / "app.py"),
            "--server.headless",
            "true",
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
    try:
        for _ in range(120):
            try:
                urllib.request.urlopen(f"{url}/_stcore/health", timeout=2)
                break
            except OSError:
                time.sleep(0.25)
        opts = webdriver.ChromeOptions()
        opts.binary_location = "/usr/bin/chromium"
        for flag in (
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={tempfile.mkdtemp()}",
        ):
            opts.add_argument(flag)
        driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
        try:
            t = time.perf_counter()
            driver.get(url)
            wait = WebDriverWait(driver, 120)
            wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, ".js-plotly-plot")))
            wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, '[data-testid="stDataFrame"]')))
            return time.perf_counter() - t
        finally:
            driver.quit()
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def main() -> None:
    times = [render_once() for _ in range(3)]
    print("| run | seconds to table and chart |")
    print("|---:|---:|")
    for i, t in enumerate(times, 1):
        print(f"| {i} | {t:.2f} |")
    (ROOT / "bench" / "results" / "app_render.json").write_text(json.dumps({"seconds": times}, indent=1))
    print("saved bench/results/app_render.json")


if __name__ == "__main__":
    main()
