"""Grading speed: the sandbox's start, a bare execution of each notebook, and a class graded three ways.

Prints figures and ratios; asserts nothing.  Budgets (docs/design.md, "Performance budgets"):
- the sandbox's own start under 0.3 s;
- per submission, the trusted grading at most 1.2x a bare execution of the same notebook;
- two workers at least 1.8x the throughput of one on 2 cores: the class's grading, once the run's once-only
  cost (generate, feedback, report: the one-student run less one submission) is taken out of both runs; the
  whole runs' ratio is printed beside it, and nears it as the class grows.
The class is graded trusted (sandbox + tests in the grader), trusted without the sandbox, and the old way
(nbgrader's Execute, tests in the student's kernel: untrusted, for comparison only).
With --profile, one trusted run of the class is profiled (cProfile, the run's own thread) and the time of each
of its steps printed: the run-level costs (generate, pre-flight, the autograde of all students, manual grades
carried across, rows read back, feedback, report), and the start of one nbgrader process, paid once per worker
(each student's grading is forked from it: course.grading.warm_nbgrader).  Each ratio is given in wall-clock time and
in CPU time (this process and the children it waited for), which a shared machine's other work disturbs less.
Usage: python benchmarks/bench_grading.py [--students N] [--assignment ID] [--modes trusted,...] [--profile]
On a shared machine the figures are noisy: say the load beside them.
"""

import argparse
import cProfile
import os
import pstats
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from course import demo
from course.grading import sandbox
from course.build import execute
from course.grade import grade
from course.grading.nbgrader_run import SOURCE


def sandbox_start(repeat: int = 20) -> tuple[float, float]:
    """Median seconds to start and stop `true` bare and inside the sandbox (namespaces, mounts, limits)."""
    def median(command):
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            subprocess.run(command, check=True)
            times.append(time.perf_counter() - start)
        return statistics.median(times)
    wrapped = sandbox.command(sandbox.isolation(), sandbox.SandboxLimits())
    wrapped = wrapped[:wrapped.index(sys.executable)] + ["/bin/true"]
    return median(["/bin/true"]), median(wrapped)


def cpu_seconds() -> float:
    """CPU seconds (user + system) of this process and of every child process it has waited for: nbgrader,
    the sandboxes and kernels they started.  Unlike the wall clock, other work on a shared machine adds little."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def timed_grade(folder: Path, out: Path, workers: int, mode: str) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one `course grade` run."""
    os.environ.pop("ROOFLAB_IN_KERNEL_GRADING", None)
    if mode == "in-kernel":
        os.environ["ROOFLAB_IN_KERNEL_GRADING"] = "1"
    start, cpu = time.perf_counter(), cpu_seconds()
    try:
        grade(folder, out, workers=workers, quiet=True, no_sandbox=(mode != "trusted"))
    finally:
        os.environ.pop("ROOFLAB_IN_KERNEL_GRADING", None)
    return time.perf_counter() - start, cpu_seconds() - cpu


def one_submission(assignment: str, repeat: int = 3) -> None:
    """The per-submission path alone: one notebook graded trusted (sandbox, copy of the library, tests in the
    grader, cascade re-tests) against one bare execution of the same notebook; no nbgrader, no class."""
    import json

    from course.grading import library_copy
    from course.grading import autograde
    from course.grading.nbgrader_run import RELEASE

    path = next((SOURCE / assignment).glob("*.ipynb"))
    notebook = json.loads(path.read_text(encoding="utf-8"))  # the reference answers, hidden tests in place
    release = json.loads(next((RELEASE / assignment).glob("*.ipynb")).read_text(encoding="utf-8"))
    start = time.perf_counter()
    library = library_copy.for_assignment(assignment, cache=Path(tempfile.mkdtemp(prefix="bench-library-")))
    made = time.perf_counter() - start
    bare, trusted = [], []
    for _ in range(repeat):  # interleaved, so that the machine's load falls on both alike
        start = time.perf_counter()
        execute(path)
        bare.append(time.perf_counter() - start)
        start = time.perf_counter()
        _, record = autograde.grade_notebook(notebook, sandbox.isolation(), sandbox.SandboxLimits(),
                                             release=release, library=library)
        trusted.append(time.perf_counter() - start)
        assert all(t["passed"] for t in record["tests"].values()), record["tests"]
    b, t = statistics.median(bare), statistics.median(trusted)
    print(f"{assignment}: library copy made once in {made:.2f} s; bare execution {b:.1f} s, trusted grading "
          f"{t:.1f} s (medians of {repeat}): {t / b:.2f}x (budget 1.2x)")


STEPS = [  # (what, function) of course.grade's run, in its order
    ("generate assignments (once per source change)", "_course_root"),
    ("pre-flight of each submission", "prepare"),
    ("autograde, all students (nbgrader processes)", "_as_they_come"),
    ("manual grades carried across", "restore_manual"),
    ("rubric cells for formgrader", "add_grader_notes"),
    ("rows read back from the gradebook", "read_rows"),
    ("feedback pages (generate_feedback per assignment)", "write"),
]


