"""`course formgrader [OUT]`: nbgrader's formgrader on a graded course, for the written answers.

formgrader reads the course config of the folder JupyterLab starts in, the gradebook that config
names, and the assignments of its ``source/``.  A graded course's ``OUT/nbgrader`` has all three once
``course grade`` has written its config (course.records.graded.write_config), so the server starts there, on
127.0.0.1 with a token.  Before it starts, every autograded notebook gets the rubric and the model
answer of each written answer next to it (course.records.graded.add_grader_notes): formgrader shows them to the
grader, feedback never shows them to the student.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from ..records import graded

HOST = "127.0.0.1"


@dataclass
class Waiting:
    """A submitted notebook with written answers (or overrides) to grade by hand."""

    student: str
    assignment: str
    notebook: str
    cells: list[str]
    points: float
    submission_id: str  # formgrader's id of the submitted notebook: /formgrader/submissions/<id>


def waiting(root: Path) -> list[Waiting]:
    """What needs manual grading in the gradebook, in assignment and student order."""
    from nbgrader.api import Gradebook

    found = []
    with Gradebook(graded.db_url(root), course_id=graded.COURSE_ID) as gradebook:
        for assignment in gradebook.assignments:
            for notebook in assignment.notebooks:
                for submission in notebook.submissions:
                    cells = [g for g in submission.grades if g.needs_manual_grade]
                    if cells:
                        found.append(Waiting(submission.student.id, assignment.name, notebook.name,
                                             [g.name for g in cells], sum(float(g.max_score) for g in cells),
                                             submission.id))
    return sorted(found, key=lambda w: (w.assignment, w.notebook, w.student))


def prepare(out: Path) -> Path:
    """Config and rubric notes in place; return OUT/nbgrader."""
    root = graded.root_of(out)
    graded.write_config(root)
    for folder in sorted((root / "autograded").glob("*/*")):
        if folder.is_dir():
            graded.add_grader_notes(root, folder.parent.name, folder.name)
    return root


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((HOST, 0))
        return probe.getsockname()[1]


def command(root: Path, port: int, token: str) -> list[str]:
    # The login cookie covers the whole server ("/"): formgrader's handlers report a base URL of "" (nbgrader
    # strips its slash), so by default a cookie set on a direct link's first visit covers only that page's
    # path, and the page's saves, under /formgrader/api/, are sent to /login (HTTP 302) and lost.
    args = [sys.executable, "-m", "jupyterlab", "--no-browser", f"--ServerApp.ip={HOST}",
            f"--ServerApp.port={port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
            '--IdentityProvider.cookie_options={"path": "/"}',
            '--ServerApp.jpserver_extensions={"course.review.formgrader_page": True}',
            f"--ServerApp.root_dir={root}"]
    if os.geteuid() == 0:
        args.append("--ServerApp.allow_root=True")  # a grading container often runs as root
    return args


EXCHANGE_CONFIG = """# Written by `course formgrader`: an exchange folder of the graded course's own, so that formgrader's
# assignment list finds a writable one (nbgrader's default, /srv/nbgrader/exchange, rarely exists).
c = get_config()  # noqa: F821
c.Exchange.root = {root!r}
"""


def exchange_config(root: Path) -> Path:
    """A config folder for the server holding an nbgrader_config.py that names OUT/nbgrader/exchange."""
    folder = root / "formgrader-config"
    (root / "exchange").mkdir(parents=True, exist_ok=True)
    folder.mkdir(exist_ok=True)
    (folder / "nbgrader_config.py").write_text(EXCHANGE_CONFIG.format(root=str(root / "exchange")), encoding="utf-8")
    return folder


def start(root: Path, port: int, token: str, log=None) -> subprocess.Popen:
    """Start JupyterLab in ``root`` (its formgrader then finds the course config there)."""
    from ..grading.nbgrader_run import environment

    env = environment()
    env["JUPYTER_CONFIG_PATH"] = os.pathsep.join(
        p for p in (str(exchange_config(root)), env.get("JUPYTER_CONFIG_PATH", "")) if p)
    env.pop("MPLBACKEND", None)  # the grader's own notebooks in this Lab show their figures inline
    return subprocess.Popen(command(root, port, token), cwd=root, env=env, stdin=subprocess.DEVNULL,
                            stdout=log or subprocess.DEVNULL, stderr=subprocess.STDOUT)


def get(url: str, token: str, timeout: float = 5.0) -> tuple[int, bytes]:
    request = urllib.request.Request(url, headers={"Authorization": f"token {token}"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def wait_ready(process: subprocess.Popen, port: int, token: str, timeout: float = 90.0) -> None:
    """Return once formgrader answers; raise if the server died, or did not answer within ``timeout``."""
    deadline = time.monotonic() + timeout
    url = f"http://{HOST}:{port}/formgrader/api/status"
    last = "no answer"
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"JupyterLab exited with code {process.returncode} before it answered")
        try:
            status, body = get(url, token, timeout=2.0)
        except OSError as error:
            last = str(error)
        else:
            if status == 200:
                return
            last = f"HTTP {status}"
            if status == 404:
                last += (" (is nbgrader's formgrader server extension disabled here? `jupyter server extension "
                         "enable --sys-prefix nbgrader.server_extensions.formgrader`)")
        time.sleep(0.5)
    raise RuntimeError(f"formgrader did not answer on {url} within {timeout:.0f} s: {last}")


def serve(out: Path, port: int = 0, token: str | None = None, lab: bool = True, ready_timeout: float = 90.0) -> int:
    """Start the server, print where to go and what waits, and run until Ctrl-C."""
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(line_buffering=True)  # the address shows as soon as it is known, even in a pipe
    root = prepare(out)
    port = port or free_port()
    token = token or secrets.token_hex(16)
    base = f"http://{HOST}:{port}"
    log = open(root / "formgrader.log", "ab")
    process = start(root, port, token, log)

    def stop(*_):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        wait_ready(process, port, token, ready_timeout)
        todo = waiting(root)
        print(f"formgrader on the graded course {root}", flush=True)
        if lab:
            print(f"  JupyterLab: {base}/lab?token={token}  (menu Nbgrader -> Formgrader)")
        print(f"  formgrader: {base}/formgrader?token={token}")
        if todo:
            print(f"\n{len(todo)} submission(s) wait for manual grading "
                  f"({sum(w.points for w in todo):g} points); the rubric is under each written answer:")
            for w in todo:
                print(f"  {w.assignment:16} {w.student:16} {', '.join(w.cells)} ({w.points:g} points): "
                      f"{base}/formgrader/submissions/{w.submission_id}/?token={token}")
        else:
            print("\nnothing waits for manual grading")
        print(f"\nlog: {root / 'formgrader.log'}\nWhen done: Ctrl-C, then `course feedback {out}` and "
              f"`course export {out} --format canvas|moodle|csv`.", flush=True)
        return process.wait()
    except KeyboardInterrupt:
        return 0
    except RuntimeError as error:
        print(f"course formgrader: {error}; see {root / 'formgrader.log'}", file=sys.stderr)
        return 1
    finally:
        signal.signal(signal.SIGTERM, previous)
        if process.poll() is None:
            process.terminate()  # Jupyter shuts down cleanly on SIGTERM
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        log.close()


def submissions_page(port: int, token: str, assignment: str, notebook: str) -> list[dict]:
    """formgrader's list of submissions of one notebook (the API behind its submissions page)."""
    status, body = get(f"http://{HOST}:{port}/formgrader/api/submitted_notebooks/{assignment}/{notebook}", token)
    if status != 200:
        raise RuntimeError(f"formgrader answered HTTP {status}")
    return json.loads(body)
