"""nbgrader loaded once per grading worker and forked for each student: the start-up paid once per run.

Starting ``python -m nbgrader`` costs about 1.5 s of CPU (its imports: Jupyter's server, SQLAlchemy,
nbconvert; then the course's grader: rooflab, pint, the exercises), a third or more of grading one
notebook.  A *warm* nbgrader is a process that makes those imports once and then, for each request,
forks a child that runs ``nbgrader ARGS`` exactly as the command line would: in a session of its own
(so a timeout kills its sandbox and kernel with it), under the same rlimits as
``course.grading.limits`` sets, with its output in files.  Each student is still graded in a process of
its own, which dies after that student; only the imports are shared.

Protocol, one JSON object a line on the warm process's stdin and stdout:
request ``{"argv", "memory", "processes", "file_bytes", "timeout", "out", "err"}``,
reply ``{"returncode", "timed_out"}`` (returncode as subprocess gives it: minus the signal if killed).
The process exits when its stdin closes.

Forking is safe here because the warm process runs no thread: it is started by ``python -m`` and only
imports; the grading threads live in the parent that writes the requests.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

# What every grading imports (nbgrader_config.py's preprocessors, the trusted tests' library): loaded once.
PRELOAD = ("nbgrader.apps.nbgraderapp", "nbgrader.apps.autogradeapp", "nbgrader.api", "nbgrader.preprocessors",
           "nbconvert.preprocessors", "jupyter_client", "nbformat", "numpy", "pint", "rooflab", "rooflab.check",
           "rooflab.earlier", "rooflab.exercises", "course.grading.autograde", "course.grading.limits",
           "course.grading.kernels")


class WarmNbgrader:
    """A warm nbgrader of one grading thread (not thread-safe: one request at a time)."""

    def __init__(self, cwd: Path, env: dict[str, str]):
        self._cwd, self._env = cwd, env
        self._process: subprocess.Popen | None = None

    def run(self, argv: list[str], memory: int, processes: int, file_bytes: int,
            timeout: float | None) -> subprocess.CompletedProcess:
        """``nbgrader ARGV`` in a forked child under the limits; raise subprocess.TimeoutExpired past ``timeout``
        seconds (the child's whole session killed first), OSError if the warm process cannot be had."""
        if self._process is None or self._process.poll() is not None:
            self._process = subprocess.Popen([sys.executable, "-m", __name__], cwd=self._cwd, env=self._env,
                                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                             start_new_session=True)
        with tempfile.TemporaryDirectory(prefix="rooflab-nbgrader-") as scratch:
            out, err = Path(scratch) / "out", Path(scratch) / "err"
            request = {"argv": argv, "memory": memory, "processes": processes, "file_bytes": file_bytes,
                       "timeout": timeout, "out": str(out), "err": str(err)}
            try:
                self._process.stdin.write(json.dumps(request) + "\n")
                self._process.stdin.flush()
                line = self._process.stdout.readline()
            except (BrokenPipeError, ValueError) as error:
                raise OSError(f"the warm nbgrader stopped: {error}") from None
            if not line:
                raise OSError(f"the warm nbgrader stopped (exit status {self._process.wait()})")
            reply = json.loads(line)
            stdout = out.read_text(errors="replace") if out.exists() else ""
            stderr = err.read_text(errors="replace") if err.exists() else ""
        if reply["timed_out"]:
            raise subprocess.TimeoutExpired(argv, timeout, stdout, stderr)
        return subprocess.CompletedProcess(argv, reply["returncode"], stdout, stderr)

    def close(self) -> None:
        if self._process is not None:
            self._process.stdin.close()  # the warm process exits at the end of its input
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            self._process.stdout.close()
            self._process = None


class Pool:
    """One warm nbgrader per grading thread, made when the thread first needs it; ``close`` ends them all."""

    def __init__(self, cwd: Path, env: dict[str, str]):
        self._cwd, self._env = cwd, env
        self._local = threading.local()
        self._all: list[WarmNbgrader] = []
        self._lock = threading.Lock()

    def get(self) -> WarmNbgrader:
        warm = getattr(self._local, "warm", None)
        if warm is None:
            warm = self._local.warm = WarmNbgrader(self._cwd, self._env)
            with self._lock:
                self._all.append(warm)
        return warm

    def close(self) -> None:
        with self._lock:
            for warm in self._all:
                warm.close()
            self._all.clear()

    def __enter__(self) -> "Pool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# --- the warm process ----------------------------------------------------------------------------------


def _child(request: dict) -> None:
    """In the forked child: become ``nbgrader ARGV`` under the limits; never returns."""
    code = 1
    try:
        os.setsid()  # a session of its own: the kernel and sandbox it starts die with it on a timeout
        for fd, path in ((1, request["out"]), (2, request["err"])):
            os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), fd)
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        # the same limits as course.grading.limits.run_limited sets before it execs nbgrader
        resource.setrlimit(resource.RLIMIT_AS, (request["memory"], request["memory"]))
        resource.setrlimit(resource.RLIMIT_FSIZE, (request["file_bytes"], request["file_bytes"]))
        if os.getuid() != 0:
            from .sandbox import count_user_processes

            cap = count_user_processes(os.getuid()) + request["processes"]
            resource.setrlimit(resource.RLIMIT_NPROC, (cap, cap))
        from nbgrader.apps.nbgraderapp import main

        sys.argv = ["nbgrader", *request["argv"]]
        try:
            main()
            code = 0
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    except BaseException:  # noqa: BLE001 - whatever it was, the parent reads it in err
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _serve() -> None:
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)
    for line in sys.stdin:
        request = json.loads(line)
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            _child(request)
        deadline = None if request["timeout"] is None else time.monotonic() + request["timeout"]
        timed_out = False
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if deadline is not None and time.monotonic() > deadline:
                timed_out = True
                try:
                    os.killpg(pid, signal.SIGKILL)  # the child's session: nbgrader, sandbox, kernel
                except ProcessLookupError:
                    pass
                _, status = os.waitpid(pid, 0)
                break
            time.sleep(0.02)
        print(json.dumps({"returncode": os.waitstatus_to_exitcode(status), "timed_out": timed_out}), flush=True)


if __name__ == "__main__":
    _serve()
