"""`course export [OUT] --format csv|canvas|moodle`: the gradebook, manual points merged, for an LMS.

Every student the graded course knows appears, in every assignment anyone handed in, with one of four
statuses:

- ``graded``: nothing left to grade; the score is the autograded points plus the written answers' points;
- ``pending``: a written answer waits for manual grading; no score is given (never a 0 that looks final);
- ``ungradable``: the hand-in could not be graded; no score, and the reason;
- ``not submitted``: nothing handed in for this assignment.

A late hand-in says so in every format (``late`` column, feedback text), with the penalty where one is configured.

Formats (sources and the choices made: docs/decisions.md, "Exports for an LMS"):

- ``csv``: one row per student and assignment, every number and the reason;
- ``canvas``: Canvas's gradebook import layout: ``Student, ID, SIS User ID, SIS Login ID, Section``, then
  one column per assignment, a ``Points Possible`` row, one row per student.  With a roster (the Canvas
  gradebook export given to `course grade --roster`) the five identity columns are the roster's, as Canvas
  wrote them; without one, ``Student`` and ``SIS Login ID`` are the login.  An assignment column carries the
  Canvas assignment's name, ``Name (id)`` as Canvas's own export heads it, from ``--name ID=NAME`` or
  ``[lms_names]`` in course.toml; an unmapped one keeps the course id and is warned about (Canvas would
  create a new assignment).  A blank cell is no grade;
- ``moodle``: Moodle's CSV grade import: one identity column (``Username``, or ``Email address`` when the
  roster is a Moodle export without usernames), then per assignment ``<name> (Real)`` and
  ``<name> (Feedback)``; ``-`` is no grade, and the feedback says why.  With a roster, a login the roster
  does not know stops the export before anything is written: Moodle aborts the whole import on one.
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
               "manual", "manual_max", "manual_pending", "reason", "flags", "late", "late_penalty"]
CANVAS_IDENTITY = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
MOODLE_IDENTITY = "Username"


@dataclass
class Line:
    """One student's result for one assignment, ready for any format."""

    student: str
    name: str  # the student's name as the gradebook has it, else the id
    assignment: str
    status: str  # graded, pending, ungradable, not submitted
    score: float | None  # the grade of record: None unless graded
    max_score: float
    autograded: float | None = None
    autograded_max: float = 0.0
    manual: float | None = None
    manual_max: float = 0.0
    manual_pending: float = 0.0
    reason: str = ""
    flags: str = ""
    late: str = ""
    late_penalty: float = 0.0

    def note(self) -> str:
        """One sentence for a feedback column or the terminal."""
        late = f" Handed in {self.late}" + (f": {self.late_penalty:g} points off." if self.late_penalty else ".") \
            if self.late else ""
        if self.status == "graded":
            written = f", written answers {self.manual:g}/{self.manual_max:g}" if self.manual_max else ""
            return (f"Final grade {self.score:g}/{self.max_score:g}: autograded "
                    f"{self.autograded + self.late_penalty:g}/{self.autograded_max:g}{written}.{late}")
        if self.status == "pending":
            return (f"not final: written answers ({self.manual_pending:g} points) wait for manual grading; "
                    f"autograded so far {self.autograded:g}/{self.autograded_max:g}.{late}")
        if self.status == "ungradable":
            return f"not graded: {self.reason}{late}"
        return "not submitted"


@dataclass
class Exported:
    lines: list[Line] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


class ExportError(ValueError):
    """An export the LMS would refuse; nothing was written."""


def lines_of(root: Path) -> list[Line]:
    """Every student x every assignment of the graded course (course.review.report.complete), with names."""
    from nbgrader.api import Gradebook

    from . import graded
    from ..review import report
    from .roster import Roster

    rows = report.complete(graded.read_rows(root), root)
    with Gradebook(graded.db_url(root), course_id=graded.COURSE_ID) as gradebook:
        names = {s.id: " ".join(p for p in (s.first_name, s.last_name) if p) or s.id for s in gradebook.students}
        maxima = {a.name: (float(a.max_code_score), float(a.max_score)) for a in gradebook.assignments}
    roster = Roster.load(root / "roster.json")
    if roster:
        names.update({s.login: s.full_name or s.login for s in roster.students})
    lines = []
    for row in rows:
        code_max, total_max = maxima.get(row.assignment, (row.max_score, row.max_score + row.manual_max))
        name = names.get(row.student, row.student)
        common = dict(autograded_max=code_max, manual_max=total_max - code_max, late=row.late)
        if row.status == report.NOT_SUBMITTED:
            lines.append(Line(row.student, name, row.assignment, "not submitted", None, total_max, **common))
        elif row.status != "graded":
            lines.append(Line(row.student, name, row.assignment, "ungradable", None, total_max, reason=row.reason,
                              flags="; ".join(row.flags), **common))
        else:
            pending = row.manual_pending > 0
            lines.append(Line(row.student, name, row.assignment, "pending" if pending else "graded",
                              None if pending else row.score + row.manual_score, row.max_score + row.manual_max,
                              row.score, row.max_score, row.manual_score, row.manual_max, row.manual_pending,
                              row.reason, "; ".join(row.flags), row.late, row.late_penalty))
    return lines


def _number(value: float | None, blank: str = "") -> str:
    return blank if value is None else f"{value:g}"


