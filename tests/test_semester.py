"""An instructor's semester on one small graded class: re-grading merges, manual grades survive, feedback waits
for them and is regenerated with them, exports in three formats, and formgrader on a real server.

One class is graded once for the module (01_two_phases: ada, every answer right; dmitri, milliseconds for
seconds; katherine, a corrupt file); each test works on its own copy of the graded course.  Expected scores
follow from which test cells each fault breaks (tests/test_grading.py has the reasoning): ada 40 of 40, dmitri
32 (roofline_time [4] and ttft_and_itl [4] fail), both with the 10-point written answer to grade by hand.
"""

import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request

import pytest

from course import demo
from course.formgrader import free_port, get
from course.grade import grade
from course.nbgrader_run import ROOT, SOLUTIONS
from tests.conftest import BARE

pytestmark = pytest.mark.slow

A = "01_two_phases"
WRITTEN = "written_faster_gpu"
DB = "nbgrader/gradebook.db"


def _students(*names):
    return [s for s in demo.CLASS if s.name in names]


@pytest.fixture(scope="module")
def term(tmp_path_factory):
    folder = tmp_path_factory.mktemp("term")
    demo.write_class(folder / "week1", selected=[A], students=_students("ada", "dmitri", "katherine"))
    rows = grade(folder / "week1", folder / "graded", workers=2, quiet=True, no_sandbox=BARE)
    return folder / "graded", {r.student: r for r in rows}


@pytest.fixture
def graded(term, tmp_path):
    """A copy of the graded class that a test may change."""
    return shutil.copytree(term[0], tmp_path / "graded")


def _gradebook(out):
    from nbgrader.api import Gradebook

    return Gradebook(f"sqlite:///{out / DB}", course_id="rooflab")


def _grade_by_hand(out, student, score, comment):
    """What formgrader does when a grader types a score and a comment."""
    with _gradebook(out) as gradebook:
        grade_ = gradebook.find_grade(WRITTEN, A, A, student)
        grade_.manual_score = score
        grade_.needs_manual_grade = False
        gradebook.find_comment(WRITTEN, A, A, student).manual_comment = comment
        gradebook.db.commit()


def _written(out, student):
    with _gradebook(out) as gradebook:
        grade_ = gradebook.find_grade(WRITTEN, A, A, student)
        comment = gradebook.find_comment(WRITTEN, A, A, student)
        return grade_.manual_score, grade_.needs_manual_grade, comment.manual_comment


def _page(out, student):
    path = out / "feedback" / student / A / f"{A}.html"
    return path.read_text(encoding="utf-8") if path.exists() else None


def course(*args, **kwargs):
    return subprocess.run([sys.executable, "-m", "course", *map(str, args)], cwd=ROOT, capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, **kwargs)


def test_grade_holds_back_feedback_until_the_written_answers_are_graded(term):
    out, rows = term
    assert {s: (r.score, r.status, r.manual_pending) for s, r in rows.items()} == {
        "ada": (40, "graded", 10), "dmitri": (32, "graded", 10), "katherine": (0, "ungradable", 0)}
    assert _page(out, "ada") is None and _page(out, "dmitri") is None  # a page now would say 0.0 / 10.0
    page = _page(out, "katherine")  # ungradable: a page that says why and what to do
    assert "not valid JSON" in page and "cut off" in page and "hand in" in page
    # the rubric is in the graded notebook, where formgrader shows it
    notebook = json.loads((out / "nbgrader" / "autograded" / "ada" / A / f"{A}.ipynb").read_text())
    notes = [c for c in notebook["cells"] if c["metadata"].get("rooflab_grader_note")]
    assert len(notes) == 1 and "Rubric for the instructor" in "".join(notes[0]["source"])


