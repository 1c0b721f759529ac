"""The grade of record: the course's test cells run in the grader's process, never in the student's kernel.

A test cell's code comes from ``source/`` (through nbgrader's gradebook), so it
is trusted.  It runs here, with the trusted library (``rooflab``, ``check``,
``ref``), in a namespace where every name the student defined is a stand-in:
a value the kernel sent as plain data, or a :class:`Remote` whose call is
forwarded to the student's kernel in its sandbox and whose result comes back
as plain data.  Expected values and comparisons never leave this process, so
patching anything inside the kernel (the checker, numpy, pint, importlib,
IPython) can only change the student's own answers.

Exercises that ask for a derivation are also read on the source
(:mod:`course.grading.source_rules`): what that finds is a flag for the instructor,
never a change of score.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import dataclasses
import io
import re
import warnings
from dataclasses import dataclass, field

import numpy as np


from .cells import HIDDEN_BEGIN, HIDDEN_END, unmarked

HIDDEN_BLOCK = (HIDDEN_BEGIN, HIDDEN_END)
# What makes a test cell a test: a check of the course's checker, or an assert.
ASSERTS = re.compile(r"check\.(exercise|quantity|number|choice)\(|\bassert\b")
MAX_ITEMS = 100_000
MAX_TEXT = 10_000


class Unreadable:
    """A value the kernel sent that is not plain data (an object, an unknown unit): every check rejects it."""

    def __init__(self, what: str):
        self.what = what[:300]

    def __repr__(self) -> str:
        return f"<{self.what}>"


class StudentError(Exception):
    """An exception raised by the student's code in the kernel, carried here by name and message."""


class Malformed(ValueError):
    """A reply that breaks the protocol."""


# -- plain data, both ways ----------------------------------------------------

def encode(value, depth: int = 0):
    """A trusted value (record, quantity, array, number, text) as plain JSON data for the kernel."""
    import pint

    if depth > 8:
        raise ValueError("argument nested too deeply")
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, np.ndarray):
        return {"__array__": value.astype(float).tolist()}
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, pint.Quantity):
        magnitude = value.magnitude
        magnitude = magnitude.tolist() if isinstance(magnitude, np.ndarray) else magnitude
        return {"__quantity__": {"__array__": magnitude} if isinstance(magnitude, list) else magnitude,
                "units": format(value.units, "D")}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        return {"__record__": type(value).__name__,
                "fields": {k: list(v) if isinstance(v, tuple) else v for k, v in fields.items()}}
    if isinstance(value, tuple):
        return {"__tuple__": [encode(v, depth + 1) for v in value]}
    if isinstance(value, list):
        return [encode(v, depth + 1) for v in value]
    if isinstance(value, dict):
        return {"__dict__": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in value.items()]}
    raise TypeError(f"cannot send a {type(value).__name__} to the student's kernel")


