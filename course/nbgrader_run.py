"""Where the course lives, which assignments it has, and how nbgrader is started."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

# The checkout this package was installed from; the course folder is this one unless the `course`
# command chose another (``--course DIR``, or the current directory when it holds nbgrader_config.py)
# and said so in ROOFLAB_COURSE before anything here was imported.
INSTALLED = Path(__file__).resolve().parent.parent
ROOT = Path(os.environ["ROOFLAB_COURSE"]).resolve() if os.environ.get("ROOFLAB_COURSE") else INSTALLED
SOURCE = ROOT / "source"
RELEASE = ROOT / "release"
SOLUTIONS = ROOT / "solutions"


def assignments() -> list[str]:
    """Assignment ids in teaching order (their names sort that way)."""
    return sorted(p.name for p in SOURCE.iterdir() if p.is_dir() and any(p.glob("*.ipynb")))


def notebooks(assignment: str, folder: Path = SOURCE) -> list[Path]:
    """The notebooks of one assignment in ``folder``."""
    return sorted((folder / assignment).glob("*.ipynb"))


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
    return env


def command_args(*args: str, root: Path | None = None) -> list[str]:
    """The arguments of ``nbgrader ARGS`` on the course root ``root`` (None: the course's own), gradebook included."""
    command = list(args)
    if root is not None:
        from .gradebook_db import nbgrader_args as database_args

        command.append(f"--CourseDirectory.root={root}")
        command += database_args(root)  # a graded course's PostgreSQL gradebook (course/gradebook_db.py)
    return command


def nbgrader(*args: str, root: Path | None = None, timeout: float | None = None,
             prefix: list[str] | None = None) -> subprocess.CompletedProcess:
    """Run ``nbgrader ARGS`` with the course's config (optionally on another course root)."""
    command = [sys.executable, "-m", "nbgrader", *command_args(*args, root=root)]
    process = subprocess.Popen(
        (prefix or []) + command,
        cwd=ROOT,  # nbgrader reads nbgrader_config.py from the working directory
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
