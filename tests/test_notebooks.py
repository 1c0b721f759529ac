"""The assignments' notebooks: structure, points, test-cell hygiene, and what the reference run shows."""

import json
import math
import re

import pytest

import rooflab as rl
from course.build import ASSERTS, HIDDEN, check_source
from course.nbgrader_run import RELEASE, SOLUTIONS, SOURCE, assignments

ASSIGNMENTS = assignments()
POINTS = {  # (autograded, written) points of each assignment
    "01_two_phases": (40, 10),
    "02_kv_cache": (30, 10),
    "03_quantization": (25, 5),
    "04_crossover": (30, 10),
    "05_under_load": (30, 0),
    "06_cost": (30, 10),
    "07_tail": (30, 10),
    "08_measure": (25, 5),
}


def cells(folder, assignment):
    path = next((folder / assignment).glob("*.ipynb"))
    return json.loads(path.read_text())["cells"]


def text(cell):
    return cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])


def nbgrader(cell):
    return cell.get("metadata", {}).get("nbgrader", {})


def test_teaching_order():
    assert ASSIGNMENTS[0] == "01_two_phases" and ASSIGNMENTS == sorted(ASSIGNMENTS)


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_source_rules_hold(assignment):
    for path in (SOURCE / assignment).glob("*.ipynb"):
        assert check_source(path) == []


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_points_add_up(assignment):
    source = cells(SOURCE, assignment)
    auto = sum(nbgrader(c)["points"] for c in source if nbgrader(c).get("grade") and c["cell_type"] == "code")
    written = sum(nbgrader(c)["points"] for c in source if nbgrader(c).get("grade") and c["cell_type"] == "markdown")
    assert (auto, written) == POINTS[assignment]
    assert (auto + written) % 10 == 0


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_every_function_exercise_has_visible_and_hidden_tests(assignment):
    tests = [nbgrader(c)["grade_id"] for c in cells(SOURCE, assignment) if nbgrader(c).get("grade") and c["cell_type"] == "code"]
    visible = {t[: -len("_visible")] for t in tests if t.endswith("_visible")}
    hidden = {t[: -len("_hidden")] for t in tests if t.endswith("_hidden")}
    # 05 asks for four larger exercises, each a model built on the one before (the steady state, its frontier, the
    # search under the SLA), within the same 60-90 minutes as six smaller ones elsewhere.
    assert visible == hidden and len(visible) >= (4 if assignment == "05_under_load" else 6)


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_test_cells_check_something_and_use_the_trusted_checker(assignment):
    """The checker comes from the locked setup cell; each test cell checks something (tests/test_exercises.py
    holds them to one line)."""
    setup = next(text(c) for c in cells(SOURCE, assignment) if c["id"] == "setup")
    assert "from rooflab import" in setup and "check" in setup
    for cell in cells(SOURCE, assignment):
        if nbgrader(cell).get("grade") and cell["cell_type"] == "code":
            source = text(cell)
            assert not re.search(r"(?<![.\w])Q_\(", source), f"{nbgrader(cell)['grade_id']} uses the notebook's Q_"
            assert ASSERTS.search(source), f"{nbgrader(cell)['grade_id']} checks nothing"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_release_is_blank_and_clean(assignment):
    for cell in cells(RELEASE, assignment):
        assert not cell.get("outputs")
        if nbgrader(cell).get("solution") and cell["cell_type"] == "code":
            assert "raise NotImplementedError()" in text(cell)


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_solutions_ran_without_errors(assignment):
    for cell in cells(SOLUTIONS, assignment):
        for output in cell.get("outputs", []):
            assert output["output_type"] != "error", f"{cell['id']}: {output.get('evalue')}"
            assert not (output["output_type"] == "stream" and output["name"] == "stderr"), cell["id"]


def test_two_phases_quotes_the_library():
    """The figures the notebook shows come from the library, so the text cannot contradict it."""
    shown = "".join(text_of(cell) for cell in cells(SOLUTIONS, "01_two_phases"))
    llama, h100 = rl.model("Llama-3-8B"), rl.hardware("H100")
    assert f"{rl.prefill(llama, h100, 2000).time:.1f~P}" in shown  # 29.3 ms
    assert f"ITL {rl.decode_step(llama, h100, 2000).time:.2f~P}" in shown  # 4.56 ms, not "a fraction of a ms"
    assert f"{rl.request(llama, h100, 2000, 300).decode_share.magnitude:.1%} decoding" in shown
    assert "'T4': 'does not fit'" in shown
    assert "image/png" in json.dumps(cells(SOLUTIONS, "01_two_phases"))  # the roofline figure


