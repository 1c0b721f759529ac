"""The library as the grading sandbox sees it for one assignment: its answers removed from the source.

At grading, the student's kernel imports this copy in place of ``lib/``
(:mod:`course.grading.sandbox` mounts it there).  It is the library with, removed from
the source itself (the syntax tree, not a switch at run time):

- the functions the assignment asks students to derive and those of later
  assignments (:data:`rooflab.exercises.DERIVED`), except one that the code
  left in the copy still calls (an assignment's answers build on
  ``rooflab.request``, which is made of ``prefill``: :func:`plan` says which
  stay, and why); calls of a removed function elsewhere (a figure, an
  explorer) fail in the kernel at grading, which costs nothing: tests run in
  the grader;
- the course's versions of this assignment's and later ones' exercises
  (:mod:`rooflab.earlier`, ``WRITTEN_IN``);
- the checker's reference copy (``check.reference``) and every exercise module
  (the expected values are computed by the grader, never in the kernel).

The copy holds no bytecode: it is written from source, and the sandbox runs
with ``PYTHONDONTWRITEBYTECODE``.  It is made once per assignment and library
version (a folder named by both, written aside and renamed into place, so
parallel graders share it), not once per submission.
"""

from __future__ import annotations

import ast
import hashlib
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

LIBRARY = Path(__file__).resolve().parents[2] / "lib"
PACKAGE = "rooflab"
# Modules whose functions serve only the notebooks' figures, explorers and reveals (no answer cell of the course
# calls them), and the tools of later notebooks (07's simulator, 08's measurements and its gap to the roofline),
# which no earlier answer calls: what they call is not needed by an answer, and they may fail at grading.
DISPLAY = ("plots", "widgets", "calibration", "simulate", "measure", "profiles", "tiny_transformer",
           "torch_profiles", "gap")
# The checker's reference copy: never in the sandbox.
CHECKER_REMOVED = ("check.reference",)


@dataclass(frozen=True)
class Plan:
    """What the copy for one assignment leaves out, and what of the list it must keep (with the reason)."""

    assignment: str
    removed: frozenset[str]  # dotted names under rooflab ("serving.prefill", "models.Model.weight_bytes")
    kept: dict  # dotted name -> the name in the copy's remaining code that calls it


def _later(assignment: str) -> list[str]:
    from rooflab.exercises import ASSIGNMENTS

    order = list(ASSIGNMENTS)
    if assignment not in order:
        raise ValueError(f"assignment must be one of {', '.join(order)}; got {assignment!r}")
    return order[order.index(assignment):]


def _modules(library: Path = LIBRARY) -> dict[str, Path]:
    """Module name under rooflab ("serving", "exercises.kv_cache") -> its file."""
    root = library / PACKAGE
    found = {}
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root).with_suffix("")
        found[".".join(relative.parts)] = path
    return found


def _candidates(assignment: str) -> set[str]:
    from rooflab import earlier
    from rooflab.exercises import derived

    own_and_later = _later(assignment)
    names = set(derived(own_and_later))
    names |= {f"earlier.{name}" for name, written in earlier.WRITTEN_IN.items() if written in own_and_later}
    return names


def _definitions(tree: ast.Module, module: str) -> dict[str, ast.AST]:
    """Dotted name -> its definition, for the module's top-level functions and classes' methods."""
    found = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found[f"{module}.{node.name}"] = node
        elif isinstance(node, ast.ClassDef):
            found[f"{module}.{node.name}"] = node
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    found[f"{module}.{node.name}.{item.name}"] = item
    return found