def _number(value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Malformed("not a number")
    return value


def decode(value, depth: int = 0):
    """A reply from the kernel (hostile) as trusted Python values; anything odd becomes :class:`Unreadable`."""
    from rooflab import Q_, hardware, model

    if depth > 8:
        raise Malformed("nested too deeply")
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        return value[:MAX_TEXT]
    if isinstance(value, list):
        if len(value) > MAX_ITEMS:
            raise Malformed("too many items")
        return [decode(v, depth + 1) for v in value]
    if not isinstance(value, dict):
        raise Malformed("unknown value")
    if "__quantity__" in value:
        units = value.get("units")
        magnitude = value["__quantity__"]
        if isinstance(magnitude, dict) and "__array__" in magnitude:
            magnitude = _array(magnitude["__array__"])
        elif isinstance(magnitude, dict) and "__float__" in magnitude:
            magnitude = _special_float(magnitude["__float__"])
        else:
            magnitude = _number(magnitude)
        unit = read_units(units)
        if isinstance(unit, Unreadable):
            return unit
        return Q_(magnitude, unit)
    if "__array__" in value:
        return _array(value["__array__"])
    if "__float__" in value:
        return _special_float(value["__float__"])
    if "__tuple__" in value and isinstance(value["__tuple__"], list):
        return tuple(decode(value["__tuple__"], depth + 1))
    if "__dict__" in value and isinstance(value["__dict__"], list):
        pairs = {}
        for pair in value["__dict__"][:MAX_ITEMS]:
            if not (isinstance(pair, list) and len(pair) == 2):
                raise Malformed("bad dict")
            key = decode(pair[0], depth + 1)
            if not isinstance(key, (str, int, float, bool, type(None), tuple)):
                raise Malformed("bad dict key")
            pairs[key] = decode(pair[1], depth + 1)
        return pairs
    if "__record__" in value:
        kind, name = value.get("__record__"), value.get("name")
        try:
            return {"Model": model, "Hardware": hardware}[kind](name)
        except Exception:
            return Unreadable(f"a {str(kind)[:40]} record")
    if "__repr__" in value:
        return Unreadable(str(value["__repr__"]))
    raise Malformed("unknown value")


# Unit text as the kernel's probe writes it (pint's "D" format): names joined by "*" and "/", small integer powers.
MAX_UNIT_TEXT = 120
MAX_UNIT_TERMS = 8
MAX_POWER = 6
_UNIT_TOKEN = re.compile(r"\s*(\*\*|\*|/|-?\d+|[A-Za-z_\u00b5\u03bc][A-Za-z0-9_\u00b5\u03bc]*)")


def read_units(text):
    """The pint unit that ``text`` names, or :class:`Unreadable`: never a parse of arbitrary text.

    Accepted: the registry's unit names (with its prefixes), joined by ``*`` and ``/``, each with an
    optional power ``** n`` of at most 6 in size, a leading ``1`` (``1 / second``), ``dimensionless`` or
    nothing; at most 120 characters and 8 names.  Anything else is refused at once, so a reply cannot hold
    the grading process (pint would evaluate ``10**10**10``).
    """
    from rooflab import ureg

    unreadable = Unreadable("a quantity whose units are not the registry's unit names joined by * and /")
    if not isinstance(text, str) or len(text) > MAX_UNIT_TEXT:
        return unreadable
    tokens, position = [], 0
    while position < len(text.rstrip()):
        match = _UNIT_TOKEN.match(text, position)
        if not match:
            return unreadable
        tokens.append(match.group(1))
        position = match.end()
    unit, sign, terms, index = ureg.dimensionless, 1, 0, 0
    while index < len(tokens):
        name = tokens[index]
        if name == "1" and index == 0:
            index += 1
        elif name[0].isdigit() or name[0] == "-" or name in ("*", "**", "/"):
            return unreadable
        else:
            terms += 1
            if terms > MAX_UNIT_TERMS:
                return unreadable
            power = 1
            if tokens[index + 1:index + 2] == ["**"]:
                if index + 2 >= len(tokens) or not re.fullmatch(r"-?\d", tokens[index + 2]):
                    return unreadable
                power = int(tokens[index + 2])
                if power == 0 or abs(power) > MAX_POWER:
                    return unreadable
                index += 2
            try:
                if name != "dimensionless" and not ureg.parse_unit_name(name):
                    return Unreadable(f"a quantity in units {text[:60]!r}, which rooflab does not know")
                unit = unit * ureg.Unit(name) ** (sign * power)
            except Exception:  # noqa: BLE001 - a name pint refuses: the value is unreadable, not a crash
                return Unreadable(f"a quantity in units {text[:60]!r}, which rooflab does not know")
            index += 1
        if index < len(tokens):
            if tokens[index] not in ("*", "/") or index + 1 >= len(tokens):
                return unreadable
            sign = -1 if tokens[index] == "/" else 1
            index += 1
    return unit


def _array(items) -> np.ndarray:
    if not isinstance(items, list) or len(items) > MAX_ITEMS:
        raise Malformed("bad array")
    flat = np.asarray(items, dtype=object)
    if flat.dtype == object and flat.ndim and not all(isinstance(x, (int, float)) and not isinstance(x, bool)
                                                       for x in flat.ravel()):
        raise Malformed("bad array")
    return np.asarray(items, dtype=float)


def _special_float(text) -> float:
    if text not in ("nan", "inf", "-inf"):
        raise Malformed("bad float")
    return float(text)


# -- stand-ins for the student's names ----------------------------------------

class Remote:
    """The student's function ``name``: calling it runs it in the kernel on the arguments, sent as plain data."""

    def __init__(self, name: str, kernel):
        self.name = name
        self._kernel = kernel

    def __repr__(self) -> str:
        return f"<the student's {self.name}>"

    def __call__(self, *args, **kwargs):
        request = {"op": "call", "name": self.name, "args": [encode(a) for a in args],
                   "kwargs": {k: encode(v) for k, v in kwargs.items()}, "derive": _deriving()}
        if _COURSE_VERSIONS:
            request["course"] = {"names": dict(_COURSE_VERSIONS), "source": _course_source()}
        reply = self._kernel.request(request)
        if not isinstance(reply, dict):
            raise StudentError(f"{self.name} gave the grader no readable answer")
        if reply.get("ok") is True:
            try:
                return decode(reply.get("value"))
            except Malformed as error:
                raise StudentError(f"{self.name} returned something the grader cannot read ({error})") from None
        raise _as_exception(reply)


# While a test is re-run for a cascade (see :func:`retest_with_course_versions`): the student's names to stand in
# for, each with the name of the course's version in rooflab.earlier.
_COURSE_VERSIONS: dict[str, str] = {}


def _course_source() -> str:
    """The source of rooflab.earlier, the course's versions of the exercises, sent to the kernel for a re-test."""
    from rooflab import earlier

    with open(earlier.__file__, encoding="utf-8") as handle:
        return handle.read()


def retest_with_course_versions(code: str, base: dict, kernel, names: dict[str, str]) -> Verdict:
    """Run a test again with the student's ``names`` (keys) replaced in the kernel by the course's versions.

    Used once every test has run: whether a failing exercise fails only because
    an earlier function it calls is wrong.
    """
    _COURSE_VERSIONS.clear()
    _COURSE_VERSIONS.update(names)
    try:
        return _run(unmarked(code), base, kernel)
    finally:
        _COURSE_VERSIONS.clear()


def _as_exception(reply: dict) -> Exception:
    """The student's exception as one the test cell can catch: a built-in or library class of the same name."""
    import rooflab

    name = str(reply.get("error", "Error"))[:80]
    message = str(reply.get("message", ""))[:MAX_TEXT]
    bases = reply.get("bases") if isinstance(reply.get("bases"), list) else [name]
    for base in bases:
        base = str(base)
        kind = getattr(rooflab, base, None) or getattr(builtins, base, None)
        if isinstance(kind, type) and issubclass(kind, Exception) and kind not in (Exception, BaseException):
            try:
                return kind(message)
            except Exception:
                continue
    return StudentError(f"{name}: {message}")


def _deriving() -> list[str]:
    """The library functions switched off here now (a test inside ``check.derive_yourself()``), by dotted name.

    The kernel switches off the same ones while the student's function runs; the
    names come from this trusted process, so patching the checker in the kernel
    (``check.derive_yourself``, ``check.library_answers``) changes nothing.
    """
    from rooflab import earlier
    from rooflab.check import _disabled
    from rooflab.exercises import derived, resolve

    names = [*derived(), *(f"earlier.{name}" for name in earlier.WRITTEN_IN)]
    off = []
    for dotted in names:
        found = resolve(dotted)
        found = found.fget if isinstance(found, property) else getattr(found, "__func__", found)
        if getattr(found, "__code__", None) is _disabled.__code__:
            off.append(dotted)
    return off


# -- test cells -----------------------------------------------------------------

def _assigned(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
    return names


def student_names(code: str, provided: set[str]) -> list[str]:
    """Names a test cell reads that neither it, the trusted setup nor Python defines: the student's."""
    tree = ast.parse(code)
    loaded = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return sorted(loaded - _assigned(tree) - provided - set(dir(builtins)))


def derived_names(code: str) -> dict[str, frozenset[str] | None]:
    """The student's functions called inside ``with check.derive_yourself(...):`` blocks of a test cell.

    Each maps to the library functions that block switches off, by name, or None
    for the default set (every library answer).
    """
    found: dict[str, frozenset[str] | None] = {}
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Call) and ast.unparse(node.func).split(".")[-1] == "exercise":
            found.update(_exercise_derivations(node))
            continue
        if not isinstance(node, ast.With):
            continue
        context = node.items[0].context_expr
        if not (isinstance(context, ast.Call) and "derive_yourself" in ast.unparse(context.func)):
            continue
        if any(isinstance(a, ast.Starred) for a in context.args):
            banned = None  # `*check.library_answers(), extra`: every library answer (the extras are among them)
        else:
            banned = frozenset(a.attr if isinstance(a, ast.Attribute) else getattr(a, "id", "") for a in context.args)
        for sub in ast.walk(node):
            if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name):
                found[sub.func.id] = banned or None
    return found


