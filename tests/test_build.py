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
import subprocess
import sys

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

from matplotlib import pyplot as plt  # noqa: E402

from course.build import (_by_source, _stable, build, check_points, check_readme_points, check_release,  # noqa: E402
                          check_source, failed_tests, name_cells, notebook_differences, update)
from course.grading.kernels import kernel_config  # noqa: E402
from course.grading.nbgrader_run import RELEASE, ROOT, SOLUTIONS, read_notebook, write_notebook  # noqa: E402
from rooflab import plots  # noqa: E402

FIGURES = SOLUTIONS / "04b_long_prompts" / "04b_long_prompts.ipynb"  # a solutions notebook with figures


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


def test_cells_pair_by_id_so_one_insertion_is_one_change():
    """A cell inserted in the middle is one addition, not every later cell changed; a removal and a move are named."""
    def notebook(ids):
        return {"cells": [{"cell_type": "markdown", "id": i, "metadata": {}, "source": f"text of {i}"} for i in ids],
                "metadata": {}}
    assert notebook_differences(notebook("abcd"), notebook("abxcd")) == ["4 cells became 5", "cell 2 (x) added"]
    assert notebook_differences(notebook("abcd"), notebook("abd")) == ["4 cells became 3", "cell (c) removed"]
    assert notebook_differences(notebook("abcd"), notebook("abdc")) == ["cells moved"]
    edited = notebook("abxcd")
    edited["cells"][3]["source"] = "new text"
    assert notebook_differences(notebook("abcd"), edited) == ["4 cells became 5", "cell 2 (x) added",
                                                              "cell 3 (c): source differs"]


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


def _cell(kind, cell_id, source, **nbgrader):
    cell = {"cell_type": kind, "id": cell_id, "metadata": {}, "source": source}
    if nbgrader:
        cell["metadata"]["nbgrader"] = dict(schema_version=3, **nbgrader)
    if kind == "code":
        cell.update(outputs=[], execution_count=None)
    return cell


def _tiny(answer="return 2 * x", points=2, heading_points=2):
    """A one-exercise source notebook: double(x), a visible and a hidden test."""
    return {"nbformat": 4, "nbformat_minor": 5,
            "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
            "cells": [
                _cell("markdown", "title", f"# Tiny\n\nPoints: {points} for the autograded exercises, 0 for the "
                                           "written answer."),
                _cell("markdown", "ex1", f"## Exercise 1: doubling ({heading_points} points)"),
                _cell("code", "answer", f"def double(x):\n    ### BEGIN SOLUTION\n    {answer}\n    ### END SOLUTION",
                      grade=False, solution=True, locked=False, grade_id="answer"),
                _cell("code", "test_double", "assert double(1) == 2, 'double(1) should be 2'\n"
                      "### BEGIN HIDDEN TESTS\nassert double(2) == 4, 'double(2) should be 4'\n### END HIDDEN TESTS\n",
                      grade=True, solution=False, locked=True, grade_id="test_double", points=points),
            ]}


def test_points_stated_in_a_notebook_are_checked(tmp_path):
    right = tmp_path / "right.ipynb"
    right.write_text(json.dumps(_tiny()))
    assert check_points(right) == []
    wrong = tmp_path / "wrong.ipynb"
    notebook = _tiny(heading_points=3)
    notebook["cells"][0]["source"] = "# Tiny\n\nPoints: 5 for the autograded exercises, 0 for the written answer."
    wrong.write_text(json.dumps(notebook))
    problems = " | ".join(check_points(wrong))
    assert "says 5 autograded + 0 written points, the metadata has 2 + 0" in problems
    assert "heading 'Exercise 1: doubling' says 3 points, its graded cells have 2" in problems


