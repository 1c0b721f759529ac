"""`course grade --scheduler ADDRESS`: each student's autograde on a Dask distributed cluster.

The run on this machine stays what it is (collect, pre-flight, generate, the ledger, manual grades kept,
feedback and report); only step 4, autograding each student with something new, goes to the cluster: one
Dask task per student, the same function as on one machine (course.grade._autograde: nbgrader in limited
processes, the kernel in its sandbox), and the results come back as each finishes, for the same progress
line and the same ledger entries.  nbgrader writes each student's grades into the gradebook from the worker.

What the workers need: this package and its course installed at the same path, OUT on a filesystem they
share with this machine (nbgrader reads submitted/ and writes autograded/ there), bubblewrap, and, with more
than one machine, a gradebook they can all write at once (`--db postgresql://...`; SQLite over a network
filesystem is not safe).

A worker that dies (killed, out of memory, its machine lost) takes only its running students with it: Dask
runs their tasks again on another worker, and nbgrader's ``autograde --force`` makes a second run the same
as a first.  The grading runs in a child process of the worker (``python -m course.cluster``) that watches
its parent and, when the worker is gone, kills nbgrader and the sandbox it started, so that a retried
student is never graded twice at once.  A student whose grading kills worker after worker (Dask's
``allowed-failures``, 3 by default) gets a reason, like any grading that fails, and the rest go on.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

INSTALL_HINT = "Dask is not installed: pip install 'distributed' (it is in .binder/requirements.txt; `make` installs it)"


class NoCluster(RuntimeError):
    """The --scheduler address names no Dask scheduler this machine can reach, or Dask is missing."""


def _connect(address: str, timeout: float = 30.0):
    try:
        from distributed import Client
    except ImportError:
        raise NoCluster(f"--scheduler: {INSTALL_HINT}") from None
    try:
        return Client(address, timeout=timeout, set_as_default=False)
    except (OSError, TimeoutError) as error:
        raise NoCluster(f"--scheduler: cannot reach a Dask scheduler at {address!r}: {error} "
                        f"(expected an address such as tcp://HOST:8786, where `dask scheduler` listens)") from None


def check(address: str, timeout: float = 30.0) -> None:
    """Fail early, with :class:`NoCluster`, if there is no scheduler at ``address`` within ``timeout`` seconds."""
    _connect(address, timeout).close()


def run_on(address: str, jobs: list[tuple]) -> Iterator[tuple[str, dict[str, str]]]:
    """Run ``course.grade._autograde(*job)`` for each job on the cluster; yield (student, problems) as each ends."""
    from distributed import as_completed

    from .grading.nbgrader_run import ROOT

    client = _connect(address)
    try:
        with client.as_current():  # as_completed looks the client up; it is not made the process's default
            futures = {client.submit(_remote, job, str(ROOT), key=f"autograde-{job[0]}-{os.urandom(4).hex()}",
                                     pure=False): job for job in jobs}
            for future in as_completed(futures):
                job = futures[future]
                try:
                    result = future.result()
                except Exception as error:  # KilledWorker (the retries ran out) or the worker's own failure
                    reason = f"the grading on the cluster failed: {type(error).__name__}: {str(error)[:200]}"
                    result = job[0], {assignment: reason for assignment in job[1]}
                yield result
    finally:
        client.close()


def _remote(job: tuple, course_root: str) -> tuple[str, dict[str, str]]:
    """On a worker: the student's grading in a child process that dies, tree and all, if the worker does."""
    from .grading.nbgrader_run import VARIABLE

    env = dict(os.environ, **{VARIABLE: course_root})  # the child works on this course (nbgrader_run.course_root)
    done = subprocess.run([sys.executable, "-m", "course.cluster"], input=pickle.dumps(job), capture_output=True,
                          env=env, cwd=course_root)
    if done.returncode != 0:
        tail = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or [f"exit status {done.returncode}"]
        return job[0], {assignment: f"the grader on the cluster failed: {tail[0][:300]}" for assignment in job[1]}
    return pickle.loads(done.stdout)


def _watch_parent(parent: int) -> None:
    # The worker is gone when this process is handed to another parent: stop nbgrader and its sandbox.
    import psutil

    while os.getppid() == parent:
        time.sleep(0.2)
    for process in psutil.Process().children(recursive=True):
        try:
            process.kill()
        except psutil.Error:
            pass
    os._exit(1)


def main() -> None:
    job = pickle.loads(sys.stdin.buffer.read())
    threading.Thread(target=_watch_parent, args=(os.getppid(),), daemon=True).start()
    from .grade import _autograde

    result = _autograde(*job)
    sys.stdout.buffer.write(pickle.dumps(result))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
