"""The probe notebook that tests/test_sandbox.py and tests/test_kernel_runner.py run once in a sandbox
(tests/conftest.py's ``probed_sandbox``): what a kernel may and may not do, a hang, a crash, and a cell after them."""

import textwrap

from course.grading.nbgrader_run import ROOT

PROBES = {
    "uid": "import os; print(os.getuid())",
    "source": "import os; print(os.path.exists(%r))" % str(ROOT / "source"),
    "network": textwrap.dedent("""\
        import socket
        try:
            socket.create_connection(("127.0.0.1", 22), timeout=1); print("connected")
        except OSError as error:
            print("refused")"""),
    "write_outside": textwrap.dedent("""\
        try:
            open(%r, "w").write("x"); print("wrote")
        except OSError:
            print("refused")""") % str(ROOT / "sandbox-escape.txt"),
    "disk_cap": textwrap.dedent("""\
        written = 0
        try:
            with open("fill.bin", "wb") as handle:
                for _ in range(400):
                    handle.write(b"x" * 2**20); handle.flush(); written += 1
        except OSError:
            pass
        print(written)"""),
    "processes": textwrap.dedent("""\
        import subprocess
        children = []
        try:
            for _ in range(200):
                children.append(subprocess.Popen(["sleep", "30"]))
        except OSError:
            pass
        print(len(children))
        for child in children:
            child.kill()"""),
    "hang": "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass",
    "crash": "import os\nos._exit(3)",
    "after": "print('still here')",
}


def _notebook(probes: dict) -> dict:
    cells = [{"cell_type": "code", "id": name, "metadata": {}, "source": code, "outputs": [],
              "execution_count": None} for name, code in probes.items()]
    return {"cells": cells, "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                        "language": "python"}}, "nbformat": 4, "nbformat_minor": 5}


def _printed(notebook: dict) -> dict:
    return {c["id"]: "".join(o.get("text", "") for o in c["outputs"] if o.get("output_type") == "stream").strip()
            for c in notebook["cells"]}


PROBES_ORDER = list(PROBES)
