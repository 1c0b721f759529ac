"""`course grade`: a folder or zip of submissions in, grades, feedback and a report out.

Steps, each of which records rather than stops on a bad submission:
1. collect ``<student>/<assignment>/<notebook>.ipynb`` from a folder or zip;
2. make a private nbgrader course in ``OUT/nbgrader`` and generate the
   assignments there (this fills its gradebook);
3. pre-flight every submission (course.preflight);
4. autograde each student in a process of its own, N at a time, under a
   wall-clock and memory limit (course.limits); inside it, nbgrader runs the
   student's kernel in a sandbox and the tests in its own process
   (course.autograde), so the grade is computed where student code cannot reach;
5. generate feedback, then write grades.csv and report/ (course.report).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from . import preflight, report, sandbox
from .nbgrader_run import RELEASE, ROOT, SOLUTIONS, SOURCE, assignments, nbgrader, write_notebook

GIB = 2**30


@dataclass
class Limits:
    """What grading one student may cost."""

    wall_seconds: float = 300.0  # the whole autograde process of one student
    memory_bytes: int = 4 * GIB  # address space of each process, the grader's and the sandbox's
    processes: int = 64  # processes the sandbox may run
    file_bytes: int = 64 * 2**20  # largest file a submission may write
    disk_bytes: int = 256 * 2**20  # bytes a submission may write in all (per sandbox folder)
    cell_seconds: float = 10.0  # one cell, or one request of the grader


@dataclass
class Outcome:
    """The fate of one student's submission of one assignment."""

    student: str
    assignment: str
    notes: list[str] = field(default_factory=list)
    problem: str | None = None


def collect(submissions: Path, scratch: Path) -> Path:
    """Return a folder of ``student/assignment/*.ipynb``; unzip a zip into ``scratch`` first."""
    if submissions.is_file() and zipfile.is_zipfile(submissions):
        target = scratch / "unzipped"
        with zipfile.ZipFile(submissions) as archive:
            for member in archive.infolist():
                name = Path(member.filename)
                if name.is_absolute() or ".." in name.parts or "__MACOSX" in name.parts:
                    continue  # never write outside the target
                archive.extract(member, target)
        entries = [p for p in target.iterdir() if p.is_dir()]
        # A zip of one folder holding the students: step into it.
        if len(entries) == 1 and not any((entries[0] / a).is_dir() for a in assignments()):
            return entries[0]
        return target
    if not submissions.is_dir():
        raise FileNotFoundError(f"SUBMISSIONS must be a folder or a zip of <student>/<assignment>/*.ipynb: {submissions}")
    return submissions


def _course_root(out: Path, selected: list[str]) -> Path:
    """A private nbgrader course under OUT, reading the repository's source/."""
    root = out / "nbgrader"
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    for assignment in selected:
        done = _generate(assignment, root)
        if done.returncode != 0:
            raise RuntimeError(f"generate_assignment {assignment} failed:\n{done.stdout}{done.stderr}")
    return root


def _generate(assignment: str, root: Path) -> subprocess.CompletedProcess:
    return nbgrader("generate_assignment", assignment, "--force",
                    f"--CourseDirectory.source_directory={SOURCE}", root=root)


def _autograde(student: str, root: Path, limits: Limits, isolation: str,
               submissions: Path) -> tuple[str, str | None]:
    """Autograde all of one student's assignments in one limited process; return (student, problem)."""
    prefix = [sys.executable, "-m", "course.limits", str(limits.memory_bytes), str(4 * limits.processes), str(2**40), "--"]
    hide = ":".join(str(p) for p in (root, SOURCE, SOLUTIONS, RELEASE, submissions, ROOT / ".git", Path.home(),
                                     Path(tempfile.gettempdir())))
    try:
        done = nbgrader("autograde", "*", "--student", student, "--force",
                        f"--CourseDirectory.source_directory={SOURCE}",
                        f"--SandboxedExecute.isolation={isolation}",
                        f"--SandboxedExecute.record_dir={root / 'records'}",
                        f"--SandboxedExecute.cell_seconds={limits.cell_seconds}",
                        f"--SandboxedExecute.memory_bytes={limits.memory_bytes}",
                        f"--SandboxedExecute.processes={limits.processes}",
                        f"--SandboxedExecute.file_bytes={limits.file_bytes}",
                        f"--SandboxedExecute.disk_bytes={limits.disk_bytes}",
                        f"--SandboxedExecute.hide={hide}",
                        f"--SandboxedExecute.release_dir={root / 'release'}",
                        root=root, timeout=limits.wall_seconds, prefix=prefix)
    except subprocess.TimeoutExpired:
        return student, f"grading took longer than {limits.wall_seconds:.0f} s and was stopped"
    except OSError as error:
        return student, f"the grader could not start: {error}"
    if done.returncode != 0:
        return student, _nbgrader_error(done.stdout + done.stderr, done.returncode)
    return student, None


