"""Late work: due dates, when each hand-in came, how late it was, and the penalty (off unless configured).

Due dates and the penalty live in the course's ``course.toml`` (read at every `course grade`), and ``--due
ASSIGNMENT=TIME`` overrides a date for one run:

    [due]
    01_two_phases = "2026-02-06T17:00:00+01:00"   # ISO 8601; a time without a zone is UTC

    [late]
    penalty_per_day = 0.1   # share of the assignment's points taken per started day late; 0 (default) is off
    max_penalty = 0.5       # at most this share

The graded course keeps what the run used (``OUT/nbgrader/dates.json``) and each hand-in's time
(``OUT/nbgrader/handins.json``), so that `course feedback` and `course export` say the same as `course grade`.
A hand-in's time is the exchange's ``timestamp.txt``; an LMS download gives none in its file names, only
Canvas's ``_LATE_`` mark, which is then reported as late by an unknown amount, with no penalty.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import tomllib
from dataclasses import dataclass
from pathlib import Path

CONFIG = "course.toml"


class DueDateError(ValueError):
    """A due date that is not an ISO 8601 time, or names no assignment."""


@dataclass(frozen=True)
class Policy:
    due: dict[str, str]  # assignment -> ISO 8601 UTC
    penalty_per_day: float = 0.0
    max_penalty: float = 1.0


@dataclass(frozen=True)
class Late:
    """How late one hand-in was."""

    seconds: float | None  # None: late by an amount nobody recorded (an LMS mark only)
    penalty_share: float  # share of the assignment's points taken off

    def describe(self) -> str:
        if self.seconds is None:
            return "late (marked late by the LMS; hand-in time unknown)"
        return f"late by {duration(self.seconds)}"


def duration(seconds: float) -> str:
    """3 d 4 h, 2 h 5 min, 12 min: the two largest units, rounded down."""
    minutes = int(seconds // 60)
    days, rest = divmod(minutes, 24 * 60)
    hours, minutes = divmod(rest, 60)
    if days:
        return f"{days} d {hours} h"
    if hours:
        return f"{hours} h {minutes} min"
    return f"{max(minutes, 1)} min" if seconds > 0 else "0 min"


def utc(text: str, what: str) -> str:
    """An ISO 8601 time as UTC text; raise DueDateError naming ``what``."""
    try:
        moment = dt.datetime.fromisoformat(str(text).strip())
    except ValueError:
        raise DueDateError(f"{what}: {text!r} is not an ISO 8601 time such as 2026-02-06T17:00:00+01:00") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.timezone.utc)
    return moment.astimezone(dt.timezone.utc).isoformat(timespec="seconds")


def course_policy(course: Path) -> Policy:
    """Due dates and penalty from ``course.toml`` in the course folder (none: no due dates, no penalty)."""
    path = Path(course) / CONFIG
    if not path.is_file():
        return Policy({})
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as error:
        raise DueDateError(f"{path}: {error}") from None
    due = {a: utc(t, f"{path} [due] {a}") for a, t in (data.get("due") or {}).items()}
    late = data.get("late") or {}
    penalty, cap = float(late.get("penalty_per_day", 0.0)), float(late.get("max_penalty", 1.0))
    if not (0 <= penalty <= 1 and 0 <= cap <= 1):
        raise DueDateError(f"{path} [late]: penalty_per_day and max_penalty are shares of the points, 0 to 1")
    return Policy(due, penalty, cap)


def parse_due(options: list[str] | None, known: list[str]) -> dict[str, str]:
    """``--due ASSIGNMENT=TIME`` options as assignment -> UTC time."""
    due = {}
    for option in options or []:
        assignment, sep, when = option.partition("=")
        if not sep or assignment not in known:
            raise DueDateError(f"--due {option!r}: expected ASSIGNMENT=TIME with ASSIGNMENT one of {', '.join(known)}")
        due[assignment] = utc(when, f"--due {assignment}")
    return due


def save_due(out: Path, due: dict[str, str] | None) -> Policy:
    """The policy of this run, kept in OUT/nbgrader/dates.json: course.toml's dates, under every ``--due`` given
    to this graded course so far (a later run need not repeat them), under this run's ``due``."""
    from ..grading.nbgrader_run import ROOT

    policy = course_policy(ROOT)
    root = Path(out).resolve() / "nbgrader"
    path = root / "dates.json"
    given = json.loads(path.read_text(encoding="utf-8")).get("given", {}) if path.is_file() else {}
    given = {**given, **(due or {})}
    policy = Policy({**policy.due, **given}, policy.penalty_per_day, policy.max_penalty)
    root.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"due": policy.due, "given": given, "penalty_per_day": policy.penalty_per_day,
                                "max_penalty": policy.max_penalty}, indent=1) + "\n", encoding="utf-8")
    return policy


def load_policy(root: Path) -> Policy:
    path = root / "dates.json"
    if not path.is_file():
        return Policy({})
    data = json.loads(path.read_text(encoding="utf-8"))
    return Policy(dict(data.get("due", {})), float(data.get("penalty_per_day", 0)), float(data.get("max_penalty", 1)))


def save_handins(root: Path, handins) -> None:
    """Add this run's hand-ins' times to OUT/nbgrader/handins.json (a later hand-in replaces an earlier one)."""
    path = root / "handins.json"
    known = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    for h in handins:
        known[f"{h.student}/{h.assignment}"] = {"handed_in": h.handed_in, "marked_late": h.marked_late,
                                                "layout": h.layout}
    path.write_text(json.dumps(known, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def load_handins(root: Path) -> dict[tuple[str, str], dict]:
    path = root / "handins.json"
    if not path.is_file():
        return {}
    return {tuple(k.split("/", 1)): v for k, v in json.loads(path.read_text(encoding="utf-8")).items()}


def late(policy: Policy, assignment: str, handin: dict | None) -> Late | None:
    """How late a hand-in was against its due date; None when on time or when nothing says."""
    if not handin:
        return None
    due, when = policy.due.get(assignment), handin.get("handed_in")
    if due and when:
        seconds = (dt.datetime.fromisoformat(when) - dt.datetime.fromisoformat(due)).total_seconds()
        if seconds <= 0:
            return None
        days = math.ceil(seconds / 86400)
        return Late(seconds, min(policy.max_penalty, policy.penalty_per_day * days))
    if handin.get("marked_late"):
        return Late(None, 0.0)
    return None
