"""What the tests share: the demo class, graded once per session, and where the slow tests run.

`make test` runs the suite on two pytest-xdist workers with ``--dist loadgroup``.  The tests that read the
graded class form one group, which one worker runs, grading the class once; the other slow tests (a build,
a fresh environment, a few small gradings) form a second group, which the other worker runs meanwhile;
the quick tests fill in around them.

Grading happens once per session whatever the scheduling: the first worker to need the class grades it
under a file lock shared by the workers of the run, the others wait and read its result.  (pytest-xdist
3.8 groups nothing on pytest 9.2, pytest-xdist#1386, hence pytest < 9.2 in pyproject.toml; if grouping
breaks again, the suite gets slower, not wrong.)
"""

import fcntl
import os
import pickle

import pytest

from course import sandbox

# Where this machine has no sandbox (no bubblewrap), the tests that grade do so bare, outside CI: the grades
# are the same (the tests run in the grader either way); CI installs bubblewrap and never grades bare.
BARE = not os.environ.get("CI") and sandbox.isolation() == sandbox.NO_SANDBOX

GRADED_CLASS = "graded_class"  # the demo class graded once, and every test that reads it
SLOW = "slow"  # every other test marked slow


@pytest.fixture(scope="session")
def graded(tmp_path_factory):
    """The demo class (course/demo.py) graded end to end: (folder, {(student, assignment): row})."""
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # each worker's basetemp is a folder of the run's
    folder = shared / "demo-class"
    with open(shared / "demo-class.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / "rows.pickle").exists():
            from course import demo
            from course.grade import grade

            demo.write_class(folder / "submissions")
            rows = grade(folder / "submissions", folder / "graded", workers=2, quiet=True, feedback_now=True,
                         no_sandbox=BARE)
            (folder / "rows.pickle").write_bytes(pickle.dumps(rows))
        rows = pickle.loads((folder / "rows.pickle").read_bytes())
    return folder, {(r.student, r.assignment): r for r in rows}


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(config, items):
    for item in items:
        if "graded" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group(GRADED_CLASS))
        elif item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.xdist_group(SLOW))
