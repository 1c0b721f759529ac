"""Feedback pages: written when there is nothing left to grade by hand, rewritten after manual grading.

nbgrader's generate_feedback makes a page from each autograded notebook and the gradebook.  A page made
while a written answer waits for the instructor says "Score: 0.0 / 10.0" for it, so by default only
submissions with nothing pending get a page (``course grade``); ``course feedback`` regenerates them
after manual grading, with the manual scores and comments.  A submission that could not be graded gets
a page of our own that says why and what to do, so every student who handed something in hears back.
Pages of submissions that went back to pending (a changed hand-in) are removed: they would be stale.
"""

from __future__ import annotations

import html
import os
import shutil
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from nbconvert.preprocessors import Preprocessor
from traitlets import Bool

from . import feedback_page

GRADER_NOTE = "rooflab_grader_note"  # as course.records.graded has it (kept import-light: nbgrader loads this module)


class DropGraderNotes(Preprocessor):
    """Remove the rubric cells that `course grade` adds for formgrader (course.records.graded.add_grader_notes)."""

    enabled = Bool(True)  # nbconvert skips a preprocessor that is not enabled, silently

    def preprocess(self, nb, resources):
        nb.cells = [cell for cell in nb.cells if not cell.get("metadata", {}).get(GRADER_NOTE)]
        return nb, resources


@dataclass
class Written:
    """What a feedback run did."""

    pages: list[tuple[str, str]] = field(default_factory=list)  # (student, assignment) with a fresh page
    held: list[tuple[str, str]] = field(default_factory=list)  # waiting for manual grading: no page
    ungradable: list[tuple[str, str]] = field(default_factory=list)  # a page that says why
    problems: list[str] = field(default_factory=list)
    folder: Path | None = None

    def summary(self) -> str:
        lines = [f"feedback: {self.folder}",
                 f"  {len(self.pages)} page(s) with scores, {len(self.ungradable)} for ungradable submissions"]
        if self.held:
            lines.append(f"  {len(self.held)} held back until their written answers are graded "
                         f"(`course formgrader`, then `course feedback`; `--all` writes them anyway): "
                         + ", ".join(f"{s} {a}" for s, a in self.held))
        lines += [f"  warning: {p}" for p in self.problems]
        return "\n".join(lines)


def write(rows, root: Path, out: Path, include_pending: bool = False) -> Written:
    """Generate and copy the pages for ``rows`` into ``out/feedback``."""
    from ..grade import _nbgrader_error
    from ..grading.nbgrader_run import nbgrader

    written = Written(folder=out / "feedback")
    by_assignment = defaultdict(list)
    for row in rows:
        by_assignment[row.assignment].append(row)
    ready, generate = {}, {}
    for assignment, group in sorted(by_assignment.items()):
        ready[assignment] = {r.student for r in group
                             if r.status == "graded" and (include_pending or r.manual_pending == 0)}
        autograded = {p.parent.name for p in (root / "autograded").glob(f"*/{assignment}") if p.is_dir()}
        if ready[assignment] & autograded:
            generate[assignment] = ",".join(sorted(autograded - ready[assignment]))
    # One nbgrader process per assignment, side by side: generate_feedback only reads the gradebook.
    with ThreadPoolExecutor(max_workers=max(1, min(len(generate), os.cpu_count() or 1))) as pool:
        runs = {assignment: pool.submit(nbgrader, "generate_feedback", assignment, "--force",
                                        f"--CourseDirectory.student_id_exclude={exclude}", root=root)
                for assignment, exclude in generate.items()}
    for assignment, run in sorted(runs.items()):
        done = run.result()
        if done.returncode != 0:
            written.problems.append(f"generate_feedback {assignment}: "
                                    f"{_nbgrader_error(done.stdout + done.stderr, done.returncode)}")
    for assignment, group in sorted(by_assignment.items()):
        ready_here = ready[assignment]
        for row in group:
            target = out / "feedback" / row.student / assignment
            made = root / "feedback" / row.student / assignment
            if row.status == "not submitted":
                continue  # nothing handed in: no page (grades.csv and the exports say so)
            if row.status == "ungradable":
                _replace(target)
                _ungradable_page(row, root, target)
                written.ungradable.append((row.student, assignment))
            elif row.student in ready_here and made.is_dir():
                _replace(target)
                shutil.copytree(made, target)
                for page in target.glob("*.html"):
                    feedback_page.finish(page, row)
                written.pages.append((row.student, assignment))
            else:
                # waiting for manual grading: a page now would show the written answer as 0
                _replace(target)
                _replace(made)
                written.held.append((row.student, assignment))
    return written