def _exercise_derivations(call: ast.Call) -> dict[str, frozenset[str] | None]:
    """For ``check.exercise("name", f, g, ...)``: the student's functions it passes, if the exercise is a derivation."""
    from rooflab import exercises

    from .source_rules import LIBRARY_ANSWERS

    if not (call.args and isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str)):
        return {}
    try:
        spec = exercises.get(call.args[0].value)
    except KeyError:
        return {}
    if not spec.derive:
        return {}
    if spec.derive is True:
        # What earlier assignments wrote may be built on; everything else the library answers is banned.
        allowed = spec.built_on()
        banned = frozenset(LIBRARY_ANSWERS - allowed) if allowed else None
    else:
        banned = frozenset(dotted.rpartition(".")[2] for dotted in spec.derive)
    return {a.id: banned for a in call.args[1:] if isinstance(a, ast.Name)}


def answers_tested(code: str) -> list[str]:
    """The student's names a test cell checks: the answers passed to ``check.exercise(name, answer, ...)``."""
    found = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Call) and ast.unparse(node.func).split(".")[-1] == "exercise":
            found += [a.id for a in node.args[1:] if isinstance(a, ast.Name)]
    return found


@dataclass
class Verdict:
    """What the trusted run of one test cell found."""

    passed: bool
    stdout: str = ""
    error: tuple[str, str] | None = None  # (name, message)
    notes: list[str] = field(default_factory=list)

    def outputs(self) -> list[dict]:
        """The cell's outputs as nbgrader reads them: an error output fails the cell."""
        outputs = []
        if self.stdout:
            outputs.append({"output_type": "stream", "name": "stdout", "text": self.stdout[:MAX_TEXT]})
        if self.error:
            name, message = self.error
            outputs.append({"output_type": "error", "ename": name, "evalue": message,
                            "traceback": [f"{name}: {message}"]})
        return outputs


