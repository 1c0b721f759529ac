"""`course build`: release/ and solutions/ are exactly what the source makes, and the checks catch leaks."""

import json
import subprocess
import sys

import pytest

from course.build import (_by_source, build, check_points, check_readme_points, check_release, check_source,
                          name_cells)
from course.nbgrader_run import RELEASE, ROOT, SOLUTIONS


def _snapshot():
    return {p: p.read_bytes() for folder in (RELEASE, SOLUTIONS) for p in sorted(folder.glob("*/*.ipynb"))}


@pytest.mark.slow
def test_build_changes_nothing_committed_and_passes_its_checks():
    before = _snapshot()
    report = build(log=lambda message: None)
    after = _snapshot()
    assert report.problems == []
    assert set(after) == set(before)
    changed = [str(p) for p in before if before[p] != after[p]]
    assert not changed, f"regenerated files differ from the committed ones: {changed}; run `course build` and commit"


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
