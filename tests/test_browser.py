"""The explorers in a real browser: JupyterLab on 127.0.0.1, driven by headless Chromium.

For each assignment with an explorer, a copy of its solutions notebook is opened
and run in JupyterLab; the explorer's first control is changed and the plot it
redraws must not be blank (a plot has many distinct colours; a blank one has
one or two).  Needs Debian's `chromium` and Python's `playwright` (no browser
download: playwright drives the system Chromium); CI installs both.
"""

import base64
import io
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from course.grading.nbgrader_run import SOLUTIONS

pytestmark = pytest.mark.slow

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
NOTEBOOKS = ["01_two_phases", "02_kv_cache", "03_quantization", "04_crossover", "04b_long_prompts", "05_under_load",
             "06b_tensor_parallel", "07_tail"]  # 06_cost has no explorer: it moved to 06b


def _missing() -> str | None:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "Python playwright is not installed (pip install playwright)"
    if not CHROMIUM:
        return "chromium is not installed (apt-get install chromium)"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    missing = _missing()
    if missing:
        (pytest.fail if os.environ.get("CI") else pytest.skip)(missing)
    folder = tmp_path_factory.mktemp("lab")
    for assignment in NOTEBOOKS:
        shutil.copy(SOLUTIONS / assignment / f"{assignment}.ipynb", folder / f"{assignment}.ipynb")
    # Settings of our own: every cell kept in the page (JupyterLab 4 drops off-screen cells), no news pop-up.
    settings = folder / ".config" / "lab" / "user-settings" / "@jupyterlab"
    (settings / "notebook-extension").mkdir(parents=True)
    (settings / "notebook-extension" / "tracker.jupyterlab-settings").write_text('{"windowingMode": "none"}')
    (settings / "apputils-extension").mkdir(parents=True)
    (settings / "apputils-extension" / "notification.jupyterlab-settings").write_text(
        '{"fetchNews": "false", "checkForUpdates": false}')
    port, token = _free_port(), secrets.token_hex(16)
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(folder / ".config"), JUPYTER_DATA_DIR=str(folder / ".data"),
               JUPYTER_RUNTIME_DIR=str(folder / ".runtime"), HOME=str(folder))
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}",
         f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={folder}", "--allow-root",
         f"--LabApp.user_settings_dir={folder / '.config' / 'lab' / 'user-settings'}"],
        cwd=folder, env=env, stdout=subprocess.DEVNULL, stderr=open(folder / "lab.log", "w"), start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2)
            break
        except OSError:
            time.sleep(0.5)
    else:
        server.kill()
        pytest.fail("JupyterLab did not start within 90 s")
    yield url, token, folder
    server.terminate()
    try:
        server.wait(timeout=20)
    except subprocess.TimeoutExpired:
        server.kill()


def _distinct_colours(png: bytes) -> int:
    from PIL import Image

    pixels = Image.open(io.BytesIO(png)).convert("RGB").tobytes()  # once: it copies the whole image
    return len({pixels[i:i + 3] for i in range(0, len(pixels), 3)})


def _redrawn(explorer, before: str, failure: str) -> str:
    """Wait up to 90 s for the explorer's first image to differ from ``before``; return the new image's source."""
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        redrawn = explorer.locator(".widget-output img").first
        if redrawn.count() and redrawn.get_attribute("src") != before:
            return redrawn.get_attribute("src")
        time.sleep(0.25)
    pytest.fail(failure)


# `make test` drives the browser through the first notebook; the others are `make test-all`'s.
@pytest.mark.parametrize("assignment", [NOTEBOOKS[0]] + [pytest.param(a, marks=pytest.mark.exhaustive)
                                                         for a in NOTEBOOKS[1:]])
def test_the_explorer_redraws_a_real_plot_after_its_first_change(lab, assignment):
    from playwright.sync_api import sync_playwright

    url, token, folder = lab
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        try:
            # A workspace of its own, so that no notebook of an earlier test is restored beside it.
            page.goto(f"{url}/lab/workspaces/{assignment}/tree/{assignment}.ipynb?reset&token={token}")
            page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
            dialog = page.locator(".jp-Dialog button:has-text('Select')")
            try:
                dialog.click(timeout=5_000)  # "Select Kernel", where JupyterLab asks
            except Exception:
                pass
            page.click("li.lm-MenuBar-item:has-text('Run')")
            page.click(".lm-Menu-itemLabel:text-is('Run All Cells')")
            explorer = page.locator(".widget-vbox").first
            explorer.wait_for(state="attached", timeout=180_000)
            explorer.scroll_into_view_if_needed()
            plot = explorer.locator(".widget-output img").first
            plot.wait_for(state="attached", timeout=60_000)
            before = plot.get_attribute("src")
            control = explorer.locator(".widget-dropdown select, .widget-slider .noUi-handle").first
            if control.evaluate("e => e.tagName") == "SELECT":
                options = control.locator("option").all_inner_texts()
                # The second option: the neighbour of a default, which fits where the last (a 70B model) may not.
                control.select_option(label=options[1] if control.input_value() != options[1] else options[0])
            else:
                control.focus()
                page.keyboard.press("ArrowRight")
            before = _redrawn(explorer, before, f"{assignment}: the explorer did not redraw after its first control "
                                                "changed")
            # Then one step of its first slider (a length, on a log scale, in most explorers).
            explorer.locator(".widget-slider .noUi-handle").first.focus()
            page.keyboard.press("ArrowRight")
            _redrawn(explorer, before, f"{assignment}: the explorer did not redraw after a slider moved")
            time.sleep(1.0)  # let the last frame of the redraw land
            images = explorer.locator(".widget-output img")
            shots = [base64.b64decode(images.nth(i).get_attribute("src").split(",", 1)[1])
                     for i in range(images.count())]
            page.screenshot(path=str(folder / f"{assignment}.png"))
            for i, shot in enumerate(shots):
                (folder / f"{assignment}-plot{i}.png").write_bytes(shot)
        except BaseException:  # pytest.fail included: keep a picture of what the browser showed
            page.screenshot(path=str(folder / f"{assignment}-failed.png"))
            raise
        finally:
            browser.close()
    assert shots and all(_distinct_colours(shot) > 20 for shot in shots), \
        f"{assignment}: the redrawn plot is blank ({[_distinct_colours(s) for s in shots]} colours)"
