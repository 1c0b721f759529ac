"""What grading leaves for the instructor: grades.csv and report/.

Scores come from nbgrader's gradebook (manual grades included); the mistakes come from the checker's
``[mistake: ...]`` tags in the failing test cells of the graded notebooks.  The report has, per
assignment, three figures (a heatmap of students by exercises, the named mistakes, the totals) and a
README with the numbers behind them.
"""

from __future__ import annotations

import csv
import json
import re
import shutil
import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

MISTAKE = re.compile(r"\[mistake: ([^\]]+)\]")
HEADING = re.compile(r"^#{1,3}\s+(.+?)\s*$", re.M)
COLUMNS = ["student", "assignment", "score", "max_score", "manual_pending", "status", "reason", "flags",
           "manual_score", "late", "late_penalty"]
NOT_SUBMITTED = "not submitted"


@dataclass
class Row:
    """One submission's result: a line of grades.csv, plus the detail the report draws on."""

    student: str
    assignment: str
    score: float  # autograded points (a grader's override of a test cell included)
    max_score: float  # autograded points possible
    manual_pending: float  # points of written answers that wait for the instructor
    status: str  # "graded", "ungradable" or "not submitted"
    reason: str
    cells: dict[str, tuple[float, float]] = field(default_factory=dict)  # grade_id -> (score, max), code cells
    mistakes: list[tuple[str, str]] = field(default_factory=list)  # (grade_id, mistake)
    flags: list[str] = field(default_factory=list)  # for the instructor: what the grader noticed
    manual_score: float = 0.0  # points given by hand to written answers so far
    manual_max: float = 0.0  # points of all written answers
    failed_untagged: int = 0  # failing test cells whose message names no known mistake
    blank: int = 0  # failing test cells of exercises the student left as released (not attempted)
    manual_review: float = 0.0  # points of kept manual scores waiting for a second look (counted in manual_score)
    late: str = ""  # "late by 2 h 5 min", or "" when on time or no due date
    late_penalty: float = 0.0  # points taken off for lateness (0 unless a penalty is configured)

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
            "manual_score": f"{self.manual_score:g}",
            "late": self.late,
            "late_penalty": f"{self.late_penalty:g}" if self.late_penalty else "",
        }


# A blank answer cell raises the released stub's NotImplementedError before it defines anything, so its test
# cells fail on a name that is not defined (course.grading.kernel_runner's message).
BLANK = ("NotImplementedError", "is not defined")


def _mistakes(path: Path) -> tuple[list[tuple[str, str]], int, int]:
    """(grade_id, mistake) for every tagged failure in a graded notebook, how many failures had no tag, and how
    many failed because the answer was left as released (a blank, counted apart from unnamed mistakes)."""
    try:
        notebook = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return [], 0, 0
    found, untagged, blank = [], 0, 0
    for cell in notebook.get("cells", []):
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        tagged = False
        errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        for output in cell.get("outputs", []):
            # The message is in evalue and again in the traceback: count it once.
            text = output.get("evalue") or " ".join(output.get("traceback", []))
            for mistake in dict.fromkeys(MISTAKE.findall(text)):
                found.append((grade_id, mistake))
                tagged = True
        if errors and grade_id and not tagged:
            text = " ".join(f"{o.get('ename', '')} {o.get('evalue', '')}" for o in errors)
            if any(marker in text for marker in BLANK):
                blank += 1
            else:
                untagged += 1
    return found, untagged, blank


