"""nbgrader's Execute step, replaced: the notebook runs in a sandbox, the tests run here.

:class:`SandboxedExecute` takes Execute's place in ``Autograde.autograde_preprocessors``
(nbgrader_config.py).  nbgrader still restores the locked cells and hidden
tests from its gradebook first, and still reads the scores from the test
cells' outputs afterwards; in between, this step

1. sends the notebook, with every hidden test removed, to the student's
   kernel in its sandbox (:mod:`course.grading.sandbox`), and takes back the outputs;
2. runs each graded test cell's trusted code in this process against that
   kernel (:mod:`course.grading.trusted`), with the derivation rules read from the
   student's source (:mod:`course.grading.source_rules`), and writes the verdict as
   the cell's outputs, which is what nbgrader scores;
3. records, per submission, the flags for the instructor: uses of the tools
   the rules watch, cells lost to a hang or a crash, and test cells that
   passed in the kernel but not here (the signature of a faked checker).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Bool, Float, Integer, Unicode

from rooflab.exercises import ASSIGNMENTS

from . import cells as cells_
from . import library_copy, source_rules, trusted
from .sandbox import Sandbox, SandboxError, SandboxLimits

HIDDEN = cells_.HIDDEN
ASSERTS = trusted.ASSERTS
_text, _meta, is_test, is_student = cells_.text, cells_.meta, cells_.is_test, cells_.is_student


def for_the_sandbox(notebook: dict) -> dict:
    """The notebook as the kernel may see it: hidden tests removed, outputs cleared."""
    cells = []
    for cell in notebook["cells"]:
        cell = dict(cell)
        if cell.get("cell_type") == "code":
            cell["outputs"], cell["execution_count"] = [], None
            if is_test(cell):
                cell["source"] = cells_.without_hidden(_text(cell), "# (hidden tests: run by the grader)\n")
        cells.append(cell)
    return dict(notebook, cells=cells)


# What a cell's error says when the sandbox's library copy lacks a name (a course cell showing a library answer, a
# prediction recorded with the checker, whose reveals live in the removed exercise modules).
_MISSING = [re.compile(p) for p in (r"cannot import name '(\w+)' from 'rooflab", r"module 'rooflab[\w.]*' has no attribute '(\w+)'",
                                     r"object has no attribute '(\w+)'", r"name '(\w+)' is not defined")]
# Only these names count: a student's own typo (rl.prefil) keeps its error.
_LEFT_OUT = source_rules.LIBRARY_ANSWERS | {"exercises", "reference"}


def _explained(output: dict) -> dict:
    """An error output caused by the grader's copy of the library, replaced by a note that says so; others as they are.

    Cells that show the library's own answers, or record a prediction, fail at
    grading because the copy leaves the answers and the checker's reveals out
    (:mod:`course.grading.library_copy`).  The student and the instructor read
    the autograded notebook (the feedback page, formgrader): a traceback the
    student did not cause would read as their error.
    """
    if output.get("output_type") != "error":
        return output
    message = f"{output.get('ename', '')}: {output.get('evalue', '')}"
    for pattern in _MISSING:
        found = pattern.search(message)
        if found and found.group(1) in _LEFT_OUT:
            name = found.group(1)
            return {"output_type": "stream", "name": "stdout",
                    "text": f"(Not run at grading: the grader's copy of the library leaves out `{name}`, as it leaves "
                            "out every answer students derive and the checker's reveals. This cell's output is in "
                            "your own notebook; it is not part of the grade.)\n"}
    return output


def grade_notebook(notebook: dict, kind: str, limits: SandboxLimits, hide: list[Path] = (),
                   release: dict | None = None, library: Path | None = None) -> tuple[dict, dict]:
    """Run ``notebook`` (after nbgrader restored its tests) and grade it; return (notebook with outputs, record).

    ``release`` is the student's starting copy: its cells, where unchanged, are the
    course's own code, not the student's.  ``library`` is the assignment's copy of
    the library without its answers (:mod:`course.grading.library_copy`), shown to the
    kernel in place of lib/.  The record holds the flags, the lost cells and the
    verdict of every test cell.
    """
    provided = {(c.get("id"), _text(c)) for c in (release or {}).get("cells", []) if not _meta(c).get("solution")}
    record: dict = {"isolation": kind, "flags": [], "lost": [], "tests": {}}
    sandbox = Sandbox(for_the_sandbox(notebook), kind=kind, limits=limits, hide=list(hide), library=library)
    try:
        try:
            executed = sandbox.run()
        except SandboxError as error:
            record["problem"] = str(error)
            executed = None
        cells = [dict(c) for c in notebook["cells"]]
        if executed is not None:
            for cell, ran in zip(cells, executed["cells"]):
                if cell.get("cell_type") == "code":
                    outputs = ran.get("outputs", []) if isinstance(ran.get("outputs"), list) else []
                    cell["outputs"] = outputs if is_test(cell) else [_explained(o) for o in outputs]
                    count = ran.get("execution_count")
                    cell["execution_count"] = count if isinstance(count, int) else None
        for lost in sandbox.lost:
            cell = cells[lost.index]
            where = _meta(cell).get("grade_id") or cell.get("id")
            cell["outputs"] = [{"output_type": "error", "ename": "GraderError",
                                "evalue": f"this cell {lost.why}; the grader ran the rest of the notebook without it",
                                "traceback": [f"GraderError: this cell {lost.why}"]}]
            record["lost"].append(f"cell {where} {lost.why}")
        student = source_rules.Notebook.read([(c.get("id") or f"cell-{i}", _text(c)) for i, c in enumerate(cells)
                                              if is_student(c) and (c.get("id"), _text(c)) not in provided])
        record["flags"] = [str(u) for u in student.flags()]
        answer_cell = {}
        for cell in cells:
            if _meta(cell).get("solution") and cell.get("cell_type") == "code":
                for name in source_rules.read_cell(cell.get("id", ""), _text(cell)).defines:
                    answer_cell.setdefault(name, cell.get("id"))
        setup = [_text(c) for c in cells if cells_.is_setup(c)]
        base = trusted.setup_namespace(setup)
        for cell in cells:
            if not is_test(cell):
                continue
            grade_id = _meta(cell).get("grade_id")
            code = _text(cell)
            in_kernel = not any(o.get("output_type") == "error" for o in cell.get("outputs", []))
            if executed is None:
                verdict = trusted.Verdict(False, error=("GraderError", record["problem"]))
            else:
                derivation = {name: student.derivation_problem(name, answer_cell.get(name), banned)
                              for name, banned in trusted.derived_names(code).items()}
                verdict = trusted.run_test(code, base, sandbox, derivation)
            visible = ASSERTS.search(cells_.without_hidden(code))
            if visible and in_kernel and not verdict.passed and executed is not None:
                record["flags"].append(f"{grade_id} passed in the kernel but fails here (a faked checker?)")
            record["flags"] += verdict.notes
            record["tests"][grade_id] = {"passed": verdict.passed, "error": verdict.error}
            cell["outputs"] = verdict.outputs()
        if executed is not None:
            _charge_once(cells, student, base, sandbox, record)
    finally:
        sandbox.close()
    record["flags"] = list(dict.fromkeys(record["flags"]))  # a note met by the visible and the hidden test: once
    record["restarts"] = sandbox.restarts
    record["sandbox_start_seconds"] = sandbox.started_seconds
    return dict(notebook, cells=cells), record


def _charge_once(cells: list, student: source_rules.Notebook, base: dict, sandbox: Sandbox, record: dict) -> None:
    """A slip is charged once: a test that fails only because an earlier wrong function it calls is re-run.

    Once every test has run, each failing test whose answers call (directly or
    through the notebook's other functions) a function that failed its own
    test, and of which the course has a version (``rooflab.earlier``), runs
    again with the course's version standing in for the student's in the
    kernel.  If it passes then, it gets its points, and its feedback names the
    function to fix and that function's own failure.
    """
    from rooflab import earlier

    tests = [(c, _meta(c).get("grade_id"), _text(c)) for c in cells if is_test(c)]
    own: dict[str, list[str]] = {}  # the student's function -> the tests that check it
    for _, grade_id, code in tests:
        for name in trusted.answers_tested(code):
            own.setdefault(name, []).append(grade_id)
    failed = {name: next(g for g in ids if not record["tests"][g]["passed"]) for name, ids in own.items()
              if any(not record["tests"][g]["passed"] for g in ids)}
    for cell, grade_id, code in tests:
        if record["tests"][grade_id]["passed"]:
            continue
        answers = trusted.answers_tested(code)
        uses = set().union(*(student.depends_on(a) for a in answers)) if answers else set()
        slips = sorted(name for name in uses - set(answers) if name in failed and name in earlier.WRITTEN_IN)
        if not slips:
            continue
        verdict = trusted.retest_with_course_versions(code, base, sandbox, {n: n for n in slips})
        if not verdict.passed:
            continue
        because = "; ".join(f"{n} is wrong (its test {failed[n]}: {_first_line(record['tests'][failed[n]]['error'])})"
                            for n in slips)
        note = (f"This test fails only because {because}. With the course's {', '.join(slips)} it passes, so it "
                f"keeps its points: fix {', '.join(slips)} first.")
        record["tests"][grade_id] = {"passed": True, "error": None, "cascade": slips}
        record["flags"].append(f"{grade_id} passes with the course's {', '.join(slips)} (a slip charged once)")
        cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": note + "\n"}]


_LIMITS = SandboxLimits()  # the defaults, defined once (course/grading/sandbox.py)


def _first_line(error) -> str:
    return str(error[1]).splitlines()[0][:300] if error else "it failed"


class SandboxedExecute(NbGraderPreprocessor):
    """Execute, in a sandbox, with the tests run by the grader (see the module's docstring)."""

    isolation = Unicode("bwrap", help="bwrap, unshare or none").tag(config=True)
    cell_seconds = Float(_LIMITS.cell_seconds, help="Seconds one cell or one request may take").tag(config=True)
    memory_bytes = Integer(_LIMITS.memory_bytes, help="Address space of each sandboxed process").tag(config=True)
    processes = Integer(_LIMITS.processes, help="Processes the sandbox may run").tag(config=True)
    file_bytes = Integer(_LIMITS.file_bytes, help="Largest file the sandbox may write").tag(config=True)
    disk_bytes = Integer(_LIMITS.disk_bytes, help="Bytes the sandbox may write in all, per folder").tag(config=True)
    record_dir = Unicode("", help="Where each submission's grading record (flags, lost cells) goes").tag(config=True)
    hide = Unicode("", help="Folders to cover when the isolation is unshare, separated by ':'").tag(config=True)
    release_dir = Unicode("", help="The release folder: its unchanged cells are the course's code").tag(config=True)
    show_expected = Bool(False, help="Show the expected value when a hidden case fails (off: hidden cases can be "
                                     "used again next semester)").tag(config=True)

    def preprocess(self, nb, resources):
        import nbformat

        limits = SandboxLimits(cell_seconds=self.cell_seconds, memory_bytes=self.memory_bytes,
                               processes=self.processes, file_bytes=self.file_bytes, disk_bytes=self.disk_bytes)
        hide = [Path(p) for p in self.hide.split(":") if p]
        info = resources.get("nbgrader", {})
        release = None
        if self.release_dir:
            path = Path(self.release_dir) / str(info.get("assignment", "")) / f"{info.get('notebook', '')}.ipynb"
            release = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
        from rooflab import check

        check.SHOW_EXPECTED_ON_HIDDEN = self.show_expected  # the grader's own checker runs the tests
        assignment = str(info.get("assignment", ""))
        library = library_copy.for_assignment(assignment) if assignment in ASSIGNMENTS else None
        graded, record = grade_notebook(json.loads(nbformat.writes(nb)), self.isolation, limits, hide, release,
                                        library)
        if self.record_dir:
            target = Path(self.record_dir) / str(info.get("student", "unknown")) / f"{info.get('assignment', 'x')}.json"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(json.dumps(record, indent=1), encoding="utf-8")
        return nbformat.reads(json.dumps(graded), as_version=4), resources
