"""nbgrader's cell kinds and the hidden-test markers, defined once for the course's code.

>>> test = {"cell_type": "code", "metadata": {"nbgrader": {"grade": True, "grade_id": "t", "points": 1}},
...         "source": "check(1)\\n### BEGIN HIDDEN TESTS\\ncheck(2)\\n### END HIDDEN TESTS\\n"}
>>> is_test(test), is_solution(test)
(True, False)
>>> without_hidden(text(test))
'check(1)\\n'
"""

from __future__ import annotations

import re

HIDDEN_BEGIN, HIDDEN_END = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"
SOLUTION_BEGIN, SOLUTION_END = "### BEGIN SOLUTION", "### END SOLUTION"
MARKERS = (SOLUTION_BEGIN, SOLUTION_END, HIDDEN_BEGIN, HIDDEN_END)
# A hidden block with its markers; group 1 is what it hides.
HIDDEN = re.compile(re.escape(HIDDEN_BEGIN) + r"\n?(.*?)" + re.escape(HIDDEN_END) + r"\n?", re.S)


def meta(cell: dict) -> dict:
    """The cell's nbgrader metadata ({} when it has none)."""
    return (cell.get("metadata") or {}).get("nbgrader") or {}


def text(cell: dict) -> str:
    """The cell's source as one string (notebooks store it as a string or a list of lines)."""
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def is_test(cell: dict) -> bool:
    """An autograder test cell: graded code that is not an answer."""
    found = meta(cell)
    return cell.get("cell_type") == "code" and bool(found.get("grade")) and not found.get("solution")


def is_solution(cell: dict) -> bool:
    """An answer cell (code or written)."""
    return bool(meta(cell).get("solution"))


def is_student(cell: dict) -> bool:
    """A code cell whose code the student wrote: an answer cell or one of their own."""
    found = meta(cell)
    return cell.get("cell_type") == "code" and (not found or bool(found.get("solution")))


def is_setup(cell: dict) -> bool:
    """A locked code cell of the course's that is neither a test nor an answer (imports, models, devices)."""
    found = meta(cell)
    return (cell.get("cell_type") == "code" and bool(found.get("locked")) and not found.get("grade")
            and not found.get("solution"))


def without_hidden(source: str, note: str = "") -> str:
    """``source`` with every hidden-test block removed (replaced by ``note``)."""
    return HIDDEN.sub(note, source)


def unmarked(source: str) -> str:
    """``source`` with the hidden-test markers taken out and the tests kept (how the grader runs them)."""
    return source.replace(HIDDEN_BEGIN + "\n", "").replace(HIDDEN_END + "\n", "").replace(
        HIDDEN_BEGIN, "").replace(HIDDEN_END, "")
