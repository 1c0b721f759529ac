"""`course grade`: a folder or zip of submissions in, grades, feedback and a report out.

Steps, each of which records rather than stops on a bad submission:
1. read the hand-ins from a folder or zip as they come: an LMS download (Canvas, Moodle), nbgrader's
   exchange, or ``<student>/<assignment>/<files>`` (course.records.intake), LMS ids mapped through a roster;
2. keep a private nbgrader course in ``OUT/nbgrader`` (course.records.graded) and generate the
   assignments there when their source changed (this fills its gradebook);
3. pre-flight every new or changed submission (course.grading.preflight); an unchanged one (same
   files, same source) keeps its grades and is not run again;
4. autograde each student with something new in a process of its own, N at a time, under a
   wall-clock and memory limit (course.grading.limits); inside it, nbgrader runs the student's kernel
   in a sandbox and the tests in its own process (course.grading.autograde), so the grade is computed
   where student code cannot reach.  Manual grades and comments already in the gradebook are
   carried across (course.records.graded.keep_manual / restore_manual);
5. write feedback for submissions with nothing left to grade by hand (course.review.feedback), then
   grades.csv and report/ (course.review.report) for every submission the graded course has seen.

Grading into an existing OUT merges: nothing is deleted; ``start_over`` (``--fresh``) is the only
way to drop a previous grading.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from .review import feedback, report
from .records import gradebook_db, graded, intake, lateness
from .records.intake import check_path
from .grading import preflight
from .grading import sandbox
from .grading import warm_nbgrader
from .records import roster as roster_module
from .grading import nbgrader_run
from .grading.nbgrader_run import assignments, command_args, environment, nbgrader, write_notebook

GIB = 2**30


# What grading one student may cost: defined once, with the sandbox (course/grading/sandbox.py).
Limits = sandbox.SandboxLimits


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
                    f"--CourseDirectory.source_directory={nbgrader_run.SOURCE}", root=root)


def _autograde(student: str, work: list[str], root: Path, limits: Limits, isolation: str,
               submissions: Path, warm: warm_nbgrader.Pool | None = None) -> tuple[str, dict[str, str]]:
    """Autograde one student's new or changed assignments in limited processes; return (student, problems).

    When every assignment the student has in submitted/ is to be graded, one process does them all
    (nbgrader's start-up is most of the cost); otherwise one process per assignment, so that an
    unchanged assignment is not run again.  With ``warm``, each process is forked from the thread's warm
    nbgrader (course.grading.warm_nbgrader) rather than started afresh.
    """
    present = sorted(p.name for p in (root / "submitted" / student).iterdir() if p.is_dir())
    batches = [("*", work)] if sorted(work) == present else [(a, [a]) for a in work]
    problems = {}
    for pattern, covered in batches:
        problem = _autograde_one(student, pattern, root, limits, isolation, submissions, warm, len(covered))
        if problem:
            problems.update({a: problem for a in covered})
    return student, problems


def _autograde_one(student: str, pattern: str, root: Path, limits: Limits, isolation: str,
                   submissions: Path, warm: warm_nbgrader.Pool | None = None, assignments: int = 1) -> str | None:
    # the limits of nbgrader's own process (the kernel's are the sandbox's): memory, processes, no file cap
    memory, processes, file_bytes = limits.memory_bytes, 4 * limits.processes, 2**40
    # the wall limit is per assignment: a process grading all of a student's assignments gets it for each
    # (one student's eight, each with a hanging cell, ran past a single 300 s on a loaded machine)
    wall = limits.wall_seconds * assignments
    course = nbgrader_run.course_root()
    hide = ":".join(str(p) for p in (root, course / "source", course / "solutions", course / "release", submissions,
                                     course / ".git", Path.home(), Path(tempfile.gettempdir())))
    args = ("autograde", pattern, "--student", student, "--force",
            f"--CourseDirectory.source_directory={nbgrader_run.SOURCE}",
            f"--SandboxedExecute.isolation={isolation}",
            f"--SandboxedExecute.record_dir={root / 'records'}",
            f"--SandboxedExecute.cell_seconds={limits.cell_seconds}",
            f"--SandboxedExecute.memory_bytes={limits.memory_bytes}",
            f"--SandboxedExecute.processes={limits.processes}",
            f"--SandboxedExecute.file_bytes={limits.file_bytes}",
            f"--SandboxedExecute.disk_bytes={limits.disk_bytes}",
            f"--SandboxedExecute.hide={hide}",
            f"--SandboxedExecute.release_dir={root / 'release'}")
    try:
        if warm is not None:
            done = warm.get().run(command_args(*args, root=root), memory, processes, file_bytes, wall)
        else:
            prefix = [sys.executable, "-m", "course.grading.limits", str(memory), str(processes), str(file_bytes), "--"]
            done = nbgrader(*args, root=root, timeout=wall, prefix=prefix)
    except subprocess.TimeoutExpired:
        return f"grading took longer than {wall:.0f} s ({limits.wall_seconds:.0f} s an assignment) and was stopped"
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
    # nbgrader's imports once per worker thread, not once per student (course.grading.warm_nbgrader)
    with warm_nbgrader.Pool(nbgrader_run.course_root(), environment()) as warm, \
            ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        for future in as_completed([pool.submit(_autograde, *job, warm) for job in jobs]):
            yield future.result()


class NoSandbox(RuntimeError):
    """Grading was asked for on a machine that offers no isolation, without --no-sandbox."""


def grade(submissions: Path, out: Path, workers: int = 2, limits: Limits | None = None,
          quiet: bool = False, no_sandbox: bool = False, feedback_now: bool = False,
          roster: Path | None = None, assignment: str | None = None,
          due: dict[str, str] | None = None, db: str | None = None,
          scheduler: str | None = None) -> list[report.Row]:
    """Grade the submissions under ``submissions`` into the graded course ``out``, merging with what is there.

    ``submissions`` is a folder or zip in any layout course.records.intake reads; ``roster`` an LMS gradebook export
    (course.records.roster); ``assignment`` the assignment of an LMS download whose notebook names do not say;
    ``due`` assignment -> due time (ISO 8601), over the course's course.toml.  ``db``: the gradebook's database
    URL for a first grading (course/records/gradebook_db.py; default: SQLite in OUT).  ``scheduler``: a Dask
    scheduler's address: each student's autograde runs on its cluster (course/cluster.py).  Raises NoSubmissions when
    ``submissions`` holds no hand-in.  Returns one row per student and assignment of the graded course:
    this run's, every earlier one's, and a ``not submitted`` row where nothing came.
    """
    limits = limits or Limits()
    check_path(submissions)  # a mistyped argument is named before the machine's shortcomings
    lateness.save_due(out, due)
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
        intake = _intake(Path(submissions), Path(scratch), roster, assignment)
        selected = [a for a in known if a in {h.assignment for h in intake.handins}]
        root = _course_root(out, selected, ledger)
        _remember_intake(root, intake)
        for handin in intake.handins:
            student, assignment_id = handin.student, handin.assignment
            if assignment_id not in known:
                ledger.entries[student, assignment_id] = graded.Entry(
                    problem=f"unknown assignment {assignment_id!r} (this course has {', '.join(known)})")
                continue
            files = sorted(handin.files)
            digest, source = graded.digest(files), ledger.sources[assignment_id]
            if _unchanged(ledger.entries.get((student, assignment_id)), digest, source,
                          root / "autograded" / student / assignment_id):
                unchanged += 1
                continue
            release = next((root / "release" / assignment_id).glob("*.ipynb"))
            prepared = preflight.prepare(student, assignment_id, files, release)
            ledger.entries[student, assignment_id] = graded.Entry(digest, source, prepared.notes, prepared.problem)
            if prepared.notebook is not None:
                kept[student, assignment_id] = graded.keep_manual(root, student, assignment_id)
                write_notebook(prepared.notebook, root / "submitted" / student / assignment_id / release.name)
                work.setdefault(student, []).append(assignment_id)
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
    # Every student of this run counts in the progress, those with nothing to run (unchanged, or
    # ungradable before nbgrader) as done from the start.
    everyone = {h.student for h in intake.handins} | set(work)
    ready = len(everyone - set(work))
    jobs = [(s, work[s], root, limits, isolation, Path(submissions).resolve()) for s in sorted(work)]
    for count, (student, problems) in enumerate(_as_they_come(jobs, workers, scheduler), 1):
        for assignment_id in work[student]:
            ledger.entries[student, assignment_id].grader_problem = problems.get(assignment_id)
        if not quiet:
            _progress(ready + count, len(everyone), started)
    review = []
    for (student, assignment), manual in kept.items():
        flagged = graded.restore_manual(root, student, assignment, manual)
        review += [f"{student} {assignment} {cell}" for cell in flagged]
        graded.add_grader_notes(root, student, assignment)
    ledger.save()

    rows = report.complete(graded.read_rows(root, ledger), root)
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
        _say_skipped(intake)
        for warning in stale_release(root, selected):
            print(f"warning: {warning}", file=sys.stderr)
    return rows


def stale_release(root: Path, selected: list[str]) -> list[str]:
    """Where the course's release/ is older than source/: the graded course's release (generated from source/
    now) and release/ differ in a cell's id, type or text.  Grading reads source/, so the grades stand; what
    is stale is the notebook the students were given."""
    from .grading.nbgrader_run import read_notebook

    def cells(path: Path) -> list[tuple]:
        return [(c.get("id"), c.get("cell_type"), "".join(c["source"]) if isinstance(c.get("source"), list)
                 else c.get("source", "")) for c in read_notebook(path)["cells"]]

    found = []
    for assignment in selected:
        for fresh in sorted((root / "release" / assignment).glob("*.ipynb")):
            committed = nbgrader_run.RELEASE / assignment / fresh.name
            if not committed.is_file():
                found.append(f"release/{assignment}/{fresh.name} is missing: run `course build`")
                continue
            now, given = cells(fresh), cells(committed)
            differ = [f"{a[0] or i}" for i, (a, b) in enumerate(zip(now, given)) if a != b]
            if differ or len(now) != len(given):
                what = f"cells {', '.join(differ[:5])}" + (" ..." if len(differ) > 5 else "") if differ \
                    else f"{len(given)} cells, {len(now)} in source/"
                found.append(f"release/{assignment} is older than source/ ({what} differ): the students' notebook "
                             f"is not the one graded; run `course build`, and hand out the new release if it matters")
    return found


# --- submissions as they come (course.records.intake) -----------------------------------------------------------


class NoSubmissions(RuntimeError):
    """SUBMISSIONS held no hand-in that could be placed."""


def _intake(submissions: Path, scratch: Path, roster: Path | None, assignment: str | None) -> intake.Intake:
    """Every hand-in of ``submissions``, in any layout; raise NoSubmissions, saying what was seen, if none."""

    known = assignments()
    if assignment is not None and assignment not in known:
        raise ValueError(f"--assignment {assignment!r}: not an assignment of this course ({', '.join(known)})")
    names = {p.stem: a for a in known for p in (nbgrader_run.RELEASE / a).glob("*.ipynb")}
    listed = roster_module.read(roster) if roster else None
    folder = intake.unpack(submissions, scratch)
    found = intake.read(folder, scratch, known, names, listed, assignment)
    if not found.handins:
        lines = [f"no submission found in {submissions}: {found.describe()}"]
        lines += [f"  skipped {s.path}: {s.reason}" for s in found.skipped[:20]]
        if len(found.skipped) > 20:
            lines.append(f"  ... and {len(found.skipped) - 20} more")
        raise NoSubmissions("\n".join(lines))
    found.roster = listed
    return found


def _remember_intake(root: Path, found: intake.Intake) -> None:
    """The roster and each hand-in's time, kept in the graded course for exports, feedback and late work."""
    if found.roster is not None:
        found.roster.save(root / "roster.json")
    lateness.save_handins(root, found.handins)


def _say_skipped(found: intake.Intake) -> None:
    if found.skipped:
        print(f"{len(found.skipped)} file(s) not graded, with why:", file=sys.stderr)
        for skipped in found.skipped:
            print(f"  skipped {skipped.path}: {skipped.reason}", file=sys.stderr)
