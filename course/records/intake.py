"""Submissions as the instructor has them: one hand-in per student and assignment, and what could not be placed.

`course grade SUBMISSIONS` takes a folder or a zip in any of four layouts, file by file (docs/decisions.md,
"Submissions as they come", cites each LMS's naming):

- nbgrader's exchange inbound folder: ``<student>+<assignment>+<timestamp>[+<random>]/``, with the
  hand-in time in ``timestamp.txt``; the latest hand-in of a student and assignment counts;
- a Moodle "Download all submissions" zip: ``<Full Name>_<participant>_assignsubmission_file_/<file>``
  (or, downloaded without folders, ``<Full Name>_<participant>_assignsubmission_file_<file>``);
- a Canvas "Download Submissions" zip: ``<lastfirst>[_LATE]_<user id>_<submission id>_<file>``, where Canvas
  adds ``-1``, ``-2`` to the file's name for a resubmission;
- the plain layout ``<student>/<assignment>/<files>``.

An LMS download holds one assignment; which one is read from the notebook's name (the release notebook
``01_two_phases.ipynb``, or ``--assignment``).  A ``--roster`` (course.records.roster) maps the LMS's ids and names to
logins; without one a student is named from the file name.  Nothing is dropped silently: every file that
is not part of a hand-in is returned in ``skipped`` with the reason.
"""

from __future__ import annotations

import datetime as dt
import re
import shutil
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from .roster import Roster, _name_key

EXCHANGE = re.compile(r"^(?P<student>[^+/]+)\+(?P<assignment>[^+/]+)\+(?P<timestamp>[^+/]+)(\+[^+/]*)?$")
MOODLE = re.compile(r"^(?P<name>.+?)_(?P<participant>\d+)_assignsubmission_(?P<plugin>[a-z]+)_(?P<rest>.*)$")
CANVAS = re.compile(r"^(?P<name>[a-z0-9]+?)(?P<late>_late)?_(?P<user>\d+)_(?P<submission>\d+)_(?P<file>.+)$",
                    re.IGNORECASE)
RESUBMITTED = re.compile(r"^(?P<stem>.+?)-\d+$")  # Canvas: "01_two_phases-1.ipynb" for a second attempt
IGNORED = {"__MACOSX", ".ipynb_checkpoints", ".DS_Store", "Thumbs.db"}


@dataclass(frozen=True)
class Handin:
    """One student's hand-in of one assignment, as found."""

    student: str  # login
    assignment: str
    files: tuple[Path, ...]
    layout: str  # exchange, moodle, canvas, folders
    handed_in: str | None = None  # ISO 8601 time in UTC, where the exchange or the LMS gives one
    marked_late: bool = False  # the LMS marked it late (Canvas's _LATE_ in the file name)


@dataclass(frozen=True)
class Skipped:
    path: str  # relative to SUBMISSIONS
    reason: str


@dataclass
class Intake:
    handins: list[Handin] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    layouts: dict[str, int] = field(default_factory=dict)  # layout -> hand-ins found
    files_seen: int = 0
    roster: Roster | None = None  # the --roster that mapped LMS ids to logins

    def describe(self) -> str:
        """What was seen, for the error when nothing could be placed."""
        found = ", ".join(f"{n} {layout}" for layout, n in self.layouts.items()) or "no hand-in"
        return f"{self.files_seen} file(s) seen, {found}, {len(self.skipped)} skipped"


class NoSubmissions(RuntimeError):
    """SUBMISSIONS held no hand-in at all."""


def unpack(submissions: Path, scratch: Path) -> Path:
    """The folder to read: SUBMISSIONS itself, or a zip unpacked into ``scratch`` (nothing written outside it)."""
    submissions = Path(submissions)
    if submissions.is_file() and zipfile.is_zipfile(submissions):
        target = scratch / "unzipped"
        with zipfile.ZipFile(submissions) as archive:
            for member in archive.infolist():
                name = Path(member.filename)
                if name.is_absolute() or ".." in name.parts or IGNORED & set(name.parts):
                    continue
                archive.extract(member, target)
        target.mkdir(parents=True, exist_ok=True)
        return target
    check_path(submissions)
    return submissions


