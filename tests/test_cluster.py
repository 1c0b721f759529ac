"""`course grade --scheduler` (course/cluster.py) on a local Dask cluster of two worker processes: the same
rows as on one machine, and a worker killed in the middle of a grading costs its student only a retry.

The class (01_two_phases): ada, every answer right, 40 of 40; dmitri, milliseconds for seconds, 36 (a slip charged once); cora, the
first half done, 21 (tests/test_semester.py reasons each); ada and dmitri have the 10-point written answer to
grade by hand, cora left it blank (nothing pending).
"""

import os
import signal
import threading
import time

import psutil
import pytest

from course import cluster, demo
from course.grade import grade
from tests.conftest import BARE

pytestmark = pytest.mark.slow

A = "01_two_phases"
EXPECTED = {"ada": (40, "graded", 10), "dmitri": (36, "graded", 10), "cora": (21, "graded", 0)}


@pytest.fixture(scope="module")
def dask_cluster():
    distributed = pytest.importorskip("distributed", reason=cluster.INSTALL_HINT)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=50) as local:
        yield local


def _jobs_running() -> list[psutil.Process]:
    """The grading processes (python -m course.cluster) that a worker of this test's cluster runs now."""
    found = []
    for process in psutil.Process().children(recursive=True):
        try:
            if process.cmdline()[1:3] == ["-m", "course.cluster"]:
                found.append(process)
        except (psutil.Error, IndexError):
            pass
    return found


def test_a_cluster_grades_as_one_machine_does_and_survives_a_dying_worker(dask_cluster, tmp_path):
    demo.write_class(tmp_path / "in", selected=[A], students=[s for s in demo.CLASS if s.name in EXPECTED])
    killed: dict = {}

    def kill_a_worker():
        # Once a student's grading has its kernel up, kill the worker running it, tree below it left alone.
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            for job in _jobs_running():
                try:
                    below = job.children(recursive=True)
                    if any("kernel_runner" in " ".join(p.cmdline()) for p in below):
                        worker = job.parent()
                        killed["tree"] = [job] + below
                        os.kill(worker.pid, signal.SIGKILL)
                        return
                except psutil.Error:
                    continue
            time.sleep(0.1)

    killer = threading.Thread(target=kill_a_worker, daemon=True)
    killer.start()
    rows = grade(tmp_path / "in", tmp_path / "out", quiet=True, no_sandbox=BARE,
                 scheduler=dask_cluster.scheduler_address)
    killer.join(timeout=1)
    assert killed, "no worker was killed: the test did not test a retry"
    assert {r.student: (r.score, r.status, r.manual_pending) for r in rows} == EXPECTED
    assert all(not r.reason for r in rows), [r.reason for r in rows]
    # The dead worker's grading, nbgrader and sandbox included, was stopped, not left to race its retry.
    _, alive = psutil.wait_procs(killed["tree"], timeout=10)
    assert not alive, alive


def test_an_address_where_no_scheduler_listens_is_named(tmp_path):
    pytest.importorskip("distributed", reason=cluster.INSTALL_HINT)
    with pytest.raises(cluster.NoCluster, match=r"--scheduler: cannot reach a Dask scheduler at 'tcp://127.0.0.1:9'"):
        cluster.check("tcp://127.0.0.1:9", timeout=3)
