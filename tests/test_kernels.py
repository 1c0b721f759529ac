"""course/grading/kernels.py: kernels over Unix sockets with a per-process prefix, the do-nothing last cell, and
ipykernel's shutdown race kept off the terminal."""

import os
import subprocess
import sys
import textwrap

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


# The shape of what ipykernel 7.4 wrote in a `course build` run (its file paths shortened here).
RACE = """ERROR:tornado.general:Uncaught exception in ZMQStream callback
Traceback (most recent call last):
  File "zmq/eventloop/zmqstream.py", line 585, in _log_error
    f.result()
  File "ipykernel/kernelbase.py", line 372, in dispatch_control
    await self.process_control(msg)
  File "ipykernel/kernelbase.py", line 409, in process_control
    self._publish_status_and_flush("idle", "control", self.control_stream)
  File "zmq/sugar/attrsettr.py", line 55, in __getattr__
    return self._get_attr_opt(upper_key, opt)
zmq.error.ZMQError: Socket operation on non-socket
"""


ZMQ_ASSERTION = "Assertion failed: pfd.revents & POLLIN (src/signaler.cpp:238)\n"  # as a build run printed it


def test_the_shutdown_noise_is_dropped_and_everything_around_it_kept():
    before, after = "a warning of the notebook's own\n", "[I 12:00:00 kernel] another record\n"
    assert kernels.without_shutdown_noise(before + RACE + after) == before + after
    assert kernels.without_shutdown_noise(RACE + RACE) == ""
    assert kernels.without_shutdown_noise("nothing to drop\n") == "nothing to drop\n"
    # libzmq's assertion, one line, at any line number of signaler.cpp
    assert kernels.without_shutdown_noise(before + ZMQ_ASSERTION + after) == before + after


def test_a_traceback_that_ends_otherwise_is_kept_whole():
    other = RACE.replace("zmq.error.ZMQError: Socket operation on non-socket", "ValueError: a real error")
    assert kernels.without_shutdown_noise(other) == other
    assert kernels.without_shutdown_noise("Assertion failed: rc == 0 (src/ctx.cpp:12)\n") != ""  # another assertion
    # the start of the race, then another record before its end: both kept
    cut = RACE.splitlines(keepends=True)[:3] + ["ERROR:tornado.general:something else\n"]
    assert kernels.without_shutdown_noise("".join(cut)) == "".join(cut)


def test_what_a_child_writes_on_stderr_is_passed_on_less_the_race(tmp_path):
    """A child process (as a kernel is) inherits fd 2 inside the block; what it wrote reaches the real stderr
    after the block, less the race."""
    (tmp_path / "written.txt").write_text("kept\n" + RACE + "also kept\n")
    script = textwrap.dedent("""
        import subprocess, sys
        from course.grading import kernels
        child = "import sys; sys.stderr.write(open('written.txt').read())"
        with kernels.stderr_without_shutdown_noise():
            subprocess.run([sys.executable, "-c", child])
        sys.stderr.write("after")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path,
                          env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    assert done.returncode == 0, done.stderr
    assert done.stderr == "kept\nalso kept\nafter"


def _noisy_job(text):
    """A pool job that writes on fd 2 as a kernel does, then the race as a kernel shutting down would."""
    os.write(2, (text + RACE).encode())
    return os.getpid()


def test_a_pool_workers_stderr_comes_back_after_the_pool_less_the_noise(tmp_path, capfd):
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn"),
                             initializer=kernels.stderr_to_folder, initargs=(str(tmp_path),)) as pool:
        pids = set(pool.map(_noisy_job, ["one\n", "two\n"]))
    kernels.pass_on_stderr(tmp_path)
    err = capfd.readouterr().err
    assert sorted(err.splitlines()) == ["one", "two"] and len(list(tmp_path.glob("*.stderr"))) == len(pids)
