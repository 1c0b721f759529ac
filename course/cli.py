"""The `course` command: one subcommand per job of an instructor or a self-learner.

Every command works on one course folder (the one holding ``nbgrader_config.py``, ``source/``,
``release/`` and ``solutions/``) and says which: ``--course DIR``, or else the current directory when
it holds ``nbgrader_config.py``, or else the checkout this package was installed from.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

CONFIG = "nbgrader_config.py"
from .grading.nbgrader_run import INSTALLED


class CourseNotFound(RuntimeError):
    """--course names a folder that is not a course."""


def course_folder(given: str | None, cwd: Path | None = None) -> tuple[Path, str]:
    """The course folder to work on, and why it is that one."""
    if given:
        folder = Path(given).expanduser().resolve()
        if not (folder / CONFIG).is_file():
            raise CourseNotFound(f"--course {given}: no {CONFIG} in {folder}")
        return folder, "--course"
    cwd = (cwd or Path.cwd()).resolve()
    if (cwd / CONFIG).is_file():
        return cwd, "the current directory"
    return INSTALLED, f"the checkout `course` is installed from; the current directory has no {CONFIG}"


def _build(args) -> int:
    from .build import build, name_cells
    from .grading.nbgrader_run import assignments, notebooks

    if args.name_cells:
        for assignment in args.assignment or assignments():
            for path in notebooks(assignment):
                for line in name_cells(path):
                    print(f"renamed {line}", file=sys.stderr)
    report = build(args.assignment or None, validate_notebooks=not args.no_validate, write=not args.check,
                   log=lambda message: print(message, file=sys.stderr))
    for problem in report.problems:
        print(f"problem: {problem}", file=sys.stderr)
    if report.problems:
        print(f"{len(report.problems)} problem(s): nothing was written to release/ or solutions/", file=sys.stderr)
        return 1
    if args.check:
        print(f"checked {', '.join(report.built)}: " + (
            f"{len(report.changed)} files in release/ and solutions/ are out of date; run `course build`"
            if report.changed else "release/ and solutions/ are current"))
        return 1 if report.changed else 0
    print(f"built {', '.join(report.built)} into release/ and solutions/ ({len(report.changed)} files changed)")
    return 0


def _grade(args) -> int:
    from .grade import Limits, NoSandbox, grade, start_over
    from .cluster import NoCluster
    from .records.gradebook_db import BadDatabase
    from .review.show import table

    out = Path(args.out)
    if args.fresh:
        if not _confirm(f"--fresh deletes the grading in {out.resolve()} (gradebook, manual grades, feedback, "
                        f"grades.csv, report). Start over?", args.yes):
            print("course grade: nothing deleted, nothing graded", file=sys.stderr)
            return 1
        start_over(out)
    limits = Limits(wall_seconds=args.timeout, memory_bytes=int(args.memory * 2**30))
    try:
        rows = grade(Path(args.submissions), out, workers=args.workers, limits=limits,
                     no_sandbox=args.no_sandbox, feedback_now=args.feedback_now, db=args.db,
                     scheduler=args.scheduler, **_intake_options(args))
    except (NoSandbox, BadDatabase, NoCluster) as error:
        print(f"course grade: {error}", file=sys.stderr)
        return 2
    except _intake_errors() as error:
        print(f"course grade: {error}", file=sys.stderr)
        return 1
    print(table(rows))
    _where(out)
    return 0


def _intake_options(args) -> dict:
    """grade()'s options for submissions as they come: --roster, --assignment, --due."""
    from .records.lateness import parse_due
    from .grading.nbgrader_run import assignments

    return {"roster": Path(args.roster) if args.roster else None, "assignment": args.assignment,
            "due": parse_due(args.due, assignments())}


def _intake_errors() -> tuple:
    from .grade import NoSubmissions
    from .records.lateness import DueDateError
    from .records.roster import RosterError

    return (NoSubmissions, DueDateError, RosterError, FileNotFoundError, ValueError)


