"""course/records/lateness.py: due dates read as UTC, how late a hand-in was, and the penalty per started day."""

import json

import pytest

from course.grading import nbgrader_run
from course.records import lateness

A = "01_two_phases"


def test_a_time_with_a_zone_is_converted_and_one_without_is_utc():
    # 17:00 at UTC+1 is 16:00 UTC
    assert lateness.utc("2026-02-06T17:00:00+01:00", "x") == "2026-02-06T16:00:00+00:00"
    assert lateness.utc("2026-02-06T17:00", "x") == "2026-02-06T17:00:00+00:00"
    with pytest.raises(lateness.DueDateError, match=r"\[due\] 01: 'friday' is not an ISO 8601 time"):
        lateness.utc("friday", "[due] 01")


def test_the_penalty_counts_started_days_and_stops_at_the_cap():
    due = "2026-02-06T16:00:00+00:00"
    # handed in 2 days and 1 hour late: 49 h = 176,400 s; 3 started days x 0.1 = 0.3 of the points
    handin = {"handed_in": "2026-02-08T17:00:00+00:00"}
    late = lateness.late(lateness.Policy({A: due}, 0.1, 1.0), A, handin)
    assert late.seconds == 176_400
    assert late.penalty_share == pytest.approx(0.3)
    assert late.describe() == "late by 2 d 1 h"
    assert lateness.late(lateness.Policy({A: due}, 0.1, 0.25), A, handin).penalty_share == 0.25
    # no penalty configured: late, but nothing taken off
    assert lateness.late(lateness.Policy({A: due}), A, handin).penalty_share == 0.0


def test_on_time_unknown_and_lms_marked_hand_ins():
    policy = lateness.Policy({A: "2026-02-06T16:00:00+00:00"}, 0.1, 1.0)
    assert lateness.late(policy, A, {"handed_in": "2026-02-06T16:00:00+00:00"}) is None  # exactly on time
    assert lateness.late(policy, A, None) is None
    assert lateness.late(policy, "02_kv_cache", {"handed_in": "2030-01-01T00:00:00+00:00"}) is None  # no due date
    marked = lateness.late(policy, A, {"handed_in": None, "marked_late": True})
    assert (marked.seconds, marked.penalty_share) == (None, 0.0)
    assert "marked late by the LMS" in marked.describe()


@pytest.mark.parametrize("seconds, text", [
    (3 * 86400 + 4 * 3600 + 59 * 60, "3 d 4 h"),  # the two largest units, rounded down
    (2 * 3600 + 5 * 60 + 30, "2 h 5 min"),
    (30, "1 min"),  # late at all is at least a minute
    (0, "0 min"),
])
def test_durations_read_as_a_person_says_them(seconds, text):
    assert lateness.duration(seconds) == text


def test_course_toml_gives_dates_and_penalty_and_refuses_a_share_above_one(tmp_path):
    assert lateness.course_policy(tmp_path) == lateness.Policy({})
    (tmp_path / "course.toml").write_text(f'[due]\n{A} = "2026-02-06T17:00:00+01:00"\n'
                                          "[late]\npenalty_per_day = 0.1\nmax_penalty = 0.5\n")
    assert lateness.course_policy(tmp_path) == lateness.Policy({A: "2026-02-06T16:00:00+00:00"}, 0.1, 0.5)
    (tmp_path / "course.toml").write_text("[late]\npenalty_per_day = 10\n")
    with pytest.raises(lateness.DueDateError, match=r"\[late\]: penalty_per_day and max_penalty are shares"):
        lateness.course_policy(tmp_path)


def test_a_due_option_must_name_a_known_assignment():
    assert lateness.parse_due([f"{A}=2026-02-06T17:00:00+01:00"], [A]) == {A: "2026-02-06T16:00:00+00:00"}
    with pytest.raises(lateness.DueDateError, match="expected ASSIGNMENT=TIME with ASSIGNMENT one of 01_two_phases"):
        lateness.parse_due(["99_none=2026-02-06T17:00"], [A])


def test_a_later_run_keeps_the_dates_given_before(tmp_path, monkeypatch):
    course, out = tmp_path / "course", tmp_path / "out"
    course.mkdir()
    (course / "course.toml").write_text(f'[due]\n{A} = "2026-02-06T16:00:00Z"\n02_kv_cache = "2026-02-13T16:00Z"\n')
    monkeypatch.setattr(nbgrader_run, "_chosen", course.resolve())
    # the first run moves 01 by --due; the second moves 02 only, and 01 keeps the first run's date
    lateness.save_due(out, {A: "2026-02-07T16:00:00+00:00"})
    policy = lateness.save_due(out, {"02_kv_cache": "2026-02-14T16:00:00+00:00"})
    assert policy.due == {A: "2026-02-07T16:00:00+00:00", "02_kv_cache": "2026-02-14T16:00:00+00:00"}
    assert lateness.load_policy(out / "nbgrader") == policy
    assert json.loads((out / "nbgrader" / "dates.json").read_text())["given"] == policy.due