def setup_namespace(setup_cells: list[str]) -> dict:
    """The trusted names every test may use: the course's locked setup cells, run here."""
    namespace: dict = {"__name__": "__grader__"}
    for code in setup_cells:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            try:
                exec(compile(code, "<setup>", "exec"), namespace)  # noqa: S102 - course code from source/
            except Exception:
                pass  # a display-only cell (a plot, a widget): its names, if any, come from the kernel
    return namespace


def run_test(code: str, base: dict, kernel, derivation: dict[str, str | None] | None = None) -> Verdict:
    """Run one test cell's trusted code against the student's kernel.

    ``derivation`` maps each function this test asks the student to derive to
    what the source rules noticed in it (None when nothing): a flag for the
    instructor, shown under the test, that never changes the verdict.
    """
    code = unmarked(code)
    notes = [f"derivation: {problem}" for problem in (derivation or {}).values() if problem]
    verdict = _run(code, base, kernel)
    verdict.notes += notes
    if notes:
        verdict.stdout += "".join(f"Flagged for the instructor to read (no points taken): {n}\n" for n in notes)
    return verdict


def _run(code: str, base: dict, kernel) -> Verdict:
    try:
        names = student_names(code, set(base))
    except SyntaxError as error:
        return Verdict(False, error=("GraderError", f"the course's test cell does not parse: {error}"))
    namespace = dict(base)
    if names:
        reply = kernel.request({"op": "describe", "names": names})
        found = reply.get("names") if isinstance(reply, dict) and reply.get("ok") is True else None
        if not isinstance(found, dict):
            found = {}
        for name in names:
            entry = found.get(name)
            if not isinstance(entry, dict):
                continue
            if entry.get("kind") == "callable":
                namespace[name] = Remote(name, kernel)
            elif entry.get("kind") == "value":
                try:
                    namespace[name] = decode(entry.get("value"))
                except Malformed:
                    namespace[name] = Unreadable(f"the value of {name}")
    out = io.StringIO()
    with warnings.catch_warnings(), contextlib.redirect_stdout(out):
        warnings.simplefilter("ignore")
        try:
            exec(compile(code, "<test>", "exec"), namespace)  # noqa: S102 - the course's own test code
        except AssertionError as error:
            return Verdict(False, out.getvalue(), ("AssertionError", str(error)))
        except StudentError as error:
            return Verdict(False, out.getvalue(), ("Error in your code", str(error)))
        except Exception as error:
            return Verdict(False, out.getvalue(), (type(error).__name__, str(error)))
    return Verdict(True, out.getvalue())

