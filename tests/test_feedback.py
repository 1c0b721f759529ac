"""course/review/feedback.py: the students' feedback pages of the small class (tests/conftest.py's ``term``): written
again with the hand grade, and carrying the figures that reached the graded notebook."""

import csv
import json

import pytest

from course.grading.nbgrader_run import SOLUTIONS
from tests.small_class import A, course, grade_by_hand, page_of

pytestmark = pytest.mark.slow  # reads the small class graded once per run (tests/conftest.py's term)


def test_feedback_is_regenerated_with_the_manual_score(term_copy):
    grade_by_hand(term_copy, "ada", 7, "Say which phase each spec moves.")
    done = course("feedback", term_copy)
    assert done.returncode == 0, done.stderr
    page = page_of(term_copy, "ada")
    assert "7.0 / 10.0" in page and "Say which phase each spec moves." in page
    assert "Rubric for the instructor" not in page and "BEGIN HIDDEN TESTS" not in page
    assert page_of(term_copy, "dmitri") is None  # still waiting
    grade_by_hand(term_copy, "ada", 9, "Better.")
    assert course("feedback", term_copy).returncode == 0
    page = page_of(term_copy, "ada")
    assert "9.0 / 10.0" in page and "Better." in page and "7.0 / 10.0" not in page
    with open(term_copy / "grades.csv", newline="") as handle:
        assert {r["student"]: r["manual_score"] for r in csv.DictReader(handle)}["ada"] == "9"


def test_figures_reach_the_graded_notebook_and_the_feedback(term_copy):
    def images(notebook):
        return sum("image/png" in o.get("data", {}) for c in notebook["cells"] for o in c.get("outputs", []))

    reference = images(json.loads((SOLUTIONS / A / f"{A}.ipynb").read_text()))  # the reference run's figures
    # A figure drawn from an answer the sandbox's library copy leaves out fails at grading, by design
    # (docs/design.md, "Trust model"); the others reach the graded notebook, and all of those its feedback.
    shown = images(json.loads((term_copy / "nbgrader" / "autograded" / "ada" / A / f"{A}.ipynb").read_text()))
    assert 1 <= shown <= reference
    done = course("feedback", term_copy, "--all")
    assert done.returncode == 0, done.stderr
    assert page_of(term_copy, "ada").count("data:image/png") == shown
