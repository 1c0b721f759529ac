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
from course.grading.nbgrader_run import ROOT
from tests.sandbox_probes import PROBES, _notebook

# slow; in one group with tests/test_kernel_runner.py, which reads the same probed sandbox (tests/conftest.py)
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("slow:probed_sandbox")]

def test_the_kernel_is_unprivileged_offline_and_blind(probed_sandbox):
    printed, _, _ = probed_sandbox
    assert printed["uid"] != "0"
    assert printed["source"] == "False"
    assert printed["network"] == "refused"
    assert printed["write_outside"] == "refused"
    assert not (ROOT / "sandbox-escape.txt").exists()


def test_writes_and_processes_are_capped(probed_sandbox):
    printed, _, _ = probed_sandbox
    assert int(printed["disk_cap"]) < 64  # MiB: the private folder's cap
    assert int(printed["processes"]) < 32


def test_no_process_survives_the_sandbox(probed_sandbox):
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
    if shutil.which("bwrap") is None:
        # CI installs bubblewrap and must test this path; elsewhere say what is missing.
        (pytest.fail if os.environ.get("CI") else pytest.skip)("no bubblewrap on this machine: " + sandbox.INSTALL_HINT)
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