def export(out: Path, fmt: str, target: Path, names: dict[str, str] | None = None) -> Exported:
    """Write the export of the graded course ``out`` in format ``fmt`` to ``target``.

    ``names`` maps a course assignment id to the LMS's name for it (over ``[lms_names]`` in course.toml).
    Raises ExportError, writing nothing, for a Moodle export with a login its roster does not know.
    """
    from . import graded
    from .roster import Roster

    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}: choose one of {', '.join(FORMATS)}")
    root = graded.root_of(out)
    lines = lines_of(root)
    roster = Roster.load(root / "roster.json")
    titles = {**lms_names(), **(names or {})}
    result = Exported(lines)
    if fmt == "moodle" and roster is not None:
        unknown = sorted({line.student for line in lines} - set(roster.by_login()))
        if unknown:
            raise ExportError(f"the roster does not know {len(unknown)} login(s): {', '.join(unknown)}; Moodle "
                              "aborts the whole import on one unknown user. Grade them under their Moodle login "
                              "(or add them to the roster); nothing was written")
    if fmt in ("canvas", "moodle"):
        unmapped = sorted({line.assignment for line in lines} - set(titles))
        if unmapped:
            effect = ("which matches no assignment of the LMS, so its import would create a new one" if fmt == "canvas"
                      else "which you must map to the grade item by hand on import")
            result.notes.append(
                f"warning: no {FORMATS[fmt].split()[0]} name for {', '.join(unmapped)}: the column keeps the course "
                f"id, {effect}. Map each with --name ID='LMS name' or [lms_names] in course.toml")
    if fmt == "moodle" and roster is None:
        result.notes.append("no roster: the Username column is the login; Moodle aborts the import if one is not a "
                            "Moodle username (`course grade --roster` with Moodle's gradebook export checks this)")
    target.parent.mkdir(parents=True, exist_ok=True)
    writers = {"csv": _csv, "canvas": _canvas, "moodle": _moodle}
    with target.open("w", newline="", encoding="utf-8") as handle:
        writers[fmt](lines, csv.writer(handle), roster, titles)
    counts = {status: sum(line.status == status for line in lines)
              for status in ("graded", "pending", "ungradable", "not submitted")}
    result.notes.insert(0, ", ".join(f"{n} {status}" for status, n in counts.items() if n))
    late = [line for line in lines if line.late]
    if late:
        result.notes.append(f"{len(late)} late: " + ", ".join(f"{l.student} {l.assignment} {l.late}" for l in late))
    unscored = [line for line in lines if line.score is None]
    if unscored and fmt != "csv":
        blank = "'-'" if fmt == "moodle" else "blank"
        result.notes.append(f"left {blank} (no grade), not 0:")
        result.notes += [f"  {line.student} {line.assignment}: {line.note()}" for line in unscored]
    return result


def lms_names() -> dict[str, str]:
    """``[lms_names]`` of the course's course.toml: course assignment id -> the LMS's assignment name."""
    import tomllib

    from ..grading.nbgrader_run import ROOT

    path = ROOT / "course.toml"
    if not path.is_file():
        return {}
    return {str(k): str(v) for k, v in (tomllib.loads(path.read_text(encoding="utf-8")).get("lms_names") or {}).items()}


def _csv(lines: list[Line], writer, roster=None, titles=None) -> None:
    writer.writerow(CSV_COLUMNS)
    for line in sorted(lines, key=lambda x: (x.student, x.assignment)):
        writer.writerow([line.student, line.assignment, line.status, _number(line.score), f"{line.max_score:g}",
                         _number(line.autograded), f"{line.autograded_max:g}", _number(line.manual),
                         f"{line.manual_max:g}", f"{line.manual_pending:g}", line.reason, line.flags, line.late,
                         f"{line.late_penalty:g}" if line.late_penalty else ""])


def _by_student(lines: list[Line]) -> tuple[list[str], dict[str, dict[str, Line]]]:
    assignments = sorted({line.assignment for line in lines})
    table: dict[str, dict[str, Line]] = {}
    for line in lines:
        table.setdefault(line.student, {})[line.assignment] = line
    return assignments, table


def _canvas(lines: list[Line], writer, roster=None, titles=None) -> None:
    assignments, table = _by_student(lines)
    titles = titles or {}
    writer.writerow(CANVAS_IDENTITY + [titles.get(a, a) for a in assignments])
    maxima = {line.assignment: line.max_score for line in lines}
    writer.writerow(["Points Possible", "", "", "", ""] + [f"{maxima[a]:g}" for a in assignments])
    known = roster.by_login() if roster else {}
    for student, results in sorted(table.items()):
        listed = known.get(student)
        if listed:
            identity = [listed.sortable_name or student, listed.lms_id, listed.sis_user_id, listed.sis_login_id,
                        listed.section]
        else:
            identity = [next(iter(results.values())).name, "", "", student, ""]
        writer.writerow(identity + [_number(results[a].score) if a in results else "" for a in assignments])


def _moodle(lines: list[Line], writer, roster=None, titles=None) -> None:
    assignments, table = _by_student(lines)
    titles = titles or {}
    by_email = roster is not None and roster.lms == "moodle" and not any(s.username for s in roster.students)
    header = ["Email address" if by_email else MOODLE_IDENTITY]
    for assignment in assignments:
        name = titles.get(assignment, assignment)
        header += [f"{name} (Real)", f"{name} (Feedback)"]
    writer.writerow(header)
    for student, results in sorted(table.items()):
        row = [student]
        for assignment in assignments:
            line = results.get(assignment)
            row += [_number(line.score, "-") if line else "-", line.note() if line else "not submitted"]
        writer.writerow(row)
