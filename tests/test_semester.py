"""An instructor's semester on one small graded class: re-grading merges, manual grades survive, feedback waits
for them and is regenerated with them, exports in three formats, and formgrader on a real server.

One class is graded once for the module (01_two_phases: ada, every answer right; dmitri, milliseconds for
seconds; katherine, a corrupt file); each test works on its own copy of the graded course.  Expected scores
follow from which test cells each fault breaks (tests/test_grading.py has the reasoning): ada 40 of 40, dmitri
36 (roofline_time [4] fails; ttft_and_itl, which calls it, passes with the course's version: a slip is charged
once), both with the 10-point written answer to grade by hand.
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
import zipfile

import pytest

from course import demo
from course.review.formgrader import free_port, get
from course.grade import grade
from course.grading.nbgrader_run import ROOT
from tests.conftest import BARE
from tests.small_class import A, DB, WRITTEN, course, grade_by_hand, page_of, students, written

# slow; in one group with the other files that read the small class graded once (tests/conftest.py)
pytestmark = pytest.mark.slow  # reads the small class graded once per run (tests/conftest.py's term)


def test_grade_holds_back_feedback_until_the_written_answers_are_graded(term):
    out, rows = term
    assert {s: (r.score, r.status, r.manual_pending) for s, r in rows.items()} == {
        "ada": (40, "graded", 10), "dmitri": (36, "graded", 10), "katherine": (0, "ungradable", 0)}
    assert page_of(out, "ada") is None and page_of(out, "dmitri") is None  # a page now would say 0.0 / 10.0
    page = page_of(out, "katherine")  # ungradable: a page that says why and what to do
    assert "not valid JSON" in page and "cut off" in page and "hand in" in page
    # the rubric is in the graded notebook, where formgrader shows it
    notebook = json.loads((out / "nbgrader" / "autograded" / "ada" / A / f"{A}.ipynb").read_text())
    notes = [c for c in notebook["cells"] if c["metadata"].get("rooflab_grader_note")]
    assert len(notes) == 1 and "Rubric for the instructor" in "".join(notes[0]["source"])


def test_a_folder_with_no_hand_in_is_an_error_that_says_what_it_saw(term_copy, tmp_path):
    (tmp_path / "empty" / "notes").mkdir(parents=True)
    (tmp_path / "empty" / "notes" / "todo.txt").write_text("grade week 1")
    done = course("grade", tmp_path / "empty", "--out", term_copy, "--no-sandbox")
    assert done.returncode == 1
    assert "no submission found" in done.stderr and "1 file(s) seen" in done.stderr
    assert "skipped notes/todo.txt: matches none of the layouts" in done.stderr


def test_fresh_asks_before_deleting(term_copy, tmp_path):
    done = course("grade", tmp_path / "nothing-here", "--out", term_copy, "--fresh")
    assert done.returncode == 1 and "--yes" in done.stderr
    assert (term_copy / DB).exists() and (term_copy / "grades.csv").exists()


def test_formgrader_serves_the_graded_course(term_copy):
    port, token = free_port(), "semester-test-token"
    server = subprocess.Popen([sys.executable, "-m", "course", "formgrader", str(term_copy), "--port", str(port),
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
        assert all(s["needs_manual_grade"] and s["code_score"] in (40, 36) for s in listed)
        assert get(f"{base}/formgrader/gradebook/{A}/{A}", token)[0] == 200
        assert b'"student"' not in get(f"{base}/formgrader/api/submitted_notebooks/{A}/{A}", "wrong-token")[1]
        # one submission as the grader sees it: the answer, then the rubric and a model answer
        ada = next(s for s in listed if s["student"] == "ada")
        status, page = get(f"{base}/formgrader/submissions/{ada['id']}/", token)
        assert status == 200 and b"Rubric for the instructor" in page and b"Model answer" in page
        # grade it through formgrader's own API, as its page does
        status, body = get(f"{base}/formgrader/api/grades?submission_id={ada['id']}", token)
        answer = next(g for g in json.loads(body) if g["name"] == WRITTEN)
        request = urllib.request.Request(f"{base}/formgrader/api/grade/{answer['id']}", method="PUT",
                                         data=json.dumps({"manual_score": 8}).encode(),
                                         headers={"Authorization": f"token {token}"})
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 200
        assert written(term_copy, "ada")[:2] == (8, False)
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


@pytest.fixture(scope="module")
def browser():
    """One headless chromium for the module's tests; each test opens contexts of its own (no shared cookies)."""
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
    # The field is in the page before formgrader's scripts have fetched the grades and bound their save handlers:
    # typed too early (seen under load, with the demo class grading beside it), a Tab saves nothing.
    page.wait_for_load_state("networkidle", timeout=60_000)
    with page.expect_response(lambda r: "/formgrader/api/grade/" in r.url and r.request.method == "PUT",
                              timeout=60_000) as saved:
        page.fill(f"#{WRITTEN}", str(score))
        page.press(f"#{WRITTEN}", "Tab")
    with page.expect_response(lambda r: "/formgrader/api/comment/" in r.url and r.request.method == "PUT",
                              timeout=60_000) as said:
        page.fill(f"#{WRITTEN}-comment", comment)
        page.press(f"#{WRITTEN}-comment", "Tab")
    return saved.value, said.value


