"""course/grading/warm_nbgrader.py: nbgrader loaded once, forked per request, each run as the command line runs it."""

import subprocess

import pytest

from course.grading.warm_nbgrader import WarmNbgrader
from course.grading.nbgrader_run import course_root, environment

pytestmark = pytest.mark.slow  # it starts nbgrader

GIB = 2**30


@pytest.fixture
def warm():
    runner = WarmNbgrader(course_root(), environment())
    yield runner
    runner.close()


def test_each_request_is_nbgrader_as_the_command_line_runs_it(warm):
    from nbgrader import __version__

    done = warm.run(["--version"], 4 * GIB, 256, 2**30, timeout=120)
    assert done.returncode == 0 and __version__ in done.stdout + done.stderr
    first = warm._process.pid
    # a setting nbgrader refuses: exit status 1 and its message, as `nbgrader --NbGraderApp.log_level=NOPE` gives
    wrong = warm.run(["--NbGraderApp.log_level=NOPE"], 4 * GIB, 256, 2**30, timeout=120)
    assert wrong.returncode == 1 and "Bad config" in wrong.stdout + wrong.stderr
    assert warm._process.pid == first  # one warm process served both: the imports were paid once


def test_past_its_time_the_child_is_killed_and_the_next_request_still_served(tmp_path):
    # a course whose config file sleeps: the request runs far past its timeout however fast the machine (a timeout
    # of a millisecond on a plain `--version` was once met by an idle machine)
    (tmp_path / "nbgrader_config.py").write_text("import time\ntime.sleep(60)\nc = get_config()\n")
    slow = WarmNbgrader(tmp_path, environment())
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            slow.run(["db", "student", "list"], 4 * GIB, 256, 2**30, timeout=2)
        assert slow.run(["--version"], 4 * GIB, 256, 2**30, timeout=120).returncode == 0  # `--version` reads no config
    finally:
        slow.close()


def test_close_ends_the_warm_process(warm):
    warm.run(["--version"], 4 * GIB, 256, 2**30, timeout=120)
    process = warm._process
    warm.close()
    assert process.poll() is not None
