"""What a submission's code reaches for, read from its syntax tree, never by running it.

Two uses in grading (:mod:`course.trusted`):

- **Derivation exercises** ("derive it yourself"): the function the test calls
  must be defined in its answer cell only, and neither it nor any function of
  the notebook that it calls may use the library's answers (``prefill``,
  ``decode_step``, ``request``, ``memory_budget``, ... under any alias or module
  path, or the checker's reference copy) or a tool that rewrites code or names
  at run time.  A notebook that rewrites names at run time anywhere (``exec``,
  ``get_ipython``, ``globals()``, ``sys.modules``, ...) cannot have any of its
  derivations trusted.  Each failure is scored 0 with the reason named.
- **Flags** for the instructor: every such use anywhere in the student's cells,
  listed in grades.csv, never penalised outside a derivation exercise.

The rules are names, so they are conservative: an attribute called ``prefill``
on any object counts (a bare name does not: the student's own ``weight_bytes``
is theirs; importing the library's under any alias does).  IPython syntax (``!cmd``, ``%magic``) is translated to
the Python it runs before parsing.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

# The library's answers to the derivation exercises, as attribute or imported names.
LIBRARY_ANSWERS = frozenset({
    "prefill", "decode_step", "request", "memory_budget", "roofline", "cost_si", "combine", "weight_bytes",
    "weight_bytes_si", "kv_bytes_per_token", "kv_bytes_per_token_si", "flops_per_token", "attention_share",
    "attention_crossover_len", "balanced_output_len", "decode_compute_bound_batch", "prefill_compute_bound_len",
    "ttft_exceeds_decode_len", "bits_per_weight", "bytes_per_weight", "embedding_bits_per_weight",
    "embedding_bytes_per_weight", "predict", "ideal_ratio",
    "reference", "forward_pass", "prefill_pass", "decode_pass", "decode_terms", "decode_total", "body_bytes",
    "footprint",
    "library_answers", "_rooflab_reference",
    # under load (rooflab.fleet)
    "steady_state", "frontier", "best_under_sla", "tensor_parallel_step", "cost_per_million_tokens",
    "energy_per_token", "cost_per_million", "_pass_si", "_steady_si",
    # the course's versions of earlier exercises (rooflab.earlier)
    "decode_flops", "prefill_flops", "decode_bytes", "roofline_time", "ttft_and_itl", "decode_step_time",
})
# Library answers a test can switch off one by one (check.derive_yourself(rooflab.crossover.x)); the rest
# (the reference copy, whole modules, private helpers) are never allowed in a derivation.
FUNCTIONS_NAMED = LIBRARY_ANSWERS - {"reference", "library_answers", "_rooflab_reference"}
# Modules that reach outside the notebook (the process, the files, the network, the interpreter).
OUTSIDE_MODULES = frozenset({
    "importlib", "inspect", "ctypes", "subprocess", "socket", "sqlite3", "sys", "builtins", "gc", "marshal",
    "pickle", "types", "os", "signal", "multiprocessing", "threading", "shutil", "pty", "code", "codeop",
    "runpy", "ast", "dis", "tracemalloc", "faulthandler", "resource", "fcntl", "mmap", "asyncio", "http",
    "urllib", "requests", "zipimport", "pkgutil", "IPython", "ipykernel", "nbformat", "nbclient", "nbgrader",
    "jupyter_client", "course", "dill", "cloudpickle", "copyreg", "weakref", "atexit", "sysconfig", "site",
})
# Built-ins and attributes that read or rewrite code and names at run time.
REWRITING_CALLS = frozenset({
    "exec", "eval", "compile", "__import__", "globals", "locals", "vars", "setattr", "delattr", "get_ipython",
})
OUTSIDE_CALLS = frozenset({"open", "breakpoint", "input", "exit", "quit"})
# Importing these is enough to rewrite names at run time.
REWRITING_MODULES = frozenset({"importlib", "builtins", "inspect", "ctypes", "IPython", "ipykernel", "runpy",
                               "code", "codeop", "marshal", "zipimport", "pkgutil"})
REWRITING_ATTRIBUTES = frozenset({
    "__dict__", "__code__", "__globals__", "__builtins__", "__closure__", "__func__", "__wrapped__",
    "__subclasses__", "__bases__", "__mro__", "__class__", "__getattribute__", "__setattr__", "__import__",
    "__loader__", "__spec__", "__self__", "f_globals", "f_locals", "f_back", "gi_frame", "tb_frame",
    "modules", "meta_path", "path_hooks", "settrace", "setprofile", "_getframe", "user_ns", "input_transformers_post",
    "input_transformers_cleanup", "ast_transformers", "events", "register_magic_function",
})


# How a derivation problem caused by run-time rewriting begins (grading tags it apart from a library call).
REWRITES = "the notebook rewrites code or names at run time"


@dataclass(frozen=True)
class Use:
    """One thing a cell reaches for."""

    cell: str  # the cell's id
    what: str  # "exec", "import os", ".prefill", ...
    kind: str  # "library answer", "reaches outside" or "rewrites code"
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


def uses_in(node: ast.AST, cell: str) -> list[Use]:
    """Everything in ``node`` that the rules care about."""
    found = []
    for sub in ast.walk(node):
        if isinstance(sub, ast.Attribute):
            if sub.attr in LIBRARY_ANSWERS:
                found.append(Use(cell, f".{sub.attr}", "library answer", sub.attr))
            elif sub.attr in REWRITING_ATTRIBUTES:
                found.append(Use(cell, f".{sub.attr}", "rewrites code"))
        elif isinstance(sub, ast.Name):
            if sub.id in REWRITING_CALLS or sub.id in REWRITING_ATTRIBUTES:
                found.append(Use(cell, sub.id, "rewrites code"))
            elif sub.id in OUTSIDE_CALLS:
                found.append(Use(cell, sub.id, "reaches outside"))
        elif isinstance(sub, (ast.Import, ast.ImportFrom)):
            module = getattr(sub, "module", None) or ""
            names = [a.name for a in sub.names]
            roots = {n.split(".")[0] for n in ([module] if module else names)}
            for root in roots & (OUTSIDE_MODULES | REWRITING_MODULES):
                kind = "rewrites code" if root in REWRITING_MODULES else "reaches outside"
                found.append(Use(cell, f"import {root}", kind))
            if module.startswith("rooflab") or any(n.startswith("rooflab.") for n in names):
                for name in names:
                    if name in LIBRARY_ANSWERS or name == "*" or name.split(".")[-1] in (
                            "serving", "roofline", "crossover", "check", "earlier", "exercises"):
                        found.append(Use(cell, f"from {module or name} import {name}", "library answer", name))
        elif isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) and sub.func.id == "getattr":
            attribute = sub.args[1] if len(sub.args) > 1 else None
            if isinstance(attribute, ast.Constant) and isinstance(attribute.value, str):
                if attribute.value in LIBRARY_ANSWERS:
                    found.append(Use(cell, f"getattr(..., {attribute.value!r})", "library answer", attribute.value))
                elif attribute.value in REWRITING_ATTRIBUTES:
                    found.append(Use(cell, f"getattr(..., {attribute.value!r})", "rewrites code"))
            else:
                found.append(Use(cell, "getattr with a computed name", "rewrites code"))
        elif isinstance(sub, ast.Constant) and isinstance(sub.value, str) and sub.value in (
                "__import__", "__builtins__", "__code__", "__globals__", "modules", "_rooflab_reference"):
            found.append(Use(cell, f"the string {sub.value!r}", "rewrites code"))
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
        """Every use anywhere of what rewrites code or reaches outside, for the instructor.

        The library's answers are not flagged here: outside the derivation
        exercises (where they score 0, with the reason) the notebooks invite them.
        """
        found = []
        for cell in self.cells:
            found += cell.module_uses
            for function in cell.functions.values():
                found += uses_in(function, cell.id)
        return [u for u in dict.fromkeys(found) if u.kind != "library answer"]

    def derivation_problem(self, name: str, answer_cell: str | None,
                           banned: frozenset[str] | None = None) -> str | None:
        """Why ``name`` cannot count as derived by the student, or None if it can.

        ``banned`` names the library answers this derivation may not use (default: all).
        """
        rewriting = [u for u in self.flags() if u.kind == "rewrites code"]
        if rewriting:
            return f"{REWRITES} ({rewriting[0]}), so no derivation in it can be trusted"
        owners = [c for c in self.cells if name in c.defines]
        if not owners:
            return None  # not defined at all: the test fails on its own with a NameError
        elsewhere = [c.id for c in owners if c.id != answer_cell]
        if answer_cell is not None and elsewhere:
            return f"{name} is defined outside its answer cell (cell {elsewhere[0]}); define it only in its answer cell"
        # The function, and everything of the notebook it refers to, transitively.
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
                    bad = [u for u in uses_in(node, cell.id) if u.kind != "library answer" or banned is None
                           or u.name in banned or u.name not in FUNCTIONS_NAMED]
                    if bad:
                        return f"{name} relies on {bad[0]}; the exercise asks you to derive it yourself"
                    todo += [n for n in _free_names(node) if n not in seen]
        return None
