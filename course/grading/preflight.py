"""Pre-flight: read every submission before nbgrader does, and mend what nbgrader cannot.

nbgrader drops a whole submission (or, in one batch, every later student) for
a duplicated grade id, and leaves deleted or retyped graded cells in limbo.
When a notebook has any of these, it is rebuilt from the release copy: every
release cell in order, each answer cell taken from the student, and the
student's own extra cells kept after the cell they followed.  What was done is
recorded, so the instructor can see it in grades.csv.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Prepared:
    """One submission after pre-flight: the notebook to grade, or the reason there is none."""

    student: str
    assignment: str
    notebook: dict | None
    notes: list[str] = field(default_factory=list)
    problem: str | None = None


def _meta(cell: dict) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {}) or {}


def _graded(cell: dict) -> bool:
    meta = _meta(cell)
    return bool(meta.get("grade") or meta.get("solution") or meta.get("locked")) and "grade_id" in meta


def load(path: Path) -> tuple[dict | None, str | None]:
    """Parse a notebook file; return (notebook, None) or (None, why it cannot be read)."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return None, "the notebook is not UTF-8 text"
    except OSError as error:
        return None, f"the notebook cannot be read: {error}"
    try:
        notebook = json.loads(text)
    except json.JSONDecodeError as error:
        return None, f"the notebook is not valid JSON (line {error.lineno}: {error.msg}); was it cut short?"
    if not isinstance(notebook, dict) or not isinstance(notebook.get("cells"), list):
        return None, "the file is JSON but not a notebook (no list of cells)"
    if notebook.get("nbformat") != 4:
        return None, f"unsupported notebook format {notebook.get('nbformat')!r} (4 expected)"
    for cell in notebook["cells"]:
        if not isinstance(cell, dict) or cell.get("cell_type") not in ("code", "markdown", "raw"):
            return None, "a cell of the notebook is malformed"
    return notebook, None


def diagnose(student: dict, release: dict) -> list[str]:
    """What in the student's notebook nbgrader would choke on, compared with the release."""
    expected = {_meta(c)["grade_id"]: c["cell_type"] for c in release["cells"] if _graded(c)}
    seen = Counter(_meta(c).get("grade_id") for c in student["cells"] if _meta(c).get("grade_id"))
    issues = []
    for grade_id, count in sorted(seen.items()):
        if count > 1:
            issues.append(f"cell {grade_id!r} appears {count} times (copy-pasted?)")
        if grade_id not in expected:
            issues.append(f"unknown graded cell {grade_id!r}")
    for grade_id, cell_type in expected.items():
        if grade_id not in seen:
            issues.append(f"graded cell {grade_id!r} was deleted or its metadata stripped")
    for cell in student["cells"]:
        grade_id = _meta(cell).get("grade_id")
        if grade_id in expected and cell["cell_type"] != expected[grade_id]:
            issues.append(f"graded cell {grade_id!r} was changed from {expected[grade_id]} to {cell['cell_type']}")
    return issues


def rebuild(student: dict, release: dict) -> dict:
    """The release notebook with the student's answers and extra cells put back in place."""
    release_ids = {c.get("id") for c in release["cells"]}
    answers: dict[str, dict] = {}
    by_id = {c.get("id"): c for c in student["cells"] if c.get("id")}
    for cell in student["cells"]:
        grade_id = _meta(cell).get("grade_id")
        if grade_id:
            # Of copies, the last wins: it is the definition in force after Run All.
            answers[grade_id] = cell
    graded_ids = {_meta(c).get("grade_id") for c in release["cells"] if _graded(c)}
    extras: dict[str | None, list[dict]] = {}
    anchor = None
    for cell in student["cells"]:
        if cell.get("id") in release_ids:
            anchor = cell.get("id")
        elif _meta(cell).get("grade_id") not in graded_ids:
            # The student's own cell (any nbgrader metadata on it is theirs to invent, so it goes).
            metadata = {k: v for k, v in (cell.get("metadata") or {}).items() if k != "nbgrader"}
            extras.setdefault(anchor, []).append(dict(cell, metadata=metadata))
    cells = [dict(c, outputs=[]) if c.get("cell_type") == "code" else dict(c) for c in extras.get(None, [])]
    for cell in release["cells"]:
        meta = _meta(cell)
        chosen = cell
        if meta.get("solution"):
            # The answer by grade id, or by cell id when its metadata was stripped.
            theirs = answers.get(meta["grade_id"]) or by_id.get(cell.get("id"))
            if theirs is not None:
                chosen = dict(cell, source=theirs.get("source", ""))
        chosen = dict(chosen)
        if chosen["cell_type"] == "code":
            chosen["outputs"], chosen["execution_count"] = [], None
        cells.append(chosen)
        for extra in extras.get(cell.get("id"), []):
            extra = dict(extra)
            if extra["cell_type"] == "code":
                extra["outputs"], extra["execution_count"] = [], None
            cells.append(extra)
    return dict(release, cells=cells)


def prepare(student: str, assignment: str, files: list[Path], release: Path) -> Prepared:
    """Pre-flight one student's submission of one assignment (one notebook per assignment)."""
    notes = []
    wanted = [f for f in files if f.name == release.name]
    if not wanted:
        candidates = [f for f in files if f.suffix == ".ipynb" and not f.name.startswith(".")]
        if len(candidates) != 1:
            names = ", ".join(f.name for f in candidates) or "none"
            return Prepared(student, assignment, None,
                            problem=f"expected {release.name}; found {len(candidates)} notebooks ({names})")
        notes.append(f"renamed {candidates[0].name} to {release.name}")
        wanted = candidates
    notebook, problem = load(wanted[0])
    if problem:
        return Prepared(student, assignment, None, notes, problem)
    released, _ = load(release)
    issues = diagnose(notebook, released)
    # Always rebuilt, so every graded cell's metadata (points, flags, locks, type) is the release's.
    notebook = rebuild(notebook, released)
    if issues:
        notes.append("rebuilt from the release copy: " + "; ".join(issues))
    return Prepared(student, assignment, notebook, notes)
