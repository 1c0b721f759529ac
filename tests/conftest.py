"""What the tests share: the demo class, graded once per session, and where the slow tests run.

`make test` runs the suite on two pytest-xdist workers with ``--dist loadgroup``.  The slow tests of each
file form a group, which one worker runs, so that the file's module fixtures (a class graded once, a server
started once) are made once; the files spread over both workers and the quick tests fill in around them.

Grading happens once per session whatever the scheduling: the first worker to need the class grades it
under a file lock shared by the workers of the run, the others wait and read its result.  (pytest-xdist
3.8 groups nothing on pytest 9.2, pytest-xdist#1386, hence pytest < 9.2 in pyproject.toml; if grouping
breaks again, the suite gets slower, not wrong.)

A Ctrl-C (or a SIGTERM) stops every process the run started: nbgrader and the sandboxes run in sessions of
their own (course.grading.nbgrader_run), so the terminal's SIGINT never reaches them, and a grading thread would
otherwise wait for them to finish.  Each pytest process, the controller and each worker, then kills its whole
tree of descendants, again and again until it exits, so that a grading queued behind the one killed dies too.
"""

import fcntl
import os
import pickle
import shutil
import signal
import threading

import psutil
import pytest

from course.grading import sandbox

# Where this machine has no sandbox (no bubblewrap), the tests that grade do so bare, outside CI: the grades
# are the same (the tests run in the grader either way); CI installs bubblewrap and never grades bare.
BARE = not os.environ.get("CI") and sandbox.isolation() == sandbox.NO_SANDBOX

SLOW = "slow"  # the tests marked slow, grouped by file


def _once_per_run(tmp_path_factory, name: str, make):
    """``(folder, rows)``: ``make(folder)``'s rows, made by the first worker of the run that asks, under a file lock
    shared by the run's workers, and read back (pickled) by every other; ``folder`` is the same for all of them."""
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # each worker's basetemp is a folder of the run's
    folder = shared / name
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / "rows.pickle").exists():
            rows = make(folder)
            (folder / "rows.pickle").write_bytes(pickle.dumps(rows))
        rows = pickle.loads((folder / "rows.pickle").read_bytes())
    return folder, rows


@pytest.fixture(scope="session")
def term(tmp_path_factory):
    """A small class graded once per run (tests/small_class.py): 01_two_phases for ada (right), dmitri (milliseconds
    for seconds) and katherine (a corrupt file): (the graded course's folder, {student: row}).  Tests only read it
    (``term_copy`` is a copy to change), so the files that use it run on either worker."""

    def make(folder):
        from course import demo
        from course.grade import grade
        from tests.small_class import A, students

        demo.write_class(folder / "week1", selected=[A], students=students("ada", "dmitri", "katherine"))
        return grade(folder / "week1", folder / "graded", workers=2, quiet=True, no_sandbox=BARE)

    folder, rows = _once_per_run(tmp_path_factory, "small-class", make)
    return folder / "graded", {r.student: r for r in rows}


@pytest.fixture
def term_copy(term, tmp_path):
    """A copy of the small graded class that a test may change."""
    return shutil.copytree(term[0], tmp_path / "graded")


@pytest.fixture(scope="session")
def graded(tmp_path_factory):
    """The demo class (course/demo.py) graded end to end, once per run: (folder, {(student, assignment): row})."""

    def make(folder):
        from course import demo
        from course.grade import grade

        demo.write_class(folder / "submissions")
        return grade(folder / "submissions", folder / "graded", workers=2, quiet=True, feedback_now=True,
                     no_sandbox=BARE)

    folder, rows = _once_per_run(tmp_path_factory, "demo-class", make)
    return folder, {(r.student, r.assignment): r for r in rows}


@pytest.fixture(scope="session")
def probed_sandbox():
    """The probe notebook (tests/sandbox_probes.py) run once in a sandbox: (printed text by cell, the sandbox, the
    reply to a describe request).  tests/test_sandbox.py and tests/test_kernel_runner.py share one xdist group."""
    from tests.sandbox_probes import PROBES, _notebook, _printed

    kind = sandbox.isolation()
    if kind == sandbox.NO_SANDBOX:
        # CI installs bubblewrap and must test the sandbox for real; elsewhere say what is missing.
        (pytest.fail if os.environ.get("CI") else pytest.skip)("no sandbox on this machine: " + sandbox.INSTALL_HINT)
    limits = sandbox.SandboxLimits(cell_seconds=4, disk_bytes=64 * 2**20, processes=32)
    box = sandbox.Sandbox(_notebook(PROBES), kind=kind, limits=limits)
    try:
        executed = box.run()
        reply = box.request({"op": "describe", "names": ["children", "written", "nothing_here"]})
    finally:
        box.close()
    return _printed(executed), box, reply


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(config, items):
    # The slow tests of one file share its module fixtures (a class graded once, a server started once): one
    # group per file keeps them on one worker, while the files spread over both.
    # A test that shares no module fixture and costs as much as the rest of its file names a group of its own
    # (@pytest.mark.xdist_group), so that it runs beside its file rather than after it.
    for item in items:
        if item.get_closest_marker("slow") and not item.get_closest_marker("xdist_group"):
            item.add_marker(pytest.mark.xdist_group(f"{SLOW}:{item.nodeid.split('::')[0]}"))


# --- Ctrl-C: nothing left running ---------------------------------------------------------------------


def stop_descendants() -> int:
    """Kill (SIGKILL) every process below this one, taken as one snapshot; return how many were signalled."""
    try:
        tree = psutil.Process().children(recursive=True)
    except psutil.Error:
        return 0
    for process in tree:
        try:
            process.kill()
        except psutil.Error:
            pass  # already gone
    return len(tree)


def _keep_stopping() -> None:
    # A grading thread may start the next queued student after its first nbgrader was killed: keep killing
    # until this process exits (a daemon thread dies with it).
    while True:
        stop_descendants()
        threading.Event().wait(0.2)


def _interrupted(signum, frame):
    if not any(t.name == "stop-descendants" for t in threading.enumerate()):
        threading.Thread(target=_keep_stopping, name="stop-descendants", daemon=True).start()
    if signum == signal.SIGINT:
        signal.default_int_handler(signum, frame)  # KeyboardInterrupt: pytest ends the run and says so
    raise SystemExit(128 + signum)


def pytest_configure(config):
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, _interrupted)
        signal.signal(signal.SIGTERM, _interrupted)


def pytest_unconfigure(config):
    stop_descendants()  # a fixture's server whose teardown never ran (an interrupted run)
