"""course/review/show.py: the grade table printed in a terminal."""

from types import SimpleNamespace

from course.review.show import table


def _row(**fields):
    base = dict(student="ada", assignment="01_two_phases", score=30.0, max_score=40.0, manual_score=0.0,
                manual_max=0.0, manual_pending=0.0, status="graded", flags=[], reason="")
    return SimpleNamespace(**{**base, **fields})


def test_columns_line_up_under_the_header():
    lines = table([_row(), _row(student="grace-hopper", score=7.5)]).splitlines()
    assert lines[0].split() == ["student", "assignment", "score", "by", "hand", "status", "flags", "reason"]
    # "grace-hopper" (12 characters) sets the first column's width, then two spaces
    assert lines[2].startswith("ada" + " " * 9 + "  01_two_phases")
    assert lines[3].startswith("grace-hopper  01_two_phases  7.5/40")
    assert lines[1].split()[0] == "-" * 12


def test_late_pending_review_and_missing_read_as_words():
    late = _row(late="late by 2 h 30 min", late_penalty=4.0)
    assert "30/40 (late by 2 h 30 min, -4)" in table([late])
    assert "10 to grade" in table([_row(manual_pending=10.0, manual_max=10.0, status="pending")])
    assert "7/10, kept, to review" in table([_row(manual_score=7.0, manual_max=10.0, manual_review=1)])
    missing = table([_row(status="not submitted")]).splitlines()[2]
    assert missing.split()[2] == "-"


def test_a_long_reason_is_cut_to_sixty_characters_and_flags_are_counted():
    text = table([_row(status="ungradable", reason="x" * 80, flags=["a", "b"])])
    assert "x" * 57 + "..." in text and "x" * 58 not in text
    # student, assignment, score ("-": an ungradable hand-in has no number, as in the exports), status, flags
    assert text.splitlines()[2].split()[2:5] == ["-", "ungradable", "2"]
