"""What the tests of the small graded class share (tests/conftest.py's ``term``: 01_two_phases graded once for
ada, every answer right; dmitri, milliseconds for seconds; katherine, a corrupt file): its names, and what a
grader does to it by hand (formgrader's score and comment), what its feedback page says, `course` as a command."""

import subprocess
import sys

from course import demo
from course.grading.nbgrader_run import ROOT

A = "01_two_phases"
WRITTEN = "written_faster_gpu"
DB = "nbgrader/gradebook.db"


def students(*names):
    return [s for s in demo.CLASS if s.name in names]


def gradebook(out):
    from nbgrader.api import Gradebook

    return Gradebook(f"sqlite:///{out / DB}", course_id="rooflab")


def grade_by_hand(out, student, score, comment):
    """What formgrader does when a grader types a score and a comment."""
    with gradebook(out) as book:
        grade_ = book.find_grade(WRITTEN, A, A, student)
        grade_.manual_score = score
        grade_.needs_manual_grade = False
        book.find_comment(WRITTEN, A, A, student).manual_comment = comment
        book.db.commit()


def written(out, student):
    with gradebook(out) as book:
        grade_ = book.find_grade(WRITTEN, A, A, student)
        comment = book.find_comment(WRITTEN, A, A, student)
        return grade_.manual_score, grade_.needs_manual_grade, comment.manual_comment


def page_of(out, student):
    path = out / "feedback" / student / A / f"{A}.html"
    return path.read_text(encoding="utf-8") if path.exists() else None


def course(*args, **kwargs):
    return subprocess.run([sys.executable, "-m", "course", *map(str, args)], cwd=ROOT, capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, **kwargs)
