"""The grader's side of the line: hostile replies decoded safely, test cells run with stand-ins, rules read from source."""

import numpy as np
import pytest

from course.grading import source_rules
from course.grading import trusted
from rooflab import Q_, model


class FakeKernel:
    """A kernel that answers from a table, as the sandboxed one would, and records the requests."""

    def __init__(self, names: dict, calls=None):
        self.names, self.calls, self.requests = names, calls or {}, []

    def request(self, message):
        self.requests.append(message)
        if message["op"] == "describe":
            return {"ok": True, "names": {n: self.names.get(n, {"kind": "missing"}) for n in message["names"]}}
        return self.calls[message["name"]](message)


def test_decode_builds_our_quantities_and_refuses_the_rest():
    assert trusted.decode({"__quantity__": 29.3, "units": "millisecond"}) == Q_(29.3, "ms")
    assert trusted.decode({"__tuple__": [1, "memory"]}) == (1, "memory")
    array = trusted.decode({"__quantity__": {"__array__": [1.0, 2.0]}, "units": "byte"})
    assert np.allclose(array.m_as("B"), [1, 2])
    assert isinstance(trusted.decode({"__quantity__": 1.0, "units": "furlongs_of_doom"}), trusted.Unreadable)
    assert isinstance(trusted.decode({"__repr__": "Yes: <object>"}), trusted.Unreadable)
    assert isinstance(trusted.decode({"__quantity__": 1.0, "units": "x" * 500}), trusted.Unreadable)
    assert trusted.decode({"__record__": "Model", "name": "Llama-3-8B"}) == model("Llama-3-8B")
    for hostile in ({"__quantity__": "1e3", "units": "s"}, {"__array__": [[1], "x"]}, {"what": 1},
                    [[[[[[[[[[1]]]]]]]]]], {"__float__": "__import__('os')"}):
        with pytest.raises(trusted.Malformed):
            trusted.decode(hostile)


@pytest.mark.parametrize("text, expected", [
    ("millisecond", "ms"), ("byte / second", "B/s"), ("1 / second", "1/s"), ("byte ** 2", "B**2"), ("", "1"),
    ("dimensionless", "1"), ("dollar / hour / token", "USD/h/token"), ("second ** -2", "1/s**2"),
    ("gibibyte", "GiB"),
])
def test_unit_text_is_read_as_names_and_small_powers(text, expected):
    assert trusted.read_units(text) == Q_(1, expected).units


@pytest.mark.parametrize("text", [
    "10**10**10", "byte ** 10**10", "byte ** 7", "(byte)", "byte /", "/ byte", "byte * * second", "1 / 1",
    "__import__('os')", "byte " * 30, "furlongs_of_doom", "byte;second", None, 3,
])
def test_any_other_unit_text_is_unreadable_at_once(text):
    assert isinstance(trusted.read_units(text), trusted.Unreadable)
    assert isinstance(trusted.decode({"__quantity__": 1.0, "units": text}), trusted.Unreadable)


def test_encode_sends_records_and_quantities_as_plain_data():
    sent = trusted.encode((model("Llama-3-8B"), Q_(200, "ms"), np.array([1, 2]), {"a": 1}))
    assert sent["__tuple__"][0]["__record__"] == "Model" and sent["__tuple__"][0]["fields"]["layers"] == 32
    assert sent["__tuple__"][1] == {"__quantity__": 200, "units": "millisecond"}
    with pytest.raises(TypeError):
        trusted.encode(object())


def test_a_test_cell_runs_here_against_the_students_answers():
    code = ('import rooflab.check as check\n'
            'check.quantity(double(Q_(1, "ms")), Q_(2, "ms"), "double")\n'
            'check.choice(phase, "prefill", "phase")\n')
    right = FakeKernel({"double": {"kind": "callable"}, "phase": {"kind": "value", "value": "prefill"}},
                       {"double": lambda m: {"ok": True, "value": {"__quantity__": 2.0, "units": "millisecond"}}})
    verdict = trusted.run_test(code, {"Q_": Q_}, right)
    assert verdict.passed, verdict.error
    assert right.requests[1]["args"] == [{"__quantity__": 1, "units": "millisecond"}]
    wrong = FakeKernel({"double": {"kind": "callable"}, "phase": {"kind": "value", "value": "prefill"}},
                       {"double": lambda m: {"ok": True, "value": {"__quantity__": 2.0, "units": "second"}}})
    verdict = trusted.run_test(code, {"Q_": Q_}, wrong)
    assert not verdict.passed and "milliseconds for seconds" in verdict.error[1]