def _intake_arguments(grade) -> None:
    grade.add_argument("--roster", metavar="FILE",
                       help="the LMS's gradebook export (Canvas: Grades > Export; Moodle: Grades > Export > Plain "
                            "text file, or the assignment's grading worksheet): maps the LMS ids in a download's "
                            "file names to logins and names, and gives exports the LMS's identity columns")
    grade.add_argument("--assignment", metavar="ID",
                       help="the assignment of an LMS download whose notebooks do not carry its name")
    grade.add_argument("--due", metavar="ID=TIME", action="append",
                       help="due date of an assignment, ISO 8601 (2026-02-06T17:00:00+01:00; no zone: UTC), over "
                            "[due] in course.toml; repeatable. Hand-ins after it are reported late")


def _confirm(question: str, yes: bool) -> bool:
    if yes:
        return True
    if not sys.stdin.isatty():
        print(f"{question}\ncourse grade: not a terminal; pass --yes to confirm", file=sys.stderr)
        return False
    return input(f"{question} [y/N] ").strip().lower() in ("y", "yes")


def _where(out: Path) -> None:
    print(f"\ngrades:   {out / 'grades.csv'}\nfeedback: {out / 'feedback'}\nreport:   {out / 'report' / 'README.md'}")
    pending = _pending_count(out)
    if pending:
        print(f"\n{pending} submission(s) wait for manual grading: `course formgrader {out}`, "
              f"then `course feedback {out}`")


def _pending_count(out: Path) -> int:
    import csv

    try:
        with (out / "grades.csv").open(newline="", encoding="utf-8") as handle:
            return sum(float(r.get("manual_pending") or 0) > 0 for r in csv.DictReader(handle))
    except OSError:
        return 0


def _formgrader(args) -> int:
    from .review.formgrader import serve
    from .records.graded import NotGraded

    try:
        return serve(Path(args.out), port=args.port, token=args.token, lab=not args.no_lab)
    except NotGraded as error:
        print(f"course formgrader: {error}", file=sys.stderr)
        return 1


def _feedback(args) -> int:
    from .review.feedback import regenerate
    from .records.graded import NotGraded

    try:
        written = regenerate(Path(args.out), include_pending=args.all)
    except NotGraded as error:
        print(f"course feedback: {error}", file=sys.stderr)
        return 1
    print(written.summary())
    return 0


def _export(args) -> int:
    from .records.export import FORMATS, export
    from .records.graded import NotGraded

    target = Path(args.output) if args.output else Path(args.out) / f"export-{args.format}.csv"
    try:
        result = export(Path(args.out), args.format, target, names=_lms_names(args.name))
    except (NotGraded, ValueError) as error:
        print(f"course export: {error}", file=sys.stderr)
        return 1
    print(f"{FORMATS[args.format]}: {target}")
    for line in result.notes:
        print(f"  {line}")
    return 0


def _lms_names(options: list[str] | None) -> dict[str, str]:
    """--name ID=NAME options: the LMS's name of each course assignment."""
    names = {}
    for option in options or []:
        assignment, sep, name = option.partition("=")
        if not sep or not name.strip():
            raise SystemExit(f"course export: --name {option!r}: expected ID=NAME, e.g. "
                             "01_two_phases='Assignment 1 (123456)'")
        names[assignment.strip()] = name.strip()
    return names


def _demo(args) -> int:
    from .demo import demo

    return demo(Path(args.out), workers=args.workers, build_first=not args.no_build, no_sandbox=args.no_sandbox)


def _check(args) -> int:
    from .grading.nbgrader_run import RELEASE, assignments
    from .selfcheck import check

    notebook = Path(args.notebook)
    if not notebook.exists() and args.notebook in assignments():
        # `course check 01_two_phases`: the notebook of that assignment in release/, from any folder
        notebook = next((RELEASE / args.notebook).glob("*.ipynb"))
    return check(notebook, hidden=args.hidden)


