"""What a submission's code reaches for, read from its syntax tree, never by running it: flags, never scores.

What the tree shows becomes a flag for the instructor (grades.csv's flags
column, a line in the feedback under the test, a note in formgrader); no flag
changes a score by itself.  Scores come from running the code: in the grading
sandbox the library answers an assignment asks for are absent (see
:mod:`course.grading.library_copy`), so the only way to a right answer is to compute it.

Four kinds of flag:

- **library answer in a derivation**: a function a test asks the student to
  derive (or anything of the notebook it calls) uses a library answer that the
  exercise switches off (``prefill``, ``decode_step``, ... under any alias);
- **touches the checker or the grader**: the checker's module or its reference
  copy, ``derive_yourself``, the grader's probe in the kernel, IPython's input
  transformers (which rewrite the grader's requests);
- **rewrites code**: ``exec``/``eval``/``compile``, code objects, frames and
  tracing, import machinery, unpickling, ``timeit`` or ``getattr`` on computed
  text, patching an attribute of the library, numpy, pint or Python itself;
- **reaches outside**: processes and sockets.

Ordinary lines raise none: magics (IPython turns ``%matplotlib inline`` into
``get_ipython().run_line_magic(...)``), ``get_ipython()``, ``globals()``,
``import os``, ``open``, ``print``, a warning hook.  The rules are names, so they
are conservative in what they flag and cost nothing when they are wrong.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from rooflab.exercises import derived_names

# The library's answers to the derivation exercises, as attribute or imported names: from the one list
# (rooflab.exercises.DERIVED, and rooflab.earlier's course versions).
LIBRARY_ANSWERS = derived_names()
# Library answers a test can switch off one by one (check.derive_yourself(rooflab.crossover.x)).
FUNCTIONS_NAMED = LIBRARY_ANSWERS
LIBRARY = "library answer"
CHECKER = "touches the checker or the grader"
REWRITES_KIND = "rewrites code"
OUTSIDE = "reaches outside"
# The checker, its reference copy and the grader's probe in the kernel.
CHECKER_NAMES = frozenset({
    "derive_yourself", "library_answers", "reference", "_rooflab_reference", "_rooflab_probe", "_rooflab_answer",
    "_EXERCISES", "_QUESTIONS", "_disabled", "input_transformers_post", "input_transformers_cleanup",
    "ast_transformers",
})
CHECKER_MODULES = ("rooflab.check", "rooflab.exercises")
# Built-ins that run text as code.
REWRITING_CALLS = frozenset({"exec", "eval", "compile", "__import__"})
# Modules whose import is enough to rewrite code or names at run time.
REWRITING_MODULES = frozenset({"importlib", "builtins", "ctypes", "marshal", "pickle", "_pickle", "dill",
                               "cloudpickle", "copyreg", "runpy", "code", "codeop", "zipimport", "pkgutil", "pydoc",
                               "gc", "dis"})
REWRITING_ATTRIBUTES = frozenset({
    "__code__", "__globals__", "__builtins__", "__closure__", "__subclasses__", "__import__", "__loader__",
    "f_globals", "f_locals", "f_back", "gi_frame", "tb_frame", "settrace", "setprofile", "_getframe",
    "meta_path", "path_hooks", "modules", "attrgetter", "methodcaller", "locate", "loads",
})
OUTSIDE_MODULES = frozenset({"subprocess", "socket", "multiprocessing", "pty", "http", "urllib", "requests",
                             "sqlite3", "shutil"})
# Modules whose attributes a patch would change for the grader's probe or the checker: rebinding one is flagged.
WATCHED_MODULES = frozenset({"rooflab", "numpy", "pint", "builtins", "importlib", "sys", "math", "json",
                             "dataclasses", "IPython", "ipykernel"})
# Names the setup cells give these modules.
WATCHED_NAMES = frozenset({"rl", "np", "check", "ureg", "Q_"})


@dataclass(frozen=True)
class Use:
    """One thing a cell reaches for."""

    cell: str  # the cell's id
    what: str  # "exec", "import subprocess", ".prefill", ...
    kind: str  # LIBRARY, CHECKER, REWRITES_KIND or OUTSIDE
    name: str = ""  # for a library answer: the library function's name

    def __str__(self) -> str:
        return f"{self.what} ({self.kind}, cell {self.cell})"


@dataclass
class Cell:
    """One student cell, read: the functions it defines and what each part of it reaches for."""

    id: str
    defines: set[str] = field(default_factory=set)  # top-level names bound
    functions: dict[str, ast.AST] = field(default_factory=dict)  # top-level defs
    module_uses: list[Use] = field(default_factory=list)  # uses outside any function
    bindings: dict[str, list[ast.AST]] = field(default_factory=dict)  # name -> top-level statements binding it
    unreadable: str | None = None


def to_python(source: str) -> str:
    """The Python that IPython would run for a cell (magics and ``!`` commands translated)."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager

        return TransformerManager().transform_cell(source)
    except Exception:  # an IPython that cannot read it: parse as it is
        return source


