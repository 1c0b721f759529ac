"""Hostile submissions against the grader: every one graded as designed, nothing outside touched.

The submissions are made by tests/adversarial.py from the release notebook of
01_two_phases; each kind carries its expected score and flag.  One grading run
covers them all (with the sandbox for real: CI installs bubblewrap), then the
checks that the attacks changed nothing: no process left, source/ and the
other students' grades intact, grades.csv not rewritten after the run.
"""

import csv
import hashlib
import os
import time

import pytest

from course.grading import sandbox
from course.grade import grade
from course.grading.nbgrader_run import SOURCE
from tests.adversarial import KINDS, write_submissions

pytestmark = pytest.mark.slow


def _tree_digest(folder):
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            digest.update(str(path.relative_to(folder)).encode() + path.read_bytes())
    return digest.hexdigest()


def _leftovers():
    """Processes the attacks start and mean to outlive their grading (other graders may run beside this test)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            command = open(f"/proc/{entry}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if command.startswith("sleep 61.2345") or "/**/grades.csv" in command:
            found.append(f"{entry}: {command[:80]}")
    return found


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    if sandbox.isolation() == sandbox.NO_SANDBOX:
        # CI installs bubblewrap and must test the sandbox for real; elsewhere say what is missing.
        (pytest.fail if os.environ.get("CI") else pytest.skip)("no sandbox on this machine: " + sandbox.INSTALL_HINT)
    folder = tmp_path_factory.mktemp("adversarial")
    write_submissions(folder / "submissions")
    source_before = _tree_digest(SOURCE)
    rows = grade(folder / "submissions", folder / "graded", workers=2, quiet=True)
    grades = folder / "graded" / "grades.csv"
    written = grades.read_bytes()
    time.sleep(5)  # a detached writer sleeps 3 s before it strikes
    return {
        "rows": {r.student: r for r in rows},
        "csv_unchanged": grades.read_bytes() == written,
        "source_unchanged": _tree_digest(SOURCE) == source_before,
        "leftovers": _leftovers(),
        "folder": folder,
    }


def test_at_least_thirty_kinds():
    assert len(KINDS) >= 30
    assert len({k.name for k in KINDS}) == len(KINDS)


@pytest.mark.exhaustive
@pytest.mark.parametrize("kind", KINDS, ids=[k.name for k in KINDS])
def test_each_kind_gets_its_designed_grade_and_flag(graded, kind):
    row = graded["rows"][kind.name]
    assert (row.score, row.status) == (kind.score, kind.status), (row.reason, row.flags, row.cells)
    if kind.flag:
        assert any(kind.flag in flag for flag in row.flags), row.flags


@pytest.mark.exhaustive
def test_every_submission_has_exactly_one_row(graded):
    assert sorted(graded["rows"]) == sorted(k.name for k in KINDS)
    with open(graded["folder"] / "graded" / "grades.csv", newline="") as handle:
        table = list(csv.DictReader(handle))
    assert sorted(r["student"] for r in table) == sorted(k.name for k in KINDS)
    assert "flags" in table[0]


@pytest.mark.exhaustive
def test_nothing_outside_the_sandbox_changed(graded):
    assert graded["source_unchanged"], "a submission changed source/"
    assert graded["csv_unchanged"], "grades.csv was rewritten after the run"
    assert graded["leftovers"] == [], graded["leftovers"]


@pytest.mark.exhaustive
def test_honest_students_are_not_flagged(graded):
    for name in ("correct", "blank", "renamed_file", "matplotlib_inline", "timeit_magic", "prints_globals",
                 "warning_hook", "imports_os", "noisy_warnings"):
        assert graded["rows"][name].flags == [], graded["rows"][name].flags
