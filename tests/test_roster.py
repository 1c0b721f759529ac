"""course/records/roster.py: Canvas and Moodle gradebook exports read as each LMS writes them."""

import pytest

from course.records import roster

CANVAS = (
    "Student,ID,SIS User ID,SIS Login ID,Section,Assignment 1 (123456)\n"
    "    Points Possible,,,,,40\n"
    '"Lovelace, Ada",340934,S001,alovelace,Section A,30\n'
    '"Hopper, Grace",340935,S002,,Section A,\n'   # no login: the SIS user id stands in
)


def test_a_canvas_export_skips_points_possible_and_falls_back_to_the_sis_user_id(tmp_path):
    path = tmp_path / "canvas.csv"
    path.write_text(CANVAS)
    read = roster.read(path)
    assert read.lms == "canvas"
    assert [s.login for s in read.students] == ["alovelace", "S002"]
    ada = read.by_lms_id()["340934"]
    assert (ada.first, ada.last, ada.full_name, ada.sortable_name) == ("Ada", "Lovelace", "Ada Lovelace",
                                                                       "Lovelace, Ada")


def test_a_moodle_export_with_a_byte_order_mark_and_semicolons(tmp_path):
    path = tmp_path / "moodle.csv"
    path.write_text("\ufeffFirst name;Last name;ID number;Email address;Username\n"
                    "Ada;Lovelace;;ada@example.org;alovelace\n"
                    "Grace;Hopper;;grace@example.org;\n"   # no username: the email is the login
                    "Nobody;Here;;;\n", encoding="utf-8")   # neither: not a student the LMS can match
    read = roster.read(path)
    assert read.lms == "moodle"
    assert [s.login for s in read.students] == ["alovelace", "grace@example.org"]
    assert [s.login for s in read.by_full_name()["ada lovelace"]] == ["alovelace"]


def test_a_grading_worksheet_gives_the_participant_number(tmp_path):
    path = tmp_path / "worksheet.csv"
    path.write_text("Identifier,Full name,Email address\nParticipant 12345,Ada Lovelace,ada@example.org\n")
    (ada,) = roster.read(path).students
    assert (ada.lms_id, ada.first, ada.last, ada.login) == ("12345", "Ada", "Lovelace", "ada@example.org")


def test_a_roster_survives_saving_and_loading(tmp_path):
    path = tmp_path / "canvas.csv"
    path.write_text(CANVAS)
    read = roster.read(path)
    read.save(tmp_path / "roster.json")
    assert roster.Roster.load(tmp_path / "roster.json") == read
    assert roster.Roster.load(tmp_path / "none.json") is None


def test_a_file_that_is_not_text_says_so(tmp_path):
    path = tmp_path / "grades.xlsx"
    path.write_bytes(b"PK\x03\x04\xff\xfe")
    with pytest.raises(roster.RosterError, match="cannot be read as UTF-8 text"):
        roster.read(path)
