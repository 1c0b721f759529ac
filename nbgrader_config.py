"""nbgrader settings for the rooflab course.  Each setting says why it is what it is."""

import os
from pathlib import Path

from nbgrader.preprocessors import (
    AssignLatePenalties,
    CheckCellMetadata,
    ClearHiddenTests,
    Execute,
    GetGrades,
    IgnorePattern,
    LimitOutput,
    SaveAutoGrades,
)
from nbconvert.preprocessors import ClearMetadataPreprocessor, CSSHTMLHeaderPreprocessor

from course.grading.autograde import SandboxedExecute
from course.grading.sandbox import SandboxLimits
from course.grading.kernels import ipc_prefix
from course.grading.limits import CapOutputBytes

c = get_config()  # noqa: F821 - provided by traitlets when it loads this file

# Paths: the course lives where this file lives, whatever the working directory.
c.CourseDirectory.root = str(Path(__file__).resolve().parent)
c.CourseDirectory.course_id = "rooflab"
c.CourseDirectory.source_directory = "source"
c.CourseDirectory.release_directory = "release"
c.CourseDirectory.solution_directory = "solutions"  # nbgrader's default is "solution"

# Kernels talk to nbgrader over Unix sockets, not TCP on localhost (course/grading/kernels.py): no
# "Kernel is running over TCP without encryption" warning from every kernel.
c.KernelManager.transport = "ipc"
c.KernelManager.ip = ipc_prefix()

# Our cells are analytic and run in milliseconds: 10 s per cell is generous for a
# plot, and an infinite loop costs 10 s, then the kernel is interrupted and the
# rest of the notebook still runs (so the other exercises are still graded).
c.Execute.timeout = int(SandboxLimits.cell_seconds)  # the one definition of the per-cell limit
c.Execute.interrupt_on_timeout = True
# Minimal tracebacks show the failing assertion's message (the checker's hint)
# but not the source lines, so a failing hidden test does not print itself.
c.Execute.extra_arguments = ["--InteractiveShell.xmode=Minimal"]

# A student who deleted a test cell is still graded: nbgrader puts it back.
c.OverwriteCells.add_missing_cells = True

# Any text on stderr zeroes a test cell.  A Python warning is not a failure:
# strip warning lines before grading (a pattern alone does nothing without enabled).
c.IgnorePattern.enabled = True
c.IgnorePattern.pattern = r"(?m)^.*Warning: "

# Output limits: nbgrader counts lines, so a single 5 MB line would pass; our
# CapOutputBytes cuts every output to a byte budget after the line limit.
c.LimitOutput.max_lines = 200
c.LimitOutput.max_traceback = 20
c.CapOutputBytes.max_bytes = 20_000
# The grade of record: nbgrader's Execute is replaced by SandboxedExecute, which runs the
# student's kernel in a sandbox and the course's test cells in the grader's own process
# (course/grading/autograde.py); nbgrader then scores the verdicts it wrote, as usual.
# benchmarks/bench_grading.py sets ROOFLAB_IN_KERNEL_GRADING=1 to time the old, untrusted way (nbgrader's own
# Execute, tests in the student's kernel) beside this one; nothing else should.
GRADER = Execute if os.environ.get("ROOFLAB_IN_KERNEL_GRADING") == "1" else SandboxedExecute
c.Autograde.autograde_preprocessors = [
    GRADER,
    IgnorePattern,
    ClearMetadataPreprocessor,
    LimitOutput,
    CapOutputBytes,
    SaveAutoGrades,
    AssignLatePenalties,
    CheckCellMetadata,
]

# Hidden tests are graded but never shown: strip them from the feedback pages.
c.GenerateFeedback.preprocessors = [GetGrades, ClearHiddenTests, CSSHTMLHeaderPreprocessor]
c.ClearHiddenTests.enforce_metadata = False
