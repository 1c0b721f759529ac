"""How the course's kernels talk to whoever started them: Unix sockets (IPC), not TCP.

Over TCP on localhost every kernel warns "Kernel is running over TCP without
encryption" and any local user could connect to it.  Over IPC the kernel binds
Unix sockets named ``<prefix>-1`` ... ``<prefix>-5``, which only their owner can
use, and which the kernel manager removes when the kernel shuts down.

The prefix must be an absolute path (the kernel runs in the notebook's folder,
its client in another) and unique per process (graders run side by side and
pick free socket numbers by looking at the file system).  One process starts
its kernels one after another, as nbgrader and ``course build`` do.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import sys
import tempfile
from pathlib import Path


def ipc_prefix() -> str:
    """Where the kernels of this process put their sockets: ``/tmp/rooflab-kernel-<pid>-<random>``
    (the random part for processes in other PID namespaces that share /tmp)."""
    return os.path.join(tempfile.gettempdir(), f"rooflab-kernel-{os.getpid()}-{secrets.token_hex(4)}")


def kernel_config():
    """A traitlets Config for nbclient or nbgrader objects that start kernels in this process."""
    from traitlets.config import Config

    config = Config()
    config.KernelManager.transport = "ipc"
    config.KernelManager.ip = ipc_prefix()
    return config


# jupyter_client interrupts a kernel before it shuts it down.  A notebook that ends with a widget leaves the
# kernel handling nbclient's last widget messages at that moment, and the kernel then logs
# "KeyboardInterrupt caught in kernel".  One more cell, which does nothing, is answered only after those
# messages (a kernel handles its requests in order), so the kernel is idle when it is interrupted.
SETTLE = "pass  # added by the course while it runs the notebook: the kernel ends idle"


def settled(notebook):
    """``notebook`` (an nbformat node) with the do-nothing last cell appended; remove it with ``unsettled``."""
    import nbformat

    notebook.cells.append(nbformat.v4.new_code_cell(SETTLE, id="course-settle"))
    return notebook


def unsettled(notebook):
    """``notebook`` without the cell ``settled`` appended."""
    if notebook.cells and notebook.cells[-1].get("id") == "course-settle":
        notebook.cells.pop()
    return notebook


# Two things a kernel (or its client) can write on the stderr it inherited from us as it shuts down, after the
# notebook ran in full, with nothing lost: ipykernel 7.4's traceback of a control stream it flushes after its
# shutdown closed it (the race ipykernel#1518 fixed for IOPub, on the control stream), and libzmq's assertion of a
# poll that found a socket already closed (zeromq/libzmq#1307, #3715), which aborts the process that is ending.
# A kernel that dies while it still has work fails its run (nbclient's DeadKernelError), which says so itself.
_RACE_START = "ERROR:tornado.general:Uncaught exception in ZMQStream callback"
_RACE_END = "zmq.error.ZMQError: Socket operation on non-socket"
_ZMQ_ASSERTION = re.compile(r"^Assertion failed: pfd\.revents & POLLIN \(src/signaler\.cpp:\d+\)$")
_LOG_LINE = re.compile(r"^(?:[A-Z]+:[\w.]+:|\[[A-Z] )")  # where another log record begins


def without_shutdown_noise(text: str) -> str:
    """``text`` (what kernels wrote on stderr) less the two shutdown messages above; everything else as it is."""
    lines, kept, i = text.splitlines(keepends=True), [], 0
    while i < len(lines):
        if _ZMQ_ASSERTION.match(lines[i].rstrip("\n")):
            i += 1
            continue
        end = _race_end(lines, i)
        if end is None:
            kept.append(lines[i])
            i += 1
        else:
            i = end + 1
    return "".join(kept)


def _race_end(lines: list[str], start: int) -> int | None:
    """The index of the last line of the race's traceback that begins at ``lines[start]``, or None if none does."""
    if lines[start].rstrip("\n") != _RACE_START:
        return None
    for j in range(start + 1, min(len(lines), start + 80)):
        line = lines[j].rstrip("\n")
        if line == _RACE_END:
            return j
        if _LOG_LINE.match(line):  # another record begins: this one did not end as the race does
            return None
    return None


def _pass_on(raw: bytes) -> None:
    kept = without_shutdown_noise(raw.decode("utf-8", errors="replace"))
    if kept:
        sys.stderr.write(kept)
        sys.stderr.flush()


@contextlib.contextmanager
def stderr_without_shutdown_noise():
    """For its block, this process's stderr (fd 2, which the kernels it starts inherit) goes to a file; at the
    end, what was written there is passed on to the real stderr, less the shutdown noise.  For a process that
    runs one thing at a time (``course check``): fd 2 is the whole process's."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as caught:
        os.dup2(caught.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            caught.seek(0)
            _pass_on(caught.read())


def stderr_to_folder(folder: str) -> None:
    """A pool worker's initializer: its stderr, and its kernels', go to a file of its own in ``folder`` for the rest
    of its life (its own end included, where the noise can come too); :func:`pass_on_stderr` reads them."""
    handle = open(os.path.join(folder, f"{os.getpid()}.stderr"), "wb", buffering=0)
    os.dup2(handle.fileno(), 2)


def pass_on_stderr(folder: str) -> None:
    """What the workers of :func:`stderr_to_folder` wrote, less the shutdown noise, to this process's stderr."""
    for path in sorted(Path(folder).glob("*.stderr")):
        _pass_on(path.read_bytes())
