"""course/grading/kernels.py: kernels over Unix sockets with a per-process prefix, and the do-nothing last cell."""

import os

import nbformat

from course.grading import kernels


def test_each_call_gives_an_absolute_prefix_of_this_process():
    first, second = kernels.ipc_prefix(), kernels.ipc_prefix()
    assert os.path.isabs(first) and f"rooflab-kernel-{os.getpid()}-" in first
    assert first != second  # the random part: processes in other PID namespaces may share /tmp


def test_the_config_asks_for_ipc_at_such_a_prefix():
    config = kernels.kernel_config()
    assert config.KernelManager.transport == "ipc"
    assert os.path.isabs(config.KernelManager.ip) and "rooflab-kernel-" in config.KernelManager.ip


def test_settled_adds_one_cell_and_unsettled_removes_only_that_one():
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")])
    kernels.settled(notebook)
    assert [c.source for c in notebook.cells] == ["x = 1", kernels.SETTLE]
    kernels.unsettled(notebook)
    assert [c.source for c in notebook.cells] == ["x = 1"]
    kernels.unsettled(notebook)  # a notebook without the cell keeps its own last cell
    assert [c.source for c in notebook.cells] == ["x = 1"]
