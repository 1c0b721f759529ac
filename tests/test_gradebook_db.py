"""The gradebook in PostgreSQL (course/records/gradebook_db.py): grading, a re-grade that keeps a manual score,
feedback, formgrader's list and an export, all against a real server this test starts for itself.

The class: ada (every answer right: 40 of 40 autograded) and dmitri (milliseconds for seconds: 36, as
tests/test_semester.py reasons), each with the 10-point written answer of 01_two_phases to grade by hand.
"""

import csv
import glob
import json
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from course import demo
from course.records import gradebook_db
from course.grade import grade, start_over
from course.grading.nbgrader_run import ROOT
from tests.conftest import BARE

A = "01_two_phases"
WRITTEN = "written_faster_gpu"
HINT = "PostgreSQL is not installed: apt-get install postgresql (its initdb and pg_ctl start a server for the test)"


def _binary(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)  # Debian keeps them here
    return candidates[0] if candidates else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def postgres():
    """A PostgreSQL server of its own in a temporary folder; yields the URL of an empty database on it."""
    initdb, pg_ctl = _binary("initdb"), _binary("pg_ctl")
    try:
        import psycopg  # noqa: F401
    except ImportError:
        initdb = None
        missing = gradebook_db.INSTALL_HINT
    else:
        missing = HINT
    if not (initdb and pg_ctl):
        (pytest.fail if os.environ.get("CI") else pytest.skip)(missing)
    # initdb refuses to run as root: as root, the server runs as the postgres account (Debian's package
    # makes it), else as nobody.
    user = {}
    if os.geteuid() == 0:
        account = next(a for a in ("postgres", "nobody") if _account(a))
        entry = pwd.getpwnam(account)
        user = {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}
    folder = Path(tempfile.mkdtemp(prefix="rooflab-postgres-"))
    if user:
        os.chown(folder, user["user"], user["group"])
    data, port = folder / "data", _free_port()
    env = dict(os.environ, LC_ALL="C", HOME=str(folder))
    subprocess.run([initdb, "-D", str(data), "-U", "rooflab", "-A", "trust", "-E", "UTF8", "--no-sync"],
                   check=True, capture_output=True, env=env, cwd=folder, **user)
    started = subprocess.run(
        [pg_ctl, "-D", str(data), "-l", str(folder / "server.log"), "-w", "-t", "60", "start",
         "-o", f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off"],
        capture_output=True, text=True, env=env, cwd=folder, **user)
    assert started.returncode == 0, started.stdout + started.stderr + _log(folder)
    try:
        import psycopg

        with psycopg.connect(host="127.0.0.1", port=port, user="rooflab", dbname="postgres",
                             autocommit=True) as connection:
            connection.execute("CREATE DATABASE gradebook")
        yield f"postgresql://rooflab@127.0.0.1:{port}/gradebook"
    finally:
        subprocess.run([pg_ctl, "-D", str(data), "-m", "immediate", "stop"], capture_output=True, env=env,
                       cwd=folder, **user)
        shutil.rmtree(folder, ignore_errors=True)


def _account(name: str) -> bool:
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


def _log(folder: Path) -> str:
    log = folder / "server.log"
    return log.read_text(errors="replace") if log.is_file() else ""


def _count(url: str, table: str) -> int:
    """Rows of one of nbgrader's tables, read with the driver directly (not through the code under test)."""
    import psycopg

    with psycopg.connect(url) as connection:
        return connection.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


def course(*args):
    return subprocess.run([sys.executable, "-m", "course", *map(str, args)], cwd=ROOT, capture_output=True,
                          text=True, stdin=subprocess.DEVNULL)


def test_a_url_of_another_kind_or_without_a_database_is_refused_by_name():
    with pytest.raises(gradebook_db.BadDatabase, match=r"--db: 'mysql' databases are not supported; expected"):
        gradebook_db.check("mysql://grader@db.example.org/course")
    with pytest.raises(gradebook_db.BadDatabase, match=r"--db: 'gradebook' is not a database URL"):
        gradebook_db.check("gradebook")
    with pytest.raises(gradebook_db.BadDatabase, match=r"names no database"):
        gradebook_db.check("postgresql://grader@127.0.0.1:5432")


def test_a_server_that_does_not_answer_is_named_without_its_password():
    port = _free_port()  # nothing listens there
    with pytest.raises(gradebook_db.BadDatabase) as raised:
        gradebook_db.check(f"postgresql://grader:secret@127.0.0.1:{port}/course")
    assert f"cannot reach postgresql://grader:***@127.0.0.1:{port}/course" in str(raised.value)
    assert "secret" not in str(raised.value)


def test_without_a_url_the_gradebook_is_the_sqlite_file_beside_the_course(tmp_path):
    root = tmp_path / "nbgrader"
    assert gradebook_db.url_of(root) == f"sqlite:///{root}/gradebook.db"
    assert gradebook_db.nbgrader_args(root) == [] and not gradebook_db.exists(root)


@pytest.mark.slow
def test_grade_regrade_feedback_and_export_on_postgresql(postgres, tmp_path):
    from nbgrader.api import Gradebook

    from course.review.formgrader import waiting

    class_ = tmp_path / "week1"
    demo.write_class(class_, selected=[A], students=[s for s in demo.CLASS if s.name in ("ada", "dmitri")])
    out = tmp_path / "graded"
    rows = grade(class_, out, workers=2, quiet=True, no_sandbox=BARE, db=postgres)
    assert {r.student: (r.score, r.status, r.manual_pending) for r in rows} == {
        "ada": (40, "graded", 10), "dmitri": (36, "graded", 10)}
    # Everything is in the database: no SQLite file, two submissions in PostgreSQL's own table.
    assert not (out / "nbgrader" / "gradebook.db").exists()
    assert _count(postgres, "submitted_assignment") == 2
    root = out / "nbgrader"
    assert f"c.CourseDirectory.db_url = {postgres!r}" in (root / "nbgrader_config.py").read_text()  # formgrader's
    assert sorted(w.student for w in waiting(root)) == ["ada", "dmitri"]

    # A teaching assistant grades ada's written answer (what formgrader does), then a late student comes.
    with Gradebook(postgres, course_id="rooflab") as gradebook:
        written = gradebook.find_grade(WRITTEN, A, A, "ada")
        written.manual_score, written.needs_manual_grade = 7, False
        gradebook.find_comment(WRITTEN, A, A, "ada").manual_comment = "Bandwidth, yes."
        gradebook.db.commit()
    late = tmp_path / "late"
    demo.write_class(late, selected=[A], students=[s for s in demo.CLASS if s.name in ("ada", "cora")])
    rows = {r.student: r for r in grade(late, out, workers=2, quiet=True, no_sandbox=BARE)}  # no --db: recorded
    # cora did the first half: 2+4+3+4+4+4 = 21 (tests/test_semester.py); ada's manual 7 kept
    assert {s: (r.score, r.status, r.manual_pending) for s, r in rows.items()} == {
        "ada": (40, "graded", 0), "cora": (21, "graded", 0), "dmitri": (36, "graded", 10)}
    assert rows["ada"].manual_score == 7
    assert _count(postgres, "submitted_assignment") == 3

    done = course("feedback", out)
    assert done.returncode == 0, done.stderr
    page = (out / "feedback" / "ada" / A / f"{A}.html").read_text()
    assert "7.0 / 10.0" in page and "Bandwidth, yes." in page

    done = course("export", out, "--format", "csv", "-o", tmp_path / "grades.csv")
    assert done.returncode == 0, done.stderr
    with open(tmp_path / "grades.csv", newline="") as handle:
        exported = {r["student"]: r for r in csv.DictReader(handle)}
    assert (exported["ada"]["status"], float(exported["ada"]["score"])) == ("graded", 40 + 7)
    assert exported["dmitri"]["status"] == "pending"

    # Another --db for the same graded course is refused: it would split the grades.
    with pytest.raises(gradebook_db.BadDatabase, match="is graded into postgresql://rooflab@"):
        grade(late, out, quiet=True, no_sandbox=BARE, db=f"sqlite:///{tmp_path / 'other.db'}")
    # --fresh drops the database's tables as well as OUT's folders.
    start_over(out)
    assert not (out / "nbgrader").exists()
    import psycopg

    with psycopg.connect(postgres) as connection:
        tables = connection.execute("SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'")
        assert tables.fetchone()[0] == 0
