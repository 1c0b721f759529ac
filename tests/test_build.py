"""`course build`: release/ and solutions/ mean what the source makes, and the checks catch leaks and stale files.

"Mean": cell sources, metadata and text outputs exactly, figures by their decoded pixels within a small
tolerance, so that the same build on another machine (a few anti-aliased pixels off by 1/255) is current,
and a figure with another colour or other data is not.
"""

import base64
import copy
import io
import json
import logging
import os

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

from matplotlib import pyplot as plt  # noqa: E402

from course.build import _stable, build, check_release, check_source, failed_tests, notebook_differences, update  # noqa: E402
from course.kernels import kernel_config  # noqa: E402
from course.nbgrader_run import RELEASE, SOLUTIONS, read_notebook, write_notebook  # noqa: E402
from rooflab import plots  # noqa: E402

FIGURES = SOLUTIONS / "04_crossover" / "04_crossover.ipynb"  # a solutions notebook with figures


def _snapshot():
    return {p: p.read_bytes() for folder in (RELEASE, SOLUTIONS) for p in sorted(folder.glob("*/*.ipynb"))}


@pytest.mark.slow
def test_committed_release_and_solutions_are_current_and_pass_their_checks(capfd, caplog):
    before = _snapshot()
    report = build(log=lambda message: None, write=False)
    assert report.problems == []
    assert report.changed == [], f"release/ or solutions/ is out of date: {report.changed}; run `course build`, commit"
    assert _snapshot() == before  # a check writes nothing
    # quiet: kernels over IPC, ending idle; hidden-only test cells give nbgrader no result to read as a score
    out, err = capfd.readouterr()
    assert out + err == ""
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


def test_kernels_use_ipc_sockets_at_an_absolute_unique_path():
    first, second = kernel_config().KernelManager, kernel_config().KernelManager
    assert first.transport == "ipc" and os.path.isabs(first.ip) and first.ip != second.ip


# Figures, rendered here the way the inline backend renders them (PNG, 100 dpi).

def _png(figure) -> str:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100)
    plt.close(figure)
    return base64.b64encode(buffer.getvalue()).decode()


def _crossover(model="Llama-3-8B", device="H100", colour=None) -> str:
    figure = plots.crossover_figure(model, device)
    if colour:
        figure.axes[0].get_lines()[0].set_color(colour)
    return _png(figure)


def _pixels(encoded):
    return np.rint(plt.imread(io.BytesIO(base64.b64decode(encoded)), format="png") * 255).astype(np.uint8)


def _encode(pixels) -> str:
    buffer = io.BytesIO()
    plt.imsave(buffer, pixels, format="png")
    return base64.b64encode(buffer.getvalue()).decode()


def _anti_aliased(encoded, count=64, seed=0) -> str:
    """The same image with ``count`` colour values moved by 1/255, as another machine's renderer does."""
    pixels = _pixels(encoded).copy()
    rng = np.random.default_rng(seed)
    flat = pixels.reshape(-1)
    chosen = rng.choice(np.flatnonzero(flat < 255), size=count, replace=False)
    flat[chosen] += 1
    return _encode(pixels)


def _with_figure(notebook, encoded):
    """``notebook`` with its first PNG replaced by ``encoded``."""
    notebook = copy.deepcopy(notebook)
    for cell in notebook["cells"]:
        for output in cell.get("outputs", []):
            if "image/png" in output.get("data", {}):
                output["data"]["image/png"] = encoded
                return notebook
    raise AssertionError("no figure in the notebook")


@pytest.fixture(scope="module")
def figure():
    return _crossover()


def test_anti_aliasing_differences_are_not_a_change(figure):
    other_machine = _anti_aliased(figure)
    assert base64.b64decode(other_machine) != base64.b64decode(figure)  # other bytes
    assert int(np.abs(_pixels(other_machine).astype(int) - _pixels(figure)).sum()) == 64  # 64 values, 1/255 each
    solutions = read_notebook(FIGURES)
    assert notebook_differences(_with_figure(solutions, figure), _with_figure(solutions, other_machine)) == []


@pytest.mark.parametrize("changed", [
    {"colour": "red"},  # one line drawn in another colour
    {"model": "Llama-3-70B"},  # other data, same axes
    {"device": "A100-80GB"},
])
def test_another_colour_or_other_data_is_a_change(figure, changed):
    solutions = read_notebook(FIGURES)
    found = notebook_differences(_with_figure(solutions, figure), _with_figure(solutions, _crossover(**changed)))
    assert len(found) == 1 and "image/png" in found[0] and ("pixels differ" in found[0] or "size" in found[0])


