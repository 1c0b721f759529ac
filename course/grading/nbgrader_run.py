"""Where the course lives (one definition: :func:`course_root`), which assignments it has, and how nbgrader is started."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

# The checkout this package was installed from: the course folder unless another is chosen.
INSTALLED = Path(__file__).resolve().parents[2]
VARIABLE = "ROOFLAB_COURSE"  # how a process this package starts (nbgrader, a cluster's grader) learns the folder
_chosen: Path | None = None


def use_course(folder: Path) -> None:
    """Work on the course in ``folder`` from now on (the `course` command's ``--course``, or the current directory
    when it holds nbgrader_config.py); the processes started through :func:`environment` work on it too."""
    global _chosen
    _chosen = Path(folder).resolve()


def course_root() -> Path:
    """The course folder (holding nbgrader_config.py, source/, release/, solutions/): the one given to
    :func:`use_course`, else ``$ROOFLAB_COURSE`` (set for the processes this package starts), else the checkout."""
    if _chosen is not None:
        return _chosen
    given = os.environ.get(VARIABLE)
    return Path(given).resolve() if given else INSTALLED


_FOLDERS = {"ROOT": "", "SOURCE": "source", "RELEASE": "release", "SOLUTIONS": "solutions"}


def __getattr__(name: str) -> Path:
    # ROOT, SOURCE, RELEASE and SOLUTIONS are read from the course folder chosen when they are asked for
    # (course_root()), not fixed when this module is imported.
    if name in _FOLDERS:
        return course_root() / _FOLDERS[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def assignments() -> list[str]:
    """Assignment ids in teaching order (their names sort that way)."""
    return sorted(p.name for p in (course_root() / "source").iterdir() if p.is_dir() and any(p.glob("*.ipynb")))


def notebooks(assignment: str, folder: Path | None = None) -> list[Path]:
    """The notebooks of one assignment in ``folder`` (default: the course's source/)."""
    return sorted(((folder or course_root() / "source") / assignment).glob("*.ipynb"))


def environment() -> dict[str, str]:
    """The environment nbgrader needs: this Python's bin/ first on PATH (nbgrader shells
    out to `alembic` when it makes a gradebook), one BLAS thread per kernel (graders
    run in parallel), and no stray matplotlib backend."""
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env.setdefault(var, "1")
    env["MPLBACKEND"] = "Agg"
    env["PYTHONWARNINGS"] = env.get("PYTHONWARNINGS", "")
    env[VARIABLE] = str(course_root())  # nbgrader's preprocessors (the grader) work on the same course
    return env


def command_args(*args: str, root: Path | None = None) -> list[str]:
    """The arguments of ``nbgrader ARGS`` on the course root ``root`` (None: the course's own), gradebook included."""
    command = list(args)
    if root is not None:
        from ..records.gradebook_db import nbgrader_args as database_args

        command.append(f"--CourseDirectory.root={root}")
        command += database_args(root)  # a graded course's PostgreSQL gradebook (course/records/gradebook_db.py)
    return command


def nbgrader(*args: str, root: Path | None = None, timeout: float | None = None,
             prefix: list[str] | None = None) -> subprocess.CompletedProcess:
    """Run ``nbgrader ARGS`` with the course's config (optionally on another course root)."""
    command = [sys.executable, "-m", "nbgrader", *command_args(*args, root=root)]
    process = subprocess.Popen(
        (prefix or []) + command,
        cwd=course_root(),  # nbgrader reads nbgrader_config.py from the working directory
        env=environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, kernels included
    )
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        # Kill the whole group: a kernel stuck in a loop outlives its nbgrader parent otherwise.
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        raise
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def read_notebook(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def write_notebook(notebook: dict, path: Path) -> None:
    """Write JSON the way Jupyter does (indent 1, trailing newline), so diffs stay small."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(notebook, indent=1, ensure_ascii=False, sort_keys=True) + "\n", encoding="utf-8")
