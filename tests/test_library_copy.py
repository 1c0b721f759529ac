"""The grading sandbox's copy of the library: the assignment's answers are absent from its source, and one list
(rooflab.exercises.DERIVED) decides what the checker switches off, what the source rules note and what the copy
leaves out."""

import ast
import json
import os
import subprocess
import sys
import textwrap

import pytest

from course.grading import library_copy
from course.grading import source_rules
from course.grading import sandbox
from rooflab import check, earlier, exercises
from rooflab.exercises import ASSIGNMENTS, DERIVED, derived, resolve


def test_every_name_on_the_list_is_a_library_function():
    for dotted in derived():
        assert resolve(dotted) is not None, dotted
    assert set(DERIVED) == set(ASSIGNMENTS)


def test_the_checker_the_source_rules_and_the_exercises_agree_with_the_list():
    on_list = {id(resolve(d)) for d in derived()}
    assert {id(f) for f in check.library_answers()} == on_list
    assert source_rules.LIBRARY_ANSWERS == {d.rpartition(".")[2] for d in derived()} | set(earlier.WRITTEN_IN)
    for spec in exercises.all_exercises():
        if isinstance(spec.derive, tuple):  # an exercise that switches off a few by name: each is on the list
            assert set(spec.derive) <= set(derived()), spec.name
        if spec.derive:
            assert {id(f) for f in spec.banned()} <= on_list | {id(getattr(earlier, n)) for n in earlier.WRITTEN_IN}


def _defined(folder):
    """Dotted names of every function and method defined in the copy's source, and the files it holds."""
    found, files = set(), []
    for path in sorted((folder / "rooflab").rglob("*")):
        if path.is_dir():
            continue
        files.append(path)
        if path.suffix != ".py":
            continue
        module = ".".join(path.relative_to(folder / "rooflab").with_suffix("").parts)
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                found.add(f"{module}.{node.name}")
            if isinstance(node, ast.ClassDef):
                found |= {f"{module}.{node.name}.{i.name}" for i in node.body if isinstance(i, ast.FunctionDef)}
    return found, files


@pytest.mark.parametrize("assignment", list(ASSIGNMENTS))
def test_the_copy_has_none_of_what_it_removes_and_no_bytecode(assignment, tmp_path):
    chosen = library_copy.write(assignment, tmp_path)
    defined, files = _defined(tmp_path)
    assert not chosen.removed & defined
    assert "check.reference" in chosen.removed and "check.exercise" in defined
    assert not [f for f in files if f.suffix in (".pyc", ".pyo") or "__pycache__" in f.parts]
    assert not [f for f in files if f.parent.name == "exercises" and f.name != "__init__.py"]
    # The course's versions of this assignment's exercises are gone; earlier assignments' stay, to build on.
    order = list(ASSIGNMENTS)
    for name, written in earlier.WRITTEN_IN.items():
        later = order.index(written) >= order.index(assignment)
        assert (f"earlier.{name}" in defined) != later or f"earlier.{name}" in chosen.kept, name
    # What of the list stays is said, with the code that needs it.
    for dotted in derived(order[order.index(assignment):]):
        assert dotted in chosen.removed or dotted in chosen.kept, dotted


def test_the_first_assignments_copy_loses_its_derivations_but_keeps_the_tools_its_answers_use(tmp_path):
    chosen = library_copy.write("01_two_phases", tmp_path)
    # serving.prefill goes although SteadyState.at reads a field named prefill (self.prefill is not the function).
    for gone in ("serving.prefill", "serving.decode_step", "roofline.roofline", "models.Model.weight_bytes",
                 "models.Model.flops_per_token", "crossover.balanced_output_len", "fleet.frontier"):
        assert gone in chosen.removed, gone
    # sla_verdict (01, not a derivation) is answered with rl.request and rl.memory_budget.
    assert chosen.kept["serving.request"] == "the course's answers"
    script = textwrap.dedent("""\
        import sys
        sys.path.insert(0, sys.argv[1])
        import rooflab as rl, rooflab.check, rooflab.plots, rooflab.widgets
        llama, h100 = rl.model("Llama-3-8B"), rl.hardware("H100")
        print(rl.__file__.startswith(sys.argv[1]), hasattr(rl, "decode_step") or hasattr(rl, "prefill"), hasattr(rooflab.check, "reference"),
              hasattr(llama, "weight_bytes"), rl.request(llama, h100, 2000, 100).ttft.m_as("ms") > 0)
        """)
    done = subprocess.run([sys.executable, "-I", "-c", script, str(tmp_path)], capture_output=True, text=True,
                          cwd=tmp_path, timeout=120)
    assert done.stdout.split() == ["True", "False", "False", "False", "True"], done.stderr[-2000:]