def _replace(folder: Path) -> None:
    if folder.is_dir():
        shutil.rmtree(folder)
        if folder.parent.is_dir() and not any(folder.parent.iterdir()):
            folder.parent.rmdir()  # the student's folder, when this was their only assignment


def regenerate(out: Path, include_pending: bool = False) -> Written:
    """`course feedback OUT`: pages from the gradebook as it is now; grades.csv and report/ too."""
    from ..records import graded
    from . import report

    root = graded.root_of(out)
    graded.write_config(root)
    rows = report.complete(graded.read_rows(root), root)
    written = write(rows, root, out.resolve(), include_pending)
    report.write(rows, root, out.resolve())
    return written


ADVICE = [
    (("not valid JSON", "not a notebook", "not UTF-8", "malformed", "unsupported notebook format",
      "cannot be read"),
     "The file you handed in is not a notebook the grader can open: it may have been cut off during the upload, "
     "or saved by another program. Open your notebook in JupyterLab; if it opens, save it, download it "
     "(File &rarr; Download) and hand in that file. If it does not open, your last good copy may be in the "
     "hidden <code>.ipynb_checkpoints</code> folder next to it."),
    (("expected ",),
     "Hand in exactly one notebook, with the name of the notebook you were given (rename yours if needed)."),
    (("unknown assignment",),
     "The folder of your hand-in does not carry the name of one of this course's assignments; hand it in "
     "again under the assignment's name."),
    (("longer than", "killed", "Kernel died", "DeadKernel", "MemoryError", "memory"),
     "Your notebook could not be run to the end within the grader's limits (time per cell, memory). Restart "
     "the kernel and run all cells: look for a loop that never ends or a very large computation, fix it, and "
     "hand the notebook in again."),
]
DEFAULT_ADVICE = ("Run <em>Kernel &rarr; Restart Kernel and Run All Cells</em>, check that the notebook runs from "
                  "top to bottom, save it and hand it in again.")


def advice(reason: str) -> str:
    for keys, text in ADVICE:
        if any(key in reason for key in keys):
            return text
    return DEFAULT_ADVICE


def _ungradable_page(row, root: Path, target: Path) -> Path:
    released = sorted((root / "release" / row.assignment).glob("*.ipynb"))
    name = released[0].stem if released else row.assignment
    target.mkdir(parents=True, exist_ok=True)
    page = target / f"{name}.html"
    page.write_text(f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(row.assignment)}: not graded</title>
<style>body {{ font-family: sans-serif; max-width: 46em; margin: 2em auto; line-height: 1.5 }}
.reason {{ background: #fdecea; border-left: 4px solid #c0392b; padding: .6em 1em }}</style></head>
<body>
<h1>{html.escape(row.assignment)}: your submission could not be graded</h1>
<p>Student: <strong>{html.escape(row.student)}</strong>. Score: <strong>none yet</strong> (out of {row.max_score:g}
autograded points).</p>
<p class="reason"><strong>Why:</strong> {html.escape(row.reason or "the grader could not run it")}</p>
<p><strong>What to do:</strong> {advice(row.reason or "")}</p>
<p>If this keeps happening, write to your instructor and quote the reason above.</p>
</body></html>
""", encoding="utf-8")
    return page
