"""A class list from the LMS's own gradebook export: who each LMS id in a download's file names is.

Two exports are read as the LMS writes them (sources: docs/decisions.md, "Submissions as they come"):

- Canvas, *Grades → Export*: ``Student`` ("Last, First"), ``ID`` (the Canvas user id, the number in a
  "Download Submissions" file name), ``SIS User ID``, ``SIS Login ID``, ``Section``, then the assignment
  columns; a second row ``Points Possible`` (and, in newer exports, ``Manual Posting`` rows) is not a student.
- Moodle, *Grades → Export → Plain text file*: ``First name``, ``Last name``, ``ID number``, ``Institution``,
  ``Department``, ``Email address`` and, where the site exports it, ``Username``; or the assignment's
  *Download grading worksheet*: ``Identifier`` ("Participant 12345", the number in a "Download all
  submissions" folder name), ``Full name``, ``Email address``.

A student's login (the name their folder, grades.csv and feedback carry) is the LMS's login: Canvas's
``SIS Login ID`` (else ``SIS User ID``, else ``ID``); Moodle's ``Username`` (else the email address, which
Moodle's grade import can also match on).
"""

from __future__ import annotations

import csv
import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path


class RosterError(ValueError):
    """A --roster file that is not a Canvas or Moodle gradebook export."""


@dataclass(frozen=True)
class Student:
    """One student as the LMS knows them."""

    login: str
    first: str = ""
    last: str = ""
    lms_id: str = ""  # Canvas user id, or Moodle's participant number where the roster has it
    sis_user_id: str = ""
    sis_login_id: str = ""
    section: str = ""
    email: str = ""
    username: str = ""

    @property
    def full_name(self) -> str:
        """"First Last", as Moodle's folder names write it."""
        return " ".join(p for p in (self.first, self.last) if p)

    @property
    def sortable_name(self) -> str:
        """"Last, First", as Canvas's Student column writes it."""
        return ", ".join(p for p in (self.last, self.first) if p)


@dataclass(frozen=True)
class Roster:
    lms: str  # "canvas" or "moodle"
    students: tuple[Student, ...]

    def by_login(self) -> dict[str, Student]:
        return {s.login: s for s in self.students}

    def by_lms_id(self) -> dict[str, Student]:
        return {s.lms_id: s for s in self.students if s.lms_id}

    def by_full_name(self) -> dict[str, list[Student]]:
        found: dict[str, list[Student]] = {}
        for s in self.students:
            found.setdefault(_name_key(s.full_name), []).append(s)
        return found

    def save(self, path: Path) -> None:
        path.write_text(json.dumps({"lms": self.lms, "students": [asdict(s) for s in self.students]}, indent=1)
                        + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: Path) -> "Roster | None":
        if not path.is_file():
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
        return cls(data["lms"], tuple(Student(**s) for s in data["students"]))


def _name_key(name: str) -> str:
    return re.sub(r"\s+", " ", name).strip().casefold()


def read(path: Path) -> Roster:
    """Parse a Canvas or Moodle gradebook export; raise RosterError naming what is missing."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")  # Excel and Moodle may write a byte-order mark
    except (OSError, UnicodeDecodeError) as error:
        raise RosterError(f"--roster {path}: cannot be read as UTF-8 text ({error})") from None
    sample = text[:4096]
    try:
        dialect = csv.Sniffer().sniff(sample, delimiters=",;\t")
    except csv.Error:
        dialect = csv.excel
    rows = list(csv.DictReader(text.splitlines(), dialect=dialect))
    columns = {c.strip() for c in (rows[0].keys() if rows else [])}
    if {"Student", "ID", "SIS Login ID"} <= columns:
        return Roster("canvas", tuple(_canvas(rows)))
    if {"First name", "Last name"} <= columns or {"Identifier", "Full name"} <= columns:
        return Roster("moodle", tuple(_moodle(rows)))
    raise RosterError(f"--roster {path}: expected a Canvas gradebook export (columns Student, ID, SIS Login ID) or a "
                      f"Moodle one (First name, Last name; or Identifier, Full name); found {sorted(columns)}")


def _get(row: dict, name: str) -> str:
    return (row.get(name) or "").strip()


def _canvas(rows: list[dict]):
    for row in rows:
        student = _get(row, "Student")
        if not student or not _get(row, "ID") or student in ("Points Possible",) or student.startswith("Manual"):
            continue  # the Points Possible row, and posting-policy rows of newer exports
        last, _, first = student.partition(",")
        login = _get(row, "SIS Login ID") or _get(row, "SIS User ID") or _get(row, "ID")
        yield Student(login, first.strip(), last.strip(), _get(row, "ID"), _get(row, "SIS User ID"),
                      _get(row, "SIS Login ID"), _get(row, "Section"))


def _moodle(rows: list[dict]):
    for row in rows:
        email, username = _get(row, "Email address"), _get(row, "Username")
        if "Identifier" in row:
            participant = re.sub(r"\D", "", _get(row, "Identifier"))
            first, _, last = _get(row, "Full name").partition(" ")
        else:
            participant, first, last = "", _get(row, "First name"), _get(row, "Last name")
        login = username or email
        if not login:
            continue
        yield Student(login, first, last, participant, _get(row, "ID number"), email=email, username=username)
