"""The grade table as a person reads it in a terminal."""

from __future__ import annotations


def table(rows) -> str:
    """Fixed-width table of student, assignment, score, written answers, status, flags and reason."""
    header = ("student", "assignment", "score", "by hand", "status", "flags", "reason")
    lines = [(r.student, r.assignment, f"{r.score:g}/{r.max_score:g}", _by_hand(r), r.status,
              str(len(r.flags)) if r.flags else "", r.reason if len(r.reason) <= 60 else r.reason[:57] + "...")
             for r in rows]
    widths = [max(len(str(x)) for x in column) for column in zip(header, *lines)]
    def fmt(values):
        return "  ".join(str(v).ljust(w) for v, w in zip(values, widths)).rstrip()
    return "\n".join([fmt(header), fmt("-" * w for w in widths)] + [fmt(line) for line in lines])


def _by_hand(row) -> str:
    """The written answers: points waiting for the instructor, or the points given."""
    if row.manual_pending:
        return f"{row.manual_pending:g} to grade"
    manual_max = getattr(row, "manual_max", 0.0)
    return f"{row.manual_score:g}/{manual_max:g}" if manual_max else ""
