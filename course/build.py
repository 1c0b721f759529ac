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

from .grading.cells import HIDDEN, MARKERS
from .grading.trusted import ASSERTS
from .grading.kernels import kernel_config, pass_on_stderr, settled, stderr_to_folder, unsettled
from .grading import nbgrader_run
from .grading.nbgrader_run import assignments, nbgrader, notebooks, read_notebook, write_notebook

MEASURED = "measured"  # the tag of a cell whose outputs are measurements of the machine that ran it


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
        if not cell_id or RANDOM_ID.fullmatch(cell_id):
            problems.append(f"{where} needs a descriptive id, not {cell_id!r} (JupyterLab's random one): "
                            f"`course build --name-cells` names it")
        if cell_id in ids:
            problems.append(f"{where} repeats the id {cell_id!r}: `course build --name-cells` renames the copy")
        ids.add(cell_id)
        meta = cell.get("metadata", {}).get("nbgrader")
        if meta:
            grade_id = meta.get("grade_id")
            if grade_id in grade_ids:
                problems.append(f"{where} repeats the grade_id {grade_id!r}")
            if grade_id and PANEL_GRADE_ID.fullmatch(grade_id):
                problems.append(f"{where} has the Create Assignment panel's default grade id {grade_id!r}: type a "
                                f"name in the panel's ID field (what the cell checks, e.g. test_ttft_visible)")
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


RANDOM_ID = re.compile(r"[0-9a-f]{8}(-[0-9a-f]{4}){0,4}.*")  # JupyterLab's ids for new cells
PANEL_GRADE_ID = re.compile(r"cell-[0-9a-zA-Z]{16}")  # the Create Assignment panel's default ID


def _slug(text: str) -> str:
    for line in text.splitlines():
        words = re.findall(r"[a-z0-9]+", line.lower())
        if words:
            return "-".join(words[:4])[:40].strip("-")
    return ""


def name_cells(path: Path) -> list[str]:
    """Give every cell with a random or repeated id a descriptive one, in place; return what was renamed.

    A graded cell takes its grade id; any other cell a slug of its first line (``## Exercise 2: ...`` becomes
    ``exercise-2``), made unique with a number.
    """
    notebook = read_notebook(path)
    taken = [cell.get("id") for cell in notebook["cells"]]
    renamed, seen = [], set()
    for index, cell in enumerate(notebook["cells"]):
        cell_id = cell.get("id")
        if cell_id and not RANDOM_ID.fullmatch(cell_id) and cell_id not in seen:
            seen.add(cell_id)
            continue
        meta = cell.get("metadata", {}).get("nbgrader") or {}
        base = meta.get("grade_id") or _slug(_source_text(cell)) or cell.get("cell_type", "cell")
        base = re.sub(r"[^A-Za-z0-9_-]", "-", base)[:60]
        new, number = base, 2
        while new in seen or new in taken:
            new, number = f"{base}-{number}", number + 1
        cell["id"] = new
        seen.add(new)
        taken.append(new)
        renamed.append(f"{path.name} cell {index}: {cell_id!r} -> {new!r}")
    if renamed:
        write_notebook(notebook, path)
    return renamed


