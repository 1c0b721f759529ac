"""`course build`: release/ and solutions/ regenerated from source/, then checked.

release/ is what nbgrader's generate_assignment makes of source/ (solutions
and hidden tests removed); solutions/ is source/ executed top to bottom with
its outputs.  Then the checks an instructor would otherwise do by hand: the
release hides what it must, the reference passes every test, the blank
release fails every test.

Everything is generated in a scratch folder first, then compared with what is
committed by meaning (``notebook_differences``): metadata, cell sources and
text outputs exactly, figures by their decoded pixels within a small
tolerance, never by PNG bytes, which differ in a few anti-aliased pixels from
machine to machine.  Only a file whose meaning changed is written, so a build
on another machine leaves a current checkout as it is, and
``build(write=False)`` (``course build --check``) says what is out of date.
"""

from __future__ import annotations

import base64
import copy
import io
import json
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from .kernels import kernel_config, settled, unsettled
from .nbgrader_run import (RELEASE, ROOT, SOLUTIONS, SOURCE, assignments, nbgrader, notebooks, read_notebook,
                           write_notebook)

HIDDEN = re.compile(r"### BEGIN HIDDEN TESTS\n(.*?)### END HIDDEN TESTS", re.S)
ASSERTS = re.compile(r"check\.(quantity|number|choice)\(|\bassert\b")
MARKERS = ("### BEGIN SOLUTION", "### END SOLUTION", "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS")


class BuildError(RuntimeError):
    """A source notebook, or what nbgrader made of it, breaks a course rule."""


@dataclass
class BuildReport:
    built: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)  # "path: what changed", for files under release/ and solutions/


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
    metadata = copy.deepcopy(dict(notebook.metadata))
    client = nbclient.NotebookClient(
        settled(notebook), timeout=timeout, kernel_name="python3", record_timing=False,
        resources={"metadata": {"path": str(path.parent)}}, config=kernel_config(),
    )
    client.execute()
    return _stable(nbformat.from_dict(unsettled(notebook)), metadata)


def _stable(notebook: dict, source_metadata: dict) -> dict:
    """Drop what changes from run to run or machine to machine (widget ids and state, the kernel's exact
    Python version in language_info), so solutions/ diffs only on content: the notebook's metadata is
    the source's."""
    notebook = dict(notebook)
    notebook["metadata"] = {k: v for k, v in source_metadata.items() if k != "widgets"}
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
    import nbformat
    from nbgrader.validator import Validator

    with tempfile.TemporaryDirectory() as folder:
        runnable = Path(folder) / path.name  # the notebook with a last cell that lets its kernel end idle
        nbformat.write(settled(nbformat.read(path, as_version=4)), runnable)
        return Validator(invert=invert, config=kernel_config()).validate(str(runnable))


