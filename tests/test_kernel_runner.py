"""course/grading/kernel_runner.py: the kernel's end of the line (it runs the notebook cell by cell, skips a cell
that hangs or kills its kernel, and answers the grader's requests with plain data), read from the probe notebook
that tests/conftest.py runs once in a sandbox (``probed_sandbox``)."""

import pytest

from tests.sandbox_probes import PROBES_ORDER

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("slow:probed_sandbox")]  # with tests/test_sandbox.py


def test_a_hang_and_a_crash_cost_their_own_cell_only(probed_sandbox):
    printed, box, _ = probed_sandbox
    lost = {PROBES_ORDER[l.index]: l.why for l in box.lost}
    assert set(lost) == {"hang", "crash"}
    assert "did not finish within 4 s" in lost["hang"]
    assert printed["after"] == "still here"


def test_requests_answer_with_plain_data(probed_sandbox):
    _, _, reply = probed_sandbox
    assert reply["ok"] is True
    assert reply["names"]["nothing_here"] == {"kind": "missing"}
    assert reply["names"]["written"]["kind"] == "value"