def _root(node: ast.AST) -> str | None:
    """The name an attribute chain starts from (``rooflab`` in ``rooflab.check.quantity``)."""
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _dotted(node: ast.AST) -> str:
    try:
        return ast.unparse(node)
    except Exception:  # noqa: BLE001 - a node ast cannot print: say so, do not fail the reading
        return "?"


def _is_text(node: ast.AST) -> bool:
    """Whether ``node`` computes text (a string, an f-string, a sum of strings): code handed over as text."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.JoinedStr):
        return True
    if isinstance(node, ast.BinOp):
        return _is_text(node.left) or _is_text(node.right)
    return False


def _imports(sub: ast.AST, cell: str) -> list[Use]:
    found = []
    module = getattr(sub, "module", None) or ""
    names = [a.name for a in sub.names]
    full = [module] if module else names
    roots = {n.split(".")[0] for n in full}
    for root in sorted(roots & REWRITING_MODULES):
        found.append(Use(cell, f"import {root}", REWRITES_KIND))
    for root in sorted(roots & OUTSIDE_MODULES):
        found.append(Use(cell, f"import {root}", OUTSIDE))
    dotted = [f"{module}.{n}" if module else n for n in names]
    for path in dotted:
        if path.startswith(CHECKER_MODULES) or path.split(".")[-1] in CHECKER_NAMES:
            found.append(Use(cell, f"import {path}", CHECKER))
    if module.startswith("rooflab") or any(n.startswith("rooflab.") for n in names):
        for name in names:
            short = name.split(".")[-1]
            if short in LIBRARY_ANSWERS or name == "*":
                found.append(Use(cell, f"from {module or name} import {name}", LIBRARY, short))
    return found


def _named(name: str, shown: str, cell: str) -> list[Use]:
    """The use an attribute reached by ``name`` is (a library answer, the checker, a rewriting tool), if any."""
    if name in LIBRARY_ANSWERS:
        return [Use(cell, shown, LIBRARY, name)]
    if name in CHECKER_NAMES:
        return [Use(cell, shown, CHECKER)]
    if name in REWRITING_ATTRIBUTES:
        return [Use(cell, shown, REWRITES_KIND)]
    return []


def uses_in(node: ast.AST, cell: str) -> list[Use]:
    """Everything in ``node`` that the rules care about (see the module's docstring)."""
    found = []
    for sub in ast.walk(node):
        if isinstance(sub, ast.Attribute):
            found += _named(sub.attr, f".{sub.attr}", cell)
            if isinstance(sub.ctx, (ast.Store, ast.Del)):
                root = _root(sub)
                if root == "check":
                    found.append(Use(cell, f"{_dotted(sub)} rebound", CHECKER))
                elif root in WATCHED_MODULES or root in WATCHED_NAMES:
                    found.append(Use(cell, f"{_dotted(sub)} rebound", REWRITES_KIND))
        elif isinstance(sub, ast.Name):
            if sub.id in REWRITING_CALLS:
                found.append(Use(cell, sub.id, REWRITES_KIND))
            elif sub.id in CHECKER_NAMES:
                found.append(Use(cell, sub.id, CHECKER))
            elif sub.id == "check" and isinstance(sub.ctx, (ast.Store, ast.Del)):
                found.append(Use(cell, "check rebound", CHECKER))
        elif isinstance(sub, (ast.Import, ast.ImportFrom)):
            found += _imports(sub, cell)
        elif isinstance(sub, ast.Call):
            function = sub.func
            name = function.id if isinstance(function, ast.Name) else getattr(function, "attr", None)
            if name == "getattr":
                attribute = sub.args[1] if len(sub.args) > 1 else None
                if isinstance(attribute, ast.Constant) and isinstance(attribute.value, str):
                    found += _named(attribute.value, f"getattr(..., {attribute.value!r})", cell)
                else:
                    found.append(Use(cell, "getattr with a computed name", REWRITES_KIND))
            elif name in ("timeit", "repeat", "Timer") and sub.args and _is_text(sub.args[0]):
                found.append(Use(cell, f"{name} on code as text", REWRITES_KIND))
            # A built-in handed on as a value (functools.reduce(getattr, ...), map(setattr, ...)).
            for argument in [*sub.args, *(k.value for k in sub.keywords)]:
                if isinstance(argument, ast.Name) and argument.id in ("getattr", "setattr", "delattr", "eval", "exec"):
                    found.append(Use(cell, f"{argument.id} handed to {_dotted(function)}", REWRITES_KIND))
        elif isinstance(sub, ast.Constant) and isinstance(sub.value, str) and (
                sub.value in CHECKER_NAMES or sub.value in ("rooflab.check", "__import__", "__builtins__",
                                                            "__code__", "__globals__")):
            kind = CHECKER if sub.value in CHECKER_NAMES or sub.value == "rooflab.check" else REWRITES_KIND
            found.append(Use(cell, f"the string {sub.value!r}", kind))
    return found


def read_cell(cell_id: str, source: str) -> Cell:
    """Parse one cell; a cell that does not parse defines nothing and is noted."""
    cell = Cell(cell_id)
    try:
        tree = ast.parse(to_python(source))
    except SyntaxError as error:
        cell.unreadable = f"a syntax error on line {error.lineno}"
        return cell
    for statement in tree.body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            cell.defines.add(statement.name)
            cell.functions[statement.name] = statement
            # Decorators and default values run at definition time, outside the body.
            outside = [*statement.decorator_list]
            if not isinstance(statement, ast.ClassDef):
                outside += [*statement.args.defaults, *statement.args.kw_defaults]
            for node in outside:
                if node is not None:
                    cell.module_uses += uses_in(node, cell_id)
            continue
        cell.module_uses += uses_in(statement, cell_id)
        bound = set()
        for sub in ast.walk(statement):
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, (ast.Store, ast.Del)):
                bound.add(sub.id)
            elif isinstance(sub, (ast.Import, ast.ImportFrom)):
                bound.update((a.asname or a.name).split(".")[0] for a in sub.names)
            elif isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                bound.add(sub.name)
            elif isinstance(sub, ast.Global):
                bound.update(sub.names)
        for name in bound:
            cell.bindings.setdefault(name, []).append(statement)
        cell.defines |= bound
    return cell