def check_path(submissions: Path) -> None:
    """Raise FileNotFoundError, naming SUBMISSIONS, unless it is a folder or a zip (checked before anything runs)."""
    submissions = Path(submissions)
    if submissions.is_file() and not zipfile.is_zipfile(submissions):
        raise FileNotFoundError(f"SUBMISSIONS must be a folder or a zip; {submissions} is a file but not a zip")
    if not submissions.exists():
        raise FileNotFoundError(f"SUBMISSIONS must be a folder or a zip of hand-ins; {submissions} does not exist")


def read(folder: Path, scratch: Path, assignments: list[str], notebook_names: dict[str, str],
         roster: Roster | None = None, assignment: str | None = None) -> Intake:
    """Every hand-in under ``folder``; ``notebook_names`` maps a release notebook's stem to its assignment.

    A file the LMS renamed is copied under ``scratch`` with the student's own name; ``folder`` is only read.
    """
    intake = Intake()
    renamed = _Renamer(scratch / "renamed")
    files = sorted(p for p in folder.rglob("*") if p.is_file() and not (IGNORED & set(p.relative_to(folder).parts)))
    intake.files_seen = len(files)
    groups: dict[tuple[str, str], dict] = {}  # (student, assignment) -> {"files", "layout", "time", "late"}

    def place(student, found_assignment, path, layout, time=None, late=False):
        key = (student, found_assignment)
        group = groups.setdefault(key, {"files": [], "layout": layout, "time": time, "late": late})
        if layout == "exchange" and group["time"] != time:
            if group["time"] and time and time < group["time"]:
                intake.skipped.append(Skipped(_rel(path, folder), f"an earlier hand-in of {student} {found_assignment} "
                                                                  f"({time}); the latest ({group['time']}) counts"))
                return
            if group["time"] and time and time > group["time"]:
                intake.skipped += [Skipped(_rel(p, folder), f"an earlier hand-in of {student} {found_assignment} "
                                                            f"({group['time']}); the latest ({time}) counts")
                                   for p in group["files"]]
                group.update(files=[], time=time)
        group["files"].append(path)

    lookup = _Students(roster)
    for path in files:
        parts = path.relative_to(folder).parts
        exchange = next((i for i, part in enumerate(parts[:-1]) if EXCHANGE.match(part)), None)
        moodle = next((i for i, part in enumerate(parts) if MOODLE.match(part)), None)
        canvas = CANVAS.match(parts[-1])
        if exchange is not None:
            found = EXCHANGE.match(parts[exchange])
            if path.name == "timestamp.txt" and len(parts) == exchange + 2:
                continue
            if len(parts) > exchange + 2:
                intake.skipped.append(Skipped(_rel(path, folder), "in a subfolder of a hand-in (only its top "
                                                                   "level is graded)"))
                continue
            stamp = _exchange_time(path.parent / "timestamp.txt", found["timestamp"])
            place(found["student"], found["assignment"], path, "exchange", stamp)
        elif moodle is not None:
            found = MOODLE.match(parts[moodle])
            if found["plugin"] != "file":
                intake.skipped.append(Skipped(_rel(path, folder), f"Moodle's {found['plugin']} submission, not a "
                                                                   "file: only notebooks are graded"))
                continue
            name = found["rest"] if moodle == len(parts) - 1 else path.name
            student, why = lookup.moodle(found["name"], found["participant"])
            target, reason = _assignment_of(name, assignments, notebook_names, assignment)
            if student is None or target is None:
                intake.skipped.append(Skipped(_rel(path, folder), why or reason))
                continue
            place(student, target, renamed(path, name), "moodle")
        elif canvas and len(parts) <= 2:
            student, why = lookup.canvas(canvas["name"], canvas["user"])
            name = canvas["file"]
            stem, suffix = Path(name).stem, Path(name).suffix
            again = RESUBMITTED.match(stem)
            if again and stem not in notebook_names:
                name = again["stem"] + suffix
            target, reason = _assignment_of(name, assignments, notebook_names, assignment)
            if student is None or target is None:
                intake.skipped.append(Skipped(_rel(path, folder), why or reason))
                continue
            place(student, target, renamed(path, name), "canvas", late=bool(canvas["late"]))
        elif len(parts) == 3:
            place(parts[0], parts[1], path, "folders")  # an unknown assignment is graded as ungradable, with why
        elif len(parts) == 4 and parts[1] in assignments:
            intake.skipped.append(Skipped(_rel(path, folder), "in a subfolder of a hand-in (only its top level is "
                                                               "graded)"))
        elif len(parts) == 4:
            place(parts[1], parts[2], path, "folders")  # one folder around the students, as a zip often has
        else:
            intake.skipped.append(Skipped(_rel(path, folder), _unplaced(parts)))
    for (student, found_assignment), group in sorted(groups.items()):
        intake.handins.append(Handin(student, found_assignment, tuple(group["files"]), group["layout"],
                                     group["time"], group["late"]))
        intake.layouts[group["layout"]] = intake.layouts.get(group["layout"], 0) + 1
    return intake