def test_the_copy_is_made_once_and_reused(tmp_path):
    first = library_copy.for_assignment("02_kv_cache", cache=tmp_path)
    stamp = (first / "rooflab" / "serving.py").stat().st_mtime_ns
    assert library_copy.for_assignment("02_kv_cache", cache=tmp_path) == first
    assert (first / "rooflab" / "serving.py").stat().st_mtime_ns == stamp
    assert library_copy.for_assignment("01_two_phases", cache=tmp_path) != first


def test_an_unknown_assignment_is_refused_by_name():
    with pytest.raises(ValueError, match="assignment must be one of 01_two_phases"):
        library_copy.plan("99_nothing")


# Run inside the sandbox: what of the library a kernel can read, anywhere it can look.
_LOOK = textwrap.dedent("""\
    import os, sys, json, importlib.util
    import rooflab, rooflab.check
    seen = {"file": rooflab.__file__, "reference": hasattr(rooflab.check, "reference"),
            "decode_step": hasattr(rooflab, "decode_step")}
    try:
        from rooflab.serving import decode_step
        seen["import"] = "imported"
    except ImportError:
        seen["import"] = "absent"
    found = []
    roots = {p for p in sys.path if p and os.path.isdir(p)} | {os.path.dirname(rooflab.__path__[0]), "/tmp",
                                                               os.path.expanduser("~"), sys.prefix}
    for root in sorted(roots):
        for folder, _, names in os.walk(root):
            for name in names:
                path = os.path.join(folder, name)
                if name.endswith((".pyc", ".pyo")) and name.split(".")[0] in ("serving", "check", "roofline",
                                                                               "models", "crossover", "fleet"):
                    try:
                        data = open(path, "rb").read()
                    except OSError:
                        continue
                    if b"rooflab" in data or b"_decode_total_si" in data:  # a name only the library uses
                        found.append(path)
                elif name.endswith(".py") and ("rooflab" in path or "editable" in name):
                    try:
                        text = open(path, encoding="utf-8", errors="replace").read()
                    except OSError:
                        continue
                    # The library's function, not a method of that name (the numpy transformer's decode_step).
                    if "\\ndef decode_step(" in text or "\\ndef reference(" in text:
                        found.append(path)
    seen["found"] = sorted(set(found))[:20]
    print(json.dumps(seen))
    """)


@pytest.mark.slow
def test_in_the_sandbox_no_derivation_function_and_no_bytecode_of_one_is_readable(tmp_path):
    kind = sandbox.isolation()
    if kind == sandbox.NO_SANDBOX:
        (pytest.fail if os.environ.get("CI") else pytest.skip)("no sandbox on this machine: " + sandbox.INSTALL_HINT)
    copy = library_copy.for_assignment("01_two_phases", cache=tmp_path)
    notebook = {"cells": [{"cell_type": "code", "id": "look", "metadata": {}, "source": _LOOK, "outputs": [],
                           "execution_count": None}],
                "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
                "nbformat": 4, "nbformat_minor": 5}
    box = sandbox.Sandbox(notebook, kind=kind, limits=sandbox.SandboxLimits(cell_seconds=60), library=copy)
    try:
        executed = box.run()
    finally:
        box.close()
    outputs = executed["cells"][0]["outputs"]
    text = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
    assert text, outputs
    seen = json.loads(text.strip().splitlines()[-1])
    assert seen["file"] == str(sandbox.LIBRARY / "rooflab" / "__init__.py")
    assert (seen["reference"], seen["decode_step"], seen["import"]) == (False, False, "absent")
    assert seen["found"] == []
