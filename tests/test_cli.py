"""The `course` command as a self-learner and an instructor call it."""

import subprocess
import sys

import pytest

from course import demo
from course.grading.nbgrader_run import ROOT


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
    # quiet: no kernel warnings, only the course folder every command names
    assert right.stderr == wrong.stderr == f"course folder: {ROOT} (the current directory)\n"


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
    assert "0/30 points" in blank.stdout


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


def test_help_lists_the_semester_jobs():
    shown = course("--help").stdout
    for job in ("formgrader", "feedback", "export"):
        assert job in shown
    assert "--fresh" in course("grade", "--help").stdout and "--feedback-now" in course("grade", "--help").stdout


def _course_in(cwd, *args):
    return subprocess.run([sys.executable, "-m", "course", *map(str, args)], cwd=cwd, capture_output=True, text=True)


def test_every_command_says_which_course_folder(tmp_path):
    here = _course_in(ROOT, "export", tmp_path / "nowhere")
    assert f"course folder: {ROOT} (the current directory)" in here.stderr
    assert here.returncode == 1 and "not a graded course" in here.stderr
    elsewhere = _course_in(tmp_path, "feedback", tmp_path / "nowhere")
    assert f"course folder: {ROOT} (the checkout `course` is installed from" in elsewhere.stderr
    chosen = _course_in(tmp_path, "--course", ROOT, "feedback", tmp_path / "nowhere")
    assert f"course folder: {ROOT} (--course)" in chosen.stderr
    after = _course_in(tmp_path, "feedback", tmp_path / "nowhere", "--course", ROOT)
    assert f"course folder: {ROOT} (--course)" in after.stderr
    wrong = _course_in(tmp_path, "--course", tmp_path, "build")
    assert wrong.returncode == 2 and "no nbgrader_config.py" in wrong.stderr


def test_a_course_folder_other_than_the_checkout(tmp_path):
    (tmp_path / "nbgrader_config.py").write_text((ROOT / "nbgrader_config.py").read_text())
    (tmp_path / "source").mkdir()
    listed = _course_in(tmp_path, "export", tmp_path / "nowhere")
    assert f"course folder: {tmp_path} (the current directory)" in listed.stderr


def test_course_check_prints_what_a_passing_check_derived():
    """`course check` runs in a terminal, where a check's rendered "What you derived" box would be lost: the text
    is taken from the cell's display output, and only that box (not other Markdown or printed text)."""
    from course.selfcheck import _derived

    cell = {"outputs": [{"output_type": "stream", "name": "stdout", "text": "3 cases right.\n"},
                        {"output_type": "display_data", "data": {"text/markdown": "**What you derived.** $b + s/g$"}},
                        {"output_type": "display_data", "data": {"text/markdown": "a table"}}]}
    assert _derived(cell) == ["**What you derived.** $b + s/g$"]
    assert _derived({"outputs": []}) == []