def test_text_metadata_and_source_are_compared_exactly():
    solutions = read_notebook(FIGURES)
    printed = next(i for i, c in enumerate(solutions["cells"]) if any(o.get("name") == "stdout" for o in c.get("outputs", [])))
    edits = {
        "text output": lambda nb: nb["cells"][printed]["outputs"][0].update(text="".join(nb["cells"][printed]["outputs"][0]["text"]) + " "),
        "source": lambda nb: nb["cells"][0].update(source="".join(nb["cells"][0]["source"]) + "\n"),
        "cell metadata": lambda nb: nb["cells"][0]["metadata"].update(tags=["x"]),
        "notebook metadata": lambda nb: nb["metadata"].update(authors=["x"]),
        "a cell": lambda nb: nb["cells"].pop(),
    }
    for what, edit in edits.items():
        edited = copy.deepcopy(solutions)
        edit(edited)
        assert notebook_differences(solutions, edited), what
    assert notebook_differences(solutions, json.loads(json.dumps(solutions))) == []


def test_update_writes_only_what_changed_in_meaning(tmp_path, figure):
    solutions = read_notebook(FIGURES)
    fresh, committed = tmp_path / "fresh", tmp_path / "committed"
    write_notebook(_with_figure(solutions, _anti_aliased(figure)), fresh / "same.ipynb")
    write_notebook(_with_figure(solutions, figure), committed / "same.ipynb")
    write_notebook(_with_figure(solutions, _crossover(colour="red")), fresh / "recoloured.ipynb")
    write_notebook(_with_figure(solutions, figure), committed / "recoloured.ipynb")
    (committed / "gone.ipynb").write_text("{}")
    kept = (committed / "same.ipynb").read_bytes()

    stale = update(fresh, committed, write=False)
    assert [line.split(":")[0].rsplit("/", 1)[-1] for line in stale] == ["gone.ipynb", "recoloured.ipynb"]
    assert (committed / "gone.ipynb").exists()  # a check writes nothing

    assert update(fresh, committed) == stale
    assert (committed / "same.ipynb").read_bytes() == kept  # the committed bytes stay: no churn from another machine
    assert (committed / "recoloured.ipynb").read_bytes() == (fresh / "recoloured.ipynb").read_bytes()
    assert not (committed / "gone.ipynb").exists()
    assert update(fresh, committed, write=False) == []


def test_solutions_keep_the_source_metadata_not_the_machines_python():
    executed = {"metadata": {"language_info": {"name": "python", "version": "3.12.1"}, "widgets": {}}, "cells": []}
    source = {"kernelspec": {"name": "python3"}, "language_info": {"name": "python"}}
    assert _stable(executed, source)["metadata"] == source


def _notebook(tmp_path, cells, name="nb.ipynb"):
    path = tmp_path / name
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    return path


def test_source_rules(tmp_path):
    path = _notebook(tmp_path, [
        {"cell_type": "code", "id": "4f3a9b1c", "metadata": {}, "source": "1", "outputs": [{"output_type": "stream", "name": "stdout", "text": "1"}], "execution_count": 1},
        {"cell_type": "code", "id": "same", "metadata": {"nbgrader": {"grade_id": "x"}}, "source": "", "outputs": [], "execution_count": None},
        {"cell_type": "code", "id": "same", "metadata": {"nbgrader": {"grade_id": "x"}}, "source": "", "outputs": [], "execution_count": None},
    ])
    problems = " | ".join(check_source(path))
    assert "has outputs" in problems and "descriptive id" in problems
    assert "repeats the id 'same'" in problems and "repeats the grade_id 'x'" in problems


def test_release_leaks_are_found(tmp_path):
    hidden = "### BEGIN HIDDEN TESTS\nassert secret_function(12345) == 67890\n### END HIDDEN TESTS\n"
    source = _notebook(tmp_path, [{"cell_type": "code", "id": "t", "metadata": {}, "source": hidden, "outputs": [], "execution_count": None}])
    leaky = _notebook(tmp_path, [{"cell_type": "code", "id": "t", "metadata": {}, "source": "assert secret_function(12345) == 67890\n### BEGIN SOLUTION", "outputs": [], "execution_count": None}], "release.ipynb")
    problems = " | ".join(check_release(source, leaky))
    assert "hidden-test line" in problems and "BEGIN SOLUTION" in problems


def test_a_failing_test_cell_in_the_reference_run_is_found():
    solutions = read_notebook(SOLUTIONS / "01_two_phases" / "01_two_phases.ipynb")

    assert failed_tests(solutions) == []
    broken = copy.deepcopy(solutions)
    test = next(c for c in broken["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == "test_weight_bytes_visible")
    test["outputs"].append({"output_type": "error", "ename": "AssertionError", "evalue": "weight_bytes: wrong", "traceback": []})
    warned = copy.deepcopy(solutions)
    test = next(c for c in warned["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == "test_share_hidden")
    test["outputs"].append({"output_type": "stream", "name": "stderr", "text": "UserWarning: x\n"})
    assert [f["grade_id"] for f in failed_tests(broken)] == ["test_weight_bytes_visible"]
    assert "weight_bytes: wrong" in failed_tests(broken)[0]["output"]
    assert [f["grade_id"] for f in failed_tests(warned)] == ["test_share_hidden"]