def _free_names(node: ast.AST) -> set[str]:
    """Names ``node`` reads but does not bind itself (its globals, roughly): what it depends on elsewhere."""
    local = {sub.arg for sub in ast.walk(node) if isinstance(sub, ast.arg)}
    local |= {sub.id for sub in ast.walk(node) if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store)}
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        local.discard(node.name)
    read = {sub.id for sub in ast.walk(node) if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load)}
    return read - local


@dataclass
class Notebook:
    """The student's cells of one submission, read."""

    cells: list[Cell]

    @classmethod
    def read(cls, student_cells: list[tuple[str, str]]) -> "Notebook":
        """``student_cells``: (cell id, source) of every cell the student wrote (answers and extra cells)."""
        return cls([read_cell(cell_id, source) for cell_id, source in student_cells])

    def flags(self) -> list[Use]:
        """Every use anywhere of what touches the checker, rewrites code or reaches outside, for the instructor.

        The library's answers are not flagged here: outside the derivation
        exercises the notebooks invite them (see :meth:`derivation_problem`).
        """
        found = []
        for cell in self.cells:
            found += cell.module_uses
            for function in cell.functions.values():
                found += uses_in(function, cell.id)
        return [u for u in dict.fromkeys(found) if u.kind != LIBRARY]

    def derivation_problem(self, name: str, answer_cell: str | None,
                           banned: frozenset[str] | None = None) -> str | None:
        """What the instructor should look at in how ``name`` was derived, or None if nothing.

        A flag, never a score: the function is defined outside its answer cell,
        or it (or a function of the notebook it calls, transitively) uses a
        library answer in ``banned`` (default: all), touches the checker or
        rewrites code.
        """
        owners = [c for c in self.cells if name in c.defines]
        if not owners:
            return None  # not defined at all: the test fails on its own with a NameError
        elsewhere = [c.id for c in owners if c.id != answer_cell]
        if answer_cell is not None and elsewhere:
            return f"{name} is defined outside its answer cell (cell {elsewhere[0]}); define it only in its answer cell"
        for cell, node in self._reached_from(name):
            bad = [u for u in uses_in(node, cell.id) if u.kind != LIBRARY or banned is None
                   or u.name in banned or u.name not in FUNCTIONS_NAMED]
            if bad:
                return f"{name} relies on {bad[0]}; the exercise asks you to derive it yourself"
        return None

    def depends_on(self, name: str) -> set[str]:
        """The notebook's names that ``name`` uses, directly or through others (not ``name`` itself)."""
        used = set()
        for _, node in self._reached_from(name):
            used |= _free_names(node)
        return used - {name}

    def _reached_from(self, name: str):
        """(cell, definition) of ``name`` and of every notebook name its definitions use, transitively."""
        seen, todo = set(), [name]
        while todo:
            current = todo.pop()
            if current in seen:
                continue
            seen.add(current)
            for cell in self.cells:
                nodes = list(cell.bindings.get(current, []))
                if current in cell.functions:
                    nodes.append(cell.functions[current])
                for node in nodes:
                    yield cell, node
                    todo += [n for n in _free_names(node) if n not in seen]
