"""`course check NOTEBOOK`: a self-learner's score, without an instructor or a gradebook.

Runs the notebook top to bottom as it is (errors do not stop it), then reads
each test cell: passed if it raised nothing.  Prints the points per exercise
and, for a failed test, the checker's message, which names the likely
mistake.  With ``--hidden`` the test cells are first swapped for the full
ones from source/ (which a public repository shows anyway), so a self-learner
can run the instructor's hidden tests too.
"""

from __future__ import annotations

import re
import sys
import textwrap
from pathlib import Path

from .grading import cells
from .grading.trusted import ASSERTS
from .grading.kernels import kernel_config, stderr_without_shutdown_noise, settled, unsettled
from .grading import nbgrader_run
from .grading.nbgrader_run import environment, read_notebook

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _derived(cell) -> list[str]:
    """The "What you derived" texts a passing check displayed in ``cell`` (Markdown, as written)."""
    texts = ["".join(o.get("data", {}).get("text/markdown", "")) for o in cell.get("outputs", [])
             if o.get("output_type") == "display_data"]
    return [t for t in texts if t.startswith("**What you derived.**")]


def _tests(notebook) -> list:
    return [c for c in notebook.cells if cells.is_test(c)]


class UnknownNotebook(LookupError):
    """The notebook matches no assignment of the course."""


def source_of(notebook) -> Path:
    """The source notebook this one was released from, found by its graded cells (any file name will do)."""
    ids = {c.metadata.get("nbgrader", {}).get("grade_id") for c in notebook.cells} - {None}
    best, overlap = None, 0
    for candidate in sorted(nbgrader_run.SOURCE.glob("*/*.ipynb")):
        theirs = {c.get("metadata", {}).get("nbgrader", {}).get("grade_id") for c in read_notebook(candidate)["cells"]}
        shared = len(ids & (theirs - {None}))
        if shared > overlap:
            best, overlap = candidate, shared
    if best is None:
        raise UnknownNotebook(
            "this notebook has none of the course's graded cells (was its nbgrader metadata removed?), so its "
            f"hidden tests cannot be found; the assignments are in {nbgrader_run.SOURCE}")
    return best


def _with_hidden(notebook, path: Path) -> int:
    """Swap in the source's test cells; return how many were swapped."""
    full = {c["metadata"]["nbgrader"]["grade_id"]: c for c in read_notebook(source_of(notebook))["cells"]
            if cells.meta(c).get("grade")}
    swapped = 0
    for cell in _tests(notebook):
        source = full.get(cell.metadata["nbgrader"]["grade_id"])
        if source is not None:
            cell.source = cells.unmarked(cells.text(source))
            swapped += 1
    return swapped


def check(path: Path, hidden: bool = False, timeout: int = 30, out=sys.stdout) -> int:
    """Run the notebook's tests and print a score per exercise; return 0 if all counted tests pass."""
    import os

    import nbclient
    import nbformat

    try:
        notebook = nbformat.read(path, as_version=4)
    except Exception as error:  # missing, not JSON, not a notebook: say so rather than a traceback
        print(f"course check: cannot read {path} as a notebook: {str(error).splitlines()[0]}", file=out)
        return 2
    if hidden:
        try:
            source = source_of(notebook)
        except UnknownNotebook as error:
            print(f"course check: {error}", file=out)
            return 2
        print(f"hidden tests from {source.relative_to(nbgrader_run.SOURCE.parent)}", file=out)
        _with_hidden(notebook, path)
    os.environ.update({k: v for k, v in environment().items() if k in ("MPLBACKEND", "OMP_NUM_THREADS")})
    client = nbclient.NotebookClient(settled(notebook), timeout=timeout, kernel_name="python3", allow_errors=True,
                                     interrupt_on_timeout=True,
                                     resources={"metadata": {"path": str(path.parent.resolve())}},
                                     config=kernel_config())  # IPC, not TCP: see course/grading/kernels.py
    with stderr_without_shutdown_noise():  # `course check` is a process of its own
        client.execute()
    unsettled(notebook)
    earned = possible = 0.0
    skipped = []
    for cell in _tests(notebook):
        meta = cell.metadata["nbgrader"]
        points = float(meta.get("points", 0))
        if not ASSERTS.search(cell.source):
            skipped.append((meta["grade_id"], points))
            continue
        errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        possible += points
        if errors:
            message = ANSI.sub("", errors[0].get("evalue", "")) or errors[0].get("ename", "error")
            print(f"  FAIL {meta['grade_id']:34} 0/{points:g}  {errors[0].get('ename')}: {message}", file=out)
        else:
            earned += points
            print(f"  ok   {meta['grade_id']:34} {points:g}/{points:g}", file=out)
            for derived in _derived(cell):  # in JupyterLab it shows under the cell; here, under its line
                print(textwrap.indent(textwrap.fill(derived, 110), "       "), file=out)
    print(f"\n{path.name}: {earned:g}/{possible:g} points on the tests run here", file=out)
    if skipped:
        hidden_points = sum(p for _, p in skipped)
        print(f"{len(skipped)} test cells ({hidden_points:g} points) are hidden in this copy; "
              f"`course check --hidden {path}` runs them from source/.", file=out)
    return 0 if earned == possible else 1
