"""What grading leaves for the instructor: grades.csv, feedback/ and report/.

Scores come from nbgrader's gradebook; the mistakes come from the checker's
``[mistake: ...]`` tags in the failing test cells of the graded notebooks.
"""

from __future__ import annotations

import csv
import json
import re
import shutil
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

MISTAKE = re.compile(r"\[mistake: ([^\]]+)\]")
COLUMNS = ["student", "assignment", "score", "max_score", "manual_pending", "status", "reason", "flags"]


@dataclass
class Row:
    """One submission's result: a line of grades.csv, plus the detail the report draws on."""

    student: str
    assignment: str
    score: float
    max_score: float
    manual_pending: float
    status: str  # "graded" or "ungradable"
    reason: str
    cells: dict[str, tuple[float, float]] = field(default_factory=dict)  # grade_id -> (score, max)
    mistakes: list[tuple[str, str]] = field(default_factory=list)  # (grade_id, mistake)
    flags: list[str] = field(default_factory=list)  # for the instructor: what the grader noticed

    def as_csv(self) -> dict:
        return {
            "student": self.student,
            "assignment": self.assignment,
            "score": f"{self.score:g}",
            "max_score": f"{self.max_score:g}",
            "manual_pending": f"{self.manual_pending:g}",
            "status": self.status,
            "reason": self.reason,
            "flags": "; ".join(self.flags),
        }


def _mistakes(path: Path) -> list[tuple[str, str]]:
    """(grade_id, mistake) for every tagged failure in a graded notebook."""
    try:
        notebook = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    found = []
    for cell in notebook.get("cells", []):
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        for output in cell.get("outputs", []):
            # The message is in evalue and again in the traceback: count it once.
            text = output.get("evalue") or " ".join(output.get("traceback", []))
            for mistake in dict.fromkeys(MISTAKE.findall(text)):
                found.append((grade_id, mistake))
    return found


def _record(root: Path, student: str, assignment: str) -> dict:
    """What the sandboxed grading recorded for one submission (course.autograde), or {}."""
    try:
        record = json.loads((root / "records" / student / f"{assignment}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def collect_rows(root: Path, outcomes, problems: dict[str, str], isolation: str = "bwrap") -> list[Row]:
    """One Row per outcome, reading scores from the gradebook in ``root``."""
    from nbgrader.api import Gradebook, MissingEntry

    rows = []
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gradebook:
        maxima = {a.name: a.max_code_score for a in gradebook.assignments}
        for outcome in outcomes:
            top = maxima.get(outcome.assignment, 0.0)
            reason = "; ".join(outcome.notes)
            if outcome.problem:
                rows.append(Row(outcome.student, outcome.assignment, 0.0, top, 0.0, "ungradable",
                                _join(outcome.problem, reason)))
                continue
            graded = list((root / "autograded" / outcome.student / outcome.assignment).glob("*.ipynb"))
            try:
                submission = gradebook.find_submission(outcome.assignment, outcome.student)
            except MissingEntry:
                submission = None
            if submission is None or not graded:
                why = problems.get(outcome.student, "nbgrader produced no graded notebook")
                rows.append(Row(outcome.student, outcome.assignment, 0.0, top, 0.0, "ungradable", _join(why, reason)))
                continue
            record = _record(root, outcome.student, outcome.assignment)
            flags = list(record.get("lost", [])) + list(dict.fromkeys(record.get("flags", [])))
            if isolation == "none":
                flags.insert(0, "graded without a sandbox (--no-sandbox)")
            if record.get("problem"):
                rows.append(Row(outcome.student, outcome.assignment, 0.0, top, 0.0, "ungradable",
                                _join(record["problem"], reason), flags=flags))
                continue
            cells, pending = {}, 0.0
            for notebook in submission.notebooks:
                for g in notebook.grades:
                    if g.cell_type == "code":
                        cells[g.name] = (float(g.score), float(g.max_score))
                    if g.needs_manual_grade:
                        pending += float(g.max_score)
            score = sum(s for s, _ in cells.values())
            mistakes = [m for path in graded for m in _mistakes(path)]
            rows.append(Row(outcome.student, outcome.assignment, score, top, pending, "graded", reason, cells, mistakes,
                            flags))
    return sorted(rows, key=lambda r: (r.student, r.assignment))


def _join(*parts: str) -> str:
    return "; ".join(p for p in parts if p)


def write(rows: list[Row], root: Path, out: Path) -> None:
    """grades.csv, feedback/ and report/ under ``out``."""
    with (out / "grades.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        for row in rows:
            writer.writerow(row.as_csv())
    feedback = out / "feedback"
    if feedback.exists():
        shutil.rmtree(feedback)
    if (root / "feedback").exists():
        shutil.copytree(root / "feedback", feedback)
    _report(rows, out / "report")


def _report(rows: list[Row], folder: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    lines = ["# Grading report", ""]
    by_assignment: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        by_assignment[row.assignment].append(row)
    for assignment, group in sorted(by_assignment.items()):
        graded = [r for r in group if r.status == "graded"]
        lines += [f"## {assignment}", "",
                  f"{len(graded)} graded, {len(group) - len(graded)} ungradable.", ""]
        exercises = sorted({g for r in graded for g in r.cells}, key=lambda g: _order(graded, g))
        if exercises:
            columns = min(4, len(exercises))
            rows_needed = -(-len(exercises) // columns)
            fig, axes = plt.subplots(rows_needed, columns, figsize=(3.2 * columns, 2.4 * rows_needed), squeeze=False)
            for ax, grade_id in zip(axes.flat, exercises):
                scores = [r.cells[grade_id][0] for r in graded if grade_id in r.cells]
                top = max(r.cells[grade_id][1] for r in graded if grade_id in r.cells)
                counts = Counter(scores)
                values = sorted(set(counts) | {0.0, top})
                ax.bar([f"{v:g}" for v in values], [counts.get(v, 0) for v in values], color="#4C72B0")
                ax.set_title(grade_id, fontsize=8)
                ax.set_xlabel(f"points (of {top:g})", fontsize=7)
                ax.tick_params(labelsize=7)
            for ax in list(axes.flat)[len(exercises):]:
                ax.axis("off")
            fig.suptitle(f"{assignment}: students per score, each exercise", fontsize=10)
            fig.tight_layout()
            image = f"{assignment}_scores.png"
            fig.savefig(folder / image, dpi=100)
            plt.close(fig)
            lines += [f"![scores per exercise]({image})", "", "| exercise | full marks | zero |", "|---|---|---|"]
            for grade_id in exercises:
                scored = [r.cells[grade_id] for r in graded if grade_id in r.cells]
                full = sum(s >= m for s, m in scored)
                zero = sum(s == 0 for s, m in scored)
                lines.append(f"| {grade_id} | {full}/{len(scored)} | {zero}/{len(scored)} |")
            lines.append("")
        counted = Counter(m for r in graded for m in r.mistakes)
        lines += ["Most frequent mistakes named by the checker:", ""]
        if counted:
            lines += [f"- {n} x {mistake} (in {grade_id})" for (grade_id, mistake), n in counted.most_common(10)]
        else:
            lines.append("- none")
        lines.append("")
        problems = [r for r in group if r.status != "graded"]
        if problems:
            lines += ["Ungradable submissions:", ""] + [f"- {r.student}: {r.reason}" for r in problems] + [""]
    (folder / "README.md").write_text("\n".join(lines), encoding="utf-8")


def _order(rows: list[Row], grade_id: str) -> int:
    for row in rows:
        if grade_id in row.cells:
            return list(row.cells).index(grade_id)
    return 0
