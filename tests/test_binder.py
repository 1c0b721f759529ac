"""Binder gets what the tests ran: a clean environment from .binder/ alone runs the release notebook."""

import os
import re
import shutil
import subprocess
import sys
import tomllib

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from course.grading.nbgrader_run import RELEASE, ROOT

BINDER = ROOT / ".binder"


def _name(name):
    return re.sub(r"[-_.]+", "-", name.lower())


def _pins(lines):
    """{package: version} of ``name==version`` lines, without the packaging tools (pip, setuptools, wheel),
    which a venv brings itself and pip freeze lists or not depending on the Python."""
    pins = {_name(line.split("==")[0]): line.split("==")[1].strip()
            for line in lines if "==" in line and not line.startswith("#")}
    return {name: version for name, version in pins.items() if name not in ("pip", "setuptools", "wheel")}


# Extras the lock leaves out on purpose: PyTorch is gigabytes (a CUDA build from PyPI) and nothing in the course
# needs it; 08 uses it where a student has it installed and says so where not.
NOT_IN_THE_LOCK = {"torch"}


def _requirements():
    """Every requirement pyproject.toml names: the library's and its extras' (those the lock installs)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = [r for name, rs in project["optional-dependencies"].items() if name not in NOT_IN_THE_LOCK for r in rs]
    return [Requirement(r) for r in project["dependencies"] + extras]


def test_extras_left_out_of_the_lock_are_really_optional():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    lock = _pins((BINDER / "requirements.txt").read_text().splitlines())
    for extra in NOT_IN_THE_LOCK:
        names = {_name(Requirement(r).name) for r in project["optional-dependencies"][extra]}
        assert names and not names & set(lock), names  # not installed by make or Binder
        needed = {_name(Requirement(r).name) for r in project["dependencies"] + project["optional-dependencies"]["course"]}
        assert not names & needed, names  # and neither the library nor the course asks for it


def test_the_lock_pins_every_dependency_within_its_tested_range():
    lock = _pins((BINDER / "requirements.txt").read_text().splitlines())
    runtime = (BINDER / "runtime.txt").read_text().strip()
    assert re.fullmatch(r"python-3\.\d+", runtime)
    binder_python = {"python_version": runtime.removeprefix("python-")}
    for requirement in _requirements():
        assert requirement.marker is None or requirement.marker.evaluate(binder_python), requirement  # all on Binder
        assert _name(requirement.name) in lock, f"{requirement.name} is not in the lock"
        assert requirement.specifier.contains(lock[_name(requirement.name)]), (requirement, lock[_name(requirement.name)])
        assert any(s.operator == ">=" for s in requirement.specifier), f"{requirement} needs a tested lower bound"
        assert not any(s.operator == "==" for s in requirement.specifier), f"{requirement}: exact pins go in the lock"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert SpecifierSet(project["requires-python"]).contains(binder_python["python_version"] + ".0")
    assert (BINDER / "postBuild").read_text().startswith("#!/bin/bash\n")
    assert os.access(BINDER / "postBuild", os.X_OK)


def _binder_python():
    """An interpreter of the Python that runtime.txt names, this one if it is, else this one anyway."""
    wanted = (BINDER / "runtime.txt").read_text().strip().removeprefix("python-")
    if f"{sys.version_info.major}.{sys.version_info.minor}" == wanted:
        return sys.executable
    found = shutil.which(f"python{wanted}")
    if found and subprocess.run([found, "-c", "pass"], capture_output=True).returncode == 0:
        return found
    return sys.executable


@pytest.mark.slow
@pytest.mark.exhaustive  # a minute of pip installing 500 MB; the lock itself is checked by the test above
def test_a_clean_binder_environment_runs_the_release(tmp_path):
    venv = tmp_path / "binder"
    subprocess.run([_binder_python(), "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    env = dict(os.environ, PATH=f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}", PIP_DISABLE_PIP_VERSION_CHECK="1")
    env.pop("PYTHONPATH", None)
    run = lambda *command: subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)  # noqa: E731
    # --no-compile: byte-compiling 500 MB of packages is a third of the install, and tells nothing here
    installed = run(str(python), "-m", "pip", "install", "--quiet", "--no-compile", "-r", str(BINDER / "requirements.txt"))
    assert installed.returncode == 0, installed.stderr[-2000:]
    built = run("bash", str(BINDER / "postBuild"))
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]

    # exactly the pinned environment, plus rooflab itself
    frozen = run(str(python), "-m", "pip", "freeze", "--exclude-editable").stdout.splitlines()
    assert _pins(frozen) == _pins((BINDER / "requirements.txt").read_text().splitlines())
    assert run(str(python), "-m", "pip", "check").returncode == 0

    extensions = run(str(venv / "bin" / "jupyter"), "labextension", "list")
    listed = extensions.stdout + extensions.stderr
    for plugin in ("formgrader", "course-list", "create-assignment", "assignment-list", "menu"):
        assert f"@jupyter/nbgrader:{plugin}" in listed.split("Disabled extensions:")[1]
    servers = run(str(venv / "bin" / "jupyter"), "server", "extension", "list")
    listed = re.sub(r"\x1b\[[0-9;]*m", "", servers.stdout + servers.stderr)
    for extension in ("formgrader", "course_list", "assignment_list"):
        assert re.search(rf"nbgrader\.server_extensions\.{extension} disabled", listed), extension

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
    plugins = re.search(r"@jupyter/nbgrader:\{([^}]+)\}", post_build).group(1).split(",")
    assert set(plugins) == {"formgrader", "course-list", "create-assignment", "assignment-list", "menu"}
    readme = (ROOT / "README.md").read_text()
    self_learners = readme[readme.index("## Self-learners"):readme.index("## Layout")]
    commands = re.findall(r"^course .*$", self_learners, re.M)
    assert commands and all(".venv" not in c for c in commands)  # the same command on Binder and locally
