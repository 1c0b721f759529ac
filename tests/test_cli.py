"""The `course` command as a self-learner and an instructor call it."""

import subprocess
import sys

import pytest

from course import demo
from course.nbgrader_run import ROOT


def course(*args):
    return subprocess.run([sys.executable, "-m", "course", *args], cwd=ROOT, capture_output=True, text=True)


def test_help_lists_the_four_jobs():
    shown = course("--help").stdout
    for job in ("build", "grade", "demo", "check"):
        assert job in shown


@pytest.mark.slow
def test_check_scores_the_visible_tests_with_hints(tmp_path):
    submissions = tmp_path / "class"
    demo.write_class(submissions, students=[s for s in demo.CLASS if s.name in ("ada", "dmitri")])
    right = course("check", str(submissions / "ada" / "01_two_phases" / "01_two_phases.ipynb"))
    assert right.returncode == 0 and "12/12 points" in right.stdout
    wrong = course("check", "--hidden", str(submissions / "dmitri" / "01_two_phases" / "01_two_phases.ipynb"))
    assert wrong.returncode == 1 and "32/40 points" in wrong.stdout
    assert "[mistake: milliseconds for seconds]" in wrong.stdout
    assert right.stderr == wrong.stderr == ""  # quiet: no kernel warnings


def test_grade_refuses_a_missing_folder(tmp_path):
    failed = course("grade", str(tmp_path / "nowhere"), "--out", str(tmp_path / "out"))
    assert failed.returncode != 0 and "SUBMISSIONS must be a folder or a zip" in failed.stderr
