"""course/grading/autograde.py: a slip is charged once (a test that fails only because an earlier wrong function
it calls is re-run with the course's version, keeps its points, and its feedback names the function to fix)."""

import os

import pytest

from course.grade import grade
from course.grading import sandbox
from course.grading.nbgrader_run import SOURCE

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cascade(tmp_path_factory):
    """02 with one slip: kv_bytes_per_token forgets K and V (half the bytes); every later exercise calls it."""
    from course import demo
    from course.grading.nbgrader_run import RELEASE, read_notebook, write_notebook

    if sandbox.isolation() == sandbox.NO_SANDBOX:
        (pytest.fail if os.environ.get("CI") else pytest.skip)("no sandbox on this machine: " + sandbox.INSTALL_HINT)
    assignment = "02_kv_cache"
    answers = demo.answers_of(read_notebook(SOURCE / assignment / f"{assignment}.ipynb"))
    slip = answers["ex1_kv_per_token"].replace("values = 2 * model.layers", "values = model.layers")
    assert slip != answers["ex1_kv_per_token"]
    folder = tmp_path_factory.mktemp("cascade")
    release = read_notebook(RELEASE / assignment / f"{assignment}.ipynb")
    write_notebook(demo.fill(release, dict(answers, ex1_kv_per_token=slip)),
                   folder / "submissions" / "one_slip" / assignment / f"{assignment}.ipynb")
    rows = grade(folder / "submissions", folder / "graded", workers=1, quiet=True)
    # The autograded notebook: what formgrader shows and the feedback page is made from.
    autograded = "\n".join(p.read_text() for p in (folder / "graded").rglob("autograded/**/*.ipynb"))
    return rows[0], autograded


def test_a_slip_is_charged_once(cascade):
    row, feedback = cascade
    # kv_bytes_per_token's own tests are 1 + 3 points of the 30 autograded; the seven later exercises that call it
    # pass with the course's version, so they keep theirs.
    assert row.score == 30 - (1 + 3), (row.cells, row.flags)
    assert row.cells["test_kv_per_token_visible"][0] == 0 and row.cells["test_kv_per_token_hidden"][0] == 0
    assert any("passes with the course's kv_bytes_per_token" in f for f in row.flags), row.flags
    assert "fix kv_bytes_per_token first" in feedback


def test_course_cells_that_fail_only_for_the_library_copy_say_so_in_the_feedback(cascade):
    """02's reveal cells record predictions with the checker, whose reveals the copy leaves out: a note, not an
    ImportError the student would read as theirs."""
    _, autograded = cascade
    assert "Not run at grading: the grader's copy of the library leaves out `exercises`" in autograded
    assert "cannot import name 'exercises'" not in autograded


def test_only_errors_caused_by_the_copy_are_explained():
    from course.grading.autograde import _explained

    def error(ename, evalue):
        return {"output_type": "error", "ename": ename, "evalue": evalue, "traceback": []}

    for caused in (error("ImportError", "cannot import name 'exercises' from 'rooflab' (/lib/rooflab/__init__.py)"),
                   error("AttributeError", "module 'rooflab' has no attribute 'prefill'"),
                   error("AttributeError", "'Model' object has no attribute 'weight_bytes'"),
                   error("NameError", "name 'steady_state' is not defined")):
        assert _explained(caused)["output_type"] == "stream", caused
    # The student's own errors stay: a typo, a name the library never had, an error of their code.
    for own in (error("AttributeError", "module 'rooflab' has no attribute 'prefil'"),
                error("NameError", "name 'ttft' is not defined"),
                error("ZeroDivisionError", "division by zero")):
        assert _explained(own) == own
    assert _explained({"output_type": "stream", "name": "stdout", "text": "x"})["text"] == "x"
