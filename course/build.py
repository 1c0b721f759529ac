"""`course build`: release/ and solutions/ regenerated from source/, then checked.

release/ is what nbgrader's generate_assignment makes of source/ (solutions
and hidden tests removed); solutions/ is source/ executed top to bottom with
its outputs.  Then the checks an instructor would otherwise do by hand: the
release hides what it must, the reference passes every test, the blank
release fails every test.
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from .nbgrader_run import RELEASE, SOLUTIONS, SOURCE, assignments, nbgrader, notebooks, read_notebook, write_notebook

HIDDEN = re.compile(r"### BEGIN HIDDEN TESTS\n(.*?)### END HIDDEN TESTS", re.S)
ASSERTS = re.compile(r"check\.(quantity|number|choice)\(|\bassert\b")
MARKERS = ("### BEGIN SOLUTION", "### END SOLUTION", "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS")


class BuildError(RuntimeError):
    """A source notebook, or what nbgrader made of it, breaks a course rule."""


@dataclass
class BuildReport:
    built: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _source_text(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def check_source(path: Path) -> list[str]:
    """Course rules for a source notebook: no outputs, stable unique ids, unique grade ids."""
    notebook = read_notebook(path)
    problems, ids, grade_ids = [], set(), set()
    for index, cell in enumerate(notebook["cells"]):
        where = f"{path.name} cell {index}"
        if cell.get("outputs") or cell.get("execution_count"):
            problems.append(f"{where} has outputs: clear them before committing")
        cell_id = cell.get("id")
        if not cell_id or re.fullmatch(r"[0-9a-f]{8}(-[0-9a-f]{4}){0,4}.*", cell_id):
            problems.append(f"{where} needs a descriptive id, not {cell_id!r}")
        if cell_id in ids:
            problems.append(f"{where} repeats the id {cell_id!r}")
        ids.add(cell_id)
        meta = cell.get("metadata", {}).get("nbgrader")
        if meta:
            grade_id = meta.get("grade_id")
            if grade_id in grade_ids:
                problems.append(f"{where} repeats the grade_id {grade_id!r}")
            grade_ids.add(grade_id)
    return problems


def check_release(source: Path, release: Path) -> list[str]:
    """The release must not contain markers, hidden tests or reference solutions."""
    problems = []
    released = release.read_text(encoding="utf-8")
    for marker in MARKERS:
        if marker in released:
            problems.append(f"{release.name} still contains {marker!r}")
    texts = [_source_text(cell) for cell in read_notebook(source)["cells"]]
    # Lines that also occur outside hidden blocks (a shared idiom) may appear in the release.
    visible = {line.strip() for text in texts for line in HIDDEN.sub("", text).splitlines()}
    for text in texts:
        for block in HIDDEN.findall(text):
            for line in block.splitlines():
                line = line.strip()
                if len(line) > 25 and line not in visible and line in released:
                    problems.append(f"{release.name} shows a hidden-test line: {line[:60]!r}")
    return problems


def execute(path: Path, timeout: int = 60) -> dict:
    """Run a notebook top to bottom in its own folder and return it with outputs."""
    import nbclient
    import nbformat

    notebook = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        notebook, timeout=timeout, kernel_name="python3", record_timing=False,
        resources={"metadata": {"path": str(path.parent)}},
    )
    client.execute()
    return _stable(nbformat.from_dict(notebook))


def _stable(notebook: dict) -> dict:
    """Drop what changes from run to run (widget ids and state), so solutions/ diffs only on content."""
    notebook = dict(notebook)
    notebook["metadata"] = {k: v for k, v in notebook["metadata"].items() if k != "widgets"}
    for cell in notebook["cells"]:
        cell.get("metadata", {}).pop("execution", None)
        if "outputs" in cell:
            cell["outputs"] = _merge_streams(cell["outputs"])
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if "application/vnd.jupyter.widget-view+json" in data:
                data.pop("application/vnd.jupyter.widget-view+json")
                data["text/plain"] = "[interactive widget: run the notebook to use it]"
    return notebook


def _merge_streams(outputs: list) -> list:
    """Join consecutive prints to the same stream: how the kernel splits them depends on timing."""
    merged = []
    for output in outputs:
        previous = merged[-1] if merged else None
        if (output.get("output_type") == "stream" and previous is not None
                and previous.get("output_type") == "stream" and previous.get("name") == output.get("name")):
            previous["text"] = "".join(previous["text"]) + "".join(output["text"])
        else:
            merged.append(output)
    return merged


def validate(path: Path, invert: bool = False) -> dict:
    """nbgrader's Validator: ``{}`` when every test passes (or, inverted, when every test fails)."""
    from nbgrader.validator import Validator

    return Validator(invert=invert).validate(str(path))


def build(selected: list[str] | None = None, validate_notebooks: bool = True, log=print) -> BuildReport:
    """Regenerate release/ and solutions/ for the selected assignments and check them."""
    report = BuildReport()
    with tempfile.TemporaryDirectory() as scratch:
        db = f"sqlite:///{Path(scratch) / 'build.db'}"
        for assignment in selected or assignments():
            sources = notebooks(assignment)
            if not sources:
                raise BuildError(f"no notebooks in {SOURCE / assignment}")
            for path in sources:
                report.problems += check_source(path)
            log(f"{assignment}: generate_assignment")
            done = nbgrader("generate_assignment", assignment, "--force", f"--CourseDirectory.db_url={db}")
            if done.returncode != 0:
                raise BuildError(f"generate_assignment {assignment} failed:\n{done.stdout}{done.stderr}")
            for path in sources:
                released = RELEASE / assignment / path.name
                if not released.exists():
                    raise BuildError(f"generate_assignment wrote no {released}")
                report.problems += check_release(path, released)
                log(f"{assignment}: executing {path.name} into solutions/")
                write_notebook(execute(path), SOLUTIONS / assignment / path.name)
                if validate_notebooks:
                    log(f"{assignment}: validating the reference and the blank release")
                    failed = validate(path)
                    if failed:
                        report.problems.append(f"{path.name}: the reference fails its own tests: {_short(failed)}")
                    # Hidden-only test cells are empty in the release, so they pass there; they are
                    # graded with their tests restored (see tests/test_grading.py).
                    passed = [c for c in validate(released, invert=True).get("passed", [])
                              if ASSERTS.search(c["source"])]
                    if passed:
                        report.problems.append(f"{released.name}: the blank release passes some tests: {_short(passed)}")
            report.built.append(assignment)
    return report


def _short(result: dict) -> str:
    return str(result)[:2000]