def _nbgrader_error(log: str, returncode: int = 1) -> str:
    """The line of nbgrader's log that says what went wrong, shortened."""
    lines = [l.strip() for l in log.splitlines() if l.strip()]
    for key in ("Kernel died", "DeadKernelError", "MemoryError", "CellTimeoutError", "ERROR"):
        for line in lines:
            if key in line:
                return line[:300]
    if returncode < 0:
        return f"the grader process was killed by signal {-returncode}"
    return (lines[-1] if lines else f"nbgrader failed without a message (exit code {returncode})")[:300]


def _progress(done: int, total: int, started: float, stream=sys.stderr) -> None:
    width = 30
    filled = int(width * done / max(total, 1))
    line = f"\rgrading [{'#' * filled}{'.' * (width - filled)}] {done}/{total} students, {time.time() - started:.0f} s"
    if stream.isatty():
        stream.write(line + ("\n" if done == total else ""))
    else:
        stream.write(line.strip() + "\n")
    stream.flush()


class NoSandbox(RuntimeError):
    """Grading was asked for on a machine that offers no isolation, without --no-sandbox."""


def grade(submissions: Path, out: Path, workers: int = 2, limits: Limits | None = None,
          quiet: bool = False, no_sandbox: bool = False) -> list[report.Row]:
    """Grade every submission under ``submissions`` into ``out``; return one row per submission."""
    limits = limits or Limits()
    isolation = sandbox.NO_SANDBOX if no_sandbox else sandbox.isolation()
    if isolation == sandbox.NO_SANDBOX and not no_sandbox:
        raise NoSandbox("this machine offers no sandbox for student code: " + sandbox.INSTALL_HINT)
    out = out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    known = assignments()
    with tempfile.TemporaryDirectory() as scratch:
        folder = collect(Path(submissions), Path(scratch))
        students = sorted(p.name for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
        found = sorted({a.name for s in students for a in (folder / s).iterdir() if a.is_dir()})
        selected = [a for a in known if a in found]
        root = _course_root(out, selected)
        outcomes: list[Outcome] = []
        to_grade: set[str] = set()
        for student in students:
            for entry in sorted((folder / student).iterdir()):
                if not entry.is_dir():
                    continue
                assignment = entry.name
                if assignment not in known:
                    outcomes.append(Outcome(student, assignment, problem=f"unknown assignment {assignment!r}"))
                    continue
                files = sorted(p for p in entry.iterdir() if p.is_file())
                release = root / "release" / assignment
                prepared = preflight.prepare(student, assignment, files, next(release.glob("*.ipynb")))
                outcomes.append(Outcome(student, assignment, prepared.notes, prepared.problem))
                if prepared.notebook is not None:
                    target = root / "submitted" / student / assignment / next(release.glob("*.ipynb")).name
                    write_notebook(prepared.notebook, target)
                    to_grade.add(student)

    problems: dict[str, str] = {}
    started = time.time()
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        futures = [pool.submit(_autograde, s, root, limits, isolation, Path(submissions).resolve())
                   for s in sorted(to_grade)]
        for count, future in enumerate(as_completed(futures), 1):
            student, problem = future.result()
            if problem:
                problems[student] = problem
            if not quiet:
                _progress(count, len(futures), started)

    for assignment in selected:
        done = nbgrader("generate_feedback", assignment, "--force", root=root)
        if done.returncode != 0 and not quiet:
            print(f"warning: generate_feedback {assignment} reported: {_nbgrader_error(done.stdout + done.stderr)}",
                  file=sys.stderr)
    rows = report.collect_rows(root, outcomes, problems, isolation)
    report.write(rows, root, out)
    return rows