def _rel(path: Path, folder: Path) -> str:
    return str(path.relative_to(folder))


def _unplaced(parts: tuple[str, ...]) -> str:
    return (f"matches none of the layouts (<student>/<assignment>/<file>; an exchange's <student>+<assignment>+"
            f"<time>/; Moodle's <Name>_<id>_assignsubmission_file_/; Canvas's <lastfirst>_<userid>_<subid>_<file>)"
            if len(parts) <= 2 else "matches none of the layouts: too deep")


class _Renamer:
    """A file under the name the student gave it (the LMS's prefix taken off), each in a folder of its own."""

    def __init__(self, folder: Path):
        self.folder, self.count = folder, 0

    def __call__(self, path: Path, name: str) -> Path:
        if path.name == name:
            return path
        self.count += 1
        target = self.folder / str(self.count) / name
        target.parent.mkdir(parents=True)
        shutil.copyfile(path, target)
        return target


def _assignment_of(name: str, assignments: list[str], notebook_names: dict[str, str],
                   given: str | None) -> tuple[str | None, str | None]:
    stem = Path(name).stem
    if stem in notebook_names:
        return notebook_names[stem], None
    if given:
        return given, None
    if not name.endswith(".ipynb"):
        return None, "not a notebook, and the LMS download does not say which assignment it belongs to"
    return None, (f"the notebook's name matches no assignment of this course ({', '.join(assignments)}); "
                  "pass --assignment ID when the download is of one assignment")


def _exchange_time(stamp_file: Path, from_name: str) -> str | None:
    text = stamp_file.read_text(encoding="utf-8").strip() if stamp_file.is_file() else from_name
    return parse_time(text)


def parse_time(text: str) -> str | None:
    """An ISO 8601 UTC time from nbgrader's or a person's timestamp text; None if it is not one."""
    from nbgrader.utils import parse_utc

    try:
        return parse_utc(text).replace(tzinfo=dt.timezone.utc).isoformat(timespec="seconds")
    except (ValueError, TypeError, OverflowError):
        return None


class _Students:
    """LMS ids and names to logins, through the roster where there is one."""

    def __init__(self, roster: Roster | None):
        self.roster = roster
        self.ids = roster.by_lms_id() if roster else {}
        self.names = roster.by_full_name() if roster else {}

    def canvas(self, lastfirst: str, user_id: str) -> tuple[str | None, str | None]:
        if self.roster is None:
            return f"{lastfirst.lower()}_{user_id}", None
        if self.roster.lms != "canvas":
            return None, "a Canvas file name, but the --roster is Moodle's"
        found = self.ids.get(user_id)
        if found is None:
            return None, f"Canvas user id {user_id} ({lastfirst}) is not in the --roster"
        return found.login, None

    def moodle(self, full_name: str, participant: str) -> tuple[str | None, str | None]:
        if self.roster is None:
            slug = re.sub(r"[^a-z0-9]+", "", full_name.casefold()) or "participant"
            return f"{slug}_{participant}", None
        if self.roster.lms != "moodle":
            return None, "a Moodle folder name, but the --roster is Canvas's"
        if participant in self.ids:
            return self.ids[participant].login, None
        named = self.names.get(_name_key(full_name), [])
        if len(named) == 1:
            return named[0].login, None
        if len(named) > 1:
            return None, (f"{len(named)} students of the --roster are named {full_name!r}; use Moodle's grading "
                          "worksheet as the roster (its Identifier column names the participant)")
        return None, f"{full_name!r} (participant {participant}) is not in the --roster"