def test_figures_reach_the_graded_notebook_and_the_feedback(graded):
    def images(notebook):
        return sum("image/png" in o.get("data", {}) for c in notebook["cells"] for o in c.get("outputs", []))

    expected = images(json.loads((SOLUTIONS / A / f"{A}.ipynb").read_text()))  # the reference run's figures
    assert expected >= 1
    assert images(json.loads((graded / "nbgrader" / "autograded" / "ada" / A / f"{A}.ipynb").read_text())) == expected
    done = course("feedback", graded, "--all")
    assert done.returncode == 0, done.stderr
    assert _page(graded, "ada").count("data:image/png") == expected


def test_regrade_merges_and_keeps_manual_grades(graded, tmp_path):
    _grade_by_hand(graded, "ada", 7, "Good on bandwidth; ask about prompt lengths.")
    _grade_by_hand(graded, "dmitri", 5, "Which slowness?")
    ada_graded = graded / "nbgrader" / "autograded" / "ada" / A / f"{A}.ipynb"
    before = ada_graded.stat().st_mtime_ns
    # A late student, ada handing in the same file again, dmitri a new written answer.
    late = tmp_path / "late"
    demo.write_class(late, selected=[A], students=_students("ada", "dmitri", "cora"))
    notebook = json.loads((late / "dmitri" / A / f"{A}.ipynb").read_text())
    answer = next(c for c in notebook["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == WRITTEN)
    answer["source"] = "Decode follows memory bandwidth, so buy bandwidth."
    (late / "dmitri" / A / f"{A}.ipynb").write_text(json.dumps(notebook))

    rows = {r.student: r for r in grade(late, graded, workers=2, quiet=True, no_sandbox=BARE)}

    # nothing lost: katherine was not in this run and keeps her row; cora did the first half (2+4+3+4+4+4)
    assert {s: (r.score, r.status, r.manual_pending) for s, r in rows.items()} == {
        "ada": (40, "graded", 0), "cora": (21, "graded", 0), "dmitri": (32, "graded", 10),
        "katherine": (0, "ungradable", 0)}
    assert _written(graded, "ada") == (7, False, "Good on bandwidth; ask about prompt lengths.")
    assert rows["ada"].manual_score == 7
    assert ada_graded.stat().st_mtime_ns == before  # unchanged: not graded again
    # dmitri changed the answer he was graded on: the grade is kept, and it waits for a second look
    assert _written(graded, "dmitri") == (5, True, "Which slowness?")
    with open(graded / "grades.csv", newline="") as handle:
        assert sorted(r["student"] for r in csv.DictReader(handle)) == ["ada", "cora", "dmitri", "katherine"]
    # ada has nothing pending now: her page is written, with the manual score and comment, without the rubric
    page = _page(graded, "ada")
    assert "7.0 / 10.0" in page and "ask about prompt lengths" in page and "Rubric for the instructor" not in page
    assert _page(graded, "dmitri") is None and _page(graded, "katherine") is not None


def test_a_changed_source_regrades_what_was_graded_against_it(graded, tmp_path):
    _grade_by_hand(graded, "ada", 6, "kept")
    ledger = json.loads((graded / "nbgrader" / "ledger.json").read_text())
    # as if source/ had changed since the class was graded: a test fixed
    ledger["sources"][A] = "the source as it was"
    for entry in ledger["submissions"].values():
        entry["source"] = "the source as it was"
    (graded / "nbgrader" / "ledger.json").write_text(json.dumps(ledger))
    ada_graded = graded / "nbgrader" / "autograded" / "ada" / A / f"{A}.ipynb"
    before = ada_graded.stat().st_mtime_ns
    (tmp_path / "nobody").mkdir()
    rows = {r.student: r for r in grade(tmp_path / "nobody", graded, quiet=True, no_sandbox=BARE)}  # a run that brings nothing
    assert ada_graded.stat().st_mtime_ns != before  # graded again, from submitted/
    assert {s: (r.score, r.status, r.manual_pending) for s, r in rows.items()} == {
        "ada": (40, "graded", 0), "dmitri": (32, "graded", 10), "katherine": (0, "ungradable", 0)}
    assert _written(graded, "ada") == (6, False, "kept")  # same answer: the manual grade stands
    assert json.loads((graded / "nbgrader" / "ledger.json").read_text())["sources"][A] != ledger["sources"][A]


def test_fresh_asks_before_deleting(graded, tmp_path):
    done = course("grade", tmp_path / "nothing-here", "--out", graded, "--fresh")
    assert done.returncode == 1 and "--yes" in done.stderr
    assert (graded / DB).exists() and (graded / "grades.csv").exists()


def test_export_rows_for_graded_pending_and_ungradable_in_each_format(graded, tmp_path):
    _grade_by_hand(graded, "ada", 7, "fine")
    read = {}
    for fmt in ("csv", "canvas", "moodle"):
        done = course("export", graded, "--format", fmt, "-o", tmp_path / f"{fmt}.csv")
        assert done.returncode == 0, done.stderr
        with open(tmp_path / f"{fmt}.csv", newline="", encoding="utf-8") as handle:
            read[fmt] = list(csv.reader(handle))
        if fmt != "csv":
            assert "dmitri" in done.stdout and "katherine" in done.stdout  # the blanks, listed with why

    header, *lines = read["csv"]
    table = {line[0]: dict(zip(header, line)) for line in lines}
    assert (table["ada"]["status"], table["ada"]["score"], table["ada"]["max_score"]) == ("graded", "47", "50")
    assert (table["ada"]["autograded"], table["ada"]["manual"]) == ("40", "7")
    assert (table["dmitri"]["status"], table["dmitri"]["score"], table["dmitri"]["autograded"],
            table["dmitri"]["manual_pending"]) == ("pending", "", "32", "10")
    assert (table["katherine"]["status"], table["katherine"]["score"]) == ("ungradable", "")
    assert "not valid JSON" in table["katherine"]["reason"]

    assert read["canvas"] == [
        ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", A],
        ["Points Possible", "", "", "", "", "50"],
        ["ada", "", "", "ada", "", "47"],
        ["dmitri", "", "", "dmitri", "", ""],
        ["katherine", "", "", "katherine", "", ""],
    ]

    header, *lines = read["moodle"]
    assert header == ["Username", f"{A} (Real)", f"{A} (Feedback)"]
    moodle = {line[0]: line[1:] for line in lines}
    assert moodle["ada"][0] == "47" and "written 7/10" in moodle["ada"][1]
    assert moodle["dmitri"][0] == "-" and "manual grading" in moodle["dmitri"][1]
    assert moodle["katherine"][0] == "-" and "not valid JSON" in moodle["katherine"][1]


def test_feedback_is_regenerated_with_the_manual_score(graded):
    _grade_by_hand(graded, "ada", 7, "Say which phase each spec moves.")
    done = course("feedback", graded)
    assert done.returncode == 0, done.stderr
    page = _page(graded, "ada")
    assert "7.0 / 10.0" in page and "Say which phase each spec moves." in page
    assert "Rubric for the instructor" not in page and "BEGIN HIDDEN TESTS" not in page
    assert _page(graded, "dmitri") is None  # still waiting
    _grade_by_hand(graded, "ada", 9, "Better.")
    assert course("feedback", graded).returncode == 0
    page = _page(graded, "ada")
    assert "9.0 / 10.0" in page and "Better." in page and "7.0 / 10.0" not in page
    with open(graded / "grades.csv", newline="") as handle:
        assert {r["student"]: r["manual_score"] for r in csv.DictReader(handle)}["ada"] == "9"


def test_formgrader_serves_the_graded_course(graded):
    port, token = free_port(), "semester-test-token"
    server = subprocess.Popen([sys.executable, "-m", "course", "formgrader", str(graded), "--port", str(port),
                               "--token", token], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL, text=True, start_new_session=True)
    printed: list[str] = []
    reader = threading.Thread(target=lambda: printed.extend(server.stdout), daemon=True)
    reader.start()
    base = f"http://127.0.0.1:{port}"
    try:
        # `course formgrader` prints its address once the server answers
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and server.poll() is None and not any("formgrader:" in l for l in printed):
            time.sleep(0.2)
        shown = "".join(printed)
        assert f"formgrader: {base}/formgrader?token={token}" in shown, shown
        assert "wait for manual grading" in shown and "ada" in shown and "dmitri" in shown  # what waits
        status, body = get(f"{base}/formgrader/api/submitted_notebooks/{A}/{A}", token)
        assert status == 200
        listed = json.loads(body)
        # the submissions page lists the graded students (katherine's file never reached the gradebook)
        assert sorted(s["student"] for s in listed) == ["ada", "dmitri"]
        assert all(s["needs_manual_grade"] and s["code_score"] in (40, 32) for s in listed)
        assert get(f"{base}/formgrader/gradebook/{A}/{A}", token)[0] == 200
        assert b'"student"' not in get(f"{base}/formgrader/api/submitted_notebooks/{A}/{A}", "wrong-token")[1]
        # one submission as the grader sees it: the answer, then the rubric and a model answer
        ada = next(s for s in listed if s["student"] == "ada")
        status, page = get(f"{base}/formgrader/submissions/{ada['id']}/", token)
        assert status == 200 and b"Rubric for the instructor" in page and b"Model answer" in page
        # grade it through formgrader's own API, as its page does
        status, body = get(f"{base}/formgrader/api/grades?submission_id={ada['id']}", token)
        written = next(g for g in json.loads(body) if g["name"] == WRITTEN)
        request = urllib.request.Request(f"{base}/formgrader/api/grade/{written['id']}", method="PUT",
                                         data=json.dumps({"manual_score": 8}).encode(),
                                         headers={"Authorization": f"token {token}"})
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 200
        assert _written(graded, "ada")[:2] == (8, False)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        reader.join(timeout=5)
    assert get_or_none(f"{base}/api/status", token) is None  # the server is gone with the command


def get_or_none(url, token):
    try:
        return get(url, token, timeout=2)
    except OSError:
        return None


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _browser_missing():
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "Python playwright is not installed (pip install playwright)"
    return None if CHROMIUM else "chromium is not installed (apt-get install chromium)"


class Formgrader:
    """`course formgrader OUT` as an instructor starts it: the lines it prints, and a way to stop it."""

    def __init__(self, out):
        self.port, self.token = free_port(), "semester-browser-token"
        self.base = f"http://127.0.0.1:{self.port}"
        self.server = subprocess.Popen(
            [sys.executable, "-m", "course", "formgrader", str(out), "--port", str(self.port), "--token", self.token],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True,
            start_new_session=True)
        self.printed: list[str] = []
        self.reader = threading.Thread(target=lambda: self.printed.extend(self.server.stdout), daemon=True)
        self.reader.start()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and self.server.poll() is None and not any(
                "When done" in line for line in self.printed):
            time.sleep(0.2)
        assert any("When done" in line for line in self.printed), "".join(self.printed)

    def links(self):
        """Every address the command printed."""
        import re

        return re.findall(r"http://\S+", "".join(self.printed))

    def stop(self):
        os.killpg(self.server.pid, signal.SIGTERM)
        try:
            self.server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.server.pid, signal.SIGKILL)
            self.server.wait()
        self.reader.join(timeout=5)


@pytest.fixture
def browser():
    missing = _browser_missing()
    if missing:
        (pytest.fail if os.environ.get("CI") else pytest.skip)(missing)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        yield chromium
        chromium.close()


def _type_grade(page, score, comment):
    """Type a score and a comment as a grader does (each saves when its field loses focus); wait for both saves."""
    with page.expect_response(lambda r: "/formgrader/api/grade/" in r.url and r.request.method == "PUT") as saved:
        page.fill(f"#{WRITTEN}", str(score))
        page.press(f"#{WRITTEN}", "Tab")
    with page.expect_response(lambda r: "/formgrader/api/comment/" in r.url and r.request.method == "PUT") as said:
        page.fill(f"#{WRITTEN}-comment", comment)
        page.press(f"#{WRITTEN}-comment", "Tab")
    return saved.value, said.value


def test_a_printed_direct_link_saves_in_a_fresh_browser(graded, browser, tmp_path):
    server = Formgrader(graded)
    try:
        links = server.links()
        ada = next(l for l in links if "/formgrader/submissions/" in l and "ada" in next(
            line for line in server.printed if l in line))
        # every printed address opens in a browser of its own, with no sign-in page
        for link in links:
            context = browser.new_context()
            page = context.new_page()
            response = page.goto(link)
            assert response.ok and "/login" not in page.url, (link, page.url)
            context.close()
        context = browser.new_context()  # a fresh browser: no cookie but what the direct link gives
        page = context.new_page()
        page.goto(ada)
        page.wait_for_selector(f"#{WRITTEN}")
        saved, said = _type_grade(page, 7, "Bandwidth, yes; say which phase.")
        # saved for real: the answer is the API's JSON, not a redirect to the login page
        assert saved.status == 200 and saved.request.redirected_from is None and saved.json()["manual_score"] == 7
        assert said.status == 200 and said.json()["manual_comment"] == "Bandwidth, yes; say which phase."
        assert page.locator("#rooflab-save-error").count() == 0
        page.reload()
        page.wait_for_selector(f"#{WRITTEN}")
        page.wait_for_function(f"document.getElementById('{WRITTEN}').value !== ''")
        assert page.input_value(f"#{WRITTEN}") == "7"
        assert page.input_value(f"#{WRITTEN}-comment") == "Bandwidth, yes; say which phase."
        context.close()
    finally:
        server.stop()
    assert _written(graded, "ada") == (7, False, "Bandwidth, yes; say which phase.")
    assert course("feedback", graded).returncode == 0
    with open(graded / "grades.csv", newline="") as handle:
        assert {r["student"]: r["manual_score"] for r in csv.DictReader(handle)}["ada"] == "7"
    assert "Bandwidth, yes; say which phase." in _page(graded, "ada")
    exported = {}
    for fmt in ("csv", "canvas", "moodle"):
        assert course("export", graded, "--format", fmt, "-o", tmp_path / f"{fmt}.csv").returncode == 0
        with open(tmp_path / f"{fmt}.csv", newline="", encoding="utf-8") as handle:
            exported[fmt] = list(csv.DictReader(handle))
    # ada: 40 autograded + 7 by hand = 47 of 50
    assert next(r for r in exported["csv"] if r["student"] == "ada")["manual"] == "7"
    assert next(r for r in exported["csv"] if r["student"] == "ada")["score"] == "47"
    assert next(r for r in exported["canvas"] if r["SIS Login ID"] == "ada")[A] == "47"
    assert next(r for r in exported["moodle"] if r["Username"] == "ada")[f"{A} (Real)"] == "47"


def test_a_save_that_fails_says_so_on_the_page(graded, browser):
    server = Formgrader(graded)
    try:
        ada = next(l for l in server.links() if "/formgrader/submissions/" in l)
        context = browser.new_context()
        page = context.new_page()
        page.goto(ada)
        page.wait_for_selector(f"#{WRITTEN}")
        context.clear_cookies()  # as if the login had expired: the save is answered with the login page
        page.fill(f"#{WRITTEN}", "3")
        page.press(f"#{WRITTEN}", "Tab")
        banner = page.locator("#rooflab-save-error")
        banner.wait_for(timeout=15_000)
        assert "NOT SAVED" in banner.inner_text() and "login" in banner.inner_text()
        context.close()
    finally:
        server.stop()
    assert _written(graded, "ada")[0] is None