def test_under_load_quotes_the_library():
    """05's figures, printed from the student's derivations, are the library's steady state, bend and SLA search."""
    solved = cells(SOLUTIONS, "05_under_load")
    shown = "".join(text_of(cell) for cell in solved)
    llama, h100 = rl.model("Llama-3-8B"), rl.hardware("H100")
    best = rl.best_under_sla(llama, h100, 2000, 300, rl.Q_(500, "ms"), rl.Q_(50, "ms"), efficiency="typical")
    assert f"ITL <=  50 ms: batch {best.batch:3}" in shown
    assert f"bends at batch {rl.decode_compute_bound_batch(llama, h100, 2149, efficiency='typical')}" in shown
    s = rl.steady_state(llama, h100, 2000, 300, 64, efficiency="typical")
    assert f"batch  64: ITL {s.itl.m_as('ms'):5.1f} ms, {s.output_throughput.m_as('token/s'):6,.0f} tokens/s" in shown
    assert "image/png" in json.dumps(solved)  # the frontier figure


def test_cost_quotes_the_library():
    """06_cost's figures come from the library, and the model answer of the written question matches them."""
    solved = cells(SOLUTIONS, "06_cost")
    shown = "".join(text_of(cell) for cell in solved)
    llama, h100 = rl.model("Llama-3-8B"), rl.hardware("H100")
    sla = dict(ttft_limit=rl.Q_(500, "ms"), itl_limit=rl.Q_(50, "ms"))
    best = rl.best_under_sla(llama, h100, 2000, 300, **sla, efficiency="typical")
    assert f"best batch {best.batch}" in shown and f"{best.cost_per_million(rl.example_price(h100)):.2f~P}" in shown
    s = rl.steady_state(llama, h100, 2000, 300, 64, efficiency="typical")
    price = rl.example_price(h100)
    assert f"{s.cost_per_million_input(price):.3f~P} for prompt tokens" in shown
    assert f"{s.cost_per_million_output(price):.3f~P} for generated ones" in shown
    brief = rl.best_under_sla("Llama-3-70B", h100, 1500, 250, rl.Q_(1, "s"), rl.Q_(50, "ms"), "fp8", tp=2,
                              efficiency="typical")
    pairs = math.ceil(20 / (brief.request_rate.m_as("1/s") * 2))
    monthly = pairs * 2 * rl.example_price(h100).m_as("USD/h") * 730
    assert f"fp8, tp=2: batch {brief.batch:3} per copy" in shown and f"${round(monthly, -2):7,.0f} a month" in shown
    answer = text(next(c for c in solved if c["id"] == "written_deployment"))
    assert (pairs, brief.batch) == (4, 64) and f"{round(monthly, -2):,.0f}" in answer  # "about $23,100"
    assert f"{brief.cost_per_million(rl.example_price(h100)).m_as('USD/Mtok'):.2f}" in answer  # "$1.70"


def text_of(cell):
    return "".join(o.get("text", "") if isinstance(o.get("text", ""), str) else "".join(o["text"])
                   for o in cell.get("outputs", [])) + "".join(
        o.get("data", {}).get("text/plain", "") if isinstance(o.get("data", {}).get("text/plain", ""), str)
        else "".join(o["data"]["text/plain"]) for o in cell.get("outputs", []))


def test_tail_worked_examples_print_the_library_and_type_none_of_its_figures():
    """06's worked examples print their figures from code (typical efficiency may be refitted; usable memory may be
    re-sourced), so its text types none of them and its worked cells ask the library."""
    source = cells(SOURCE, "07_tail")
    shown = "".join(text(cell) for cell in source if cell["cell_type"] == "markdown")
    tokens = rl.memory_budget("Llama-3-8B", "H100", 1, gpu_memory_utilization=0.9).max_tokens
    step = rl.decode_step("Mistral-7B", "A100-80GB", 1099, 32, efficiency="typical").time.m_as("ms")
    prefill = rl.prefill("Mistral-7B", "A100-80GB", 1000, efficiency="typical").time.m_as("ms")
    batch = rl.best_under_sla("Llama-3-8B", "H100", 2000, 300, itl_limit=rl.Q_(50, "ms"), efficiency="typical").batch
    for figure in (f"{tokens:,}", f"{tokens // 16:,}", f"{step:.1f} ms", f"{prefill:.1f} ms",
                   f"{step + prefill:.1f} ms", f"batch {batch}"):
        assert figure not in shown, figure
    code = {cell["id"]: text(cell) for cell in source if cell["cell_type"] == "code"}
    assert "rl.memory_budget(llama, h100, 1, gpu_memory_utilization=0.9).max_tokens" in code["ex3_worked"]
    assert 'rl.decode_step(mistral, a100, mean_context(1000, 200), 32, efficiency="typical")' in code["ex2_worked"]
    assert 'rl.prefill(mistral, a100, 1000, efficiency="typical")' in code["ex2_worked"]
    assert "rl.best_under_sla(" in code["ex2_show"]