def execute(path: Path, timeout: int = 60, allow_errors: bool = False) -> dict:
    """Run a notebook top to bottom in its own folder and return it with outputs.

    With ``allow_errors`` a failing cell does not stop the run: its error is in its outputs
    (:func:`errors` reads them), so every failure of the reference can be reported at once.
    """
    import nbclient
    import nbformat

    notebook = nbformat.read(path, as_version=4)
    metadata = copy.deepcopy(dict(notebook.metadata))
    client = nbclient.NotebookClient(
        settled(notebook), timeout=timeout, kernel_name="python3", record_timing=False, allow_errors=allow_errors,
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


def _cores() -> int:
    """The cores this process may run on."""
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def _pool(workers: int, stderr_folder: Path):
    """A pool of ``workers`` processes for notebook runs (spawned, not forked: the caller may hold threads), whose
    stderr goes to files in ``stderr_folder`` (kernels.stderr_to_folder; read them with kernels.pass_on_stderr)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    return ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                               initializer=stderr_to_folder, initargs=(str(stderr_folder),))


def _run_reference_and_blank(path: Path, released: Path, validate_notebooks: bool) -> tuple[dict, list[str]]:
    """Execute the source notebook ``path`` (the reference) and, if it ran clean, check that its tests pass and
    that the blank ``released`` notebook fails each of its own; return the executed notebook and the problems."""
    executed = execute(path, allow_errors=True)
    problems = errors(executed, path.name)
    if validate_notebooks and not problems:
        cells = {c["metadata"].get("nbgrader", {}).get("grade_id"): c for c in executed["cells"]}
        for failure in failed_tests(executed):  # what nbgrader would not score: stderr, say
            problems.append(f"{_where(path.name, cells.get(failure['grade_id'], {}))}: the "
                            f"reference fails its test: {_failure(failure['output'])}")
        # Hidden-only test cells are empty in the release, so they pass there; they are graded with their
        # tests restored (see tests/test_grading.py).
        passed = [c for c in validate(released, invert=True).get("passed", []) if ASSERTS.search(c["source"])]
        problems += _by_source(released, passed, "the blank release passes this test")
    return executed, problems


def validate(path: Path, invert: bool = False) -> dict:
    """nbgrader's Validator: ``{}`` when every test passes (or, inverted, when every test fails)."""
    import nbformat
    from nbgrader.validator import Validator

    with tempfile.TemporaryDirectory() as folder:
        runnable = Path(folder) / path.name  # the notebook with a last cell that lets its kernel end idle
        nbformat.write(settled(nbformat.read(path, as_version=4)), runnable)
        return Validator(invert=invert, config=kernel_config()).validate(str(runnable))


ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _where(notebook: str, cell: dict) -> str:
    meta = cell.get("metadata", {}).get("nbgrader") or {}
    return f"{notebook}, {meta.get('grade_id') or 'cell ' + str(cell.get('id'))}"


def _failure(text: str) -> str:
    """The line of a traceback that says what failed (``AssertionError: ...``), without colour codes."""
    lines = [line.strip() for line in ANSI.sub("", text).splitlines() if line.strip()]
    for line in reversed(lines):
        if re.match(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt|Warning)\b", line):
            return line[:400]
    return (lines[-1] if lines else "failed without a message")[:400]


def errors(notebook: dict, name: str) -> list[str]:
    """One problem line per cell of an executed notebook that raised: notebook, grade id, the failure."""
    found = []
    for cell in notebook.get("cells", []):
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                message = f"{output.get('ename', 'Error')}: {ANSI.sub('', str(output.get('evalue', '')))}"
                found.append(f"{_where(name, cell)}: the reference fails: {_failure(message)[:400]}")
    return found


def _by_source(path: Path, results: list[dict], what: str) -> list[str]:
    """Validator results (which carry only the cell's source) as problem lines naming each cell's grade id."""
    cells = {_source_text(c).strip(): c for c in read_notebook(path)["cells"]}
    lines = []
    for result in results:
        cell = cells.get(result.get("source", "").strip(), {"id": "?"})
        detail = f": {_failure(result['raw_error'])}" if result.get("raw_error") else ""
        lines.append(f"{_where(path.name, cell)}: {what}{detail}")
    return lines


POINTS_LINE = re.compile(r"Points:\s*(\d+(?:\.\d+)?)\s+for the autograded exercises,"
                         r"\s*(\d+(?:\.\d+)?)\s+for the written")
HEADING_POINTS = re.compile(r"^##\s+(.*?)\((\d+(?:\.\d+)?) points?\b", re.M)
README_ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|.*\|\s*(\d+(?:\.\d+)?)\s*\+\s*(\d+(?:\.\d+)?)\s*\|\s*$", re.M)


def points(path: Path) -> tuple[float, float]:
    """(autograded, written) points of a notebook, from its nbgrader metadata."""
    auto = written = 0.0
    for cell in read_notebook(path)["cells"]:
        meta = cell.get("metadata", {}).get("nbgrader") or {}
        if meta.get("grade"):
            if cell["cell_type"] == "code":
                auto += float(meta.get("points", 0))
            else:
                written += float(meta.get("points", 0))
    return auto, written


def check_points(path: Path) -> list[str]:
    """The notebook's own point statements against its metadata: the "Points: A ..., W ..." line, and each
    exercise heading's "(N points)" against the graded cells under it."""
    problems = []
    auto, written = points(path)
    cells = read_notebook(path)["cells"]
    for cell in cells:
        if cell["cell_type"] != "markdown":
            continue
        for stated_auto, stated_written in POINTS_LINE.findall(_source_text(cell)):
            if (float(stated_auto), float(stated_written)) != (auto, written):
                problems.append(f"{path.name}: says {stated_auto} autograded + {stated_written} written points, the "
                                f"metadata has {auto:g} + {written:g}")
    heading, stated, total = None, None, 0.0

    def close():
        if heading is not None and stated is not None and stated != total:
            problems.append(f"{path.name}: heading {heading.strip()!r} says {stated:g} points, its graded cells have "
                            f"{total:g}")

    for cell in cells:
        text = _source_text(cell)
        if cell["cell_type"] == "markdown" and re.match(r"^#{1,2}\s", text):  # a section; ### stays inside
            close()
            found = HEADING_POINTS.match(text)
            heading, stated, total = (found.group(1), float(found.group(2)), 0.0) if found else (None, None, 0.0)
        meta = cell.get("metadata", {}).get("nbgrader") or {}
        if meta.get("grade"):
            total += float(meta.get("points", 0))
    close()
    return problems


def check_readme_points(readme: Path, totals: dict[str, tuple[float, float]]) -> list[str]:
    """README's table of assignments ("| `id` | ... | A + W |") against the notebooks' metadata."""
    if not readme.is_file():
        return []
    listed = {name: (float(a), float(w)) for name, a, w in README_ROW.findall(readme.read_text(encoding="utf-8"))}
    problems = []
    for assignment, (auto, written) in sorted(totals.items()):
        if assignment not in listed:
            problems.append(f"README.md: the assignments table has no row for `{assignment}` "
                            f"({auto:g} + {written:g} points)")
        elif listed[assignment] != (auto, written):
            problems.append(f"README.md: `{assignment}` is listed with {listed[assignment][0]:g} + "
                            f"{listed[assignment][1]:g} points, the notebooks' metadata has {auto:g} + {written:g}")
    return problems


def build(selected: list[str] | None = None, validate_notebooks: bool = True, log=print,
          write: bool = True) -> BuildReport:
    """Regenerate release/ and solutions/ for the selected assignments and check them.

    Everything is made in a scratch folder first and compared with what is committed by meaning; release/ and
    solutions/ are written only when no check found a problem, so a failed build leaves the committed notebooks
    as they were.  With ``write=False`` nothing in the repository is touched: ``report.changed`` lists what is
    out of date.
    """
    report = BuildReport()
    chosen = selected or assignments()
    totals: dict[str, tuple[float, float]] = {}
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        for assignment in chosen:
            if not notebooks(assignment):
                report.problems.append(f"{nbgrader_run.SOURCE / assignment}: no notebooks")
                continue
            for path in notebooks(assignment):
                report.problems += check_source(path)
                report.problems += check_points(path)
            found = [points(path) for path in notebooks(assignment)]
            totals[assignment] = (sum(a for a, _ in found), sum(w for _, w in found))
        if report.problems:
            return report  # ids and points first: nbgrader would stumble over the same cells
        log(f"generate_assignment {', '.join(chosen)}")
        # One nbgrader process for all of them when it can (each process takes seconds to start).
        for pattern in ["*"] if sorted(chosen) == assignments() else chosen:
            done = nbgrader("generate_assignment", pattern, "--force",
                            f"--CourseDirectory.source_directory={nbgrader_run.SOURCE}",
                            f"--CourseDirectory.db_url=sqlite:///{scratch / 'build.db'}", root=scratch)
            if done.returncode != 0:
                report.problems.append(f"{pattern}: generate_assignment failed: {_nbgrader_line(done)}")
                return report
        jobs = []  # (assignment, source notebook, its release), in course order
        for assignment in chosen:
            for path in notebooks(assignment):
                released = scratch / "release" / assignment / path.name
                if not released.exists():
                    report.problems.append(f"{path.name}: generate_assignment wrote no release notebook")
                    continue
                report.problems += check_release(path, released)
                jobs.append((assignment, path, released))
        # Each notebook runs in kernels of its own, so the runs go side by side, one per core; the results are
        # read in course order, so the report does not depend on which finished first.
        workers = max(1, min(len(jobs), _cores()))
        log(f"executing {len(jobs)} notebook{'s' if len(jobs) != 1 else ''}, {workers} at a time")
        # The workers' stderr and their kernels' is passed on once they have ended, less the noise of kernels that
        # shut down after a complete run (course/grading/kernels.py), which would read as a failure.
        (scratch / "stderr").mkdir()
        try:
            with _pool(workers, scratch / "stderr") as pool:
                runs = [pool.submit(_run_reference_and_blank, path, released, validate_notebooks)
                        for _, path, released in jobs]
                for (assignment, path, _), run in zip(jobs, runs):
                    log(f"{assignment}: ran {path.name}" + (", checked the reference and the blank release"
                                                           if validate_notebooks else ""))
                    executed, problems = run.result()
                    report.problems += problems
                    write_notebook(executed, scratch / "solutions" / assignment / path.name)
        finally:
            pass_on_stderr(scratch / "stderr")
        report.built += [a for a in chosen if notebooks(a)]
        if selected is None:
            report.problems += check_readme_points(nbgrader_run.ROOT / "README.md", totals)
        if report.problems:
            return report
        for assignment in report.built:
            for fresh, committed in ((scratch / "release" / assignment, nbgrader_run.RELEASE / assignment),
                                     (scratch / "solutions" / assignment, nbgrader_run.SOLUTIONS / assignment)):
                for change in update(fresh, committed, write=write):
                    log(f"{assignment}: {'updated' if write else 'out of date:'} {change}")
                    report.changed.append(change)
    return report


def _nbgrader_line(done) -> str:
    from .grade import _nbgrader_error

    return _nbgrader_error(done.stdout + done.stderr, done.returncode)


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
        shown = target.relative_to(nbgrader_run.ROOT) if target.is_relative_to(nbgrader_run.ROOT) else target
        if name not in new:
            changed.append(f"{shown}: no longer generated")
            if write:
                target.unlink()
            continue
        if name not in old:
            reason = "new"
        elif name.suffix == ".ipynb":
            found = notebook_differences(read_notebook(target), read_notebook(fresh / name))
            reason = "; ".join(found) if found else None  # every cell named: --check is read to fix them all
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
    images.  Images are compared by decoded pixels, within PIXEL_TOLERANCE, never by their bytes.  A cell tagged
    ``measured`` (its outputs are timings of the machine that ran it, as in 08_measure) has its outputs ignored.
    """
    found = []
    for key in sorted(set(old) | set(new)):
        if key != "cells" and old.get(key) != new.get(key):
            found.append(f"notebook {key} differs")
    old_cells, new_cells = old.get("cells", []), new.get("cells", [])
    if len(old_cells) != len(new_cells):
        found.append(f"{len(old_cells)} cells became {len(new_cells)}")
    for index, a, b in _paired_cells(old_cells, new_cells, found):
        where = f"cell {index} ({b.get('id', '?')})"
        for key in sorted((set(a) | set(b)) - {"outputs", "source"}):
            if a.get(key) != b.get(key):
                found.append(f"{where}: {key} differs")
        if _text(a.get("source", "")) != _text(b.get("source", "")):
            found.append(f"{where}: source differs")
        if MEASURED in b.get("metadata", {}).get("tags", ()):
            continue  # timings differ on every run and machine: only the source is the cell's meaning
        outputs_a, outputs_b = a.get("outputs", []), b.get("outputs", [])
        if len(outputs_a) != len(outputs_b):
            found.append(f"{where}: {len(outputs_a)} outputs became {len(outputs_b)}")
            continue
        for number, (x, y) in enumerate(zip(outputs_a, outputs_b)):
            found += [f"{where}, output {number}: {d}" for d in _output_differences(x, y)]
    return found


def _paired_cells(old_cells: list[dict], new_cells: list[dict], found: list[str]) -> list[tuple[int, dict, dict]]:
    """(index in the new notebook, old cell, new cell) for each cell both notebooks hold, paired by id where every
    cell has a unique one, so that one inserted cell reads as one change, not as every later cell changed; cells
    added, removed or moved are noted in ``found``.  Without unique ids, cells pair by position."""
    old_ids, new_ids = [c.get("id") for c in old_cells], [c.get("id") for c in new_cells]
    unique = all(old_ids) and all(new_ids) and len(set(old_ids)) == len(old_ids) and len(set(new_ids)) == len(new_ids)
    if not unique:
        return [(index, a, b) for index, (a, b) in enumerate(zip(old_cells, new_cells))]
    by_id, kept = dict(zip(old_ids, old_cells)), set(new_ids)
    found += [f"cell {index} ({cell_id}) added" for index, cell_id in enumerate(new_ids) if cell_id not in by_id]
    found += [f"cell ({cell_id}) removed" for cell_id in old_ids if cell_id not in kept]
    if [i for i in old_ids if i in kept] != [i for i in new_ids if i in by_id]:
        found.append("cells moved")
    return [(index, by_id[cell_id], b) for index, (cell_id, b) in enumerate(zip(new_ids, new_cells))
            if cell_id in by_id]


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