def nbgrader_start(repeat: int = 3) -> float:
    """Median seconds for an nbgrader process to start and load its autograde app (paid once per student)."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "nbgrader", "autograde", "--help"], check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def profile(folder: Path, out: Path, students: int, executed: float) -> None:
    profiler = cProfile.Profile()
    start = time.perf_counter()
    profiler.runcall(grade, folder, out, workers=2, quiet=True)
    total = time.perf_counter() - start
    stats = pstats.Stats(profiler).stats
    print(f"\nprofile of one trusted run, {students} students, 2 workers: {total:.1f} s in all")
    for what, name in STEPS:
        cumulative = [s[3] for (path, _, function), s in stats.items()
                      if function == name and "course" in path and (name != "write" or path.endswith("feedback.py"))]
        spent = max(cumulative, default=0.0)
        print(f"  {what:52}: {spent:6.1f} s ({spent / total:4.0%})")
    report = max((s[3] for (path, _, function), s in stats.items()
                  if function == "write" and path.endswith("report.py")), default=0.0)
    print(f"  {'report (heatmaps, README)':52}: {report:6.1f} s ({report / total:4.0%})")
    start_cost = nbgrader_start()
    print(f"  an nbgrader process's start, paid once per worker : {start_cost:6.1f} s "
          f"({start_cost / executed:.2f}x the bare execution; students are forked from it, "
          f"course.grading.warm_nbgrader)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--students", type=int, default=6, help="copies of the all-right student to grade")
    parser.add_argument("--assignment", default="01_two_phases")
    parser.add_argument("--modes", default="in-kernel,no-sandbox,trusted",
                        help="comma-separated, of: in-kernel (the old way), no-sandbox (trusted, bare), trusted")
    parser.add_argument("--profile", action="store_true", help="profile one trusted run's steps (see above)")
    parser.add_argument("--per-submission", action="store_true",
                        help="time only one submission's trusted grading against a bare execution, each assignment")
    args = parser.parse_args()
    if args.per_submission:
        from rooflab.exercises import ASSIGNMENTS

        for assignment in ASSIGNMENTS:
            one_submission(assignment)
        return
    modes = [m for m in args.modes.split(",") if m]
    unknown = sorted(set(modes) - {"in-kernel", "no-sandbox", "trusted"})
    if unknown:
        parser.error(f"--modes: unknown {', '.join(unknown)}; expected in-kernel, no-sandbox or trusted")

    bare, boxed = sandbox_start()
    print(f"sandbox start ({sandbox.isolation()}): {boxed * 1000:.1f} ms against {bare * 1000:.1f} ms bare "
          f"(+{(boxed - bare) * 1000:.1f} ms; budget 300 ms)")

    path = next((SOURCE / args.assignment).glob("*.ipynb"))
    runs, cpus = [], []
    for _ in range(3):
        start, cpu = time.perf_counter(), cpu_seconds()
        execute(path)
        runs.append(time.perf_counter() - start)
        cpus.append(cpu_seconds() - cpu)
    executed, executed_cpu = statistics.median(runs), statistics.median(cpus)
    print(f"bare execution of {path.name}: {executed:.1f} s, {executed_cpu:.1f} s of CPU "
          f"(medians of 3, kernel start included)")

    right = next(s for s in demo.CLASS if s.name == "ada")
    students = [demo.Student(f"student{i:02}", right.did, right.make) for i in range(args.students)]
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch) / "submissions"
        demo.write_class(folder, selected=[args.assignment], students=students)
        # Fixed costs (generate_assignment, feedback, report) are paid once per run: time one student alone.
        demo.write_class(Path(scratch) / "one", selected=[args.assignment], students=students[:1])
        results = {}
        for mode in modes:
            fixed, fixed_cpu = timed_grade(Path(scratch) / "one", Path(scratch) / f"fixed-{mode}", 1, mode)
            t1, cpu1 = timed_grade(folder, Path(scratch) / f"one-{mode}", 1, mode)
            t2, _ = timed_grade(folder, Path(scratch) / f"two-{mode}", 2, mode)
            per_submission = (t1 - fixed) / (args.students - 1) if args.students > 1 else t1
            per_cpu = (cpu1 - fixed_cpu) / (args.students - 1) if args.students > 1 else cpu1
            # What a run pays once whatever the class (generate, feedback, report): the one-student run less its
            # student.  Taken out of both runs, the rest is the class's grading, which the workers share.
            once = max(0.0, fixed - per_submission)
            results[mode] = (t1, t2, per_submission, once)
            print(f"{mode:20}: {args.students} students 1 worker {t1:6.1f} s, 2 workers {t2:6.1f} s "
                  f"({t1 / t2:.2f}x); one submission about {per_submission:.1f} s "
                  f"= {per_submission / executed:.2f}x a bare execution; in CPU {per_cpu:.1f} s "
                  f"= {per_cpu / executed_cpu:.2f}x the bare execution's; the run's fixed cost {fixed:.1f} s "
                  f"({fixed_cpu:.1f} s of CPU)")
        if "trusted" in results:
            trusted = results["trusted"][2]
            old = f", {trusted / results['in-kernel'][2]:.2f}x the old in-kernel grading" if "in-kernel" in results else ""
            print(f"\ntrusted grading per submission: {trusted / executed:.2f}x a bare execution (budget 1.2x){old}")
            t1, t2, _, once = results["trusted"]
            print(f"two workers against one (trusted): {t1 / t2:.2f}x over the whole run of {args.students} students; "
                  f"{(t1 - once) / (t2 - once):.2f}x in throughput, the run's once-only {once:.1f} s taken out of "
                  f"both (budget 1.8x)")
        if args.profile:
            profile(folder, Path(scratch) / "profiled", args.students, executed)


if __name__ == "__main__":
    main()