def build(selected: list[str] | None = None, validate_notebooks: bool = True, log=print,
          write: bool = True) -> BuildReport:
    """Regenerate release/ and solutions/ for the selected assignments and check them.

    With ``write=False`` nothing in the repository is touched: ``report.changed`` lists what is out of date.
    """
    report = BuildReport()
    chosen = selected or assignments()
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        for assignment in chosen:
            if not notebooks(assignment):
                raise BuildError(f"no notebooks in {SOURCE / assignment}")
            for path in notebooks(assignment):
                report.problems += check_source(path)
        log(f"generate_assignment {', '.join(chosen)}")
        # One nbgrader process for all of them when it can (each process takes seconds to start).
        for pattern in ["*"] if sorted(chosen) == assignments() else chosen:
            done = nbgrader("generate_assignment", pattern, "--force", f"--CourseDirectory.source_directory={SOURCE}",
                            f"--CourseDirectory.db_url=sqlite:///{scratch / 'build.db'}", root=scratch)
            if done.returncode != 0:
                raise BuildError(f"generate_assignment {pattern} failed:\n{done.stdout}{done.stderr}")
        for assignment in chosen:
            for path in notebooks(assignment):
                released = scratch / "release" / assignment / path.name
                if not released.exists():
                    raise BuildError(f"generate_assignment wrote no {released.name}")
                report.problems += check_release(path, released)
                log(f"{assignment}: executing {path.name}")
                executed = execute(path)
                write_notebook(executed, scratch / "solutions" / assignment / path.name)
                if validate_notebooks:
                    log(f"{assignment}: checking the reference and the blank release")
                    failed = failed_tests(executed)  # the reference's own run, scored as nbgrader scores it
                    if failed:
                        report.problems.append(f"{path.name}: the reference fails its own tests: {_short(failed)}")
                    # Hidden-only test cells are empty in the release, so they pass there; they are
                    # graded with their tests restored (see tests/test_grading.py).
                    passed = [c for c in validate(released, invert=True).get("passed", [])
                              if ASSERTS.search(c["source"])]
                    if passed:
                        report.problems.append(f"{released.name}: the blank release passes some tests: {_short(passed)}")
            for fresh, committed in ((scratch / "release" / assignment, RELEASE / assignment),
                                     (scratch / "solutions" / assignment, SOLUTIONS / assignment)):
                for change in update(fresh, committed, write=write):
                    log(f"{assignment}: {'updated' if write else 'out of date:'} {change}")
                    report.changed.append(change)
            report.built.append(assignment)
    return report


def failed_tests(executed: dict) -> list[dict]:
    """The test cells of an executed notebook that nbgrader would not give full marks (an error, stderr)."""
    import nbformat
    from nbgrader.utils import determine_grade, is_grade, is_solution

    failed = []
    for cell in nbformat.from_dict(executed)["cells"]:
        if cell.cell_type == "code" and is_grade(cell) and not is_solution(cell):
            score, points = determine_grade(cell)
            if score != points:
                errors = [f"{o.get('ename')}: {o.get('evalue')}" if o["output_type"] == "error" else "".join(o["text"])
                          for o in cell.outputs if o["output_type"] == "error" or o.get("name") == "stderr"]
                failed.append({"grade_id": cell.metadata.nbgrader["grade_id"], "output": " | ".join(errors)[:500]})
    return failed


def update(fresh: Path, committed: Path, write: bool = True) -> list[str]:
    """Make the folder ``committed`` mean what ``fresh`` means; return what changed, one line per file.

    A file whose meaning is unchanged keeps its committed bytes, whatever the bytes just generated.
    """
    def files(folder: Path) -> set[Path]:
        if not folder.is_dir():
            return set()
        return {p.relative_to(folder) for p in folder.rglob("*")
                if p.is_file() and not any(part.startswith(".") for part in p.relative_to(folder).parts)}

    changed = []
    new, old = files(fresh), files(committed)
    for name in sorted(new | old):
        target = committed / name
        shown = target.relative_to(ROOT) if target.is_relative_to(ROOT) else target
        if name not in new:
            changed.append(f"{shown}: no longer generated")
            if write:
                target.unlink()
            continue
        if name not in old:
            reason = "new"
        elif name.suffix == ".ipynb":
            found = notebook_differences(read_notebook(target), read_notebook(fresh / name))
            reason = found[0] + (f" (and {len(found) - 1} more)" if len(found) > 1 else "") if found else None
        else:
            reason = "changed" if target.read_bytes() != (fresh / name).read_bytes() else None
        if reason:
            changed.append(f"{shown}: {reason}")
            if write:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(fresh / name, target)
    return changed


# A figure may differ by this much per colour channel (out of 255) and still be the same figure: rendering the
# same plot on two machines moves a few anti-aliased edge pixels by 1 or 2.  A change of colour, data, labels
# or size moves pixels by far more, or changes the image's size.
PIXEL_TOLERANCE = 4
IMAGES = ("image/png", "image/jpeg")


