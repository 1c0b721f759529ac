"""course/records/export.py: the grades of the small class (tests/conftest.py's ``term``) in each format an LMS imports:
plain CSV, Canvas and Moodle, with graded, pending and ungradable rows."""

import csv

import pytest

from tests.small_class import A, course, grade_by_hand

pytestmark = pytest.mark.slow  # reads the small class graded once per run (tests/conftest.py's term)


def test_export_rows_for_graded_pending_and_ungradable_in_each_format(term_copy, tmp_path):
    grade_by_hand(term_copy, "ada", 7, "fine")
    read = {}
    for fmt in ("csv", "canvas", "moodle"):
        done = course("export", term_copy, "--format", fmt, "-o", tmp_path / f"{fmt}.csv")
        assert done.returncode == 0, done.stderr
        with open(tmp_path / f"{fmt}.csv", newline="", encoding="utf-8") as handle:
            read[fmt] = list(csv.reader(handle))
        if fmt != "csv":
            assert "dmitri" in done.stdout and "katherine" in done.stdout  # the blanks, listed with why

    header, *lines = read["csv"]
    table = {line[0]: dict(zip(header, line)) for line in lines}
    assert (table["ada"]["status"], table["ada"]["score"], table["ada"]["max_score"]) == ("graded", "47", "50")
    assert (table["ada"]["autograded"], table["ada"]["manual"]) == ("40", "7")
    assert (table["dmitri"]["status"], table["dmitri"]["score"], table["dmitri"]["autograded"],
            table["dmitri"]["manual_pending"]) == ("pending", "", "36", "10")
    assert (table["katherine"]["status"], table["katherine"]["score"]) == ("ungradable", "")
    assert "not valid JSON" in table["katherine"]["reason"]

    assert read["canvas"] == [
        ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", A],
        ["Points Possible", "", "", "", "", "50"],
        ["ada", "", "", "ada", "", "47"],
        ["dmitri", "", "", "dmitri", "", ""],
        ["katherine", "", "", "katherine", "", ""],
    ]

    header, *lines = read["moodle"]
    assert header == ["Username", f"{A} (Real)", f"{A} (Feedback)"]
    moodle = {line[0]: line[1:] for line in lines}
    assert moodle["ada"][0] == "47" and moodle["ada"][1].startswith("Final grade 47/50")
    assert "written answers 7/10" in moodle["ada"][1]
    assert moodle["dmitri"][0] == "-" and "manual grading" in moodle["dmitri"][1]
    assert moodle["katherine"][0] == "-" and "not valid JSON" in moodle["katherine"][1]
