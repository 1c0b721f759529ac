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


# ipykernel 7.4 can log a traceback as it shuts down: after the shutdown request it flushes its control stream,
# which the shutdown has just closed (the same race that ipykernel#1518 fixed for IOPub, on the control stream).
# The notebook ran in full and nothing is lost, but the kernel writes it on the stderr it inherited from us.
_RACE_START = "ERROR:tornado.general:Uncaught exception in ZMQStream callback"
_RACE_END = "zmq.error.ZMQError: Socket operation on non-socket"
_LOG_LINE = re.compile(r"^(?:[A-Z]+:[\w.]+:|\[[A-Z] )")  # where another log record begins


def without_shutdown_race(text: str) -> str:
    """``text`` (a kernel's stderr) less each traceback of the shutdown race above; everything else kept as is."""
    lines, kept, i = text.splitlines(keepends=True), [], 0
    while i < len(lines):
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


@contextlib.contextmanager
def kernel_stderr_without_shutdown_race():
    """For its block, this process's stderr (fd 2, which the kernels it starts inherit) goes to a file; at the
    end, what was written there is passed on to the real stderr, less the shutdown race's tracebacks.
    For a process that runs one thing at a time (``course build``'s notebook workers): the fd is the process's."""
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
            kept = without_shutdown_race(caught.read().decode("utf-8", errors="replace"))
            if kept:
                sys.stderr.write(kept)
                sys.stderr.flush()
