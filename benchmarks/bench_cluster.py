"""Grading on a Dask cluster: a synthetic class graded on a local cluster here, and a MOOC's week projected.

Prints figures; asserts nothing.  The class is N copies of the demo's all-right student (one assignment each),
graded with `course grade --scheduler` on a local cluster of W worker processes (one thread each), after one
student alone, whose time is the run's fixed cost (generate_assignment, feedback, report).  The cost of one
submission on one core is then  (t(N) - t(1)) * W / (N - 1),  and a class of S submissions on M machines of C
cores takes about  S * cost / (M * C)  plus the fixed cost (the projection assumes the cluster scales as the
local one does: a shared gradebook in PostgreSQL and a shared filesystem that keep up).
On a shared machine the figures are noisy: run it when the machine is otherwise idle.
Usage: python benchmarks/bench_cluster.py [--students 200] [--workers W] [--assignment ID] [--cores C]
Not run by CI (200 submissions take several minutes a core).
"""

import argparse
import os
import tempfile
import time
from pathlib import Path

from course import demo
from course.grading import sandbox
from course.grade import grade

MOOC = 30_000  # submissions a week: 5,000 students x six assignments (the MOOC, ten times 500 x 6)


def timed(folder: Path, out: Path, scheduler: str) -> float:
    start = time.perf_counter()
    grade(folder, out, quiet=True, no_sandbox=sandbox.isolation() == sandbox.NO_SANDBOX, scheduler=scheduler)
    return time.perf_counter() - start


def main() -> None:
    from distributed import LocalCluster

    parser = argparse.ArgumentParser()
    parser.add_argument("--students", type=int, default=200, help="submissions in the synthetic class")
    parser.add_argument("--workers", type=int, default=os.cpu_count(), help="worker processes (default: cores)")
    parser.add_argument("--cores", type=int, default=16, help="cores per machine in the projection")
    parser.add_argument("--assignment", default="01_two_phases")
    args = parser.parse_args()
    if args.students < 2:
        parser.error("--students: expected 2 or more (one alone measures the fixed cost)")

    right = next(s for s in demo.CLASS if s.name == "ada")
    students = [demo.Student(f"student{i:04}", right.did, right.make) for i in range(args.students)]
    with tempfile.TemporaryDirectory() as scratch, \
            LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=None,
                         silence_logs=50) as cluster:
        scratch = Path(scratch)
        demo.write_class(scratch / "class", selected=[args.assignment], students=students)
        demo.write_class(scratch / "one", selected=[args.assignment], students=students[:1])
        fixed = timed(scratch / "one", scratch / "graded-one", cluster.scheduler_address)
        total = timed(scratch / "class", scratch / "graded", cluster.scheduler_address)
    per_core = (total - fixed) * args.workers / (args.students - 1)
    print(f"local cluster, {args.workers} worker process(es), isolation {sandbox.isolation()}: "
          f"{args.students} submissions in {total:.1f} s (one alone {fixed:.1f} s)")
    print(f"one submission on one core: {per_core:.2f} s; throughput here {args.students / total * 60:.0f} "
          f"submissions a minute")
    print(f"projected for {MOOC:,} submissions on machines of {args.cores} cores (fixed cost {fixed:.0f} s added):")
    for machines in (1, 10, 50, 100):
        seconds = MOOC * per_core / (machines * args.cores) + fixed
        print(f"  {machines:4} machine(s): {seconds / 3600:6.2f} h")


if __name__ == "__main__":
    main()
