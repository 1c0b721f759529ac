"""Hostile and honest submissions of 01_two_phases, made from the release notebook.

Each kind is what one student hands in: the blank release or the reference
answers (both from the committed notebooks), with a cheat, an attack, a
tampering or an honest slip written in.  ``tests/test_adversarial.py`` grades
all of them in one run and checks every score and flag; run this file to
write them out for a look (``python tests/adversarial.py FOLDER``).

Points of 01_two_phases, 40 autograded: the reference scores 40, the blank 0.
"""

from __future__ import annotations

import copy
import pickle
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from course import demo
from course.grading.nbgrader_run import RELEASE, SOURCE, read_notebook, write_notebook

ASSIGNMENT = "01_two_phases"
NOTEBOOK = f"{ASSIGNMENT}.ipynb"
FULL, BLANK = 40, 0


@dataclass(frozen=True)
class Kind:
    """One submission: how to make it, the score it must get, and a text its flags must contain."""

    name: str
    make: Callable[[dict, dict], dict]  # (blank release, reference-filled release) -> notebook
    score: float
    flag: str | None = None  # a substring of the flags column, or None where nothing need be flagged
    status: str = "graded"
    filename: str = NOTEBOOK


def _cell(code: str, cell_id: str) -> dict:
    return {"cell_type": "code", "id": cell_id, "metadata": {}, "source": code, "outputs": [],
            "execution_count": None}


def _index(notebook: dict, grade_id: str) -> int:
    return next(i for i, c in enumerate(notebook["cells"])
                if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == grade_id)


def extra(code: str, base: str = "blank", after: str = "setup") -> Callable[[dict, dict], dict]:
    """The blank (or reference) notebook with a cell of the student's own after ``after``."""
    def make(blank: dict, reference: dict) -> dict:
        notebook = copy.deepcopy(blank if base == "blank" else reference)
        notebook["cells"].insert(_index(notebook, after) + 1, _cell(code, "student-extra"))
        return notebook
    return make


def answer(grade_id: str, code: str, base: str = "blank") -> Callable[[dict, dict], dict]:
    """The blank (or reference) notebook with one answer cell written."""
    def make(blank: dict, reference: dict) -> dict:
        notebook = copy.deepcopy(blank if base == "blank" else reference)
        notebook["cells"][_index(notebook, grade_id)]["source"] = code
        return notebook
    return make


def tamper(change: Callable[[list], None]) -> Callable[[dict, dict], dict]:
    """The reference notebook with its cell list changed in place by ``change``."""
    def make(blank: dict, reference: dict) -> dict:
        notebook = copy.deepcopy(reference)
        change(notebook["cells"])
        return notebook
    return make


def _meta_of(cells: list, grade_id: str) -> dict:
    return next(c for c in cells if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == grade_id)[
        "metadata"]["nbgrader"]


def _set(grade_id: str, **changes) -> Callable[[list], None]:
    return lambda cells: _meta_of(cells, grade_id).update(changes)


def _delete(grade_id: str) -> Callable[[list], None]:
    return lambda cells: cells.pop(next(i for i, c in enumerate(cells)
                                        if c["metadata"].get("nbgrader", {}).get("grade_id") == grade_id))


def _retype(grade_id: str) -> Callable[[list], None]:
    def change(cells):
        cell = next(c for c in cells if c["metadata"].get("nbgrader", {}).get("grade_id") == grade_id)
        cell["cell_type"] = "markdown"
        cell.pop("outputs", None)
        cell.pop("execution_count", None)
    return change


def _duplicate(grade_id: str) -> Callable[[list], None]:
    def change(cells):
        index = next(i for i, c in enumerate(cells) if c["metadata"].get("nbgrader", {}).get("grade_id") == grade_id)
        pasted = copy.deepcopy(cells[index])
        pasted["id"] = "pasted-" + pasted["id"]
        cells.insert(index + 1, pasted)
    return change


def _edit_locked(cells: list) -> None:
    setup = next(c for c in cells if c["metadata"].get("nbgrader", {}).get("grade_id") == "setup")
    setup["source"] += "\nimport types\nrl = types.SimpleNamespace()  # the tests now see a fake library\n"


# Everything a checker-faking cheat needs: a checker whose every check passes.
_FAKE_CHECKER = (
    "import contextlib, types\n"
    "fake = types.SimpleNamespace(exercise=lambda *a, **k: None, quantity=lambda *a, **k: None,\n"
    "                             number=lambda *a, **k: None,\n"
    "                             choice=lambda *a, **k: None, derive_yourself=contextlib.nullcontext,\n"
    "                             reference=lambda: __import__('rooflab'))\n"
)



