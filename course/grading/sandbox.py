"""A disposable sandbox for one submission's kernel, and the grader's end of its line.

The student's notebook runs in :mod:`course.grading.kernel_runner` inside bubblewrap
(``bwrap``): its own PID, network, IPC and UTS namespaces (no network, nothing
outside to signal), a read-only view of the Python environment and the library
and nothing else of the file system (no course output, gradebook, ``source/``,
``solutions/`` or other submissions), a private writable folder and ``/tmp``
that are size-capped tmpfs (the cap on the total bytes it may write), an
unprivileged uid, and rlimits on address space, processes and file size.
Everything it starts dies with it.

Where bubblewrap is missing and the grader runs as root, the fallback is
``unshare`` (PID, network, IPC, UTS and mount namespaces) with the course's
folders hidden under empty tmpfs mounts and ``setpriv`` to an unprivileged uid.
Where neither can be had, grading refuses unless the instructor asks for
``--no-sandbox``, and then every row says so.

The :class:`Sandbox` object runs the notebook (a cell that hangs, ignores
signals or kills its kernel is skipped on a fresh kernel, and grading goes on)
and then forwards the grader's requests, reading every reply as hostile input.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

RUNNER = Path(__file__).resolve().parent / "kernel_runner.py"
LIBRARY = Path(__file__).resolve().parents[2] / "lib"
LINE_LIMIT = 64 * 2**20  # the executed notebook is one line; 64 MiB is far above any honest one
NO_SANDBOX = "none"


class SandboxError(RuntimeError):
    """The sandbox could not run the notebook at all (it did not start, or kept dying)."""


@dataclass(frozen=True)
class SandboxLimits:
    """What grading one submission may use: the one definition (course.grade.Limits, SandboxedExecute's settings
    and nbgrader_config.py's cell timeout take their defaults from here)."""

    wall_seconds: float = 300.0  # one student's autograde of one assignment (a process doing several: each)
    cell_seconds: float = 10.0  # one cell, or one request of the grader
    memory_bytes: int = 4 * 2**30  # address space of each process
    processes: int = 64  # processes and threads of the sandbox's own user
    file_bytes: int = 64 * 2**20  # largest single file
    disk_bytes: int = 256 * 2**20  # the private folder and /tmp, each
    restarts: int = 6  # fresh kernels after a hang or a crash, before giving up


def isolation() -> str:
    """The isolation this machine offers: "bwrap", "unshare" (root only) or "none"."""
    if shutil.which("bwrap"):
        probe = subprocess.run(_bwrap_prefix(SandboxLimits()) + ["/bin/true"], capture_output=True)
        if probe.returncode == 0:
            return "bwrap"
    if os.geteuid() == 0 and shutil.which("unshare") and shutil.which("setpriv") and _reachable_by_others():
        return "unshare"
    return NO_SANDBOX


def _reachable_by_others() -> bool:
    """Whether an unprivileged uid can run this Python (the unshare fallback has no bind mounts to help)."""
    for path in _python_paths():
        for folder in [path.resolve(), *path.resolve().parents]:
            if folder.is_dir() and not folder.stat().st_mode & 0o001:
                return False
    return True


INSTALL_HINT = ("install bubblewrap (Debian/Ubuntu: `sudo apt-get install bubblewrap`; Fedora: `sudo dnf install "
                "bubblewrap`), or grade as root where `unshare` and `setpriv` exist, or pass --no-sandbox to grade "
                "without isolation (every row then says so)")


def _python_paths() -> list[Path]:
    """The Python environment, its base interpreter and the library."""
    return [Path(sys.prefix), Path(sys.base_prefix), Path(sys.executable).resolve().parent.parent, LIBRARY, RUNNER]


def _read_only_paths() -> list[Path]:
    """What the kernel must see: the system, the Python environment, the library."""
    paths = [Path(p) for p in ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/etc")]
    paths += _python_paths()[:-1]
    seen, kept = set(), []
    for path in paths:
        if path.exists() and path not in seen:
            seen.add(path)
            kept.append(path)
    return kept


def matplotlib_cache() -> Path:
    """A folder with matplotlib's font cache, built once per user: copied into each sandbox (course/grading/kernel_runner.py),
    it saves every kernel the second or two of building it afresh."""
    folder = Path(tempfile.gettempdir()) / f"rooflab-matplotlib-{os.geteuid()}"
    if not list(folder.glob("fontlist*.json")):
        folder.mkdir(mode=0o755, exist_ok=True)
        subprocess.run([sys.executable, "-c", "import matplotlib.font_manager"], capture_output=True,
                       env=dict(os.environ, MPLCONFIGDIR=str(folder)), timeout=120)
        for path in folder.iterdir():
            path.chmod(0o644)
    return folder


def _environment(home: str) -> dict[str, str]:
    return {
        "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
        "HOME": home, "TMPDIR": "/tmp", "LANG": "C.UTF-8",
        "MPLBACKEND": "module://matplotlib_inline.backend_inline", "MPLCONFIGDIR": f"{home}/.matplotlib",
        "IPYTHONDIR": f"{home}/.ipython", "JUPYTER_RUNTIME_DIR": f"{home}/.jupyter",
        "JUPYTER_PLATFORM_DIRS": "1", "PYTHONDONTWRITEBYTECODE": "1", "PYDEVD_DISABLE_FILE_VALIDATION": "1",
        "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
    }


HOME = "/sandbox"


def _bwrap_prefix(limits: SandboxLimits, library: Path | None = None) -> list[str]:
    command = ["bwrap", "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-net", "--unshare-ipc",
               "--unshare-uts", "--unshare-cgroup-try", "--hostname", "sandbox"]
    if os.geteuid() != 0:
        command += ["--unshare-user"]  # an unprivileged grader gets its isolation from a user namespace
    made: set[Path] = {Path("/tmp"), Path("/dev"), Path("/proc")}  # mounted below, before any bind

    def parents(path: Path) -> list[str]:
        # bwrap makes missing mount points 0700 and root-owned: open them to the sandbox's uid.
        args = []
        for parent in reversed(path.parents):
            if parent != Path("/") and parent not in made:
                made.add(parent)
                args += ["--perms", "0755", "--dir", str(parent)]
        return args

    # The private /tmp first: a Python environment that lives under /tmp is then bound on top of it, not hidden.
    command += ["--proc", "/proc", "--dev", "/dev",
                "--perms", "1777", "--size", str(limits.disk_bytes), "--tmpfs", "/tmp",
                "--perms", "1777", "--size", str(limits.disk_bytes), "--tmpfs", "/dev/shm"]
    for path in _read_only_paths():
        if path.is_symlink():
            command += ["--symlink", os.readlink(path), str(path)]
        else:
            # The assignment's copy of the library takes the library's place (course/grading/library_copy.py).
            source = library if library is not None and path == LIBRARY else path
            command += parents(path) + ["--ro-bind", str(source), str(path)]
    command += ["--perms", "1777", "--size", str(limits.disk_bytes), "--tmpfs", HOME,
                "--perms", "0755", "--dir", "/grader",
                "--ro-bind", str(RUNNER), "/grader/kernel_runner.py",
                "--ro-bind", str(matplotlib_cache()), "/grader/matplotlib", "--chdir", HOME, "--clearenv"]
    for key, value in (_environment(HOME) | {"ROOFLAB_MATPLOTLIB_CACHE": "/grader/matplotlib"}).items():
        command += ["--setenv", key, value]
    command += ["--"]
    return command


def _unshare_prefix(hide: list[Path], limits: SandboxLimits, library: Path | None = None) -> list[str]:
    """Namespaces with util-linux alone; the course's folders are covered by empty tmpfs mounts.

    A folder that holds the Python environment or the library cannot be hidden (the kernel needs them).
    """
    needed = [p.resolve() for p in _python_paths()]
    covered = [p for p in hide if p.exists() and not any(n == p.resolve() or p.resolve() in n.parents
                                                          for n in needed)]
    # The library's copy first: its folder (under /tmp) is about to be covered.
    mounts = [f"mount --bind {json.dumps(str(library))} {json.dumps(str(LIBRARY))}"] if library is not None else []
    mounts += [f"mount -t tmpfs -o size=1m,mode=0755 none {json.dumps(str(p))}" for p in covered]
    mounts += [f"mkdir -p {folder} && mount -t tmpfs -o size={limits.disk_bytes},mode=1777 none {folder}"
               for folder in ("/tmp", "/dev/shm", HOME)]
    script = " && ".join(mounts) + f" && cd {HOME} && exec \"$@\""
    env = " ".join(f"{k}={json.dumps(v)}" for k, v in
                   (_environment(HOME) | {"ROOFLAB_MATPLOTLIB_CACHE": str(matplotlib_cache())}).items())
    return ["unshare", "--mount", "--pid", "--fork", "--kill-child", "--mount-proc", "--net", "--ipc", "--uts",
            "sh", "-c", f"export {env}; {script}", "sandbox"]


def count_user_processes(uid: int) -> int:
    """How many processes ``uid`` runs now (RLIMIT_NPROC counts them all, so a cap adds to this)."""
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                count += os.stat(f"/proc/{entry}").st_uid == uid
            except OSError:
                pass
    return count


def command(kind: str, limits: SandboxLimits, hide: list[Path] = (), library: Path | None = None) -> list[str]:
    """The full command line that starts the runner under ``kind`` of isolation.

    ``library``: a folder to show in place of ``lib/`` (the assignment's copy); None shows the library itself.
    """
    nproc = limits.processes
    drop: list[str] = []
    if os.geteuid() == 0 and kind != NO_SANDBOX:
        # A uid of its own, so that the process limit counts this sandbox alone and no
        # signal reaches the grader; 61000 + pid keeps parallel workers apart.
        uid = 61000 + os.getpid() % 30000
        drop = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--inh-caps=-all",
                "--bounding-set=-all", "--"]
    elif os.geteuid() != 0:
        nproc = count_user_processes(os.geteuid()) + limits.processes
    limit = ["prlimit", f"--as={limits.memory_bytes}", f"--nproc={nproc}", f"--fsize={limits.file_bytes}",
             "--core=0", "--"]
    if kind == "bwrap":
        return _bwrap_prefix(limits, library) + limit + drop + [sys.executable, "/grader/kernel_runner.py"]
    if kind == "unshare":
        return _unshare_prefix(list(hide), limits, library) + limit + drop + [sys.executable, str(RUNNER)]
    return limit + [sys.executable, str(RUNNER)]


@dataclass
class Lost:
    """A cell that the grader had to skip, and why."""

    index: int
    why: str


@dataclass
class Sandbox:
    """One submission's kernel in a sandbox: run the notebook, then answer requests.

    ``run()`` returns the executed notebook; ``request()`` returns the runner's
    reply as parsed JSON (still untrusted).  A hang or a crash costs the cell or
    request that caused it: the sandbox is killed and a fresh one replays the
    notebook without the lost cells.
    """

    notebook: dict
    kind: str = "bwrap"
    limits: SandboxLimits = field(default_factory=SandboxLimits)
    hide: list[Path] = field(default_factory=list)
    library: Path | None = None  # the assignment's copy of the library, shown in place of lib/
    lost: list[Lost] = field(default_factory=list)
    restarts: int = 0
    _process: subprocess.Popen | None = None
    _scratch: tempfile.TemporaryDirectory | None = None
    _lines: queue.Queue | None = None
    executed: dict | None = None
    started_seconds: list[float] = field(default_factory=list)

    # -- the process ------------------------------------------------------
    def _start(self) -> None:
        started = time.perf_counter()
        home, folder = HOME, "/"
        if self.kind == NO_SANDBOX:
            # No private tmpfs here: a folder of its own, so that runners side by side keep their kernels'
            # sockets and files apart.
            self._scratch = tempfile.TemporaryDirectory(prefix="rooflab-grade-")
            home = folder = self._scratch.name
        self._process = subprocess.Popen(
            command(self.kind, self.limits, self.hide, self.library), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, start_new_session=True, env=self._env(home),
            cwd=folder, close_fds=True)
        self.started_seconds.append(time.perf_counter() - started)
        self._lines = queue.Queue()
        threading.Thread(target=self._read, args=(self._process.stdout, self._lines), daemon=True).start()
        skip = sorted(l.index for l in self.lost)
        self._send({"notebook": self.notebook, "skip": skip, "timeout": self.limits.cell_seconds})

    def _env(self, home: str) -> dict[str, str]:
        env = _environment(home) | {"PATH": os.environ["PATH"]}
        if self.kind == NO_SANDBOX and self.library is not None:
            env["PYTHONPATH"] = str(self.library)  # ahead of the editable install's finder
        return env

    @staticmethod
    def _read(stream, lines: queue.Queue) -> None:
        try:
            while True:
                line = stream.readline(LINE_LIMIT)
                if not line:
                    break
                if not line.endswith(b"\n"):
                    lines.put({"event": "garbage", "why": f"a line of more than {LINE_LIMIT} bytes"})
                    break
                try:
                    message = json.loads(line)
                except ValueError:
                    message = {"event": "garbage", "why": "a line that is not JSON"}
                lines.put(message if isinstance(message, dict) else {"event": "garbage", "why": "not an object"})
        except (OSError, ValueError):
            pass
        lines.put(None)  # end of the line: the runner stopped

    def _send(self, message: dict) -> bool:
        try:
            self._process.stdin.write(json.dumps(message).encode() + b"\n")
            self._process.stdin.flush()
            return True
        except (BrokenPipeError, OSError, ValueError):
            return False

    def _next(self, timeout: float):
        """The next message, None at the end of the line, or "timeout"."""
        try:
            return self._lines.get(timeout=timeout)
        except queue.Empty:
            return "timeout"

    def close(self) -> None:
        """Kill the sandbox and everything in it."""
        if self._process is None:
            return
        try:
            os.killpg(self._process.pid, 9)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self._process.kill()
            self._process.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            pass
        for stream in (self._process.stdin, self._process.stdout):
            try:
                stream.close()
            except OSError:
                pass
        self._process = None
        if self._scratch is not None:  # after the kill: nothing writes there any more
            self._scratch.cleanup()
            self._scratch = None

    # -- running the notebook --------------------------------------------
    def run(self) -> dict:
        """Execute the notebook; return it with outputs (lost cells noted in ``self.lost``)."""
        margin = 5.0 + self.limits.cell_seconds
        while True:
            self._start()
            current = None
            while True:
                message = self._next(margin if current is not None else 60.0)
                if isinstance(message, dict) and message.get("event") == "cell":
                    index = message.get("index")
                    if isinstance(index, int) and 0 <= index < len(self.notebook["cells"]):
                        current = index
                    continue
                if isinstance(message, dict) and message.get("event") == "lost":
                    died = message.get("why") == "DeadKernelError"
                    message = None if died else "timeout"
                if isinstance(message, dict) and message.get("event") == "executed":
                    executed = message.get("notebook")
                    if _same_shape(executed, self.notebook):
                        self.executed = executed
                        return executed
                    message = None
                # A hang (no line), the end of the line, or garbage: this cell is lost.
                self.close()
                if current is None:
                    raise SandboxError("the sandbox stopped before running any cell"
                                       + (f" ({message['why']})" if isinstance(message, dict) else ""))
                why = (f"did not finish within {self.limits.cell_seconds:g} s" if message == "timeout"
                       else "stopped its kernel (it died or was killed)")
                self.lost.append(Lost(current, why))
                self.restarts += 1
                if self.restarts > self.limits.restarts:
                    raise SandboxError(f"the notebook crashed or hung {self.restarts} times; grading stopped")
                break

    def _replay(self) -> bool:
        """A fresh sandbox with the notebook run again (lost cells skipped); False if that fails."""
        self.close()
        self.restarts += 1
        if self.restarts > self.limits.restarts:
            return False
        self._start()
        deadline = time.monotonic() + 60 + self.limits.cell_seconds * len(self.notebook["cells"])
        while time.monotonic() < deadline:
            message = self._next(self.limits.cell_seconds + 5)
            if isinstance(message, dict) and message.get("event") == "cell":
                continue
            if isinstance(message, dict) and message.get("event") == "executed":
                return True
            break
        self.close()
        return False

    def request(self, message: dict) -> dict:
        """Send one request to the kernel; return its reply (untrusted) or a failure reply."""
        if self._process is None and not self._replay():
            return {"ok": False, "error": "GraderError", "message": "the kernel could not be restarted"}
        if self._send(message):
            reply = self._next(self.limits.cell_seconds + 5)
            if isinstance(reply, dict) and "event" not in reply:
                return reply
        else:
            reply = None
        self.close()  # hung or died while answering: the next request gets a fresh kernel
        why = (f"did not return within {self.limits.cell_seconds:g} s" if reply == "timeout"
               else "stopped the kernel while it ran")
        return {"ok": False, "error": "TimeoutError" if reply == "timeout" else "KernelDied", "message": why}


def _same_shape(executed, original: dict) -> bool:
    """The runner's notebook has the same cells (ids and types) as the one sent."""
    try:
        cells = executed["cells"]
        return len(cells) == len(original["cells"]) and all(
            a.get("cell_type") == b.get("cell_type") and a.get("id") == b.get("id")
            for a, b in zip(cells, original["cells"]))
    except (TypeError, KeyError, AttributeError):
        return False
