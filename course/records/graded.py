"""A graded course on disk, as `course grade` leaves it and the later steps find it.

    OUT/grades.csv, OUT/feedback/, OUT/report/      what the instructor reads and hands out
    OUT/nbgrader/                                   nbgrader's course: gradebook.db, submitted/, autograded/,
                                                    feedback/, release/, records/ (the sandbox's flags)
    OUT/nbgrader/nbgrader_config.py                 the course's config with this folder as its root, so that
                                                    nbgrader and formgrader started here find everything
    OUT/nbgrader/ledger.json                        what was handed in: per student and assignment, a hash of
                                                    the files, the pre-flight notes, why it is ungradable

The ledger is what makes a re-grade a merge: an unchanged submission is not graded again, and students
absent from this run keep their rows.  Manual grades live in the gradebook; :func:`keep_manual` and
:func:`restore_manual` carry them across nbgrader's autograde, which would otherwise flag every manually
graded cell for review again (SaveAutoGrades sets ``needs_manual_grade`` wherever a manual score exists).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..grading import nbgrader_run
from ..grading.nbgrader_run import read_notebook, write_notebook

COURSE_ID = "rooflab"
GRADER_NOTE = "rooflab_grader_note"  # cell metadata key of the rubric cells formgrader shows (never in feedback)


class NotGraded(RuntimeError):
    """The folder is not a course graded by `course grade`."""


@dataclass
class Entry:
    """One student's hand-in of one assignment, as the ledger keeps it."""

    files: str | None = None  # sha256 of the files handed in
    source: str | None = None  # sha256 of the assignment's source/ it was graded against
    notes: list[str] = field(default_factory=list)  # what pre-flight repaired
    problem: str | None = None  # why it could not be graded at all (then it never reached nbgrader)
    grader_problem: str | None = None  # why nbgrader's run failed (retried on the next run)


class Ledger:
    """Every (student, assignment) ever handed in to this graded course, with its latest :class:`Entry`."""

    def __init__(self, path: Path):
        self.path = path
        self.entries: dict[tuple[str, str], Entry] = {}
        self.sources: dict[str, str] = {}  # assignment -> digest of its source notebooks when generated

    @classmethod
    def load(cls, root: Path) -> "Ledger":
        ledger = cls(root / "ledger.json")
        if ledger.path.is_file():
            data = json.loads(ledger.path.read_text(encoding="utf-8"))
            ledger.sources = dict(data.get("sources", {}))
            for key, value in data.get("submissions", {}).items():
                student, assignment = key.split("/", 1)
                ledger.entries[student, assignment] = Entry(**value)
        elif (root / "gradebook.db").is_file():
            # A course graded before the ledger existed: its gradebook's submissions, hashes unknown.
            for student, assignment in _gradebook_submissions(root):
                ledger.entries[student, assignment] = Entry()
        return ledger

    def save(self) -> None:
        data = {"sources": self.sources,
                "submissions": {f"{s}/{a}": asdict(e) for (s, a), e in sorted(self.entries.items())}}
        self.path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def _gradebook_submissions(root: Path) -> list[tuple[str, str]]:
    from nbgrader.api import Gradebook

    with Gradebook(db_url(root), course_id=COURSE_ID) as gradebook:
        return [(s.student.id, s.assignment.name) for a in gradebook.assignments for s in a.submissions]


def db_url(root: Path) -> str:
    """The gradebook's URL: OUT/nbgrader/gradebook.db, or the database `course grade --db` recorded."""
    from .gradebook_db import url_of

    return url_of(root)


