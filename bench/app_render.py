"""Dashboard timings a user feels, on this machine:
1. cold start: start `streamlit run app.py` fresh with empty caches (a new HOME), open it in
   headless chromium, time from the page request until the first recommendations table is on
   the page (the planner's estimates, labelled as such), and until the verified page (the
   simulated table and the Pareto chart) replaces it; then the same after a restart, with the
   answer the first run stored on disk;
2. what-if: in one session (streamlit's AppTest, the script run a browser interaction triggers),
   time each what-if change from the widget change to the finished rerun; report the median.
Prints both and saves bench/results/app_render.json. Targets: cold start < 8 s, what-if < 1 s.
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WHAT_IFS = [  # (widget label, value): each is a new what-if (not cached) on the default question
    ("experts", "fp8"),
    ("KV cache", "bf16"),
    ("decode EP", 32),
    ("KV cache", "as planned"),
    ("experts", "as planned"),
    ("decode EP", 8),
    ("batch cap / instance (0: as planned)", 1024),
    ("decode EP", 0),
    ("batch cap / instance (0: as planned)", 0),
    ("MTP accepted of 3 drafts", 1.5),
    ("comm overlap", 0.9),
    ("KV memory fraction", 0.9),
]


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def render_once(home: str, app: Path = ROOT / "app.py") -> tuple[float, float]:
    from selenium import webdriver  # noqa: PLC0415  (bench-only dependency)
    from selenium.webdriver.chrome.service import Service  # noqa: PLC0415
    from selenium.webdriver.common.by import By  # noqa: PLC0415
    from selenium.webdriver.support import expected_conditions as ec  # noqa: PLC0415
    from selenium.webdriver.support.ui import WebDriverWait  # noqa: PLC0415

    port = _port()
    cmd = [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(app),
        "--server.headless",
        "true",
        "--server.port",
        str(port),
        "--browser.gatherUsageStats",
        "false",
        "--server.fileWatcherType",
        "none",
    ]
    env = {**os.environ, "HOME": home, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(240):
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
            wait = WebDriverWait(driver, 180, poll_frequency=0.05)
            wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, '[data-testid="stDataFrame"]')))
            first = time.perf_counter() - t
            wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, ".js-plotly-plot")))
            wait.until(lambda d: "Pareto front" in d.find_element(By.TAG_NAME, "body").text)
            return first, time.perf_counter() - t
        finally:
            driver.quit()
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def what_if_times() -> list[float]:
    from streamlit.testing.v1 import AppTest  # noqa: PLC0415

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=240).run()
    times = []
    for label, value in WHAT_IFS:
        w = next(x for kind in ("selectbox", "number_input", "select_slider") for x in at.get(kind) if x.label == label)
        w.set_value(value)
        t = time.perf_counter()
        at.run()
        times.append(time.perf_counter() - t)
        assert not at.exception, at.exception
    return times


def main() -> None:
    home = tempfile.mkdtemp(prefix="app-render-home-")
    cold, cold_verified = render_once(home)  # empty caches: the default question is planned
    warm, _ = render_once(home)  # restart: the answer the first run stored
    whatifs = what_if_times()
    med = statistics.median(whatifs)
    print(f"cold start to table (empty cache; the estimates table, labelled): {cold:.2f} s  (target < 8 s)")
    print(f"cold start to the verified page (simulated table and Pareto chart): {cold_verified:.2f} s")
    print(f"restart to table (answer stored by the first run): {warm:.2f} s")
    print(
        f"what-if, median of {len(whatifs)}: {med:.3f} s  (target < 1 s); all: "
        + ", ".join(f"{t:.2f}" for t in whatifs)
    )
    out = {
        "cold_start_s": cold,
        "cold_start_verified_s": cold_verified,
        "restart_s": warm,
        "what_if_median_s": med,
        "what_if_s": whatifs,
        "cpus": os.cpu_count(),
    }
    (ROOT / "bench" / "results" / "app_render.json").write_text(json.dumps(out, indent=1))
    print("saved bench/results/app_render.json")


if __name__ == "__main__":
    main()
