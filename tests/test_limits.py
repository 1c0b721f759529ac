"""Grading limits: output bytes, and memory for a submission's process."""

import subprocess
import sys

from nbformat.v4 import new_code_cell, new_output

from course.grading.limits import CapOutputBytes


def test_one_huge_line_is_cut_to_the_byte_cap():
    cell = new_code_cell("print('x' * 5_000_000)")
    cell.outputs = [new_output("stream", name="stdout", text="x" * 5_000_000),
                    new_output("execute_result", data={"text/html": "<p>" + "y" * 100_000 + "</p>"}, execution_count=1)]
    capped, _ = CapOutputBytes(max_bytes=1000).preprocess_cell(cell, {}, 0)
    assert len(capped.outputs[0]["text"]) < 1200 and "cut by the grader" in capped.outputs[0]["text"]
    assert len(capped.outputs[1]["data"]["text/html"]) < 1200


def test_small_outputs_are_untouched():
    cell = new_code_cell("1")
    cell.outputs = [new_output("stream", name="stdout", text="hello\n")]
    capped, _ = CapOutputBytes(max_bytes=1000).preprocess_cell(cell, {}, 0)
    assert capped.outputs[0]["text"] == "hello\n"


def test_memory_limit_stops_a_hog():
    hog = [sys.executable, "-c", "x = bytearray(3 * 2**30); print('allocated')"]
    limited = subprocess.run([sys.executable, "-m", "course.grading.limits", str(2**30), "64", str(2**20), "--", *hog],
                             capture_output=True, text=True)
    assert limited.returncode != 0 and "MemoryError" in limited.stderr
    free = subprocess.run([sys.executable, "-m", "course.grading.limits", str(8 * 2**30), "64", str(2**20), "--",
                           sys.executable, "-c", "print('fine')"], capture_output=True, text=True)
    assert free.stdout.strip() == "fine"
