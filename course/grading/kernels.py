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

import os
import secrets
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