def test_a_printed_direct_link_saves_in_a_fresh_browser(term_copy, browser, tmp_path):
    server = Formgrader(term_copy)
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
        # formgrader fills the score and the comment from two requests: wait for both
        page.wait_for_function(f"document.getElementById('{WRITTEN}').value !== '' && "
                               f"document.getElementById('{WRITTEN}-comment').value !== ''")
        assert page.input_value(f"#{WRITTEN}") == "7"
        assert page.input_value(f"#{WRITTEN}-comment") == "Bandwidth, yes; say which phase."
        context.close()
    finally:
        server.stop()
    assert written(term_copy, "ada") == (7, False, "Bandwidth, yes; say which phase.")
    assert course("feedback", term_copy).returncode == 0
    with open(term_copy / "grades.csv", newline="") as handle:
        assert {r["student"]: r["manual_score"] for r in csv.DictReader(handle)}["ada"] == "7"
    assert "Bandwidth, yes; say which phase." in page_of(term_copy, "ada")
    exported = {}
    for fmt in ("csv", "canvas", "moodle"):
        assert course("export", term_copy, "--format", fmt, "-o", tmp_path / f"{fmt}.csv").returncode == 0
        with open(tmp_path / f"{fmt}.csv", newline="", encoding="utf-8") as handle:
            exported[fmt] = list(csv.DictReader(handle))
    # ada: 40 autograded + 7 by hand = 47 of 50
    assert next(r for r in exported["csv"] if r["student"] == "ada")["manual"] == "7"
    assert next(r for r in exported["csv"] if r["student"] == "ada")["score"] == "47"
    assert next(r for r in exported["canvas"] if r["SIS Login ID"] == "ada")[A] == "47"
    assert next(r for r in exported["moodle"] if r["Username"] == "ada")[f"{A} (Real)"] == "47"


def test_a_save_that_fails_says_so_on_the_page(term_copy, browser):
    server = Formgrader(term_copy)
    try:
        ada = next(l for l in server.links() if "/formgrader/submissions/" in l)
        context = browser.new_context()
        page = context.new_page()
        page.goto(ada)
        page.wait_for_selector(f"#{WRITTEN}")
        page.wait_for_load_state("networkidle", timeout=60_000)  # handlers bound (see _type_grade)
        # as if the sign-in had expired (the XSRF cookie kept): the save is refused
        kept = [c for c in context.cookies() if c["name"] == "_xsrf"]
        context.clear_cookies()
        context.add_cookies(kept)
        page.fill(f"#{WRITTEN}", "3")
        page.press(f"#{WRITTEN}", "Tab")
        banner = page.locator("#rooflab-save-error")
        banner.wait_for(timeout=60_000)
        assert "NOT SAVED" in banner.inner_text() and "sign-in" in banner.inner_text()
        context.close()
    finally:
        server.stop()
    assert written(term_copy, "ada")[0] is None


def test_a_release_older_than_source_is_named(term, tmp_path):
    from course.grade import stale_release

    root = term[0] / "nbgrader"
    assert stale_release(root, [A]) == []  # release/ as committed is current
    copy = tmp_path / "nbgrader"
    shutil.copytree(root / "release", copy / "release")
    notebook = copy / "release" / A / f"{A}.ipynb"
    cells = json.loads(notebook.read_text())
    cells["cells"][3]["source"] = "a sentence source/ now has and release/ lacks"
    notebook.write_text(json.dumps(cells))
    (warning,) = stale_release(copy, [A])
    assert f"release/{A} is older than source/" in warning and cells["cells"][3]["id"] in warning