def notebook_differences(old: dict, new: dict) -> list[str]:
    """How two notebooks differ in meaning; ``[]`` when they mean the same.

    Compared exactly: notebook and cell metadata, cell types, ids and sources, and every output except
    images.  Images are compared by decoded pixels, within PIXEL_TOLERANCE, never by their bytes.
    """
    found = []
    for key in sorted(set(old) | set(new)):
        if key != "cells" and old.get(key) != new.get(key):
            found.append(f"notebook {key} differs")
    old_cells, new_cells = old.get("cells", []), new.get("cells", [])
    if len(old_cells) != len(new_cells):
        found.append(f"{len(old_cells)} cells became {len(new_cells)}")
    for index, (a, b) in enumerate(zip(old_cells, new_cells)):
        where = f"cell {index} ({b.get('id', '?')})"
        for key in sorted((set(a) | set(b)) - {"outputs", "source"}):
            if a.get(key) != b.get(key):
                found.append(f"{where}: {key} differs")
        if _text(a.get("source", "")) != _text(b.get("source", "")):
            found.append(f"{where}: source differs")
        outputs_a, outputs_b = a.get("outputs", []), b.get("outputs", [])
        if len(outputs_a) != len(outputs_b):
            found.append(f"{where}: {len(outputs_a)} outputs became {len(outputs_b)}")
            continue
        for number, (x, y) in enumerate(zip(outputs_a, outputs_b)):
            found += [f"{where}, output {number}: {d}" for d in _output_differences(x, y)]
    return found


def _output_differences(old: dict, new: dict) -> list[str]:
    found = []
    for key in sorted((set(old) | set(new)) - {"data", "text"}):
        if old.get(key) != new.get(key):
            found.append(f"{key} differs")
    if _text(old.get("text", "")) != _text(new.get("text", "")):
        found.append("text differs")
    data_a, data_b = old.get("data", {}), new.get("data", {})
    for mime in sorted(set(data_a) | set(data_b)):
        if mime not in data_a or mime not in data_b:
            found.append(f"{mime} {'added' if mime in data_b else 'removed'}")
        elif mime in IMAGES:
            difference = image_difference(_text(data_a[mime]), _text(data_b[mime]))
            if difference:
                found.append(f"{mime} {difference}")
        elif _plain(data_a[mime]) != _plain(data_b[mime]):
            found.append(f"{mime} differs")
    return found


def image_difference(old_base64: str, new_base64: str, tolerance: int = PIXEL_TOLERANCE) -> str | None:
    """``None`` when two base64 images show the same pixels within ``tolerance`` (of 255), else how they differ."""
    if old_base64.strip() == new_base64.strip():
        return None
    old, new = _pixels(old_base64), _pixels(new_base64)
    if old.shape != new.shape:
        return f"size {_size(old)} became {_size(new)}"
    import numpy as np

    delta = np.abs(old - new)
    worst = int(delta.max())
    if worst <= tolerance:
        return None
    return f"pixels differ: {int((delta > tolerance).sum())} values by up to {worst}/255"


def _pixels(encoded: str):
    """Decoded pixels as integers 0-255, shape (height, width, channels)."""
    import numpy as np
    from matplotlib.image import imread

    raw = base64.b64decode(encoded)
    image = imread(io.BytesIO(raw), format="jpeg" if raw[:2] == b"\xff\xd8" else "png")
    if image.dtype.kind == "f":
        image = np.rint(image * 255)
    image = np.asarray(image, dtype=np.int16)
    return image if image.ndim == 3 else image[:, :, None]


def _size(pixels) -> str:
    return f"{pixels.shape[1]}x{pixels.shape[0]}x{pixels.shape[2]}"


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else value


def _plain(value) -> str:
    """A mime bundle's value as one comparable string: text joined, JSON serialised."""
    if isinstance(value, str) or (isinstance(value, list) and all(isinstance(v, str) for v in value)):
        return _text(value)
    return json.dumps(value, sort_keys=True)


def _short(result: dict) -> str:
    return str(result)[:2000]