def digest(files: list[Path]) -> str:
    """What identifies a hand-in: its files' names and bytes."""
    h = hashlib.sha256()
    for path in sorted(files):
        h.update(path.name.encode() + b"\0")
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def source_digest(assignment: str) -> str:
    h = hashlib.sha256()
    for path in sorted((nbgrader_run.SOURCE / assignment).rglob("*")):
        if path.is_file() and ".ipynb_checkpoints" not in path.parts:
            h.update(str(path.relative_to(nbgrader_run.SOURCE)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def root_of(out: Path) -> Path:
    """OUT/nbgrader, checked: a graded course has a gradebook there."""
    from .gradebook_db import exists

    root = out.resolve() / "nbgrader"
    if not exists(root):
        raise NotGraded(f"{out} is not a graded course (no {root / 'gradebook.db'}); run `course grade "
                        f"SUBMISSIONS --out {out}` first")
    return root


CONFIG = '''"""nbgrader settings of this graded copy of the course, written by `course grade`.

The course's own settings ({config}), with this folder as the course root and the course's
source/ as the source, so that nbgrader, and formgrader started here (`course formgrader`), find the gradebook,
the submissions and the assignments.  Rewritten on every `course` run; edit the course's file instead.
"""

from pathlib import Path

c = get_config()  # noqa: F821 - provided by traitlets
load_subconfig({config!r})  # noqa: F821
here = str(Path(__file__).resolve().parent)
c.CourseDirectory.root = here
c.CourseDirectory.source_directory = {source!r}
c.CourseDirectory.course_id = {course_id!r}
c.CourseDirectory.db_url = {db_url!r}
c.SandboxedExecute.record_dir = here + "/records"
c.SandboxedExecute.release_dir = here + "/release"

# The rubric cells shown to the grader in formgrader never reach a student's feedback page.
from course.review.feedback import DropGraderNotes  # noqa: E402

_feedback = c.GenerateFeedback.preprocessors if isinstance(c.GenerateFeedback.preprocessors, list) else []
c.GenerateFeedback.preprocessors = [DropGraderNotes] + [p for p in _feedback if p is not DropGraderNotes]
'''


def write_config(root: Path) -> Path:
    """OUT/nbgrader/nbgrader_config.py: the course's config, rooted here."""
    root.mkdir(parents=True, exist_ok=True)
    path = root / "nbgrader_config.py"
    text = CONFIG.format(config=str(nbgrader_run.ROOT / "nbgrader_config.py"), source=str(nbgrader_run.SOURCE),
                         course_id=COURSE_ID,
                         db_url=db_url(root))
    if not path.is_file() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")
    return path


# --- manual grades across a re-autograde -------------------------------------------------------------


def _text(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def _answers(path: Path) -> dict[str, str]:
    """grade_id -> text of every answer cell of a submitted notebook ({} if there is none)."""
    try:
        notebook = read_notebook(path)
    except (OSError, ValueError):
        return {}
    return {cell["metadata"]["nbgrader"]["grade_id"]: _text(cell) for cell in notebook.get("cells", [])
            if (cell.get("metadata", {}).get("nbgrader") or {}).get("solution")}


def keep_manual(root: Path, student: str, assignment: str) -> dict:
    """What the graders put in the gradebook for this submission, and the answers they graded."""
    from nbgrader.api import Gradebook, MissingEntry

    from .gradebook_db import exists

    kept = {"grades": {}, "comments": {}, "answers": {}}
    if not exists(root):
        return kept
    with Gradebook(db_url(root), course_id=COURSE_ID) as gradebook:
        try:
            submission = gradebook.find_submission(assignment, student)
        except MissingEntry:
            return kept
        for notebook in submission.notebooks:
            for grade in notebook.grades:
                if grade.manual_score is not None or grade.extra_credit:
                    kept["grades"][f"{notebook.name}/{grade.name}"] = {
                        "manual_score": grade.manual_score, "extra_credit": grade.extra_credit,
                        "needs_manual_grade": grade.needs_manual_grade, "cell_type": grade.cell_type}
            for comment in notebook.comments:
                if comment.manual_comment:
                    kept["comments"][f"{notebook.name}/{comment.name}"] = comment.manual_comment
    for path in (root / "submitted" / student / assignment).glob("*.ipynb"):
        for grade_id, text in _answers(path).items():
            kept["answers"][f"{path.stem}/{grade_id}"] = text
    return kept


def restore_manual(root: Path, student: str, assignment: str, kept: dict) -> list[str]:
    """Put ``kept`` back after autograde; return the cells whose manual grade now needs a second look.

    A written answer the student did not change keeps its grade as it was.  A manual score on a changed
    answer, or on a test cell of a changed submission, is kept but flagged for review (formgrader lists
    it again, and exports count it as pending).
    """
    from nbgrader.api import Gradebook, MissingEntry

    if not kept["grades"] and not kept["comments"]:
        return []
    now = {}
    for path in (root / "submitted" / student / assignment).glob("*.ipynb"):
        for grade_id, text in _answers(path).items():
            now[f"{path.stem}/{grade_id}"] = text
    review = []
    with Gradebook(db_url(root), course_id=COURSE_ID) as gradebook:
        for key, saved in kept["grades"].items():
            notebook, name = key.split("/", 1)
            try:
                grade = gradebook.find_grade(name, notebook, assignment, student)
            except MissingEntry:
                continue  # the cell is gone from the assignment
            grade.manual_score = saved["manual_score"]
            grade.extra_credit = saved["extra_credit"]
            unchanged = saved["cell_type"] == "markdown" and key in kept["answers"] \
                and now.get(key) == kept["answers"][key]
            grade.needs_manual_grade = saved["needs_manual_grade"] if unchanged else True
            if not unchanged and saved["manual_score"] is not None:
                review.append(name)
        for key, text in kept["comments"].items():
            notebook, name = key.split("/", 1)
            try:
                comment = gradebook.find_comment(name, notebook, assignment, student)
            except MissingEntry:
                continue
            comment.manual_comment = text
        gradebook.db.commit()
    return review


# --- the rubric, where the grader sees it -------------------------------------------------------------


def add_grader_notes(root: Path, student: str, assignment: str) -> int:
    """After each written answer of an autograded notebook, a cell with the source's rubric and model answer.

    formgrader shows the autograded notebook, so the grader reads the rubric next to the answer;
    feedback drops these cells (course.review.feedback.DropGraderNotes).  Returns how many cells were added.
    """
    added = 0
    for path in (root / "autograded" / student / assignment).glob("*.ipynb"):
        source = nbgrader_run.SOURCE / assignment / path.name
        if not source.is_file():
            continue
        reference = {(c.get("metadata", {}).get("nbgrader") or {}).get("grade_id"): _text(c)
                     for c in read_notebook(source)["cells"]}
        notebook = read_notebook(path)
        cells = [c for c in notebook["cells"] if not c.get("metadata", {}).get(GRADER_NOTE)]
        out = []
        for cell in cells:
            out.append(cell)
            meta = cell.get("metadata", {}).get("nbgrader") or {}
            if cell.get("cell_type") == "markdown" and meta.get("grade") and meta.get("solution"):
                text = reference.get(meta.get("grade_id"))
                if text:
                    out.append({"cell_type": "markdown", "id": f"grader-note-{meta['grade_id']}"[:64],
                                "metadata": {GRADER_NOTE: True, "editable": False, "deletable": False},
                                "source": "> **For the grader: the rubric and a model answer (from source/; never in "
                                          "the student's feedback).**\n\n" + text})
                    added += 1
        if out != notebook["cells"]:
            write_notebook(dict(notebook, cells=out), path)
    return added


# --- rows: every submission the graded course has seen -------------------------------------------------


@dataclass
class Outcome:
    """The fate of one student's hand-in of one assignment, as report.collect_rows reads it."""

    student: str
    assignment: str
    notes: list[str] = field(default_factory=list)
    problem: str | None = None


def read_rows(root: Path, ledger: Ledger | None = None):
    """One report.Row per (student, assignment) in the ledger, scores and manual grades from the gradebook."""
    from ..review.report import collect_rows

    ledger = ledger or Ledger.load(root)
    outcomes = [Outcome(s, a, list(e.notes), e.problem) for (s, a), e in sorted(ledger.entries.items())]
    problems = {(s, a): e.grader_problem for (s, a), e in ledger.entries.items() if e.grader_problem}
    return collect_rows(root, outcomes, problems)
