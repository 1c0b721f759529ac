"""Pre-flight: what nbgrader would choke on is found, and the notebook is rebuilt with the student's work kept."""

import copy
import json

import pytest

from course.grading import preflight
from course.demo import answers_of, fill
from course.grading.nbgrader_run import RELEASE, SOURCE, read_notebook

ASSIGNMENT = "01_two_phases"


@pytest.fixture(scope="module")
def release():
    return read_notebook(RELEASE / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")


@pytest.fixture
def done(release):
    return fill(release, answers_of(read_notebook(SOURCE / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")))


def grade_ids(notebook):
    return [c["metadata"].get("nbgrader", {}).get("grade_id") for c in notebook["cells"]
            if c["metadata"].get("nbgrader")]


def test_a_clean_submission_needs_nothing(done, release):
    assert preflight.diagnose(done, release) == []


def test_duplicate_keeps_the_last_copy(done, release):
    index = grade_ids(done).index("ex2_weight_bytes")
    cells = [c for c in done["cells"] if c["metadata"].get("nbgrader")]
    original = cells[index]
    pasted = copy.deepcopy(original)
    pasted["id"] = "pasted"
    pasted["source"] = "def weight_bytes(model, precision='fp16'):\n    return 'edited copy'"
    done["cells"].insert(done["cells"].index(original) + 1, pasted)
    assert any("appears 2 times" in issue for issue in preflight.diagnose(done, release))
    rebuilt = preflight.rebuild(done, release)
    assert grade_ids(rebuilt) == grade_ids(release)
    answer = next(c for c in rebuilt["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == "ex2_weight_bytes")
    assert "edited copy" in answer["source"]  # after Run All, the later definition is the one in force


def test_deleted_and_retyped_cells_are_restored(done, release):
    done["cells"] = [c for c in done["cells"]
                     if c["metadata"].get("nbgrader", {}).get("grade_id") != "test_prefill_flops_visible"]
    retyped = next(c for c in done["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == "ex7_share")
    retyped["cell_type"] = "markdown"
    retyped.pop("outputs"), retyped.pop("execution_count")
    issues = preflight.diagnose(done, release)
    assert any("'test_prefill_flops_visible' was deleted" in i for i in issues)
    assert any("'ex7_share' was changed from code to markdown" in i for i in issues)
    rebuilt = preflight.rebuild(done, release)
    assert grade_ids(rebuilt) == grade_ids(release)
    share = next(c for c in rebuilt["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == "ex7_share")
    assert share["cell_type"] == "code" and "def decode_share" in share["source"]


def test_students_own_cells_stay_where_they_were(done, release):
    helper = {"cell_type": "code", "id": "my-helper", "metadata": {}, "outputs": [], "execution_count": 3,
              "source": "def helper():\n    return 42"}
    anchor = next(i for i, c in enumerate(done["cells"]) if c["id"] == "ex2_intro")
    done["cells"].insert(anchor + 1, helper)
    done["cells"] = [c for c in done["cells"] if c["id"] != "test_share_visible"]  # forces a rebuild
    rebuilt = preflight.rebuild(done, release)
    ids = [c["id"] for c in rebuilt["cells"]]
    assert ids[ids.index("ex2_intro") + 1] == "my-helper"
    assert rebuilt["cells"][ids.index("my-helper")]["outputs"] == []


def test_unreadable_files_get_a_reason(tmp_path, release):
    cut = tmp_path / f"{ASSIGNMENT}.ipynb"
    cut.write_text(json.dumps(release)[:500])
    result = preflight.prepare("s", ASSIGNMENT, [cut], RELEASE / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")
    assert result.notebook is None and "not valid JSON" in result.problem
    other = tmp_path / "list.ipynb"
    other.write_text("[1, 2]")
    assert "not a notebook" in preflight.load(other)[1]


def test_a_renamed_notebook_is_found(tmp_path, done):
    renamed = tmp_path / f"{ASSIGNMENT} (1).ipynb"
    renamed.write_text(json.dumps(done))
    result = preflight.prepare("s", ASSIGNMENT, [renamed], RELEASE / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")
    assert result.notebook is not None and result.notes == [f"renamed {renamed.name} to {ASSIGNMENT}.ipynb"]


def test_two_candidate_notebooks_are_not_guessed(tmp_path, done):
    files = []
    for name in ("a.ipynb", "b.ipynb"):
        (tmp_path / name).write_text(json.dumps(done))
        files.append(tmp_path / name)
    result = preflight.prepare("s", ASSIGNMENT, files, RELEASE / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")
    assert result.notebook is None and "found 2 notebooks" in result.problem