def main(argv: list[str] | None = None) -> int:
    def course_option(default):
        common = argparse.ArgumentParser(add_help=False)
        common.add_argument("--course", metavar="DIR", default=default,
                            help=f"the course folder (default: the current directory if it holds {CONFIG}, "
                                 "else the checkout `course` is installed from)")
        return common

    parser = argparse.ArgumentParser(prog="course", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     parents=[course_option(None)])
    commands = parser.add_subparsers(dest="command", required=True)

    def command(name: str, **kwargs) -> argparse.ArgumentParser:
        # SUPPRESS: `course --course DIR build` and `course build --course DIR` both work
        return commands.add_parser(name, parents=[course_option(argparse.SUPPRESS)], **kwargs)

    build = command("build", help="regenerate release/ and solutions/ from source/ and check them",
                    description="Regenerate release/ and solutions/ from source/, then check them: stable cell "
                                "ids, no leaked hidden tests, the reference passes every test, the blank release "
                                "fails every test, README's points table matches the notebooks. Any problem is a "
                                "`problem:` line, and then nothing is written to release/ or solutions/.")
    build.add_argument("assignment", nargs="*", help="assignment ids (default: all)")
    build.add_argument("--no-validate", action="store_true", help="skip running the notebooks' tests")
    build.add_argument("--check", action="store_true",
                       help="write nothing; fail if release/ or solutions/ is out of date")
    build.add_argument("--name-cells", action="store_true",
                       help="first give cells with JupyterLab's random ids (or copied ids) a descriptive one in "
                            "source/: a graded cell takes its grade id, another a slug of its first line")
    build.set_defaults(run=_build)

    grade = command(
        "grade", help="autograde a folder or zip of submissions into a graded course (merging)",
        description="Autograde submissions: each student's kernel runs in a sandbox (bubblewrap: no network, no "
                    "view of the course, the gradebook or other students, limits on time, memory, processes and "
                    "disk) and the course's tests run in the grader's own process. Needs bubblewrap "
                    "(Debian/Ubuntu: sudo apt-get install bubblewrap), or root with unshare and setpriv. "
                    "Grading into an existing OUT merges: new and changed submissions are autograded, the rest "
                    "is kept, manual grades and comments included; nothing is deleted unless --fresh.")
    grade.add_argument("submissions", help="folder or zip of hand-ins: a Canvas 'Download Submissions' zip, a Moodle "
                                           "'Download all submissions' zip, nbgrader's exchange inbound folder, or "
                                           "<student>/<assignment>/<notebook>.ipynb")
    grade.add_argument("--workers", type=int, default=2, help="students graded at once (default 2)")
    grade.add_argument("--out", default="graded", help="the graded course: grades.csv, feedback/, report/ and "
                                                       "nbgrader/ (the gradebook) go here (default: graded)")
    grade.add_argument("--timeout", type=float, default=300, help="seconds one student's assignment may take to grade")
    grade.add_argument("--memory", type=float, default=4, help="GiB one student's grading may use")
    grade.add_argument("--feedback-now", action="store_true",
                       help="write feedback also for submissions whose written answers are not graded yet "
                            "(by default they get theirs from `course feedback` after manual grading)")
    grade.add_argument("--fresh", action="store_true",
                       help="delete OUT's previous grading (manual grades included) and start over; asks first")
    grade.add_argument("--yes", action="store_true", help="answer yes to --fresh's question")
    grade.add_argument("--db", metavar="URL", default=None,
                       help="the gradebook, for graders working at once: postgresql://USER@HOST:PORT/DATABASE "
                            "(default: SQLite in OUT/nbgrader; c.CourseGrade.db_url in nbgrader_config.py also "
                            "sets it); recorded in OUT at the first grading, so later commands need not repeat it")
    grade.add_argument("--scheduler", metavar="ADDRESS", default=None,
                       help="grade each student on a Dask cluster (tcp://HOST:8786); its workers need this course "
                            "at the same path, OUT on a shared filesystem and, on several machines, --db "
                            "postgresql://...; --workers is then the cluster's")
    grade.add_argument("--no-sandbox", action="store_true",
                       help="grade without isolating student code (every row then says so); by default each "
                            "submission's kernel runs in a bubblewrap sandbox: install it with "
                            "`sudo apt-get install bubblewrap`")
    _intake_arguments(grade)
    grade.set_defaults(run=_grade)

    formgrader = command(
        "formgrader", help="grade written answers by hand in nbgrader's formgrader",
        description="Start JupyterLab with nbgrader's formgrader on a graded course (OUT/nbgrader: its gradebook, "
                    "the course's source/), on 127.0.0.1. Prints the address and what waits for manual grading; "
                    "each written answer shows the rubric and the model answer to the grader. Stop with Ctrl-C, "
                    "then run `course feedback OUT`.")
    formgrader.add_argument("out", nargs="?", default="graded", help="the graded course (default: graded)")
    formgrader.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    formgrader.add_argument("--token", default=None, help="the server's token (default: a random one)")
    formgrader.add_argument("--no-lab", action="store_true", help="print the formgrader's address, not JupyterLab's")
    formgrader.set_defaults(run=_formgrader)

    feedback = command(
        "feedback", help="(re)generate feedback pages after manual grading",
        description="Regenerate OUT/feedback/<student>/<assignment>/ from the gradebook, with the manual scores "
                    "and comments: a page for every submission with nothing left to grade by hand, and for every "
                    "ungradable one a page that says why and what to do. Also rewrites grades.csv and report/.")
    feedback.add_argument("out", nargs="?", default="graded", help="the graded course (default: graded)")
    feedback.add_argument("--all", action="store_true",
                          help="also for submissions with written answers not graded yet (they show 0 there)")
    feedback.set_defaults(run=_feedback)

    export = command(
        "export", help="grades for an LMS: csv, canvas or moodle",
        description="Export the gradebook, manual points merged: `csv` has one row per student and assignment "
                    "(status graded, pending or ungradable, with the reason); `canvas` and `moodle` follow those "
                    "systems' gradebook import layouts, one row per student. A score waiting for manual grading "
                    "or an ungradable submission is left blank (Moodle: '-'), never 0.")
    export.add_argument("out", nargs="?", default="graded", help="the graded course (default: graded)")
    from .records.export import FORMATS  # noqa: E402 - light module, needed for the choices

    export.add_argument("--format", choices=sorted(FORMATS), default="csv", help="default: csv")
    export.add_argument("--output", "-o", help="file to write (default: OUT/export-FORMAT.csv)")
    export.add_argument("--name", metavar="ID=NAME", action="append",
                        help="the LMS's name of an assignment, as its gradebook export heads the column (Canvas: "
                             "'Assignment 1 (123456)'); over [lms_names] in course.toml; repeatable")
    export.set_defaults(run=_export)

    demo = command("demo", help="build, then grade a simulated class end to end",
                   description="Build, write sixteen simulated students' submissions of every assignment (right, "
                               "blank, half done, unit slips, crashes, hangs, tampering, cheats), grade them in the "
                               "sandbox as `course grade` would (into OUT/graded, afresh each time) and print the "
                               "grade table. Feedback pages are written for submissions with nothing left to grade "
                               "by hand; the rest wait for `course formgrader` and `course feedback`.")
    demo.add_argument("--out", default="demo-class", help="where the class and its grades go")
    demo.add_argument("--workers", type=int, default=2, help="students graded at once (default: 2)")
    demo.add_argument("--no-build", action="store_true", help="use release/ as it is")
    demo.add_argument("--no-sandbox", action="store_true", help="grade without isolation (see `course grade -h`)")
    demo.set_defaults(run=_demo)

    check = command("check", help="score a notebook on its visible tests, with hints")
    check.add_argument("notebook", help="path to your notebook, or an assignment id (its notebook in release/)")
    check.add_argument("--hidden", action="store_true", help="also run the hidden tests, taken from source/")
    check.set_defaults(run=_check)

    args = parser.parse_args(argv)
    try:
        folder, why = course_folder(args.course)
    except CourseNotFound as error:
        print(f"course: {error}", file=sys.stderr)
        return 2
    from .grading.nbgrader_run import use_course

    use_course(folder)  # every module reads the folder from nbgrader_run.course_root() when it needs it
    print(f"course folder: {folder} ({why})", file=sys.stderr)
    return args.run(args)


if __name__ == "__main__":
    raise SystemExit(main())
