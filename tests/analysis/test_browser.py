"""The report and the benchmark's page as a reader sees them: opened in headless Chromium (Debian's chromium and
chromium-driver).

Skipped outside CI when Chromium is absent; under CI (env CI set) a missing browser is a failure.
"""

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from conftest import EVIL_ERROR, EVIL_NAME

from analysis.report import sections as registry

CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync")


def _executables() -> tuple[str, str]:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    missing = [name for name, path in (("chromium", chromium), ("chromedriver", driver)) if path is None]
    if missing:
        message = f"{' and '.join(missing)} not installed (apt-get install chromium chromium-driver)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return chromium, driver


@pytest.fixture
def browser():
    chromium, driver_path = _executables()
    if os.environ.get("CI"):
        from selenium import webdriver
    else:
        webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="report-browser-")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--window-size=1280,1000"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(driver_path))
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def test_the_report_opens_in_chromium_with_every_section_and_image_and_no_console_error(report, browser, tmp_path):
    browser.get(report.as_uri())
    assert browser.execute_script("return document.readyState") == "complete"

    headings = browser.execute_script(
        "return Array.from(document.querySelectorAll('section > h2'), heading => heading.textContent)")
    assert headings == [builder.title for builder in registry.SECTIONS]

    images = browser.execute_script(
        "return Array.from(document.images, i => ({src: i.getAttribute('src'), complete: i.complete,"
        " width: i.naturalWidth, height: i.naturalHeight}))")
    assert len(images) >= 8
    broken = [image["src"] for image in images if not image["complete"] or image["width"] == 0]
    assert broken == []
    assert all(image["width"] >= 380 and image["height"] >= 200 for image in images), images  # readable sizes

    errors = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
    assert errors == []

    # The softmax saturation section: the tiny study's findings, its eleven figures loaded, its six tables (steps
    # to accuracy, the model's q/k variance, study A at that variance, B's normalisers, learning rates, lengths).
    saturation = browser.execute_script(
        "const section = document.getElementById('saturation');"
        "return {text: section.innerText, tables: section.querySelectorAll('table').length,"
        " images: Array.from(section.querySelectorAll('img'), i => ({src: i.getAttribute('src'),"
        " complete: i.complete, width: i.naturalWidth, height: i.naturalHeight}))}")
    assert "Study A (init_stats.csv: 64 samples per cell, seed 0, float32)" in saturation["text"]
    assert "rows had an entropy below their bound (as it must be" in saturation["text"]
    assert len(saturation["images"]) == 11 and saturation["tables"] == 6
    assert "Study A at the model's variance" in saturation["text"]
    assert all(image["src"].startswith("figures/saturation-") and image["complete"] and image["width"] >= 380
               and image["height"] >= 200 for image in saturation["images"]), saturation["images"]

    # Strings from runs are text on the page: no script ran, no element was injected.
    text = browser.execute_script("return document.body.innerText")
    assert EVIL_NAME in text and EVIL_ERROR in text
    assert browser.execute_script("return document.querySelectorAll('script').length") == 0
    assert browser.execute_script("return document.querySelectorAll('img[onerror]').length") == 0

    height = min(browser.execute_script("return document.documentElement.scrollHeight"), 16000)
    browser.set_window_size(1280, height)
    screenshot = tmp_path / "report.png"
    assert browser.save_screenshot(str(screenshot))
    assert screenshot.stat().st_size > 50_000
    assert Path(screenshot).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_protocol_2_benchmark_page_opens_in_chromium_led_by_its_figures_with_no_rank(browser, tmp_path):
    from attnlab.cli import main

    tiny = ["task.seq_len=12", "task.num_keys=4", "task.num_distractors=4", "task.num_buckets=4", "task.test_size=32",
            "model.dim=32", "model.depth=1", "train.batch_size=16", "train.log_every=5", "train.eval_every=10",
            "train.checkpoint_every=10", "train.steps=20"]
    out = tmp_path / "reports"
    assert main(["benchmark", "--variant", "dense,local:window=4", "--task", "passkey", "--seeds", "3",
                 "--capacity-widths", "none", "--capacity-scales", "none", "--extend-grid", "0", "--name", "seen",
                 *(word for setting in tiny for word in ("--set", setting)), "--runs-dir", str(tmp_path / "runs"),
                 "--out", str(out), "--heartbeat-seconds", "1", "--quiet"]) == 0
    browser.get((out / "benchmark-seen" / "index.html").as_uri())
    assert browser.execute_script("return document.readyState") == "complete"
    headings = browser.execute_script(
        "return Array.from(document.querySelectorAll('section > h2'), heading => heading.textContent)")
    assert headings[0] == "Contrasts against dense" and "Leaderboard" not in headings
    lead = browser.execute_script(
        "const section = document.querySelector('section');"
        "return {images: Array.from(section.querySelectorAll('img'), i => ({src: i.getAttribute('src'),"
        " complete: i.complete, width: i.naturalWidth, height: i.naturalHeight})),"
        " headers: Array.from(document.querySelectorAll('th'), cell => cell.textContent.toLowerCase())}")
    # the section opens on its figures: a forest plot of each variant against dense, then the learning curves
    assert [image["src"] for image in lead["images"]] == ["figures/contrasts-0.png", "figures/learning-curves.png"]
    assert all(image["complete"] and image["width"] >= 380 and image["height"] >= 200 for image in lead["images"])
    assert "rank" not in lead["headers"]
    assert [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"] == []
    browser.set_window_size(1280, min(browser.execute_script("return document.documentElement.scrollHeight"), 16000))
    screenshot = tmp_path / "benchmark.png"
    assert browser.save_screenshot(str(screenshot)) and screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
