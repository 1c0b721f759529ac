"""Limits on what a submission may cost the grader: output bytes, memory, processes, time."""

from __future__ import annotations

import os
import resource
import sys

from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Integer

_CUT = "\n[... output cut by the grader: {dropped:,} bytes over the {limit:,}-byte limit ...]\n"


class CapOutputBytes(NbGraderPreprocessor):
    """Cut every output of a graded notebook to ``max_bytes``.

    nbgrader's LimitOutput counts lines, so one enormous line would reach the
    gradebook and the feedback page intact; this counts bytes.  Images larger
    than the budget are replaced by a note.
    """

    max_bytes = Integer(20_000, help="Most bytes one output may keep").tag(config=True)

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code":
            return cell, resources
        for output in cell.get("outputs", []):
            if "text" in output:
                output["text"] = self._cut(output["text"])
            if output.get("output_type") == "error":
                output["traceback"] = [self._cut(line) for line in output.get("traceback", [])][:50]
                output["evalue"] = self._cut(output.get("evalue", ""))
            data = output.get("data", {})
            for mime in list(data):
                value = data[mime]
                if isinstance(value, list):
                    value = "".join(value)
                if not isinstance(value, str) or len(value) <= self.max_bytes:
                    continue
                if mime.startswith("text/"):
                    data[mime] = self._cut(value)
                elif mime.startswith("image/") and len(value) <= 25 * self.max_bytes:
                    continue  # a plot: let it through up to 25 budgets (about 500 KB)
                else:
                    del data[mime]
                    data.setdefault("text/plain", f"[{mime} output of {len(value):,} bytes removed by the grader]")
        return cell, resources

    def _cut(self, text):
        if isinstance(text, list):
            text = "".join(text)
        encoded = text.encode("utf-8", "replace")
        if len(encoded) <= self.max_bytes:
            return text
        kept = encoded[: self.max_bytes].decode("utf-8", "ignore")
        return kept + _CUT.format(dropped=len(encoded) - self.max_bytes, limit=self.max_bytes)


def run_limited(argv: list[str]) -> None:
    """``python -m course.grading.limits MEMORY PROCESSES FILE_BYTES -- COMMAND...``: exec COMMAND under rlimits.

    A launcher rather than subprocess's preexec_fn, which may deadlock when the
    grader runs several workers from threads.  The kernel inherits the limits.
    The process limit counts every process of the user, so it is set to what
    the user already runs plus PROCESSES; root is exempt from it by the kernel.
    """
    memory, processes, file_bytes = (int(x) for x in argv[:3])
    command = argv[argv.index("--") + 1:]
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_bytes, file_bytes))
    if os.getuid() != 0:
        from .sandbox import count_user_processes

        cap = count_user_processes(os.getuid()) + processes
        resource.setrlimit(resource.RLIMIT_NPROC, (cap, cap))
    os.execvp(command[0], command)


if __name__ == "__main__":
    run_limited(sys.argv[1:])