# --- a semester of twelve, from the LMS downloads to the LMS imports ------------------------------------------
#
# Twelve students of the simulated class (course/demo.py), each with the 01_two_phases score that
# tests/test_grading.py derives cell by cell (EXPECTED_A there): ada, ivan, joan, linus, niklaus 40 (right, or
# mended by pre-flight); dmitri and frances 32; edsger and grace 22; cora 21; blaise 0 (blank); katherine
# ungradable.  Seven are on a Canvas course, five on a Moodle one, each handed in as that LMS's download names it.

DUE = "2026-02-06T17:00:00+01:00"  # 16:00 UTC
CANVAS_NAME = "Assignment 1: two phases (551)"
CANVAS_CLASS = {  # demo student -> (Last, First, Canvas ID, SIS User ID, SIS Login ID, Section)
    "ada": ("Lovelace", "Ada", "1001", "S1001", "alovelace", "Lab A"),
    "blaise": ("Pascal", "Blaise", "1002", "S1002", "bpascal", "Lab A"),
    "cora": ("Berliner", "Cora", "1003", "S1003", "cberliner", "Lab B"),
    "dmitri": ("Mendeleev", "Dmitri", "1004", "S1004", "dmendeleev", "Lab B"),
    "edsger": ("Dijkstra", "Edsger", "1005", "S1005", "edijkstra", "Lab A"),
    "frances": ("Allen", "Frances", "1006", "S1006", "fallen", "Lab B"),
    "grace": ("Hopper", "Grace", "1007", "S1007", "ghopper", "Lab A"),
}
MOODLE_CLASS = {  # demo student -> (First name, Last name, Username, participant number in the download)
    "ivan": ("Ivan", "Sutherland", "isutherland", "5101"),
    "joan": ("Joan", "Clarke", "jclarke", "5102"),
    "katherine": ("Katherine", "Johnson", "kjohnson", "5103"),
    "linus": ("Linus", "Torvalds", "ltorvalds", "5104"),
    "niklaus": ("Niklaus", "Wirth", "nwirth", "5105"),
}


def _canvas_roster(path):
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["Student", "ID", "SIS User ID", "SIS Login ID", "Section", CANVAS_NAME])
        writer.writerow(["    Points Possible", "", "", "", "", "50"])
        for last, first, cid, sis, login, section in CANVAS_CLASS.values():
            writer.writerow([f"{last}, {first}", cid, sis, login, section, ""])
    return path


def _moodle_roster(path):
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["First name", "Last name", "Username", "ID number", "Institution", "Department",
                         "Email address"])
        for first, last, username, _ in MOODLE_CLASS.values():
            writer.writerow([first, last, username, "", "", "", f"{username}@uni.example"])
    return path


def _canvas_zip(plain, path, students, late=()):
    """Canvas's "Download Submissions": loose files <lastfirst>[_LATE]_<userid>_<submissionid>_<file>."""
    with zipfile.ZipFile(path, "w") as archive:
        for number, student in enumerate(students):
            last, first, cid, *_ = CANVAS_CLASS[student]
            marker = "_LATE" if student in late else ""
            for notebook in (plain / student / A).iterdir():
                name = f"{(last + first).lower()}{marker}_{cid}_{70000 + number}_{notebook.name}"
                archive.write(notebook, name)
    return path


def _moodle_zip(plain, path, students):
    """Moodle's "Download all submissions": <Full Name>_<participant>_assignsubmission_file_/<file>."""
    with zipfile.ZipFile(path, "w") as archive:
        for student in students:
            first, last, _, participant = MOODLE_CLASS[student]
            for notebook in (plain / student / A).iterdir():
                archive.write(notebook, f"{first} {last}_{participant}_assignsubmission_file_/{notebook.name}")
    return path


def _grades(out):
    with open(out / "grades.csv", newline="") as handle:
        return {r["student"]: r for r in csv.DictReader(handle)}


def _parse_canvas(path, roster_rows):
    """Canvas's gradebook import rules: identity columns first, a Points Possible row, a student matched by ID
    (then SIS User ID, SIS Login ID); a score a number no larger than the points possible, or blank (no grade)."""
    with open(path, newline="", encoding="utf-8") as handle:
        header, points, *rows = list(csv.reader(handle))
    assert header[:5] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
    assert points[0].strip() == "Points Possible"
    possible = {name: float(p) for name, p in zip(header[5:], points[5:])}
    known = {r[1]: r for r in roster_rows}
    scores = {}
    for row in rows:
        assert row[1] in known and row[:5] == known[row[1]], row  # matched, identity as Canvas exported it
        for name, cell in zip(header[5:], row[5:]):
            assert cell == "" or 0 <= float(cell) <= possible[name]
            scores[row[3], name] = None if cell == "" else float(cell)
    return header[5:], scores


