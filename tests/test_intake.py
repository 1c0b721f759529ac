"""Submissions as they come (course.records.intake) and LMS rosters (course.records.roster), on files shaped as each LMS names them.

The names follow the LMS's documented download layouts (docs/decisions.md, "Submissions as they come"):
Canvas "<lastfirst>[_LATE]_<user id>_<submission id>_<file>", "-1" added to a resubmitted file's name; Moodle
"<Full Name>_<participant>_assignsubmission_file_/<file>"; nbgrader's exchange "<student>+<assignment>+<time>".
"""

import zipfile

import pytest

from course.records import intake, lateness, roster

A, B = "01_two_phases", "02_kv_cache"
KNOWN = [A, B]
NOTEBOOKS = {A: A, B: B}

CANVAS_ROSTER = """Student,ID,SIS User ID,SIS Login ID,Section,Assignment 1 (551)
    Points Possible,,,,,50
"Smith, Alice",12345,S001,asmith,Lab A,
"Jones, Bob",23456,S002,bjones,Lab B,
"""
MOODLE_ROSTER = """First name,Last name,ID number,Institution,Department,Email address
Alice,Smith,S001,,,alice@uni.example
Bob,Jones,S002,,,bob@uni.example
"""


def _write(folder, files):
    for name, text in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return folder


def _read(folder, tmp_path, listed=None, assignment=None):
    return intake.read(folder, tmp_path / "scratch", KNOWN, NOTEBOOKS, listed, assignment)


def test_a_canvas_download_is_placed_through_the_roster(tmp_path):
    listed = roster.read(_write(tmp_path, {"canvas.csv": CANVAS_ROSTER}) / "canvas.csv")
    assert listed.lms == "canvas"
    assert [(s.login, s.sortable_name, s.lms_id, s.sis_user_id, s.section) for s in listed.students] == [
        ("asmith", "Smith, Alice", "12345", "S001", "Lab A"), ("bjones", "Jones, Bob", "23456", "S002", "Lab B")]
    folder = _write(tmp_path / "dl", {
        f"smithalice_12345_67890_{A}.ipynb": "{}",
        f"jonesbob_LATE_23456_78901_{A}-1.ipynb": "{}",  # late, and a second attempt
        "doejane_99999_11111_01_two_phases.ipynb": "{}",  # not on the roster
        "smithalice_12345_67891_notes.pdf": "%PDF",
    })
    found = _read(folder, tmp_path, listed)
    placed = {(h.student, h.assignment): h for h in found.handins}
    assert sorted(placed) == [("asmith", A), ("bjones", A)]
    assert [p.name for p in placed["bjones", A].files] == [f"{A}.ipynb"]  # Canvas's "-1" taken off
    assert placed["bjones", A].marked_late and not placed["asmith", A].marked_late
    reasons = {s.path: s.reason for s in found.skipped}
    assert "not in the --roster" in reasons["doejane_99999_11111_01_two_phases.ipynb"]
    assert "not a notebook" in reasons["smithalice_12345_67891_notes.pdf"]


def test_a_moodle_download_is_placed_by_full_name(tmp_path):
    listed = roster.read(_write(tmp_path, {"moodle.csv": MOODLE_ROSTER}) / "moodle.csv")
    assert listed.lms == "moodle" and listed.by_login()["alice@uni.example"].full_name == "Alice Smith"
    archive = tmp_path / "moodle.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr(f"Alice Smith_4401_assignsubmission_file_/{A}.ipynb", "{}")
        z.writestr("Bob Jones_4402_assignsubmission_onlinetext_/onlinetext.html", "<p>hi</p>")
        z.writestr(f"Carol White_4403_assignsubmission_file_/{A}.ipynb", "{}")
    folder = intake.unpack(archive, tmp_path)
    found = _read(folder, tmp_path, listed)
    assert [(h.student, h.assignment, h.layout) for h in found.handins] == [("alice@uni.example", A, "moodle")]
    reasons = sorted(s.reason for s in found.skipped)
    assert any("onlinetext" in r for r in reasons) and any("'Carol White'" in r for r in reasons)


def test_the_exchange_keeps_the_latest_hand_in_and_its_time(tmp_path):
    folder = _write(tmp_path / "inbound", {
        f"ada+{A}+2026-02-06 15:00:00.000000 UTC+x1/{A}.ipynb": '{"first": 1}',
        f"ada+{A}+2026-02-06 15:00:00.000000 UTC+x1/timestamp.txt": "2026-02-06 15:00:00.000000 UTC",
        f"ada+{A}+2026-02-06 18:30:00.000000 UTC+x2/{A}.ipynb": '{"second": 1}',
        f"ada+{A}+2026-02-06 18:30:00.000000 UTC+x2/timestamp.txt": "2026-02-06 18:30:00.000000 UTC",
    })
    found = _read(folder, tmp_path)
    (handin,) = found.handins
    assert handin.handed_in == "2026-02-06T18:30:00+00:00" and handin.files[0].read_text() == '{"second": 1}'
    assert len(found.skipped) == 1 and "the latest" in found.skipped[0].reason
    # due 17:00 at UTC+1 (16:00 UTC): 2 h 30 min late; a 10 % per started day penalty takes 0.1 of the points
    policy = lateness.Policy({A: lateness.utc("2026-02-06T17:00:00+01:00", "test")}, 0.1, 0.5)
    late = lateness.late(policy, A, {"handed_in": handin.handed_in})
    assert (late.seconds, late.describe(), late.penalty_share) == (9000, "late by 2 h 30 min", 0.1)
    assert lateness.late(lateness.Policy({A: "2026-02-06T19:00:00+00:00"}), A, {"handed_in": handin.handed_in}) \
        is None


def test_the_plain_layout_and_what_it_cannot_place(tmp_path):
    folder = _write(tmp_path / "class", {
        f"ada/{A}/{A}.ipynb": "{}", f"ada/{B}/{B}.ipynb": "{}", "readme.txt": "hello",
        f"ada/{A}/data/extra.csv": "1", f"wrapper-free/{A}.ipynb": "{}",
    })
    found = _read(folder, tmp_path)
    assert [(h.student, h.assignment) for h in found.handins] == [("ada", A), ("ada", B)]
    reasons = {s.path: s.reason for s in found.skipped}
    assert set(reasons) == {"readme.txt", f"ada/{A}/data/extra.csv", f"wrapper-free/{A}.ipynb"}
    assert "subfolder" in reasons[f"ada/{A}/data/extra.csv"]


def test_a_roster_that_is_neither_says_what_it_expected(tmp_path):
    path = _write(tmp_path, {"x.csv": "name,grade\nada,3\n"}) / "x.csv"
    with pytest.raises(roster.RosterError, match="Canvas gradebook export"):
        roster.read(path)
    with pytest.raises(lateness.DueDateError, match="--due"):
        lateness.parse_due(["01_two_phases=next friday"], KNOWN)
