"""`course grade`: a folder or zip of submissions in, grades, feedback and a report out.

Steps, each of which records rather than stops on a bad submission:
1. collect ``<student>/<assignment>/<notebook>.ipynb`` from a folder or zip;
2. keep a private nbgrader course in ``OUT/nbgrader`` (course.graded) and generate the
   assignments there when their source changed (this fills its gradebook);
3. pre-flight every new or changed submission (course.preflight); an unchanged one (same
   files, same source) keeps its grades and is not run again;
4. autograde each student with something new in a process of its own, N at a time, under a
   wall-clock and memory limit (course.limits); inside it, nbgrader runs the student's kernel
   in a sandbox and the tests in its own process (course.autograde), so the grade is computed
   where student code cannot reach.  Manual grades and comments already in the gradebook are
   carried across (course.graded.keep_manual / restore_manual);
5. write feedback for submissions with nothing left to grade by hand (course.feedback), then
   grades.csv and report/ (course.report) for every submission the graded course has seen.

Grading into an existing OUT merges: nothing is deleted; ``start_over`` (``--fresh``) is the only
way to drop a previous grading.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from . import feedback, gradebook_db, graded, preflight, report, sandbox
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


def _course_root(out: Path, selected: list[str], ledger: graded.Ledger) -> Path:
    """The private nbgrader course under OUT, reading the repository's source/: kept between runs.

    An assignment is generated again only when its source changed (or was never generated here);
    nbgrader refuses to add or remove graded cells of an assignment that has submissions, and then
    grading stops with its message rather than mixing two versions.
    """
    root = out / "nbgrader"
    root.mkdir(parents=True, exist_ok=True)
    graded.write_config(root)
    for assignment in sorted(set(selected) | set(ledger.sources)):
        if assignment not in assignments():
            continue
        current = graded.source_digest(assignment)
        if ledger.sources.get(assignment) == current and any((root / "release" / assignment).glob("*.ipynb")):
            continue
        done = _generate(assignment, root)
        if done.returncode != 0:
            raise RuntimeError(f"generate_assignment {assignment} failed:\n{done.stdout}{done.stderr}")
        ledger.sources[assignment] = current
        ledger.save()
    return root


def start_over(out: Path) -> None:
    """Delete what `course grade` made in ``out`` (--fresh): the gradebook and its folders, feedback, report."""
    out = Path(out)
    gradebook_db.clear(out / "nbgrader")  # a database outside OUT: its tables
    for name in ("nbgrader", "feedback", "report"):
        if (out / name).is_dir():
            shutil.rmtree(out / name)
    for name in ("grades.csv",):
        if (out / name).is_file():
            (out / name).unlink()


def _generate(assignment: str, root: Path) -> subprocess.CompletedProcess:
    return nbgrader("generate_assignment", assignment, "--force",
                    f"--CourseDirectory.source_directory={SOURCE}", root=root)


def _autograde(student: str, work: list[str], root: Path, limits: Limits, isolation: str,
               submissions: Path) -> tuple[str, dict[str, str]]:
    """Autograde one student's new or changed assignments in limited processes; return (student, problems).

    When every assignment the student has in submitted/ is to be graded, one process does them all
    (nbgrader's start-up is most of the cost); otherwise one process per assignment, so that an
    unchanged assignment is not run again.
    """
    present = sorted(p.name for p in (root / "submitted" / student).iterdir() if p.is_dir())
    batches = [("*", work)] if sorted(work) == present else [(a, [a]) for a in work]
    problems = {}
    for pattern, covered in batches:
        problem = _autograde_one(student, pattern, root, limits, isolation, submissions)
        if problem:
            problems.update({a: problem for a in covered})
    return student, problems


def _autograde_one(student: str, pattern: str, root: Path, limits: Limits, isolation: str,
                   submissions: Path) -> str | None:
    prefix = [sys.executable, "-m", "course.limits", str(limits.memory_bytes), str(4 * limits.processes), str(2**40), "--"]
    hide = ":".join(str(p) for p in (root, SOURCE, SOLUTIONS, RELEASE, submissions, ROOT / ".git", Path.home(),
                                     Path(tempfile.gettempdir())))
    try:
        done = nbgrader("autograde", pattern, "--student", student, "--force",
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
        return f"grading took longer than {limits.wall_seconds:.0f} s and was stopped"
    except OSError as error:
        return f"the grader could not start: {error}"
    if done.returncode != 0:
        return _nbgrader_error(done.stdout + done.stderr, done.returncode)
    return None


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


def _unchanged(previous: graded.Entry | None, files: str, source: str, autograded: Path) -> bool:
    """Whether a hand-in is the one already graded: same files, same source, and its grading stands.

    An ungradable hand-in stays ungradable whatever the source; a run of nbgrader that failed is retried.
    """
    if previous is None or previous.files != files or previous.grader_problem:
        return False
    if previous.problem:
        return True
    return previous.source == source and autograded.is_dir()


def _as_they_come(jobs: list[tuple], workers: int, scheduler: str | None):
    """(student, problems) of each ``_autograde(*job)`` as it ends: on ``workers`` threads here, or on the
    Dask cluster at ``scheduler``."""
    if scheduler:
        from .cluster import run_on

        yield from run_on(scheduler, jobs)
        return
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        for future in as_completed([pool.submit(_autograde, *job) for job in jobs]):
            yield future.result()


class NoSandbox(RuntimeError):
    """Grading was asked for on a machine that offers no isolation, without --no-sandbox."""


def grade(submissions: Path, out: Path, workers: int = 2, limits: Limits | None = None,
          quiet: bool = False, no_sandbox: bool = False, feedback_now: bool = False,
          db: str | None = None, scheduler: str | None = None) -> list[report.Row]:
    """Grade the submissions under ``submissions`` into the graded course ``out``, merging with what is there.

    ``db``: the gradebook's database URL for a first grading (course/gradebook_db.py; default: SQLite in OUT).
    ``scheduler``: a Dask scheduler's address: each student's autograde runs on its cluster (course/cluster.py).
    Returns one row per submission the graded course holds: this run's and every earlier one's.
    """
    limits = limits or Limits()
    isolation = sandbox.NO_SANDBOX if no_sandbox else sandbox.isolation()
    if isolation == sandbox.NO_SANDBOX and not no_sandbox:
        raise NoSandbox("this machine offers no sandbox for student code: " + sandbox.INSTALL_HINT)
    out = out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    gradebook_db.choose(out / "nbgrader", db)
    if scheduler:
        from .cluster import check

        check(scheduler)
    known = assignments()
    ledger = graded.Ledger.load(out / "nbgrader")
    work: dict[str, list[str]] = {}  # student -> assignments to autograde
    kept: dict[tuple[str, str], dict] = {}  # manual grades to carry across the autograde
    unchanged = 0
    with tempfile.TemporaryDirectory() as scratch:
        folder = collect(Path(submissions), Path(scratch))
        students = sorted(p.name for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
        found = sorted({a.name for s in students for a in (folder / s).iterdir() if a.is_dir()})
        selected = [a for a in known if a in found]
        root = _course_root(out, selected, ledger)
        for student in students:
            for entry in sorted((folder / student).iterdir()):
                if not entry.is_dir():
                    continue
                assignment = entry.name
                if assignment not in known:
                    ledger.entries[student, assignment] = graded.Entry(
                        problem=f"unknown assignment {assignment!r} (this course has {', '.join(known)})")
                    continue
                files = sorted(p for p in entry.iterdir() if p.is_file())
                digest, source = graded.digest(files), ledger.sources[assignment]
                if _unchanged(ledger.entries.get((student, assignment)), digest, source,
                              root / "autograded" / student / assignment):
                    unchanged += 1
                    continue
                release = next((root / "release" / assignment).glob("*.ipynb"))
                prepared = preflight.prepare(student, assignment, files, release)
                ledger.entries[student, assignment] = graded.Entry(digest, source, prepared.notes, prepared.problem)
                if prepared.notebook is not None:
                    kept[student, assignment] = graded.keep_manual(root, student, assignment)
                    write_notebook(prepared.notebook, root / "submitted" / student / assignment / release.name)
                    work.setdefault(student, []).append(assignment)
    # Submissions graded against a source that has changed since (a fixed test) are graded again from
    # submitted/, whether or not this run brought them.
    stale = 0
    for (student, assignment), entry in sorted(ledger.entries.items()):
        if entry.problem or assignment not in ledger.sources or entry.source == ledger.sources[assignment]:
            continue
        if assignment in work.get(student, []) or not any((root / "submitted" / student / assignment).glob("*.ipynb")):
            continue
        entry.source = ledger.sources[assignment]
        kept[student, assignment] = graded.keep_manual(root, student, assignment)
        work.setdefault(student, []).append(assignment)
        stale += 1
    ledger.save()

    started = time.time()
    jobs = [(s, work[s], root, limits, isolation, Path(submissions).resolve()) for s in sorted(work)]
    for count, (student, problems) in enumerate(_as_they_come(jobs, workers, scheduler), 1):
        for assignment in work[student]:
            ledger.entries[student, assignment].grader_problem = problems.get(assignment)
        if not quiet:
            _progress(count, len(jobs), started)
    review = []
    for (student, assignment), manual in kept.items():
        flagged = graded.restore_manual(root, student, assignment, manual)
        review += [f"{student} {assignment} {cell}" for cell in flagged]
        graded.add_grader_notes(root, student, assignment)
    ledger.save()

    rows = graded.read_rows(root, ledger)
    written = feedback.write(rows, root, out, include_pending=feedback_now)
    report.write(rows, root, out)
    if not quiet:
        graded_now = sum(len(a) for a in work.values())
        again = f" ({stale} of them again, as their assignment's source changed)" if stale else ""
        print(f"this run: {graded_now} submission(s) autograded{again}, {unchanged} unchanged and kept; the graded "
              f"course holds {len(rows)}", file=sys.stderr)
        for line in review:
            print(f"review: {line}: manual grade kept, but the answer changed", file=sys.stderr)
        for problem in written.problems:
            print(f"warning: {problem}", file=sys.stderr)
    return rows
