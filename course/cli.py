"""The `course` command: one subcommand per job of an instructor or a self-learner."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _build(args) -> int:
    from .build import build

    report = build(args.assignment or None, validate_notebooks=not args.no_validate, write=not args.check)
    for problem in report.problems:
        print(f"problem: {problem}", file=sys.stderr)
    if args.check:
        print(f"checked {', '.join(report.built)}: " + (
            f"{len(report.changed)} files in release/ and solutions/ are out of date; run `course build`"
            if report.changed else "release/ and solutions/ are current"))
        return 1 if report.problems or report.changed else 0
    print(f"built {', '.join(report.built)} into release/ and solutions/ ({len(report.changed)} files changed)")
    return 1 if report.problems else 0


def _grade(args) -> int:
    from .grade import Limits, NoSandbox, grade
    from .show import table

    limits = Limits(wall_seconds=args.timeout, memory_bytes=int(args.memory * 2**30))
    try:
        rows = grade(Path(args.submissions), Path(args.out), workers=args.workers, limits=limits,
                     no_sandbox=args.no_sandbox)
    except NoSandbox as error:
        print(f"course grade: {error}", file=sys.stderr)
        return 2
    print(table(rows))
    print(f"\ngrades: {Path(args.out) / 'grades.csv'}\nfeedback: {Path(args.out) / 'feedback'}\n"
          f"report: {Path(args.out) / 'report' / 'README.md'}")
    return 0


def _demo(args) -> int:
    from .demo import demo

    return demo(Path(args.out), workers=args.workers, build_first=not args.no_build, no_sandbox=args.no_sandbox)


def _check(args) -> int:
    from .selfcheck import check

    return check(Path(args.notebook), hidden=args.hidden)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="course", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    build = commands.add_parser("build", help="regenerate release/ and solutions/ from source/ and check them")
    build.add_argument("assignment", nargs="*", help="assignment ids (default: all)")
    build.add_argument("--no-validate", action="store_true", help="skip running the notebooks' tests")
    build.add_argument("--check", action="store_true",
                       help="write nothing; fail if release/ or solutions/ is out of date")
    build.set_defaults(run=_build)

    grade = commands.add_parser(
        "grade", help="autograde a folder or zip of submissions",
        description="Autograde submissions: each student's kernel runs in a sandbox (bubblewrap: no network, no "
                    "view of the course, the gradebook or other students, limits on time, memory, processes and "
                    "disk) and the course's tests run in the grader's own process. Needs bubblewrap "
                    "(Debian/Ubuntu: sudo apt-get install bubblewrap), or root with unshare and setpriv.")
    grade.add_argument("submissions", help="folder or zip of <student>/<assignment>/<notebook>.ipynb")
    grade.add_argument("--workers", type=int, default=2, help="students graded at once (default 2)")
    grade.add_argument("--out", default="graded", help="where grades.csv, feedback/ and report/ go")
    grade.add_argument("--timeout", type=float, default=300, help="seconds one student may take")
    grade.add_argument("--memory", type=float, default=4, help="GiB one student's grading may use")
    grade.add_argument("--no-sandbox", action="store_true",
                       help="grade without isolating student code (every row then says so); by default each "
                            "submission's kernel runs in a bubblewrap sandbox: install it with "
                            "`sudo apt-get install bubblewrap`")
    grade.set_defaults(run=_grade)

    demo = commands.add_parser("demo", help="build, then grade a simulated class end to end")
    demo.add_argument("--out", default="demo-class", help="where the class and its grades go")
    demo.add_argument("--workers", type=int, default=2)
    demo.add_argument("--no-build", action="store_true", help="use release/ as it is")
    demo.add_argument("--no-sandbox", action="store_true", help="grade without isolation (see `course grade -h`)")
    demo.set_defaults(run=_demo)

    check = commands.add_parser("check", help="score a notebook on its visible tests, with hints")
    check.add_argument("notebook", help="path to your notebook")
    check.add_argument("--hidden", action="store_true", help="also run the hidden tests, taken from source/")
    check.set_defaults(run=_check)

    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    raise SystemExit(main())