def test_an_object_that_equals_everything_is_rejected():
    code = 'import rooflab.check as check\ncheck.number(share(), 0.5, "share")\n'
    kernel = FakeKernel({"share": {"kind": "callable"}},
                        {"share": lambda m: {"ok": True, "value": {"__repr__": "Yes: <always equal>"}}})
    assert not trusted.run_test(code, {}, kernel).passed


def test_the_students_exception_keeps_its_builtin_class():
    code = 'try:\n    f()\nexcept ValueError:\n    pass\nelse:\n    raise AssertionError("should raise")\n'
    kernel = FakeKernel({"f": {"kind": "callable"}},
                        {"f": lambda m: {"ok": False, "error": "UnsupportedPrecision", "message": "no fp8",
                                         "bases": ["UnsupportedPrecision", "ValueError", "Exception"]}})
    assert trusted.run_test(code, {}, kernel).passed


def test_derived_names_and_what_each_block_switches_off():
    code = ("with check.derive_yourself():\n    a = f(1)\n"
            "with check.derive_yourself(rooflab.crossover.balanced_output_len):\n    b = g(2)\n")
    assert trusted.derived_names(code) == {"f": None, "g": frozenset({"balanced_output_len"})}
    code = "with check.derive_yourself(*check.library_answers(), rooflab.crossover.attention_crossover_len):\n    c = h(3)\n"
    assert trusted.derived_names(code) == {"h": None}  # the default set and more: every library answer


def test_one_line_exercise_cells_name_their_derivations():
    # prefill_flops (assignment 1) is a derivation with everything switched off: the default set
    assert trusted.derived_names('check.exercise("prefill_flops", prefill_flops)') == {"prefill_flops": None}
    assert trusted.derived_names('check.exercise("prefill_flops", prefill_flops, cases=[("Gemma-2B", 9)])') == {
        "prefill_flops": None}
    assert trusted.derived_names('check.exercise("no_such_exercise", f)') == {}


def test_a_later_assignment_may_build_on_the_course_versions_of_earlier_exercises():
    from rooflab import earlier, exercises

    later = exercises.Exercise("later", "02_kv_cache", lambda *a: None, (), derive=True)
    banned = later.banned()
    assert earlier.decode_flops not in banned and earlier.roofline_time not in banned  # assignment 1's: build on them
    assert earlier.decode_step_time in banned and earlier.kv_bytes_per_token in banned  # assignment 2's own answers
    first = exercises.get("prefill_flops").banned()
    assert earlier.prefill_flops in first and earlier.decode_flops in first
    cells = [("a", "from rooflab.earlier import prefill_flops as p\ndef f(m, n):\n    return p(m, n)")]
    assert "import prefill_flops" in source_rules.Notebook.read(cells).derivation_problem("f", "a")


