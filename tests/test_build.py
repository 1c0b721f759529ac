"""`course build`: release/ and solutions/ are exactly what the source makes, and the checks catch leaks."""

import json

import pytest

from course.build import build, check_release, check_source
from course.nbgrader_run import RELEASE, SOLUTIONS


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
