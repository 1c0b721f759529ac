"""The suite's own machinery (tests/conftest.py): a Ctrl-C of the run leaves no grader or kernel running."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parent.parent

# One student whose every answer cell sleeps 9 s (under the 10 s a cell may take): a grading of minutes, which
# a Ctrl-C must cut short; without the suite's handler the grading thread waits for it to finish.
SLOW_GRADING = """
import json
from pathlib import Path

from course.grading import sandbox
from course.grade import grade
from course.grading.nbgrader_run import RELEASE


def test_a_long_grading(tmp_path):
    release = RELEASE / "01_two_phases" / "01_two_phases.ipynb"
    notebook = json.loads(release.read_text())
    for cell in notebook["cells"]:
        if cell["cell_type"] == "code" and cell["metadata"].get("nbgrader", {}).get("solution"):
            cell["source"] = "import time\\ntime.sleep(9)\\n"
    for student in ("sleepy", "drowsy"):
        target = tmp_path / "in" / student / "01_two_phases" / release.name
        target.parent.mkdir(parents=True)
        target.write_text(json.dumps(notebook))
    grade(tmp_path / "in", tmp_path / "out", workers=1, quiet=True,
          no_sandbox=sandbox.isolation() == sandbox.NO_SANDBOX)
"""


def _cmdline(process: psutil.Process) -> str:
    try:
        return " ".join(process.cmdline())
    except psutil.Error:
        return ""


@pytest.mark.slow
def test_ctrl_c_while_grading_leaves_no_nbgrader_or_kernel_running(tmp_path):
    # The suite's machinery as `make test` runs it (two xdist workers), on a test that grades in the sandbox.
    (tmp_path / "test_long_grading.py").write_text(SLOW_GRADING)
    run = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-n", "2", "-p", "no:cacheprovider", "-p", "tests.conftest",
         f"--basetemp={tmp_path / 'run'}", f"--rootdir={tmp_path}", str(tmp_path / "test_long_grading.py")],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True)  # a process group of its own, as a terminal gives `make test`
    try:
        deadline = time.monotonic() + 300
        tree: list[psutil.Process] = []
        while time.monotonic() < deadline and run.poll() is None:
            tree = psutil.Process(run.pid).children(recursive=True)
            lines = [_cmdline(p) for p in tree]
            # the grader: `nbgrader autograde`, or a child forked from the warm nbgrader (course.grading.warm_nbgrader)
            graders = [l for l in lines if "nbgrader autograde" in l or "course.grading.warm_nbgrader" in l]
            if graders and any("kernel_runner" in l for l in lines):
                break
            time.sleep(0.1)
        else:
            pytest.fail(f"no kernel was started within 300 s (exit status {run.poll()}):\n{run.communicate()[0]}")
        tree = psutil.Process(run.pid).children(recursive=True)  # the whole tree at the moment of the Ctrl-C
        os.killpg(run.pid, signal.SIGINT)  # what the terminal sends the foreground process group
        # Stopped at once, not after the queued student's grading (minutes): the tree is killed, not awaited.
        output = run.communicate(timeout=60)[0]
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
    _, alive = psutil.wait_procs(tree, timeout=10)
    assert not alive, [f"{p.pid}: {_cmdline(p)[:120]}" for p in alive]
    assert run.returncode != 0, output  # interrupted, and it says so