@pytest.mark.parametrize("cells, problem", [
    ([("a", "def f(m, n):\n    return 2 * m.layers * n")], None),
    ([("a", "def f(m, n):\n    return rl.prefill(m, 'H100', n).flops")], ".prefill"),
    ([("a", "from rooflab import prefill as p\ndef f(m, n):\n    return p(m, 'H100', n).flops")], "import prefill"),
    ([("a", "def f(m, n):\n    return helper(m, n)"), ("b", "def helper(m, n):\n    return m.weight_bytes('fp16')")],
     ".weight_bytes"),
    ([("a", "def f(m, n):\n    return g(m, n)"), ("b", "g = rl.decode_step")], ".decode_step"),
    ([("a", "def f(m, n):\n    return getattr(rl, 'pre' + 'fill')(m, 'H100', n)")], "computed name"),
    ([("a", "def f(m, n):\n    return 1"), ("b", "def f(m, n):\n    return 2")], "outside its answer cell"),
    ([("a", "def f(m, n):\n    return ref.prefill(m.name, 'H100', n).flops")], ".prefill"),
    ([("a", "def f(m, n):\n    return check.reference().model(m.name)")], ".reference"),
    # The issue's cheats that the old rules let through.
    ([("a", "import functools\ndef f(m, n):\n    return functools.reduce(getattr, ['serving', 'x'], rl)(m)")],
     "getattr handed to functools.reduce"),
    ([("a", "def f(m, n):\n    return table['p'](m, 'H100', n).flops"), ("b", "table = {'p': rl.prefill}")],
     ".prefill"),
    ([("a", "import operator\ndef f(m, n):\n    return operator.attrgetter('check.reference')(rl)()")],
     ".attrgetter"),
    ([("a", "import timeit\ndef f(m, n):\n    return timeit.timeit('x = 1', number=1)")], "code as text"),
    # Honest helpers, magics and prints in the notebook: nothing to note about f.
    ([("a", "def f(m, n):\n    print(sorted(globals()))\n    return 2 * m.layers * n"),
      ("b", "%matplotlib inline"), ("c", "%timeit f(1, 2)"), ("d", "import os\nprint(os.getcwd())")], None),
])
def test_derivation_notes_read_from_the_source(cells, problem):
    found = source_rules.Notebook.read(cells).derivation_problem("f", "a")
    if problem is None:
        assert found is None
    else:
        assert found is not None and problem in found, found


@pytest.mark.parametrize("line", [
    "%matplotlib inline", "%timeit sum(range(10))", "print(sorted(globals()))", "import os\nprint(os.listdir('.'))",
    "ip = get_ipython()\nip.events.register('post_run_cell', lambda result: print('remember to save'))",
    "import warnings\nwarnings.warn('slow cell')", "with open('notes.txt', 'w') as handle:\n    handle.write('x')",
    "!ls", "import numpy as np\nx = np.linspace(0, 1, 5)", "import sys\nprint('noise', file=sys.stderr)",
])
def test_honest_lines_raise_no_flag(line):
    assert source_rules.Notebook.read([("a", line)]).flags() == []


@pytest.mark.parametrize("line, flag", [
    ("get_ipython().input_transformers_post.append(lambda lines: lines)", "input_transformers_post"),
    ("import rooflab.check\nrooflab.check.exercise = lambda *a, **k: None", "rooflab.check"),
    ("import rooflab.check as c\nc.derive_yourself = None", "derive_yourself"),
    ("check = None", "check rebound"),
    ("import _pickle\n_pickle.loads(b'')", "import _pickle"),
    ("import numpy\nnumpy.all = lambda *a, **k: True", "numpy.all rebound"),
    ("import sys\nsys.settrace(None)", ".settrace"),
    ("import subprocess", "import subprocess"),
    ("exec('x = 1')", "exec"),
    ("import pydoc\npydoc.locate('rooflab.serving')", "import pydoc"),
])
def test_what_touches_the_checker_or_rewrites_code_is_flagged(line, flag):
    flags = [str(u) for u in source_rules.Notebook.read([("a", line)]).flags()]
    assert any(flag in f for f in flags), flags


def test_the_library_calls_the_notebooks_invite_are_not_flagged():
    notebook = source_rules.Notebook.read([("a", "import subprocess\nr = rl.request(llama, h100, 10, 10)")])
    flags = [str(u) for u in notebook.flags()]
    assert any("import subprocess" in f for f in flags)
    assert not any("request" in f for f in flags)


def test_a_derivation_note_is_a_flag_and_costs_nothing():
    code = 'import rooflab.check as check\ncheck.quantity(f(1), Q_(2, "ms"), "f")\n'
    kernel = FakeKernel({"f": {"kind": "callable"}},
                        {"f": lambda m: {"ok": True, "value": {"__quantity__": 2.0, "units": "millisecond"}}})
    verdict = trusted.run_test(code, {"Q_": Q_}, kernel, {"f": "f relies on .prefill (library answer, cell a)"})
    assert verdict.passed and verdict.error is None
    assert verdict.notes == ["derivation: f relies on .prefill (library answer, cell a)"]
    assert "no points taken" in verdict.stdout and ".prefill" in verdict.stdout
