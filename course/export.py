"""`course export [OUT] --format csv|canvas|moodle`: the gradebook, manual points merged, for an LMS.

Every student the graded course knows appears, in every assignment anyone handed in, with one of four
statuses:

- ``graded``: nothing left to grade; the score is the autograded points plus the written answers' points;
- ``pending``: a written answer waits for manual grading; no score is given (never a 0 that looks final);
- ``ungradable``: the hand-in could not be graded; no score, and the reason;
- ``missing``: nothing handed in for this assignment.

Formats (sources and the choices made: docs/decisions.md, "Exports for an LMS"):

- ``csv``: one row per student and assignment, every number and the reason;
- ``canvas``: Canvas's gradebook import layout: ``Student, ID, SIS User ID, SIS Login ID, Section``, then
  one column per assignment, a ``Points Possible`` row, one row per student; the student id goes in
  ``SIS Login ID``; a blank cell is no grade;
- ``moodle``: Moodle's CSV grade import: a ``Username`` column to map to the user's username, then per
  assignment ``<id> (Real)`` and ``<id> (Feedback)`` (Moodle's export naming); ``-`` is no grade, and the
  feedback says why.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path

FORMATS = {
    "csv": "one row per student and assignment",
    "canvas": "Canvas gradebook import (Grades > Import)",
    "moodle": "Moodle grade import (Grades > Import > CSV file)",
}
CSV_COLUMNS = ["student", "assignment", "status", "score", "max_score", "autograded", "autograded_max",
               "manual", "manual_max", "manual_pending", "reason", "flags"]
CANVAS_IDENTITY = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
MOODLE_IDENTITY = "Username"


@dataclass
class Line:
    """One student's result for one assignment, ready for any format."""

    student: str
    name: str  # the student's name as the gradebook has it, else the id
    assignment: str
    status: str  # graded, pending, ungradable, missing
    score: float | None  # the grade of record: None unless graded
    max_score: float
    autograded: float | None = None
    autograded_max: float = 0.0
    manual: float | None = None
    manual_max: float = 0.0
    manual_pending: float = 0.0
    reason: str = ""
    flags: str = ""

    def note(self) -> str:
        """One sentence for a feedback column or the terminal."""
        if self.status == "graded":
            written = f"; written {self.manual:g}/{self.manual_max:g}" if self.manual_max else ""
            return f"autograded {self.autograded:g}/{self.autograded_max:g}{written}"
        if self.status == "pending":
            return (f"not final: written answers ({self.manual_pending:g} points) wait for manual grading; "
                    f"autograded so far {self.autograded:g}/{self.autograded_max:g}")
        if self.status == "ungradable":
            return f"not graded: {self.reason}"
        return "no submission"


@dataclass
class Exported:
    lines: list[Line] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def lines_of(root: Path) -> list[Line]:
    """Every student x every assignment seen, from the ledger and the gradebook."""
    from nbgrader.api import Gradebook

    from . import graded

    rows = {(r.student, r.assignment): r for r in graded.read_rows(root)}
    with Gradebook(graded.db_url(root), course_id=graded.COURSE_ID) as gradebook:
        names = {s.id: " ".join(p for p in (s.first_name, s.last_name) if p) or s.id for s in gradebook.students}
        maxima = {a.name: (float(a.max_code_score), float(a.max_score)) for a in gradebook.assignments}
    students = sorted({s for s, _ in rows} | set(names))
    assignments = sorted({a for _, a in rows})
    lines = []
    for assignment in assignments:
        code_max, total_max = maxima.get(assignment, (0.0, 0.0))
        for student in students:
            row = rows.get((student, assignment))
            name = names.get(student, student)
            if row is None:
                lines.append(Line(student, name, assignment, "missing", None, total_max, autograded_max=code_max,
                                  manual_max=total_max - code_max))
            elif row.status != "graded":
                lines.append(Line(student, name, assignment, "ungradable", None, total_max, autograded_max=code_max,
                                  manual_max=total_max - code_max, reason=row.reason, flags="; ".join(row.flags)))
            else:
                pending = row.manual_pending > 0
                lines.append(Line(student, name, assignment, "pending" if pending else "graded",
                                  None if pending else row.score + row.manual_score, row.max_score + row.manual_max,
                                  row.score, row.max_score, row.manual_score, row.manual_max, row.manual_pending,
                                  row.reason, "; ".join(row.flags)))
    return lines


def _number(value: float | None, blank: str = "") -> str:
    return blank if value is None else f"{value:g}"


def export(out: Path, fmt: str, target: Path) -> Exported:
    """Write the export of the graded course ``out`` in format ``fmt`` to ``target``."""
    from . import graded

    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}: choose one of {', '.join(FORMATS)}")
    root = graded.root_of(out)
    lines = lines_of(root)
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("w", newline="", encoding="utf-8") as handle:
        {"csv": _csv, "canvas": _canvas, "moodle": _moodle}[fmt](lines, csv.writer(handle))
    result = Exported(lines)
    counts = {status: sum(line.status == status for line in lines)
              for status in ("graded", "pending", "ungradable", "missing")}
    result.notes.append(", ".join(f"{n} {status}" for status, n in counts.items() if n))
    unscored = [line for line in lines if line.score is None]
    if unscored and fmt != "csv":
        blank = "'-'" if fmt == "moodle" else "blank"
        result.notes.append(f"left {blank} (no grade), not 0:")
        result.notes += [f"  {line.student} {line.assignment}: {line.note()}" for line in unscored]
    return result


def _csv(lines: list[Line], writer) -> None:
    writer.writerow(CSV_COLUMNS)
    for line in sorted(lines, key=lambda x: (x.student, x.assignment)):
        writer.writerow([line.student, line.assignment, line.status, _number(line.score), f"{line.max_score:g}",
                         _number(line.autograded), f"{line.autograded_max:g}", _number(line.manual),
                         f"{line.manual_max:g}", f"{line.manual_pending:g}", line.reason, line.flags])


def _by_student(lines: list[Line]) -> tuple[list[str], dict[str, dict[str, Line]]]:
    assignments = sorted({line.assignment for line in lines})
    table: dict[str, dict[str, Line]] = {}
    for line in lines:
        table.setdefault(line.student, {})[line.assignment] = line
    return assignments, table


def _canvas(lines: list[Line], writer) -> None:
    assignments, table = _by_student(lines)
    writer.writerow(CANVAS_IDENTITY + assignments)
    maxima = {line.assignment: line.max_score for line in lines}
    writer.writerow(["Points Possible", "", "", "", ""] + [f"{maxima[a]:g}" for a in assignments])
    for student, results in sorted(table.items()):
        name = next(iter(results.values())).name
        writer.writerow([name, "", "", student, ""] + [_number(results[a].score) if a in results else ""
                                                       for a in assignments])


def _moodle(lines: list[Line], writer) -> None:
    assignments, table = _by_student(lines)
    header = [MOODLE_IDENTITY]
    for assignment in assignments:
        header += [f"{assignment} (Real)", f"{assignment} (Feedback)"]
    writer.writerow(header)
    for student, results in sorted(table.items()):
        row = [student]
        for assignment in assignments:
            line = results.get(assignment)
            row += [_number(line.score, "-") if line else "-", line.note() if line else "no submission"]
        writer.writerow(row)