def _record(root: Path, student: str, assignment: str) -> dict:
    """What the sandboxed grading recorded for one submission (course.grading.autograde), or {}."""
    try:
        record = json.loads((root / "records" / student / f"{assignment}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def collect_rows(root: Path, outcomes, problems: dict, isolation: str | None = None) -> list[Row]:
    """One Row per outcome, reading scores from the gradebook in ``root``.

    ``problems`` maps a student, or a (student, assignment), to why nbgrader's run failed.  Whether a
    submission was graded without a sandbox is read from its record (or forced by ``isolation="none"``).
    """
    from nbgrader.api import Gradebook, MissingEntry

    rows = []
    from ..records.graded import db_url

    with Gradebook(db_url(root), course_id="rooflab") as gradebook:
        maxima = {a.name: a.max_code_score for a in gradebook.assignments}
        for outcome in outcomes:
            top = maxima.get(outcome.assignment, 0.0)
            reason = "; ".join(outcome.notes)
            if outcome.problem:
                rows.append(Row(outcome.student, outcome.assignment, 0.0, top, 0.0, "ungradable",
                                _join(outcome.problem, reason)))
                continue
            failed = problems.get((outcome.student, outcome.assignment))
            if failed:
                # nbgrader's run stopped (a time limit, a crash): a notebook it left behind is partial, so the
                # row says why rather than showing its zeros as a grade (the run is retried next time)
                rows.append(Row(outcome.student, outcome.assignment, 0.0, top, 0.0, "ungradable",
                                _join(failed, reason)))
                continue
            graded = list((root / "autograded" / outcome.student / outcome.assignment).glob("*.ipynb"))
            try:
                submission = gradebook.find_submission(outcome.assignment, outcome.student)
            except MissingEntry:
                submission = None
            if submission is None or not graded:
                why = (problems.get((outcome.student, outcome.assignment)) or problems.get(outcome.student)
                       or "nbgrader produced no graded notebook")
                rows.append(Row(outcome.student, outcome.assignment, 0.0, top, 0.0, "ungradable", _join(why, reason)))
                continue
            record = _record(root, outcome.student, outcome.assignment)
            flags = list(record.get("lost", [])) + list(dict.fromkeys(record.get("flags", [])))
            if isolation == "none" or record.get("isolation") == "none":
                flags.insert(0, "graded without a sandbox (--no-sandbox)")
            if record.get("problem"):
                rows.append(Row(outcome.student, outcome.assignment, 0.0, top, 0.0, "ungradable",
                                _join(record["problem"], reason), flags=flags))
                continue
            cells, pending, manual, manual_max, review = {}, 0.0, 0.0, 0.0, 0.0
            for notebook in submission.notebooks:
                for g in notebook.grades:
                    if g.cell_type == "code":
                        cells[g.name] = (float(g.score), float(g.max_score))
                    else:
                        manual_max += float(g.max_score)
                        if not g.needs_manual_grade:
                            manual += float(g.score)
                        elif g.manual_score is not None:
                            # kept through a re-grade, to be looked at again: still the score given
                            manual += float(g.manual_score)
                            review += float(g.max_score)
                    if g.needs_manual_grade:
                        pending += float(g.max_score)
            score = sum(s for s, _ in cells.values())
            mistakes, untagged, blank = [], 0, 0
            for path in graded:
                found, missed, left = _mistakes(path)
                mistakes += found
                untagged += missed
                blank += left
            rows.append(Row(outcome.student, outcome.assignment, score, top, pending, "graded", reason, cells, mistakes,
                            flags, manual, manual_max, untagged, blank, review))
    return sorted(rows, key=lambda r: (r.student, r.assignment))


def complete(rows: list[Row], root: Path) -> list[Row]:
    """``rows`` with how late each hand-in was, and a ``not submitted`` row for every student and assignment
    that has none: students of the graded course and of its roster, assignments handed in or given a due date.

    A late penalty (course.records.lateness, off by default) is taken off the autograded score, never below 0.
    """
    from ..records import lateness
    from ..records.roster import Roster

    policy = lateness.load_policy(root)
    handins = lateness.load_handins(root)
    roster = Roster.load(root / "roster.json")
    students = {r.student for r in rows} | ({s.login for s in roster.students} if roster else set())
    assignments = {r.assignment for r in rows} | set(policy.due)
    present = {(r.student, r.assignment) for r in rows}
    maxima = {r.assignment: r.max_score for r in rows if r.status == "graded"}
    done = []
    for row in rows:
        late = lateness.late(policy, row.assignment, handins.get((row.student, row.assignment)))
        if late is not None:
            row.late = late.describe()
            if row.status == "graded" and late.penalty_share:
                row.late_penalty = min(row.score, late.penalty_share * (row.max_score + row.manual_max))
                row.score -= row.late_penalty
        done.append(row)
    for student in sorted(students):
        for assignment in sorted(assignments):
            if (student, assignment) not in present:
                due = policy.due.get(assignment)
                done.append(Row(student, assignment, 0.0, maxima.get(assignment, 0.0), 0.0, NOT_SUBMITTED,
                                f"nothing handed in (due {due})" if due else "nothing handed in"))
    return sorted(done, key=lambda r: (r.student, r.assignment))


def _join(*parts: str) -> str:
    return "; ".join(p for p in parts if p)


def write(rows: list[Row], root: Path, out: Path) -> None:
    """grades.csv and report/ under ``out`` (feedback/ is course.review.feedback's)."""
    with (out / "grades.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        for row in rows:
            writer.writerow(row.as_csv())
    _report(rows, out / "report")


def exercises(assignment: str) -> dict[str, str]:
    """grade_id -> the heading it stands under in the source notebook ("Exercise 2: ..."), for grouping."""
    from ..grading.nbgrader_run import SOURCE

    found = {}
    for path in sorted((SOURCE / assignment).glob("*.ipynb")):
        try:
            notebook = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        heading = None
        for cell in notebook.get("cells", []):
            text = "".join(cell["source"]) if isinstance(cell.get("source"), list) else cell.get("source", "")
            meta = (cell.get("metadata", {}).get("nbgrader") or {})
            if cell.get("cell_type") == "markdown" and not meta.get("solution"):
                titles = HEADING.findall(text)
                if titles and not text.lstrip().startswith("# "):  # the notebook's title is not an exercise
                    heading = re.sub(r"\s*\([^)]*points?[^)]*\)\s*$", "", titles[0])
            if meta.get("grade") and meta.get("grade_id"):
                found[meta["grade_id"]] = heading or meta["grade_id"]
    return found


def _short(label: str, width: int = 28) -> str:
    return label if len(label) <= width else label[: width - 1] + "…"


def _brief(label: str) -> str:
    """"Exercise 2: your own roofline calculator" -> "Exercise 2", for axes; other headings shortened."""
    found = re.match(r"(Exercise\s+\d+)\b", label)
    return found.group(1) if found else _short(label, 22)


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
        absent = sorted(r.student for r in group if r.status == NOT_SUBMITTED)
        group = sorted((r for r in group if r.status != NOT_SUBMITTED), key=lambda r: r.student)
        graded = [r for r in group if r.status == "graded"]
        broken = [r for r in group if r.status != "graded"]
        waiting = [r for r in graded if r.manual_pending > 0]
        lines += [f"## {assignment}", "",
                  f"{len(group)} submissions: {len(graded)} graded ({len(waiting)} with written answers still to "
                  f"grade by hand), {len(broken)} ungradable."
                  + (f" Not submitted: {len(absent)} ({', '.join(absent)})." if absent else ""), ""]
        late = [r for r in group if r.late]
        if late:
            lines += [f"Late: {len(late)} (" + ", ".join(f"{r.student} {r.late}" for r in late) + ").", ""]
        labels = exercises(assignment)
        columns = list(dict.fromkeys(labels.get(g, g) for r in graded for g in r.cells))
        order = {label: i for i, label in enumerate(dict.fromkeys(labels.values()))}
        columns.sort(key=lambda label: order.get(label, len(order)))
        written = any(r.manual_max for r in graded)

        def fraction(row: Row, label: str) -> float | None:
            parts = [row.cells[g] for g in row.cells if labels.get(g, g) == label]
            top = sum(m for _, m in parts)
            return sum(s for s, _ in parts) / top if top else None

        if group and (columns or written):
            _heatmap(plt, group, columns, written, fraction, folder / f"{assignment}_heatmap.png", assignment)
            lines += [f"![students by exercises]({assignment}_heatmap.png)", ""]
        if graded and columns:
            lines += ["| exercise | mean score | full marks | zero |", "|---|---|---|---|"]
            for label in columns:
                values = [v for v in (fraction(r, label) for r in graded) if v is not None]
                lines.append(f"| {label} | {statistics.mean(values):.0%} | {sum(v >= 1 for v in values)}/{len(values)}"
                             f" | {sum(v == 0 for v in values)}/{len(values)} |")
            if written:
                done = [r for r in graded if r.manual_pending == 0 and r.manual_max]
                mean = f"{statistics.mean(r.manual_score / r.manual_max for r in done):.0%}" if done else "n/a"
                lines.append(f"| written answer (by hand) | {mean} | graded for {len(done)}/{len(graded)} | |")
            lines.append("")

        # A mistake counts once per submission and exercise, however many of its test cells caught it.
        who, where = defaultdict(set), defaultdict(set)
        for r in graded:
            for grade_id, mistake in r.mistakes:
                key = (mistake, _brief(labels.get(grade_id, grade_id)))
                who[key].add(r.student)
                where[key].add(grade_id)
        counted = Counter({key: len(students) for key, students in who.items()})
        untagged = sum(r.failed_untagged for r in graded)
        blanks = sum(r.blank for r in graded)
        if counted:
            _mistake_chart(plt, counted, folder / f"{assignment}_mistakes.png", assignment)
            lines += [f"![mistakes named by the checker]({assignment}_mistakes.png)", "",
                      "Mistakes the checker named (submissions with each):", ""]
            lines += [f"- {n} x {mistake}, {label} ({', '.join(sorted(where[mistake, label]))})"
                      for (mistake, label), n in counted.most_common(15)]
            if untagged:
                lines.append(f"- and {untagged} failing test cell(s) whose message named no known mistake")
        elif untagged:
            lines.append(f"The checker named no known mistake: the {untagged} failing test cell(s) failed in ways "
                         "it has no name for (see the feedback pages for their messages).")
        elif not blanks:
            lines.append("No test failed, so there is no mistake to name.")
        if blanks:
            lines.append(f"- {blanks} failing test cell(s) of exercises left blank (the answer's function was never "
                         f"defined), in {sum(r.blank > 0 for r in graded)} submission(s): not a mistake, not attempted")
        lines.append("")

        if graded:
            totals = [r.score for r in graded]
            top = max(r.max_score for r in graded)
            _totals_chart(plt, totals, top, folder / f"{assignment}_totals.png", assignment, len(broken))
            lines += [f"![autograded totals]({assignment}_totals.png)", "",
                      f"Autograded totals (of {top:g}): mean {statistics.mean(totals):.1f}, median "
                      f"{statistics.median(totals):g}, lowest {min(totals):g}, highest {max(totals):g}.", ""]
        if waiting:
            lines += ["Waiting for manual grading (`course formgrader`):", ""]
            lines += [f"- {r.student}: {r.manual_pending:g} points" for r in waiting] + [""]
        if broken:
            lines += ["Ungradable submissions:", ""] + [f"- {r.student}: {r.reason}" for r in broken] + [""]
    (folder / "README.md").write_text("\n".join(lines), encoding="utf-8")


def _heatmap(plt, group: list[Row], columns: list[str], written: bool, fraction, path: Path, assignment: str):
    import numpy as np

    names = columns + (["written (by hand)"] if written else [])
    grid = np.full((len(group), len(names)), np.nan)
    notes = []
    for i, row in enumerate(group):
        if row.status != "graded":
            notes.append((i, "ungradable"))
            continue
        for j, label in enumerate(columns):
            value = fraction(row, label)
            grid[i, j] = np.nan if value is None else value
        if written:
            if row.manual_pending > 0:
                notes.append((i, "pending", len(names) - 1))
            elif row.manual_max:
                grid[i, len(names) - 1] = row.manual_score / row.manual_max
    height = 1.6 + 0.32 * len(group)
    fig, ax = plt.subplots(figsize=(2.2 + 0.55 * len(names), height))
    cmap = plt.get_cmap("RdYlGn").with_extremes(bad="#dddddd")  # no score in that exercise: grey
    image = ax.imshow(np.ma.masked_invalid(grid), cmap=cmap, vmin=0, vmax=1, aspect="auto")
    for note in notes:
        if note[1] == "ungradable":
            ax.axhspan(note[0] - 0.5, note[0] + 0.5, color="#555555")
            ax.text((len(names) - 1) / 2, note[0], "ungradable", ha="center", va="center", color="white", fontsize=8)
        else:
            ax.text(note[2], note[0], "?", ha="center", va="center", fontsize=9)
    ax.set_xticks(range(len(names)), [_brief(n) for n in names], rotation=45, ha="right", fontsize=7)
    ax.set_yticks(range(len(group)), [r.student for r in group], fontsize=7)
    ax.set_title(f"{assignment}: share of each exercise's points (? = waiting for manual grading)", fontsize=9)
    fig.colorbar(image, ax=ax, fraction=0.04, pad=0.02, label="score / points")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _mistake_chart(plt, counted: Counter, path: Path, assignment: str):
    items = counted.most_common(15)[::-1]
    fig, ax = plt.subplots(figsize=(7, 1.0 + 0.35 * len(items)))
    ax.barh([f"{_short(m, 40)} ({label})" for (m, label), _ in items], [n for _, n in items], color="#C44E52")
    ax.set_xlabel("submissions", fontsize=8)
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.tick_params(labelsize=7)
    ax.set_title(f"{assignment}: mistakes named by the checker", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _totals_chart(plt, totals: list[float], top: float, path: Path, assignment: str, ungradable: int):
    import numpy as np

    fig, ax = plt.subplots(figsize=(6, 2.8))
    bins = np.linspace(0, top, min(int(top), 20) + 1) if top > 0 else 10
    ax.hist(totals, bins=bins, color="#4C72B0", edgecolor="white")
    ax.set_xlim(0, max(top, 1))
    ax.set_xlabel(f"autograded points (of {top:g})", fontsize=8)
    ax.set_ylabel("students", fontsize=8)
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.tick_params(labelsize=7)
    extra = f"; {ungradable} ungradable not shown" if ungradable else ""
    ax.set_title(f"{assignment}: totals of {len(totals)} graded submissions{extra}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
