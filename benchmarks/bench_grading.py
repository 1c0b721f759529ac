"""Grading speed: executing each source notebook alone, and grading a class with 1 and 2 workers.

Prints figures and ratios; asserts nothing.  Budgets (DESIGN.md): each notebook executes in seconds on 2 cores;
two workers grade about twice as fast as one; grading a submission costs little more than executing it.
Usage: python benchmarks/bench_grading.py [--students N]
"""

import argparse
import tempfile
import time
from pathlib import Path

from course import demo
from course.build import execute
from course.grade import grade
from course.nbgrader_run import SOURCE, assignments


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--students", type=int, default=6, help="students of the demo class to grade (right ones)")
    args = parser.parse_args()

    executed = {}
    for assignment in assignments():
        for path in sorted((SOURCE / assignment).glob("*.ipynb")):
            start = time.perf_counter()
            execute(path)
            executed[path.name] = time.perf_counter() - start
            print(f"execute {path.name:28} {executed[path.name]:6.1f} s (kernel start included)")

    # Copies of the all-right student, so each grading does the same work.
    right = next(s for s in demo.CLASS if s.name == "ada")
    students = [demo.Student(f"student{i:02}", right.did, right.make) for i in range(args.students)]
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch) / "submissions"
        demo.write_class(folder, students=students)
        times = {}
        for workers in (1, 2):
            start = time.perf_counter()
            grade(folder, Path(scratch) / f"out{workers}", workers=workers, quiet=True)
            times[workers] = time.perf_counter() - start
            print(f"grade {args.students} students, {workers} worker(s): {times[workers]:6.1f} s "
                  f"({times[workers] / args.students:.1f} s a student)")
    print(f"2 workers against 1: {times[1] / times[2]:.2f}x the throughput")
    per_notebook = sum(executed.values())
    print(f"grading one submission (1 worker, fixed costs shared) against executing it: "
          f"{times[1] / args.students / per_notebook:.2f}x")


if __name__ == "__main__":
    main()
