"""The untrusted half of grading: runs inside the sandbox, next to the student's kernel.

Started by :mod:`course.grading.sandbox` as ``python kernel_runner.py`` with nothing
but the Python environment and the library visible.  It speaks JSON lines:

- it reads one line ``{"notebook": {...}, "skip": [cell indices], "timeout": s}``,
  runs the notebook's code cells in an IPython kernel (errors do not stop it),
  announcing each cell before it runs (``{"event": "cell", "index": i}``) so
  that the grader knows which cell hung if the line stops coming, then sends
  ``{"event": "executed", "notebook": {...}}``;
- then it answers requests, one line each: ``{"op": "describe", "names": [...]}``
  (is each name missing, callable, or a value, and the value as plain data) and
  ``{"op": "call", "name": ..., "args": [...], "kwargs": {...}}`` (the result of
  calling the student's function, as plain data).

Nothing here is trusted: the student's code shares this process's user and
could forge any line.  The grader reads every line as hostile input, and the
worst a forged line can do is change that student's own answers.  This file
imports nothing from the course, so it can be bound into the sandbox alone.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

# Defined in the student's kernel once the notebook has run; each request then
# calls it and leaves a JSON string in ``_rooflab_answer``, read back through the
# execute reply.  A submission that redefines it (a post-run hook could) changes
# only its own answers.
PROBE = r'''
def _rooflab_probe(request):
    import dataclasses, json, math
    def encode(value, depth=0):
        if depth > 8:
            return {"__repr__": "nested too deeply"}
        if value is None or isinstance(value, (bool, str)):
            return value if not isinstance(value, str) else value[:10000]
        if isinstance(value, int):
            return value if abs(value) < 2**63 else float(value)
        if isinstance(value, float):
            return value if math.isfinite(value) else {"__float__": repr(value)}
        module = type(value).__module__ or ""
        if module.startswith("numpy"):
            import numpy
            if isinstance(value, numpy.ndarray):
                if value.size > 100000 or value.dtype.kind not in "biuf":
                    return {"__repr__": f"array of {value.size} {value.dtype}"}
                return {"__array__": encode(value.astype(float).tolist(), depth + 1)}
            if isinstance(value, numpy.generic):
                return encode(value.item(), depth + 1)
        if module.startswith("pint") and hasattr(value, "magnitude") and hasattr(value, "units"):
            return {"__quantity__": encode(value.magnitude, depth + 1), "units": format(value.units, "D")}
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return {"__record__": type(value).__name__, "name": str(getattr(value, "name", ""))[:200]}
        if isinstance(value, (list, tuple)):
            items = [encode(v, depth + 1) for v in list(value)[:10000]]
            return {"__tuple__": items} if isinstance(value, tuple) else items
        if isinstance(value, dict):
            return {"__dict__": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in list(value.items())[:10000]]}
        return {"__repr__": f"{type(value).__name__}: {repr(value)[:200]}"}

    def decode(value):
        import rooflab
        if isinstance(value, list):
            return [decode(v) for v in value]
        if not isinstance(value, dict):
            return value
        if "__quantity__" in value:
            return rooflab.Q_(decode(value["__quantity__"]), value["units"])
        if "__array__" in value:
            import numpy
            return numpy.asarray(decode(value["__array__"]))
        if "__tuple__" in value:
            return tuple(decode(v) for v in value["__tuple__"])
        if "__dict__" in value:
            return {decode(k): decode(v) for k, v in value["__dict__"]}
        if "__record__" in value:
            kind = getattr(rooflab, value["__record__"])
            fields = {k: (tuple(v) if isinstance(v, list) else v) for k, v in value["fields"].items()}
            return kind(**fields)
        return value

    namespace = globals()
    if request["op"] == "describe":
        found = {}
        for name in request["names"]:
            if name not in namespace:
                found[name] = {"kind": "missing"}
            elif callable(namespace[name]) and not isinstance(namespace[name], type):
                found[name] = {"kind": "callable"}
            else:
                found[name] = {"kind": "value", "value": encode(namespace[name])}
        return json.dumps({"ok": True, "names": found})
    function = namespace.get(request["name"])
    if function is None:
        return json.dumps({"ok": False, "error": "NameError", "message": f"name {request['name']!r} is not defined"})
    args = [decode(a) for a in request["args"]]
    kwargs = {k: decode(v) for k, v in request["kwargs"].items()}
    def switched_off(dotted):
        # The library functions the grader names, found afresh and switched off here by swapping their code:
        # every reference to them (an alias, a dict of functions) stops working; the kernel's checker is not used.
        import importlib
        module, *attributes = dotted.split(".")
        try:
            target = importlib.import_module("rooflab." + module)
        except ImportError:
            return None
        for attribute in attributes:
            target = vars(target).get(attribute) if isinstance(target, type) else getattr(target, attribute, None)
            if target is None:
                return None  # absent from this copy of the library
        target = target.fget if isinstance(target, property) else getattr(target, "__func__", target)
        return target if hasattr(target, "__code__") else None

    def _off(*args, **kwargs):
        raise RuntimeError("rooflab: this library function is switched off while this test runs. The exercise asks "
                           "you to derive the result from the formula yourself, so write the arithmetic instead.")

    saved, replaced = [], {}
    course = request.get("course")
    if isinstance(course, dict):
        # A cascade re-test: the student's earlier functions replaced by the course's versions for this call.
        import types
        module = types.ModuleType("rooflab._course_versions")
        module.__package__ = "rooflab"
        exec(compile(course["source"], "<the course's versions>", "exec"), module.__dict__)
        for name, course_name in course["names"].items():
            replaced[name] = namespace.get(name)
            namespace[name] = getattr(module, course_name)
    try:
        for dotted in request.get("derive") or []:
            target = switched_off(str(dotted))
            if target is not None and all(target is not t for t, _ in saved):
                saved.append((target, target.__code__))
                target.__code__ = _off.__code__
        result = function(*args, **kwargs)
    except BaseException as error:
        return json.dumps({"ok": False, "error": type(error).__name__, "message": str(error)[:2000],
                           "bases": [c.__name__ for c in type(error).__mro__][:20]})
    finally:
        for target, code in saved:
            target.__code__ = code
        for name, value in replaced.items():
            namespace[name] = value
    return json.dumps({"ok": True, "value": encode(result)})
'''


def send(message: dict) -> None:
    sys.__stdout__.write(json.dumps(message) + "\n")
    sys.__stdout__.flush()


def answer(client, request: dict | None, timeout: float, code: str | None = None) -> dict:
    """Run one request in the kernel and return its reply.

    The reply comes back through the execute reply's ``user_expressions``, not a
    file, so a submission that filled its disk still gets its answers read.  A
    timeout or a dead kernel raises: the runner then stops, and the grader,
    which sees the line never come, replaces the sandbox.
    """
    import ast
    import time

    code = code or f"_rooflab_answer = _rooflab_probe({request!r})"
    kc = client.kc
    while kc.iopub_channel.msg_ready():  # drop what earlier requests printed
        kc.get_iopub_msg(timeout=0)
    msg_id = kc.execute(code, silent=True, store_history=False, user_expressions={"answer": "_rooflab_answer"})
    deadline = time.monotonic() + timeout
    while True:
        reply = kc.get_shell_msg(timeout=max(0.01, deadline - time.monotonic()))
        if reply.get("parent_header", {}).get("msg_id") == msg_id:
            break
    content = reply.get("content", {})
    if content.get("status") != "ok":
        return {"ok": False, "error": str(content.get("ename", "Error")),
                "message": str(content.get("evalue", ""))[:2000]}
    found = content.get("user_expressions", {}).get("answer", {})
    text = found.get("data", {}).get("text/plain", "") if found.get("status") == "ok" else ""
    try:
        return json.loads(ast.literal_eval(text))
    except (ValueError, SyntaxError, TypeError):
        return {"ok": False, "error": "ProtocolError", "message": "the kernel gave no answer to the grader's request"}


def main() -> None:
    import nbformat
    from jupyter_client.manager import KernelManager
    from nbclient import NotebookClient

    cache = os.environ.get("ROOFLAB_MATPLOTLIB_CACHE")
    if cache and os.path.isdir(cache) and os.environ.get("MPLCONFIGDIR"):
        shutil.copytree(cache, os.environ["MPLCONFIGDIR"], dirs_exist_ok=True)  # the grader's font cache
    start = json.loads(sys.stdin.readline())
    notebook = nbformat.reads(json.dumps(start["notebook"]), as_version=4)
    skip = set(start.get("skip", []))
    # IPC sockets in the private working folder: no TCP port, nothing to reach from outside.
    manager = KernelManager(kernel_name="python3", transport="ipc", ip=os.path.abspath("kernel"))
    client = NotebookClient(
        notebook, km=manager, timeout=start.get("timeout", 10), allow_errors=True,
        extra_arguments=["--HistoryManager.hist_file=:memory:"],
        interrupt_on_timeout=False, record_timing=False,
        resources={"metadata": {"path": os.getcwd()}},
        on_cell_start=lambda cell, cell_index: send({"event": "cell", "index": cell_index}),
    )
    # The kernel gets no stdin and no way to write on the grader's line directly.
    with client.setup_kernel(stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL):
        for index, cell in enumerate(notebook.cells):
            if cell.cell_type != "code" or index in skip:
                continue
            try:
                client.execute_cell(cell, index)
            except Exception as error:  # the cell hung or killed its kernel: say which, then stop
                send({"event": "lost", "index": index, "why": type(error).__name__})
                raise
        send({"event": "executed", "notebook": notebook})
        client.on_cell_start = None
        answer(client, None, client.timeout, code=PROBE)
        for line in sys.stdin:
            send(answer(client, json.loads(line), client.timeout))


if __name__ == "__main__":
    main()
