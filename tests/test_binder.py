"""Binder gets what the tests ran: a clean environment from .binder/ alone runs the release notebook."""

import os
import re
import subprocess
import sys

import pytest

from course.nbgrader_run import RELEASE, ROOT

BINDER = ROOT / ".binder"


def _pins(lines):
    return {re.sub(r"[-_.]+", "-", line.split("==")[0].lower()): line.split("==")[1].strip()
            for line in lines if "==" in line and not line.startswith("#")}


def test_pyproject_pins_match_the_binder_lock():
    lock = _pins((BINDER / "requirements.txt").read_text().splitlines())
    project = (ROOT / "pyproject.toml").read_text()
    for name, version in re.findall(r'"([A-Za-z0-9_.-]+)==([^"]+)"', project):
        assert lock[re.sub(r"[-_.]+", "-", name.lower())] == version, name
    assert (BINDER / "runtime.txt").read_text().strip() == f"python-{sys.version_info.major}.{sys.version_info.minor}"
    assert (BINDER / "postBuild").read_text().startswith("#!/bin/bash\n")
    assert os.access(BINDER / "postBuild", os.X_OK)


@pytest.mark.slow
def test_a_clean_binder_environment_runs_the_release(tmp_path):
    venv = tmp_path / "binder"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    env = dict(os.environ, PATH=f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}", PIP_DISABLE_PIP_VERSION_CHECK="1")
    env.pop("PYTHONPATH", None)
    run = lambda *command: subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)  # noqa: E731
    installed = run(str(python), "-m", "pip", "install", "--quiet", "-r", str(BINDER / "requirements.txt"))
    assert installed.returncode == 0, installed.stderr[-2000:]
    built = run("bash", str(BINDER / "postBuild"))
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]

    # exactly the pinned environment, plus rooflab itself
    frozen = run(str(python), "-m", "pip", "freeze", "--exclude-editable").stdout.splitlines()
    assert _pins(frozen) == _pins((BINDER / "requirements.txt").read_text().splitlines())
    assert run(str(python), "-m", "pip", "check").returncode == 0

    extensions = run(str(venv / "bin" / "jupyter"), "labextension", "list")
    disabled = extensions.stdout + extensions.stderr
    for plugin in ("formgrader", "course-list", "create-assignment", "assignment-list", "menu"):
        assert f"@jupyter/nbgrader:{plugin}" in disabled.split("Disabled extensions:")[1]

    notebook = next((RELEASE / "01_two_phases").glob("*.ipynb"))
    script = f"""
import json, nbformat, nbclient
nb = nbformat.read({str(notebook)!r}, as_version=4)
first_answer = next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {{}}).get("solution"))
nb.cells = [c for c in nb.cells[:first_answer] if c.cell_type == "code"]
nbclient.NotebookClient(nb, timeout=60, kernel_name="python3").execute()
print(json.dumps([o.get("text", "") for c in nb.cells for o in c.outputs]))
"""
    executed = run(str(python), "-c", script)
    assert executed.returncode == 0, executed.stderr[-3000:]
    assert "Llama-3-8B has 8.03 billion parameters" in executed.stdout


def test_students_see_no_nbgrader_menu_or_panels():
    post_build = (BINDER / "postBuild").read_text()
    plugins = re.search(r"for plugin in ([^;]+);", post_build).group(1).split()
    assert set(plugins) == {"formgrader", "course-list", "create-assignment", "assignment-list", "menu"}
    readme = (ROOT / "README.md").read_text()
    self_learners = readme[readme.index("## Self-learners"):readme.index("## Layout")]
    commands = re.findall(r"^course .*$", self_learners, re.M)
    assert commands and all(".venv" not in c for c in commands)  # the same command on Binder and locally
