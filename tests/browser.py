"""Headless Chromium from Debian (packages chromium and chromium-driver; .ci/run installs them)
driven by selenium, for the tests of the /ui/ page: the driver, and waiting for, reading and
photographing the page. Screenshots go to ``$RUNWAY_TEST_ARTIFACTS`` (else ``test-artifacts/``).

Import ``require_chromium()`` first in a test module: it skips the module where Chromium is
missing, and fails it under CI (where .ci/run installs it)."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
ARTIFACTS = Path(
    os.environ.get("RUNWAY_TEST_ARTIFACTS", Path(__file__).resolve().parents[1] / "test-artifacts")
)


def require_chromium() -> None:
    """Skip the calling module without Chromium; under CI its absence is an error."""
    if shutil.which(CHROMIUM) and shutil.which(CHROMEDRIVER):
        return
    if os.environ.get("CI"):  # .ci/run installs them: missing there is a failure, not a skip
        raise RuntimeError(f"{CHROMIUM} and {CHROMEDRIVER} are needed (apt-get install chromium)")
    pytest.skip("needs Debian's chromium and chromium-driver", allow_module_level=True)


@contextmanager
def chromium(profile: Path) -> Iterator[Any]:
    """A headless Chromium session (selenium WebDriver) with its profile in ``profile``;
    always quit."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    # Without the background-networking flags Chromium calls out to Google at every start,
    # which this closed network refuses.
    for flag in (
        "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--disable-dev-shm-usage", "--window-size=1400,2200", f"--user-data-dir={profile}",
    ):  # fmt: skip
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    try:
        yield driver
    finally:
        driver.quit()


def loaded(driver: Any, since: float = 0.0, within: float = 20.0) -> None:
    """Poll (with a deadline) until the page has drawn the REST answers after ``since``."""
    from selenium.webdriver.common.by import By

    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        stamp = driver.execute_script("return document.body.dataset.loaded || ''")
        if stamp and int(stamp) / 1000 >= since:
            return
        time.sleep(0.05)  # polling interval
    error = driver.find_element(By.ID, "error").text
    raise AssertionError(f"the page did not load its data within {within}s: {error!r}")


def sign_in(driver: Any, token: str, within: float = 20.0) -> None:
    """Wait for the page's token form, fill it in and wait for the data."""
    from selenium.webdriver.common.by import By

    login = driver.find_element(By.ID, "login")
    deadline = time.monotonic() + within
    while not login.is_displayed():
        assert time.monotonic() < deadline, "the page asked for no token"
        time.sleep(0.05)  # polling interval
    started = time.time()
    driver.find_element(By.ID, "token").send_keys(token)
    login.submit()
    loaded(driver, started, within)
    assert not login.is_displayed()


def cells(driver: Any, selector: str) -> list[list[str]]:
    """The text of each cell of each row of the table ``selector`` (the "empty" row left out)."""
    from selenium.webdriver.common.by import By

    rows = driver.find_elements(By.CSS_SELECTOR, f"{selector} tbody tr:not(.empty)")
    return [[td.text for td in row.find_elements(By.TAG_NAME, "td")] for row in rows]


def shot(driver: Any, name: str) -> Path:
    """A screenshot of the whole page, kept as ``ui-NAME.png`` among the test artefacts."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1400, max(int(height) + 40, 800))
    path = ARTIFACTS / f"ui-{name}.png"
    assert driver.save_screenshot(str(path)), path
    return path
