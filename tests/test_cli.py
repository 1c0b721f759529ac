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


@pytest.mark.slow
def test_check_hidden_finds_the_assignment_of_a_renamed_copy(tmp_path):
    renamed = tmp_path / "my copy (1).ipynb"
    renamed.write_text((ROOT / "release" / "02_kv_cache" / "02_kv_cache.ipynb").read_text())
    blank = course("check", "--hidden", str(renamed))
    assert blank.returncode == 1, blank.stderr
    assert "hidden tests from source/02_kv_cache/02_kv_cache.ipynb" in blank.stdout
    assert "0/25 points" in blank.stdout


def test_check_says_why_it_cannot_find_hidden_tests(tmp_path):
    stranger = tmp_path / "notes.ipynb"
    stranger.write_text('{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}')
    found = course("check", "--hidden", str(stranger))
    assert found.returncode == 2 and "none of the course's graded cells" in found.stdout
    broken = tmp_path / "broken.ipynb"
    broken.write_text("{not json")
    found = course("check", str(broken))
    assert found.returncode == 2 and "cannot read" in found.stdout and "Traceback" not in found.stderr


def test_grade_help_says_how_to_install_the_sandbox():
    shown = course("grade", "--help").stdout
    assert "bubblewrap" in shown and "--no-sandbox" in shown
