"""The grading pipeline end to end on the simulated class.

Expected scores are derived from which test cells each student's fault breaks
(cell points in brackets; 40 autograded points in all, 12 in visible tests):
predict [2]; prefill_flops [1 visible + 3 hidden]; weight_bytes [1+2];
decode_bytes [1+3]; roofline_time [1+3]; ttft_and_itl [1+3];
intensities [1+3]; speedups [1+3]; sla [1+4]; decode_share [1+2]; mfu/mbu [1+2].
"""

import csv
import zipfile

import pytest

from course import demo
from course.grade import grade

pytestmark = pytest.mark.slow

A = "01_two_phases"
EXPECTED = {
    # student: (score, status, manual points pending)
    "ada": (40, "graded", 10),  # the reference answers
    "blaise": (0, "graded", 0),  # blank: every test fails; an untouched written answer needs no grading
    "cora": (21, "graded", 0),  # predict, ex2 and ex3 done: 2 + 4 + 3 + 4 + 4 + 4
    # ms for s in roofline_time: roofline_time [4] and ttft_and_itl [4] fail; speed-up ratios survive
    "dmitri": (32, "graded", 10),
    # GB for GiB in weight_bytes: weight_bytes [3], the hidden decode_bytes totals [3], the hidden
    # ttft_and_itl [3] and intensities [4] fail.  The visible decode_bytes and ITL pass by coincidence:
    # weights / 1.074 lands within 2 % of the careful count that skips the embedding table.
    "edsger": (27, "graded", 10),
    # forgot K and V: only the hidden KV-part test [3] sees it; elsewhere the cache is under 2 % of the bytes
    "frances": (37, "graded", 10),
    # prefill_flops raises: it [4], ttft_and_itl [4], intensities [4] and speedups [4] fail
    "grace": (24, "graded", 10),
    # the decode_share cell loops until the per-cell timeout: decode_share [3] fails, the rest runs
    "hedy": (37, "graded", 10),
    "ivan": (40, "graded", 10),  # deleted a test cell: restored
    "joan": (40, "graded", 10),  # pasted an answer cell twice: rebuilt
    "katherine": (0, "ungradable", 0),  # corrupt JSON
    "linus": (40, "graded", 10),  # a warning on stderr does not zero a passing test
    "margaret": (12, "graded", 10),  # hard-coded visible answers: the 12 visible points only
    "niklaus": (40, "graded", 10),  # renamed notebook: found and renamed back
    "olga": (0, "ungradable", 0),  # os._exit kills the kernel: nbgrader drops the submission
}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    folder = tmp_path_factory.mktemp("demo")
    demo.write_class(folder / "submissions")
    rows = grade(folder / "submissions", folder / "graded", workers=2, quiet=True)
    return folder, {r.student: r for r in rows}


def test_every_student_gets_the_grade_the_design_implies(graded):
    _, rows = graded
    assert set(rows) == set(EXPECTED)
    got = {s: (r.score, r.status, r.manual_pending) for s, r in rows.items()}
    assert got == EXPECTED
    assert all(r.max_score == 40 for r in rows.values())


def test_reference_full_marks_and_blank_zero_on_every_cell(graded):
    _, rows = graded
    assert all(score == top for score, top in rows["ada"].cells.values())
    assert len(rows["blaise"].cells) == 21 and all(score == 0 for score, _ in rows["blaise"].cells.values())


def test_reasons_are_recorded(graded):
    _, rows = graded
    assert "not valid JSON" in rows["katherine"].reason
    assert "Kernel died" in rows["olga"].reason
    assert "rebuilt from the release copy" in rows["ivan"].reason and "deleted" in rows["ivan"].reason
    assert "appears 2 times" in rows["joan"].reason
    assert "renamed" in rows["niklaus"].reason
    assert rows["ada"].reason == ""


def test_checker_names_the_mistakes(graded):
    _, rows = graded
    assert ("test_roofline_time_visible", "milliseconds for seconds") in rows["dmitri"].mistakes
    assert ("test_weight_bytes_visible", "GB for GiB") in rows["edsger"].mistakes
    assert ("test_decode_bytes_hidden", "forgot K and V (or the 2 bytes of an fp16 value)") in rows["frances"].mistakes


def test_grades_csv_feedback_and_report(graded):
    folder, rows = graded
    out = folder / "graded"
    with open(out / "grades.csv", newline="") as handle:
        table = list(csv.DictReader(handle))
    assert list(table[0]) == ["student", "assignment", "score", "max_score", "manual_pending", "status", "reason"]
    assert {r["student"] for r in table} == set(EXPECTED)
    feedback = out / "feedback" / "ada" / A / f"{A}.html"
    assert feedback.exists()
    page = feedback.read_text()
    assert "BEGIN HIDDEN TESTS" not in page and "Mixtral-8x7B&quot;, 4096" not in page and '("Mixtral-8x7B", 4096)' not in page
    wrong = (out / "feedback" / "dmitri" / A / f"{A}.html").read_text()
    assert "milliseconds for seconds" in wrong
    report = (out / "report" / "README.md").read_text()
    assert "milliseconds for seconds" in report and "GB for GiB" in report
    assert (out / "report" / f"{A}_scores.png").stat().st_size > 10_000


SMALL = ["ada", "dmitri", "joan"]  # right, a unit mistake, a repaired notebook


def _scores(rows):
    return {(r.student, r.assignment): (r.score, r.status, r.manual_pending, tuple(sorted(r.cells.items())))
            for r in rows}


def test_same_grades_twice_with_one_or_two_workers_from_a_folder_or_a_zip(tmp_path):
    submissions = tmp_path / "class" / "submissions"
    demo.write_class(submissions, students=[s for s in demo.CLASS if s.name in SMALL])
    archive = tmp_path / "class.zip"
    with zipfile.ZipFile(archive, "w") as handle:
        for path in submissions.rglob("*.ipynb"):
            handle.write(path, path.relative_to(tmp_path / "class"))  # inside one top folder, as an LMS exports
    one = grade(submissions, tmp_path / "one", workers=1, quiet=True)
    two = grade(archive, tmp_path / "two", workers=2, quiet=True)
    again = grade(archive, tmp_path / "two", workers=2, quiet=True)  # over the previous run's output
    assert _scores(one) == _scores(two) == _scores(again)
    assert {r.student: r.score for r in one} == {"ada": 40, "dmitri": 32, "joan": 40}
