"""course/records/graded.py: the graded course kept between runs: a re-grade merges (a hand grade survives an unchanged
answer and waits for a second look at a changed one), and a submission graded against a source that has changed
since is graded again (the ledger's source digest).  On the small class of tests/conftest.py's ``term``."""

import csv
import json

import pytest

from course import demo
from course.grade import grade
from tests.conftest import BARE
from tests.small_class import A, WRITTEN, grade_by_hand, page_of, students, written

pytestmark = pytest.mark.slow  # reads the small class graded once per run (tests/conftest.py's term)


def test_regrade_merges_and_keeps_manual_grades(term_copy, tmp_path):
    grade_by_hand(term_copy, "ada", 7, "Good on bandwidth; ask about prompt lengths.")
    grade_by_hand(term_copy, "dmitri", 5, "Which slowness?")
    ada_graded = term_copy / "nbgrader" / "autograded" / "ada" / A / f"{A}.ipynb"
    before = ada_graded.stat().st_mtime_ns
    # A late student, ada handing in the same file again, dmitri a new written answer.
    late = tmp_path / "late"
    demo.write_class(late, selected=[A], students=students("ada", "dmitri", "cora"))
    notebook = json.loads((late / "dmitri" / A / f"{A}.ipynb").read_text())
    answer = next(c for c in notebook["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == WRITTEN)
    answer["source"] = "Decode follows memory bandwidth, so buy bandwidth."
    (late / "dmitri" / A / f"{A}.ipynb").write_text(json.dumps(notebook))

    rows = {r.student: r for r in grade(late, term_copy, workers=2, quiet=True, no_sandbox=BARE)}

    # nothing lost: katherine was not in this run and keeps her row; cora did the first half (2+4+3+4+4+4)
    assert {s: (r.score, r.status, r.manual_pending) for s, r in rows.items()} == {
        "ada": (40, "graded", 0), "cora": (21, "graded", 0), "dmitri": (36, "graded", 10),
        "katherine": (0, "ungradable", 0)}
    assert written(term_copy, "ada") == (7, False, "Good on bandwidth; ask about prompt lengths.")
    assert rows["ada"].manual_score == 7
    assert ada_graded.stat().st_mtime_ns == before  # unchanged: not graded again
    # dmitri changed the answer he was graded on: the grade is kept, and it waits for a second look
    assert written(term_copy, "dmitri") == (5, True, "Which slowness?")
    with open(term_copy / "grades.csv", newline="") as handle:
        assert sorted(r["student"] for r in csv.DictReader(handle)) == ["ada", "cora", "dmitri", "katherine"]
    # ada has nothing pending now: her page is written, with the manual score and comment, without the rubric
    page = page_of(term_copy, "ada")
    assert "7.0 / 10.0" in page and "ask about prompt lengths" in page and "Rubric for the instructor" not in page
    assert page_of(term_copy, "dmitri") is None and page_of(term_copy, "katherine") is not None


def test_a_changed_source_regrades_what_was_graded_against_it(term, term_copy, tmp_path):
    grade_by_hand(term_copy, "ada", 6, "kept")
    ledger = json.loads((term_copy / "nbgrader" / "ledger.json").read_text())
    # as if source/ had changed since the class was graded: a test fixed
    ledger["sources"][A] = "the source as it was"
    for entry in ledger["submissions"].values():
        entry["source"] = "the source as it was"
    (term_copy / "nbgrader" / "ledger.json").write_text(json.dumps(ledger))
    ada_graded = term_copy / "nbgrader" / "autograded" / "ada" / A / f"{A}.ipynb"
    before = ada_graded.stat().st_mtime_ns
    # the same hand-ins again: unchanged files, but graded against a source that has changed since
    rows = {r.student: r for r in grade(term[0].parent / "week1", term_copy, quiet=True, no_sandbox=BARE)}
    assert ada_graded.stat().st_mtime_ns != before  # graded again
    assert {s: (r.score, r.status, r.manual_pending) for s, r in rows.items()} == {
        "ada": (40, "graded", 0), "dmitri": (36, "graded", 10), "katherine": (0, "ungradable", 0)}
    assert written(term_copy, "ada") == (6, False, "kept")  # same answer: the manual grade stands
    assert json.loads((term_copy / "nbgrader" / "ledger.json").read_text())["sources"][A] != ledger["sources"][A]


def test_a_grading_run_that_was_stopped_is_a_reason_not_a_zero(term):
    """nbgrader's run for ada stopped (a time limit): the notebook it left may be there, but the row says why
    (ungradable, the reason) rather than showing its zeros as a grade."""
    from course.records.graded import Ledger, read_rows

    root = term[0] / "nbgrader"
    ledger = Ledger.load(root)
    assert ledger.entries["ada", A].grader_problem is None
    ledger.entries["ada", A].grader_problem = "grading took longer than 300 s (300 s an assignment) and was stopped"
    rows = {r.student: r for r in read_rows(root, ledger)}  # the ledger changed in memory only
    assert (rows["ada"].score, rows["ada"].status) == (0.0, "ungradable")
    assert "took longer than 300 s" in rows["ada"].reason
    assert rows["dmitri"].status == "graded"  # the others as graded