def test_readme_table_is_checked_against_the_metadata(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("| id | question | points |\n|---|---|---|\n| `01_a` | q | 40 + 10 |\n| `02_b` | q | 25 + 5 |\n")
    assert check_readme_points(readme, {"01_a": (40, 10), "02_b": (25, 5)}) == []
    problems = check_readme_points(readme, {"01_a": (41, 10), "02_b": (25, 5), "03_c": (1, 0)})
    assert problems == ["README.md: `01_a` is listed with 40 + 10 points, the notebooks' metadata has 41 + 10",
                        "README.md: the assignments table has no row for `03_c` (1 + 0 points)"]


def test_validator_results_name_the_grade_id(tmp_path):
    path = tmp_path / "tiny.ipynb"
    path.write_text(json.dumps(_tiny()))
    source = _tiny()["cells"][3]["source"]
    lines = _by_source(path, [{"source": source.strip()}], "the blank release passes this test")
    assert lines == ["tiny.ipynb, test_double: the blank release passes this test"]
    traceback = "\x1b[0;31mAssertionError\x1b[0m: double(2) should be 4"
    assert _by_source(path, [{"source": source, "raw_error": traceback}], "fails") == [
        "tiny.ipynb, test_double: fails: AssertionError: double(2) should be 4"]


def test_name_cells_gives_random_and_repeated_ids_a_name(tmp_path):
    notebook = _tiny()
    notebook["cells"][1]["id"] = "4f3a9b1c-7d2e-4c1b-9a8f-0123456789ab"  # JupyterLab's
    notebook["cells"][3]["id"] = "9e8d7c6b"
    notebook["cells"].append(dict(notebook["cells"][2]))  # a copied cell keeps its id
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps(notebook))
    assert any("descriptive id" in p and "--name-cells" in p for p in check_source(path))
    renamed = name_cells(path)
    ids = [c["id"] for c in json.loads(path.read_text())["cells"]]
    assert ids == ["title", "exercise-1-doubling-2", "answer", "test_double", "answer-2"]
    assert len(renamed) == 3 and not [p for p in check_source(path) if "id" in p and "grade_id" not in p]


@pytest.mark.slow
def test_a_failing_reference_is_a_problem_line_and_nothing_is_written(tmp_path):
    course = tmp_path / "course"
    (course / "source" / "99_tiny").mkdir(parents=True)
    (course / "nbgrader_config.py").write_text((ROOT / "nbgrader_config.py").read_text())
    (course / "README.md").write_text("| id | question | points |\n|---|---|---|\n| `99_tiny` | q | 3 + 0 |\n")
    (course / "source" / "99_tiny" / "99_tiny.ipynb").write_text(
        json.dumps(_tiny(answer="return 2 * x if x < 2 else 2 * x + 1")))  # right on 1, wrong on 2
    done = subprocess.run([sys.executable, "-m", "course", "--course", str(course), "build"], cwd=tmp_path,
                          capture_output=True, text=True)
    assert done.returncode == 1
    problems = [line for line in done.stderr.splitlines() if line.startswith("problem: ")]
    assert problems == [
        "problem: 99_tiny.ipynb, test_double: the reference fails: AssertionError: double(2) should be 4",
        "problem: README.md: `99_tiny` is listed with 3 + 0 points, the notebooks' metadata has 2 + 0"]
    assert "\x1b[" not in done.stderr and "Traceback" not in done.stderr and "built" not in done.stdout
    assert not (course / "release").exists() and not (course / "solutions").exists()


def test_a_check_names_every_out_of_date_cell(tmp_path):
    cells = [{"cell_type": "markdown", "id": f"c{i}", "metadata": {}, "source": f"text {i}"} for i in range(3)]
    old = {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    new = json.loads(json.dumps(old))
    new["cells"][0]["source"] = "text zero"
    new["cells"][2]["source"] = "text two"
    write_notebook(old, tmp_path / "committed" / "nb.ipynb")
    write_notebook(new, tmp_path / "fresh" / "nb.ipynb")
    (line,) = update(tmp_path / "fresh", tmp_path / "committed", write=False)
    assert "cell 0 (c0): source differs" in line and "cell 2 (c2): source differs" in line and "more" not in line


def test_a_measured_cell_is_compared_by_its_source_not_its_outputs():
    def notebook(tags, text):
        cell = {"cell_type": "code", "id": "timing", "metadata": {"tags": tags}, "source": "print(best_time())",
                "outputs": [{"output_type": "stream", "name": "stdout", "text": text}], "execution_count": 1}
        return {"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}

    from course.build import notebook_differences

    assert notebook_differences(notebook(["measured"], "9.8 ms\n"), notebook(["measured"], "10.4 ms\n")) == []
    assert notebook_differences(notebook([], "9.8 ms\n"), notebook([], "10.4 ms\n")) == ["cell 0 (timing), output 0: text differs"]
    changed = notebook(["measured"], "9.8 ms\n")
    changed["cells"][0]["source"] = "print(best_time(repeats=5))"
    assert notebook_differences(notebook(["measured"], "9.8 ms\n"), changed) == ["cell 0 (timing): source differs"]