class _RunsOnLoad:
    """Unpickling this runs ``code``: what a pickled payload hidden in a cell does."""

    def __init__(self, code: str):
        self.code = code

    def __reduce__(self):
        return (exec, (self.code,))


# A payload that installs an input transformer answering the grader's probe from the checker's reference copy:
# the probe's request cell gets prefill_flops defined first, from the reference.
_PAYLOAD = pickle.dumps(_RunsOnLoad(
    "import rooflab.check\n"
    "_ref = rooflab.check.reference()\n"
    "def _answer(lines):\n"
    "    if any('_rooflab_probe(' in line for line in lines):\n"
    "        return ['prefill_flops = lambda model, prompt_len: _ref.prefill(model.name, \"H100\", prompt_len, '\n"
    "                'allow_overflow=True).flops\\n'] + lines\n"
    "    return lines\n"
    "get_ipython().input_transformers_post.append(_answer)\n"))

KINDS: list[Kind] = [
    # --- cheats: tricks that made a blank notebook pass the in-kernel tests -------------------------
    Kind("input_transformer", extra(
        "ip = get_ipython()\n"
        "ip.input_transformers_post.append(\n"
        "    lambda lines: ['pass\\n'] if any('check.' in line for line in lines) else lines)\n"),
        BLANK, "input_transformers_post"),
    Kind("reload_replaced", extra(_FAKE_CHECKER + "import importlib\nimportlib.reload = lambda module: fake\n"),
         BLANK, "import importlib"),
    Kind("import_hook", extra(
        _FAKE_CHECKER + "import builtins\n_real = builtins.__import__\n"
        "def _hooked(name, *args, **kwargs):\n"
        "    module = _real(name, *args, **kwargs)\n"
        "    return fake if name == 'rooflab.check' else module\n"
        "builtins.__import__ = _hooked\n"), BLANK, "import builtins"),
    Kind("meta_path_finder", extra(
        "import sys, importlib.abc\n"
        "class Finder(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        return None\n"
        "sys.meta_path.insert(0, Finder())\n"), BLANK, "meta_path"),
    Kind("fake_check_module", extra(
        "import os, rooflab\n"
        "fake = 'def quantity(*a, **k): pass\\ndef number(*a, **k): pass\\ndef choice(*a, **k): pass\\n'\n"
        "for folder in [os.getcwd(), *rooflab.__path__]:\n"
        "    try:\n"
        "        with open(os.path.join(folder, 'check.py'), 'w') as handle:\n"
        "            handle.write(fake)\n"
        "    except OSError as error:\n"
        "        print('refused:', error)\n"), BLANK),
    # The one-line test cells read `check` from the setup cell: rebinding it, patching its exercise() or the
    # registry of cases fools the kernel's own run of the tests, never the grader's.
    Kind("check_rebound", extra(_FAKE_CHECKER + "check = fake\n"), BLANK, "passed in the kernel"),
    Kind("exercise_patched", extra("import rooflab.check\nrooflab.check.exercise = lambda *a, **k: None\n"),
         BLANK, "passed in the kernel"),
    Kind("cases_emptied", extra(
        "import dataclasses, rooflab.exercises as ex\n"
        "ex._load()\n"
        "for key, spec in list(ex._EXERCISES.items()):\n"
        "    ex._EXERCISES[key] = dataclasses.replace(spec, visible=())\n"), BLANK, "_EXERCISES"),
    Kind("settrace", extra(
        "import sys\n"
        "def skip_asserts(frame, event, arg):\n"
        "    return None\n"
        "sys.settrace(skip_asserts)\n"), BLANK, "settrace"),
    Kind("pre_run_cell_hook", extra(
        "def neuter(info):\n"
        "    import rooflab.check as c\n"
        "    c.quantity = c.number = c.choice = lambda *a, **k: None\n"
        "get_ipython().events.register('pre_run_cell', neuter)\n"), BLANK, "import rooflab.check"),
    Kind("reference_copy", answer("ex2_prefill_flops",
        "import rooflab.check\n"
        "def prefill_flops(model, prompt_len):\n"
        "    return rooflab.check.reference().prefill(model.name, 'H100', prompt_len, allow_overflow=True).flops\n"),
        BLANK, "library answer"),
    Kind("ref_global_left_by_tests", answer("ex2_prefill_flops",
        "def prefill_flops(model, prompt_len):\n"
        "    return ref.prefill(model.name, 'H100', prompt_len, allow_overflow=True).flops\n"),
        BLANK, ".prefill"),
    Kind("alias_of_library", answer("ex2_prefill_flops",
        "from rooflab import prefill as _p\n"
        "def prefill_flops(model, prompt_len):\n"
        "    return _p(model, 'H100', prompt_len, allow_overflow=True).flops\n"),
        BLANK, "library answer"),
    Kind("second_library_copy", answer("ex2_prefill_flops",
        "import importlib.util, os, rooflab\n"
        "spec = importlib.util.spec_from_file_location('copy_of_rooflab', os.path.join(rooflab.__path__[0], "
        "'__init__.py'), submodule_search_locations=list(rooflab.__path__))\n"
        "twin = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(twin)\n"
        "def prefill_flops(model, prompt_len):\n"
        "    return getattr(twin, 'pre' + 'fill')(model.name, 'H100', prompt_len, allow_overflow=True).flops\n"),
        BLANK, "rewrites code"),
    Kind("saved_code_object", answer("ex2_prefill_flops",
        "import rooflab as _r\n"
        "_saved = _r.serving.prefill.__code__\n"
        "def _mine(model, device, prompt_len, *args, **kwargs):\n"
        "    pass\n"
        "_mine.__code__ = _saved\n"
        "def prefill_flops(model, prompt_len):\n"
        "    return _mine(model, 'H100', prompt_len).flops\n"), BLANK, "__code__"),
    Kind("getsource_exec", answer("ex2_prefill_flops",
        "import inspect, rooflab.serving\n"
        "ns = {}\n"
        "exec(inspect.getsource(rooflab.serving).replace('from .', 'from rooflab.'), ns)\n"
        "def prefill_flops(model, prompt_len):\n"
        "    return ns['pre' + 'fill'](model, 'H100', prompt_len).flops\n"), BLANK, "exec"),
    Kind("numpy_all_patched", answer("ex2_prefill_flops",
        "import numpy\n"
        "numpy.all = lambda *args, **kwargs: True\n"
        "def prefill_flops(model, prompt_len):\n"
        "    return Q_(1.0, 'FLOP')\n"), BLANK, "numpy.all rebound"),
    Kind("pint_patched", answer("ex2_prefill_flops",
        "import pint\n"
        "pint.Quantity.m_as = lambda self, *args, **kwargs: 1.0\n"
        "def prefill_flops(model, prompt_len):\n"
        "    return Q_(1.0, 'FLOP')\n"), BLANK),
    Kind("always_equal", answer("ex7_share",
        "class Yes:\n"
        "    def __eq__(self, other): return True\n"
        "    def __ne__(self, other): return False\n"
        "    def __float__(self): return 0.5\n"
        "def decode_share(ttft, itl, output_len):\n"
        "    return Yes()\n"), BLANK),
    Kind("float_subclass_equal", answer("ex7_share",
        "class Yes(float):\n"
        "    def __eq__(self, other): return True\n"
        "    def __le__(self, other): return True\n"
        "    def __ge__(self, other): return True\n"
        "    __hash__ = float.__hash__\n"
        "def decode_share(ttft, itl, output_len):\n"
        "    return Yes(12345.0)\n"), BLANK),
    Kind("reference_patched_in_kernel", extra(
        "import rooflab.check\n"
        "copy = rooflab.check.reference()\n"
        "copy.prefill = lambda *args, **kwargs: None\n"
        "copy.model = lambda name: None\n", base="blank"), BLANK),
    Kind("hard_coded_visible", lambda blank, reference: demo._edited("hard_coded")(
        ASSIGNMENT, blank, demo.answers_of(read_notebook(SOURCE / ASSIGNMENT / NOTEBOOK))), 12),
    # The cheats on main, each scoring more than its honest work there: now what the honest work earns.
    Kind("pickled_transformer", extra(f"import _pickle\n_pickle.loads({_PAYLOAD!r})\n"), BLANK, "import _pickle"),
    Kind("reference_by_attrgetter", answer("ex2_prefill_flops",
        "import operator, pydoc\n"
        "def prefill_flops(model, prompt_len):\n"
        "    operator.attrgetter('check.reference')(rl)()\n"
        "    found = pydoc.locate('_rooflab_reference.serving.prefill')\n"
        "    return found(model.name, 'H100', prompt_len, allow_overflow=True).flops\n"), BLANK, ".attrgetter"),
    Kind("reduce_getattr", answer("ex2_prefill_flops",
        "import functools\n"
        "def prefill_flops(model, prompt_len):\n"
        "    found = functools.reduce(getattr, ['serving', 'pre' + 'fill'], rl)\n"
        "    return found(model, 'H100', prompt_len, allow_overflow=True).flops\n"), BLANK, "getattr handed to"),
    Kind("dict_of_functions", lambda blank, reference: answer("ex2_prefill_flops",
        "def prefill_flops(model, prompt_len):\n"
        "    return tools['prefill'](model, 'H100', prompt_len, allow_overflow=True).flops\n")(
        extra("tools = {'prefill': rl.prefill, 'decode': rl.decode_step}\n")(blank, reference), reference),
        BLANK, ".prefill"),
    Kind("derive_yourself_patched", answer("ex2_prefill_flops",
        "import contextlib, rooflab.check\n"
        "rooflab.check.derive_yourself = lambda *functions: contextlib.nullcontext()\n"
        "def prefill_flops(model, prompt_len):\n"
        "    return rl.prefill(model, 'H100', prompt_len, allow_overflow=True).flops\n"), BLANK, "derive_yourself"),
    Kind("timeit_on_text", answer("ex2_prefill_flops",
        "import timeit\n"
        "def prefill_flops(model, prompt_len):\n"
        "    box = {}\n"
        "    timeit.timeit('box[0] = rl.prefill(model, \"H100\", prompt_len, allow_overflow=True).flops', number=1,\n"
        "                  globals={**globals(), 'box': box, 'model': model, 'prompt_len': prompt_len})\n"
        "    return box[0]\n"), BLANK, "code as text"),
    Kind("units_bomb", answer("ex7_share",
        "class Units:\n"
        "    def __format__(self, spec):\n"
        "        return '10**10**10'\n"
        "class Bomb:\n"
        "    __module__ = 'pint.bomb'  # what the probe reads as a quantity\n"
        "    magnitude = 0.5\n"
        "    units = Units()\n"
        "def decode_share(ttft, itl, output_len):\n"
        "    return Bomb()\n"), BLANK),
    # --- attacks on the grader, other students and the machine; the honest answers still score -------
    Kind("gradebook_write", extra(
        "import glob, os\n"
        "for path in glob.glob('/**/gradebook.db', recursive=True) + ['../../gradebook.db', '../gradebook.db']:\n"
        "    try:\n"
        "        with open(path, 'wb') as handle:\n"
        "            handle.write(b'wiped')\n"
        "        print('wrote', path)\n"
        "    except OSError as error:\n"
        "        print('refused', path, error)\n", base="reference"), FULL),
    Kind("detached_writer", extra(
        "import subprocess, sys\n"
        "subprocess.Popen([sys.executable, '-c', 'import time, glob\\ntime.sleep(3)\\n"
        "[open(p, \"w\").write(\"student,score\\\\nme,40\\\\n\") for p in glob.glob(\"/**/grades.csv\", "
        "recursive=True)]'], start_new_session=True)\n", base="reference"), FULL, "import subprocess"),
    Kind("reads_other_submissions", extra(
        "import glob\n"
        "found = glob.glob('/**/*.ipynb', recursive=True) + glob.glob('/**/source/**', recursive=True)\n"
        "print(len(found), 'notebooks or source files visible:', found[:5])\n"
        "assert not [f for f in found if '01_two_phases' in f], 'another notebook is visible'\n",
        base="reference"), FULL),
    Kind("kills_parent", extra("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n", base="reference",
                               after="test_prefill_flops_visible"), FULL, "cell student-extra"),
    Kind("kills_everything_it_can", extra("import os, signal\nos.kill(-1, signal.SIGKILL)\n", base="reference",
                                          after="test_prefill_flops_visible"), FULL, "cell student-extra"),
    Kind("loopback_connection", extra(
        "import socket\n"
        "for port in (22, 80, 8888, 5432):\n"
        "    try:\n"
        "        socket.create_connection(('127.0.0.1', port), timeout=1)\n"
        "        print('connected to', port)\n"
        "    except OSError as error:\n"
        "        print(port, error)\n", base="reference"), FULL, "import socket"),
    Kind("two_hundred_processes", extra(
        "import subprocess\n"
        "children = []\n"
        "try:\n"
        "    for _ in range(200):\n"
        "        children.append(subprocess.Popen(['sleep', '61.2345']))\n"
        "except OSError as error:\n"
        "    print('stopped after', len(children), error)\n", base="reference"), FULL, "import subprocess"),
    Kind("twenty_gib", extra(
        "try:\n"
        "    hog = bytearray(20 * 2**30)\n"
        "except MemoryError:\n"
        "    print('refused')\n", base="reference"), FULL),
    Kind("two_gb_write", extra(
        "try:\n"
        "    with open('big.bin', 'wb') as handle:\n"
        "        for _ in range(2000):\n"
        "            handle.write(b'x' * 2**20)\n"
        "except OSError as error:\n"
        "    print('refused', error)\n", base="reference"), FULL),
    Kind("ignores_signals_and_loops", extra(
        "import signal\n"
        "for s in (signal.SIGINT, signal.SIGTERM):\n"
        "    signal.signal(s, signal.SIG_IGN)\n"
        "while True:\n"
        "    pass\n", base="reference", after="test_prefill_flops_visible"), FULL,
        "cell student-extra did not finish"),
    Kind("kills_its_kernel", extra("import os\nos._exit(1)\n", base="reference", after="test_prefill_flops_visible"),
         FULL,
         "cell student-extra"),
    Kind("huge_output", extra("print('x' * 50_000_000)\n", base="reference"), FULL),
    # --- tampering with the notebook's structure: repaired from the release ---------------------------
    Kind("test_marked_not_graded", tamper(_set("test_prefill_flops_hidden", grade=False)), FULL),
    Kind("points_inflated", tamper(_set("test_prefill_flops_visible", points=1000)), FULL),
    Kind("test_cell_deleted", tamper(_delete("test_weight_bytes_hidden")), FULL),
    Kind("answer_cell_retyped", tamper(_retype("ex7_share")), FULL),
    Kind("answer_cell_duplicated", tamper(_duplicate("ex2_weight_bytes")), FULL),
    Kind("locked_setup_edited", tamper(_edit_locked), FULL),
    # --- honest students -----------------------------------------------------------------------------
    Kind("correct", lambda blank, reference: copy.deepcopy(reference), FULL),
    Kind("blank", lambda blank, reference: copy.deepcopy(blank), BLANK),
    # roofline_time [4] fails; ttft_and_itl, which calls it, passes with the course's version (a slip charged
    # once); the ratios survive (tests/test_grading.py, dmitri)
    Kind("milliseconds_for_seconds", lambda blank, reference: demo._edited("ms_for_s")(
        ASSIGNMENT, blank, demo.answers_of(read_notebook(SOURCE / ASSIGNMENT / NOTEBOOK))), 36,
        "passes with the course's roofline_time"),
    Kind("noisy_warnings", extra(
        "import sys, warnings\nwarnings.warn('a deprecation I cannot fix')\nprint('noise', file=sys.stderr)\n",
        base="reference"), FULL),
    # Lines a real class writes in week one: full marks, and nothing for the instructor to read.
    Kind("matplotlib_inline", extra("%matplotlib inline\n", base="reference"), FULL),
    Kind("timeit_magic", extra("%timeit sum(range(100))\n", base="reference", after="test_prefill_flops_visible"),
         FULL),
    Kind("prints_globals", extra("print(sorted(globals()))\n", base="reference"), FULL),
    Kind("warning_hook", extra(
        "def remind(result):\n"
        "    if result.error_in_exec is not None:\n"
        "        print('warning: that cell failed; fix it before going on')\n"
        "get_ipython().events.register('post_run_cell', remind)\n", base="reference"), FULL),
    Kind("imports_os", extra("import os\nprint(os.getcwd(), os.listdir('.'))\n", base="reference"), FULL),
    Kind("renamed_file", lambda blank, reference: copy.deepcopy(reference), FULL, filename="01_two_phases (2).ipynb"),
]


def write_submissions(folder: Path, kinds: list[Kind] = KINDS) -> list[Kind]:
    """Write one student per kind under ``folder`` (``folder/<kind>/01_two_phases/<notebook>``)."""
    blank = read_notebook(RELEASE / ASSIGNMENT / NOTEBOOK)
    reference = demo.fill(blank, demo.answers_of(read_notebook(SOURCE / ASSIGNMENT / NOTEBOOK)))
    for kind in kinds:
        write_notebook(kind.make(blank, reference), folder / kind.name / ASSIGNMENT / kind.filename)
    return kinds


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "adversarial-class")
    written = write_submissions(target)
    print(f"wrote {len(written)} submissions under {target}")