def _module_aliases(tree: ast.Module, package_modules: set[str]) -> set[str]:
    """Names a module binds to modules (``import numpy as np``, ``from . import serving``), anywhere in it."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            found.update(a.asname or a.name for a in node.names if a.name in package_modules)
    return found


def _names_used(node: ast.AST, modules: set[str]) -> tuple[set[str], set[str]]:
    """(names that may reach a module's function or class, names that may reach a method).

    A module's function is reached by its bare name or as an attribute of a
    module (``serving.prefill``); ``state.prefill`` on an object is a field or
    a method, never it.  A method is reached as an attribute of anything.
    """
    attributes = [n for n in ast.walk(node) if isinstance(n, ast.Attribute)]
    functions = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
    functions |= {a.attr for a in attributes if isinstance(a.value, ast.Name) and a.value.id in modules}
    return functions, functions | {a.attr for a in attributes}


def invited(notebook: dict) -> set[str]:
    """The library names the course's own answers in ``notebook`` call (``rl.request``, ``from rooflab import x``).

    The student's own functions are called by bare name and do not count; a
    library function reached as an attribute or imported from rooflab does.
    """
    found = set()
    for cell in notebook.get("cells", []):
        meta = cell.get("metadata", {}).get("nbgrader", {}) or {}
        if cell.get("cell_type") != "code" or not meta.get("solution"):
            continue
        source = cell.get("source", "")
        try:
            tree = ast.parse("".join(source) if isinstance(source, list) else source)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute):
                found.add(node.attr)
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(PACKAGE):
                found.update(a.name for a in node.names)
    return found


def _course_notebook(assignment: str) -> dict:
    import json

    from .nbgrader_run import SOURCE

    path = SOURCE / assignment / f"{assignment}.ipynb"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {"cells": []}


def plan(assignment: str, library: Path = LIBRARY, notebook: dict | None = None) -> Plan:
    """What the copy for ``assignment`` removes: candidates that neither its answers nor code left in the copy call.

    ``notebook`` is the course's source notebook of the assignment (default:
    read from source/): a library function its own answers call (``rl.request``
    in an exercise that asks for a verdict, not a derivation) stays.  A
    candidate is also kept when a function left in the copy (outside the
    display modules and the removed exercise modules) uses its name: removing
    it would break a tool the answers use.  Names are matched conservatively
    (any attribute of that name counts), so no kept function is broken.
    """
    answers_use = invited(_course_notebook(assignment) if notebook is None else notebook)
    trees = {m: ast.parse(p.read_text(encoding="utf-8")) for m, p in _modules(library).items()
             if not m.startswith("exercises.")}
    definitions: dict[str, ast.AST] = {}
    aliases: dict[str, set[str]] = {}
    package_modules = {m.split(".")[-1] for m in _modules(library)}
    for module, tree in trees.items():
        definitions.update(_definitions(tree, module))
        aliases[module] = _module_aliases(tree, package_modules)
    candidates = {c for c in _candidates(assignment) if c in definitions}
    kept: dict[str, str] = {c: "the course's answers" for c in candidates if c.rpartition(".")[2] in answers_use}
    while True:
        removed = candidates - set(kept)
        used_as_function: dict[str, str] = {}
        used_as_method: dict[str, str] = {}
        for dotted, node in definitions.items():
            if dotted in removed or dotted.split(".")[0] in DISPLAY:
                continue
            if isinstance(node, ast.ClassDef):
                continue  # its methods are looked at one by one
            if any(dotted.startswith(r + ".") for r in removed):
                continue  # a method of a removed class
            functions, methods = _names_used(node, aliases[dotted.split(".")[0]])
            for name in functions:
                used_as_function.setdefault(name, dotted)
            for name in methods:
                used_as_method.setdefault(name, dotted)
        newly = {}
        for c in removed:
            # "serving.prefill" is a module's function; "models.Model.weight_bytes" a method
            used = used_as_method if c.count(".") >= 2 else used_as_function
            if c.rpartition(".")[2] in used:
                newly[c] = used[c.rpartition(".")[2]]
        newly = {c: by for c, by in newly.items() if by != c}
        if not newly:
            break
        kept.update(newly)
    return Plan(assignment, frozenset(candidates - set(kept)) | frozenset(CHECKER_REMOVED), kept)


class _Remove(ast.NodeTransformer):
    """Drop the removed definitions of one module, and every import or ``__all__`` entry of a removed name."""

    def __init__(self, module: str, removed: frozenset[str], gone_names: dict[str, set[str]]):
        self.module, self.removed, self.gone = module, removed, gone_names
        self.scope: list[str] = []

    def _drop(self, name: str) -> bool:
        return ".".join([self.module, *self.scope, name]) in self.removed

    def visit_FunctionDef(self, node):
        return None if self._drop(node.name) else node

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node):
        if self._drop(node.name):
            return None
        self.scope.append(node.name)
        node.body = [item for item in (self.visit(i) for i in node.body) if item is not None] or [ast.Pass()]
        self.scope.pop()
        return node

    def visit_ImportFrom(self, node):
        if node.level and node.module is not None:
            source = node.module if node.level == 1 else None
            gone = self.gone.get(source, set()) if source else set()
            node.names = [a for a in node.names if a.name not in gone]
            if not node.names:
                return None
        return node

    def visit_Assign(self, node):
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets) and isinstance(
                node.value, (ast.List, ast.Tuple)):
            everything_gone = set().union(*self.gone.values()) if self.gone else set()
            node.value.elts = [e for e in node.value.elts
                               if not (isinstance(e, ast.Constant) and e.value in everything_gone)]
        return node


def _rewrite(source: str, module: str, removed: frozenset[str], gone: dict[str, set[str]]) -> str:
    tree = ast.parse(source)
    tree = _Remove(module, removed, gone).visit(tree)
    ast.fix_missing_locations(tree)
    return ast.unparse(tree) + "\n"


def _digest(library: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted((library / PACKAGE).rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(str(path.relative_to(library)).encode() + b"\0" + path.read_bytes())
    digest.update(Path(__file__).read_bytes())  # a change of the rules makes a new copy
    return digest.hexdigest()[:16]


def write(assignment: str, target: Path, library: Path = LIBRARY, notebook: dict | None = None) -> Plan:
    """Write the copy for ``assignment`` under ``target`` (``target/rooflab/...``); return its plan."""
    chosen = plan(assignment, library, notebook)
    gone: dict[str, set[str]] = {}
    for dotted in chosen.removed:
        module, _, name = dotted.partition(".")
        if "." not in name:  # a top-level function: its imports elsewhere go too
            gone.setdefault(module, set()).add(name)
    source_root = library / PACKAGE
    for path in sorted(source_root.rglob("*")):
        relative = path.relative_to(source_root)
        if "__pycache__" in relative.parts or path.suffix in (".pyc", ".pyo") or path.is_dir():
            continue
        module = ".".join(relative.with_suffix("").parts)
        if module.startswith("exercises.") and path.suffix == ".py":
            continue  # the expected values and their reference calls: computed by the grader only
        destination = target / PACKAGE / relative
        destination.parent.mkdir(parents=True, exist_ok=True)
        if path.suffix == ".py":
            destination.write_text(_rewrite(path.read_text(encoding="utf-8"), module, chosen.removed, gone),
                                   encoding="utf-8")
        else:
            shutil.copyfile(path, destination)
    for path in [target, *target.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)  # the sandbox's own uid reads it
    return chosen


def for_assignment(assignment: str, cache: Path | None = None, library: Path = LIBRARY) -> Path:
    """The folder to mount in place of ``lib/`` when grading ``assignment``: made once, then reused."""
    cache = cache or Path(tempfile.gettempdir()) / f"rooflab-library-{os.geteuid()}"
    cache.mkdir(mode=0o755, parents=True, exist_ok=True)
    folder = cache / f"{assignment}-{_digest(library)}"
    if (folder / PACKAGE / "__init__.py").is_file():
        return folder
    aside = Path(tempfile.mkdtemp(prefix=f".{assignment}-", dir=cache))
    write(assignment, aside, library)
    try:
        aside.rename(folder)
    except OSError:  # another grader made it first: theirs is the same
        shutil.rmtree(aside, ignore_errors=True)
    return folder
