"""course.grading.nbgrader_run: the course folder is one setting, read when it is needed, not when a module is imported."""

from pathlib import Path

import pytest

from course.grading import nbgrader_run
from course.records import graded


@pytest.fixture
def other_course(tmp_path, monkeypatch):
    """A second course folder with one assignment, chosen for the test and the checkout's restored after it."""
    (tmp_path / "source" / "99_tiny").mkdir(parents=True)
    (tmp_path / "source" / "99_tiny" / "99_tiny.ipynb").write_text("{}")
    monkeypatch.setattr(nbgrader_run, "_chosen", None)
    monkeypatch.delenv(nbgrader_run.VARIABLE, raising=False)
    return tmp_path  # monkeypatch puts the checkout back afterwards


def test_the_checkout_unless_another_folder_is_chosen(other_course):
    assert nbgrader_run.course_root() == nbgrader_run.INSTALLED
    assert "01_two_phases" in nbgrader_run.assignments()
    nbgrader_run.use_course(other_course)
    assert nbgrader_run.course_root() == other_course.resolve()
    assert (nbgrader_run.SOURCE, nbgrader_run.RELEASE) == (other_course / "source", other_course / "release")
    assert nbgrader_run.assignments() == ["99_tiny"]
    assert nbgrader_run.notebooks("99_tiny") == [other_course / "source" / "99_tiny" / "99_tiny.ipynb"]


def test_a_module_imported_before_the_choice_works_on_the_chosen_folder(other_course):
    # course.records.graded was imported above, with the checkout as the course; its source digest reads the new one
    before = graded.source_digest("01_two_phases")
    nbgrader_run.use_course(other_course)
    assert graded.source_digest("99_tiny") != before
    with pytest.raises(FileNotFoundError):
        (nbgrader_run.SOURCE / "01_two_phases" / "01_two_phases.ipynb").read_text()


def test_a_process_the_course_starts_works_on_the_same_folder(other_course, monkeypatch):
    nbgrader_run.use_course(other_course)
    env = nbgrader_run.environment()
    assert env[nbgrader_run.VARIABLE] == str(other_course.resolve())
    # in that process, nothing chosen: the variable names the folder
    monkeypatch.setattr(nbgrader_run, "_chosen", None)
    monkeypatch.setenv(nbgrader_run.VARIABLE, env[nbgrader_run.VARIABLE])
    assert nbgrader_run.course_root() == other_course.resolve()


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="SOURCES"):
        nbgrader_run.SOURCES  # noqa: B018