def _parse_moodle(path, usernames):
    """Moodle's CSV grade import rules: every identity value must map to a user (else the whole import aborts);
    per grade item a (Real) column, where '' and '-' are no grade, and its (Feedback) column."""
    with open(path, newline="", encoding="utf-8") as handle:
        header, *rows = list(csv.reader(handle))
    assert header[0] == "Username"
    unknown = [row[0] for row in rows if row[0] not in usernames]
    assert not unknown, f"Moodle would abort the import: no user {unknown}"
    found = {}
    for row in rows:
        for index in range(1, len(header), 2):
            assert header[index].endswith(" (Real)") and header[index + 1].endswith(" (Feedback)")
            grade = row[index]
            found[row[0], header[index][:-7]] = (None if grade in ("", "-") else float(grade), row[index + 1])
    return found


# Exhaustive: two minutes of CPU (thirteen hand-ins graded in four runs, formgrader in a browser) joining paths that
# quicker tests cover one by one (tests/test_intake.py, test_graded.py, test_export.py and the browser tests above).
@pytest.mark.exhaustive
@pytest.mark.xdist_group("slow:tests/test_semester.py::test_a_semester_of_twelve")  # no module fixture: beside the rest
def test_a_semester_of_twelve(tmp_path, browser):
    plain = tmp_path / "plain"
    demo.write_class(plain, selected=[A], students=students(*CANVAS_CLASS, *MOODLE_CLASS))
    sandbox = ["--no-sandbox"] if BARE else []
    canvas_roster = _canvas_roster(tmp_path / "canvas-gradebook.csv")

    # Week 1 on Canvas: six hand in (dmitri after the due date), frances does not
    week1 = _canvas_zip(plain, tmp_path / "submissions.zip", ["ada", "blaise", "cora", "dmitri", "edsger", "grace"],
                        late={"dmitri"})
    out = tmp_path / "canvas-course"
    done = course("grade", week1, "--roster", canvas_roster, "--due", f"{A}={DUE}", "--out", out, *sandbox)
    assert done.returncode == 0, done.stderr
    assert "6/6 students" in done.stderr  # the progress counts everyone of the run
    rows = _grades(out)
    assert {s: (r["score"], r["status"], r["manual_pending"]) for s, r in rows.items()} == {
        "alovelace": ("40", "graded", "10"), "bpascal": ("0", "graded", "0"), "cberliner": ("21", "graded", "0"),
        "dmendeleev": ("36", "graded", "10"), "edijkstra": ("36", "graded", "10"), "ghopper": ("36", "graded", "10"),
        "fallen": ("0", "not submitted", "0")}
    assert rows["dmendeleev"]["late"].startswith("late (marked late by the LMS")
    assert "not submitted" in done.stdout and "late" in done.stdout  # the console table

    # ada's written answer, graded in formgrader's page, opened from the link the command prints
    server = Formgrader(out)
    try:
        link = next(l for l in server.links() if "/formgrader/submissions/" in l
                    and "alovelace" in next(line for line in server.printed if l in line))
        context = browser.new_context()
        page = context.new_page()
        page.goto(link)
        page.wait_for_selector(f"#{WRITTEN}")
        saved, said = _type_grade(page, 8, "Right phase, right spec.")
        assert saved.status == 200 and said.status == 200
        page.reload()
        page.wait_for_function(f"document.getElementById('{WRITTEN}').value !== ''")
        assert page.input_value(f"#{WRITTEN}") == "8"
        context.close()
    finally:
        server.stop()

    # Week 2: frances hands in late; ada hands in the same file again. Merged: ada's hand grade stays.
    week2 = _canvas_zip(plain, tmp_path / "late.zip", ["ada", "frances"], late={"frances"})
    done = course("grade", week2, "--roster", canvas_roster, "--out", out, *sandbox)
    assert done.returncode == 0, done.stderr
    rows = _grades(out)
    assert (rows["alovelace"]["manual_score"], rows["alovelace"]["manual_pending"]) == ("8", "0")
    assert (rows["fallen"]["score"], rows["fallen"]["status"]) == ("35", "graded") and rows["fallen"]["late"]

    assert course("feedback", out).returncode == 0
    page = (out / "feedback" / "alovelace" / A / f"{A}.html").read_text()
    assert "8.0 / 10.0" in page and "Right phase, right spec." in page
    assert "cdnjs" not in page and "pre-wrap" in page  # no CDN for maths; long lines wrap

    done = course("export", out, "--format", "canvas", "--name", f"{A}={CANVAS_NAME}", "-o", tmp_path / "c.csv")
    assert done.returncode == 0 and "warning" not in done.stdout, done.stdout
    with open(canvas_roster, newline="") as handle:
        roster_rows = [r[:5] for r in list(csv.reader(handle))[2:]]
    columns, scores = _parse_canvas(tmp_path / "c.csv", roster_rows)
    assert columns == [CANVAS_NAME]
    # ada 40 + 8; blaise 0 (blank, final); cora 21; the others wait for their written answers: no grade
    assert {login: s for (login, _), s in scores.items()} == {
        "alovelace": 48, "bpascal": 0, "cberliner": 21, "dmendeleev": None, "edijkstra": None, "fallen": None,
        "ghopper": None}
    unmapped = course("export", out, "--format", "canvas", "-o", tmp_path / "c2.csv")
    assert "warning: no Canvas name for 01_two_phases" in unmapped.stdout

    # The Moodle course: four in the download (niklaus renamed his notebook, so --assignment says which),
    # linus through nbgrader's exchange, 1 h 30 min after the due date
    moodle_roster = _moodle_roster(tmp_path / "moodle-grades.csv")
    download = _moodle_zip(plain, tmp_path / "moodle.zip", ["ivan", "joan", "katherine", "niklaus"])
    mout = tmp_path / "moodle-course"
    done = course("grade", download, "--roster", moodle_roster, "--assignment", A, "--due", f"{A}={DUE}",
                  "--out", mout, *sandbox)
    assert done.returncode == 0, done.stderr
    inbound = tmp_path / "exchange" / "rooflab" / "inbound" / f"ltorvalds+{A}+2026-02-06 17:30:00.000000 UTC+a1b2"
    shutil.copytree(plain / "linus" / A, inbound)
    (inbound / "timestamp.txt").write_text("2026-02-06 17:30:00.000000 UTC")
    done = course("grade", tmp_path / "exchange", "--roster", moodle_roster, "--out", mout, *sandbox)
    assert done.returncode == 0, done.stderr
    rows = _grades(mout)
    assert {s: (r["score"], r["status"]) for s, r in rows.items()} == {
        "isutherland": ("40", "graded"), "jclarke": ("40", "graded"), "kjohnson": ("0", "ungradable"),
        "ltorvalds": ("40", "graded"), "nwirth": ("40", "graded")}
    assert rows["ltorvalds"]["late"] == "late by 1 h 30 min" and rows["isutherland"]["late"] == ""
    grade_by_hand(mout, "isutherland", 6, "Say which spec moves ITL.")
    done = course("export", mout, "--format", "moodle", "--name", f"{A}=Assignment 1", "-o", tmp_path / "m.csv")
    assert done.returncode == 0, done.stdout + done.stderr
    found = _parse_moodle(tmp_path / "m.csv", {"isutherland", "jclarke", "kjohnson", "ltorvalds", "nwirth"})
    assert found["isutherland", "Assignment 1"][0] == 46
    assert found["isutherland", "Assignment 1"][1].startswith("Final grade 46/50")
    assert found["kjohnson", "Assignment 1"][0] is None and "not valid JSON" in found["kjohnson", "Assignment 1"][1]
    assert found["ltorvalds", "Assignment 1"][0] is None and "late by 1 h 30 min" in found["ltorvalds", "Assignment 1"][1]
    # a login the roster does not know: refused before anything is written
    roster = json.loads((mout / "nbgrader" / "roster.json").read_text())
    roster["students"] = [s for s in roster["students"] if s["login"] != "nwirth"]
    (mout / "nbgrader" / "roster.json").write_text(json.dumps(roster))
    refused = course("export", mout, "--format", "moodle", "-o", tmp_path / "m2.csv")
    assert refused.returncode == 1 and "nwirth" in refused.stderr and not (tmp_path / "m2.csv").exists()
