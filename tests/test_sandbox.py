"""The sandbox on its own: what a kernel inside it can and cannot do, and how a hang or a crash is survived."""

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from course.grading import sandbox
from course.nbgrader_run import ROOT

pytestmark = pytest.mark.slow

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


@pytest.fixture(scope="module")
def ran():
    kind = sandbox.isolation()
    if kind == sandbox.NO_SANDBOX:
        # CI installs bubblewrap and must test the sandbox for real; elsewhere say what is missing.
        (pytest.fail if os.environ.get("CI") else pytest.skip)("no sandbox on this machine: " + sandbox.INSTALL_HINT)
    limits = sandbox.SandboxLimits(cell_seconds=4, disk_bytes=64 * 2**20, processes=32)
    box = sandbox.Sandbox(_notebook(PROBES), kind=kind, limits=limits)
    try:
        executed = box.run()
        reply = box.request({"op": "describe", "names": ["children", "written", "nothing_here"]})
    finally:
        box.close()
    return _printed(executed), box, reply


def test_the_kernel_is_unprivileged_offline_and_blind(ran):
    printed, _, _ = ran
    assert printed["uid"] != "0"
    assert printed["source"] == "False"
    assert printed["network"] == "refused"
    assert printed["write_outside"] == "refused"
    assert not (ROOT / "sandbox-escape.txt").exists()


def test_writes_and_processes_are_capped(ran):
    printed, _, _ = ran
    assert int(printed["disk_cap"]) < 64  # MiB: the private folder's cap
    assert int(printed["processes"]) < 32


def test_a_hang_and_a_crash_cost_their_own_cell_only(ran):
    printed, box, _ = ran
    lost = {PROBES_ORDER[l.index]: l.why for l in box.lost}
    assert set(lost) == {"hang", "crash"}
    assert "did not finish within 4 s" in lost["hang"]
    assert printed["after"] == "still here"


PROBES_ORDER = list(PROBES)


def test_requests_answer_with_plain_data(ran):
    _, _, reply = ran
    assert reply["ok"] is True
    assert reply["names"]["nothing_here"] == {"kind": "missing"}
    assert reply["names"]["written"]["kind"] == "value"


def test_no_process_survives_the_sandbox(ran):
    # The sandbox's uid is 61000 + the grader's pid (course/grading/sandbox.py); other graders may run beside this test.
    # The kernel reaps a dead PID namespace's processes asynchronously: allow it time on a busy machine.
    uid = 61000 + os.getpid() % 30000 if os.geteuid() == 0 else None
    for _ in range(200):
        leftovers = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    owner = os.stat(f"/proc/{entry}").st_uid
                    command = open(f"/proc/{entry}/cmdline", "rb").read()
                    state = open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()[0]
                except OSError:
                    continue
                # A zombie runs nothing: it waits for this machine's init to reap it, which may take a while.
                if state != "Z" and (owner == uid or command == b"sleep\x0030\x00"):
                    leftovers.append(entry)
        if not leftovers:
            break
        time.sleep(0.1)
    assert leftovers == []


@pytest.mark.skipif(os.geteuid() != 0, reason="switching to an unprivileged user needs root")
def test_the_user_namespace_path_as_an_unprivileged_grader():
    """The grader itself as `nobody`: bubblewrap then isolates through a user namespace."""
    tmp_path = Path(tempfile.mkdtemp(prefix="rooflab-nobody-"))
    home = Path.home()
    mode = stat.S_IMODE(home.stat().st_mode)
    # The interpreter may live under root's home (pyenv): let `nobody` through it, for this test only.
    home.chmod(mode | 0o001)
    try:
        script = tmp_path / "run.py"
        script.write_text(textwrap.dedent(f"""\
            import json, sys
            sys.path.insert(0, {str(ROOT)!r})
            from course.grading import sandbox
            kind = sandbox.isolation()
            box = sandbox.Sandbox(json.loads({json.dumps(json.dumps(_notebook({k: PROBES[k] for k in ("uid", "source", "network", "hang", "after")})))}),
                                  kind=kind, limits=sandbox.SandboxLimits(cell_seconds=4))
            executed = box.run()
            box.close()
            printed = {{c["id"]: "".join(o.get("text", "") for o in c["outputs"]).strip() for c in executed["cells"]}}
            print(json.dumps({{"kind": kind, "printed": printed, "lost": [l.index for l in box.lost]}}))
            """))
        tmp_path.chmod(0o777)
        script.chmod(0o644)
        done = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable,
                               str(script)], capture_output=True, text=True, timeout=180,
                              env={"PATH": os.environ["PATH"], "HOME": str(tmp_path)}, cwd=tmp_path)
    finally:
        home.chmod(mode)
        shutil.rmtree(tmp_path, ignore_errors=True)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["kind"] == "bwrap"
    assert result["printed"]["source"] == "False" and result["printed"]["network"] == "refused"
    assert result["printed"]["after"] == "still here" and result["lost"] == [3]
