"""The grade table as a person reads it in a terminal."""

from __future__ import annotations


def table(rows) -> str:
    """Fixed-width table of student, assignment, score, written answers, status, flags and reason."""
    # flags: a count (grades.csv lists them)
    header = ("student", "assignment", "score", "by hand", "status", "flags", "reason")
    lines = [(r.student, r.assignment, _score(r), _by_hand(r), r.status,
              str(len(r.flags)) if r.flags else "", r.reason if len(r.reason) <= 60 else r.reason[:57] + "...")
             for r in rows]
    widths = [max(len(str(x)) for x in column) for column in zip(header, *lines)]
    def fmt(values):
        return "  ".join(str(v).ljust(w) for v, w in zip(values, widths)).rstrip()
    return "\n".join([fmt(header), fmt("-" * w for w in widths)] + [fmt(line) for line in lines])


def _score(row) -> str:
    # No number where the export writes none: an ungradable hand-in read as 0/40 (round 16's instructor).
    if row.status in ("not submitted", "ungradable"):
        return "-"
    late = f" ({row.late}" + (f", -{row.late_penalty:g}" if getattr(row, "late_penalty", 0) else "") + ")" \
        if getattr(row, "late", "") else ""
    return f"{row.score:g}/{row.max_score:g}{late}"


def _by_hand(row) -> str:
    """The written answers: points waiting for the instructor, or the points given (a kept score under review too)."""
    manual_max = getattr(row, "manual_max", 0.0)
    if getattr(row, "manual_review", 0):
        return f"{row.manual_score:g}/{manual_max:g}, kept, to review"
    if row.manual_pending:
        return f"{row.manual_pending:g} to grade"
    return f"{row.manual_score:g}/{manual_max:g}" if manual_max else ""
