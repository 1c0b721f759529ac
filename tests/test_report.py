"""The grading report, from rows made by hand: three figures per assignment and a README with the numbers."""

from course.review.report import Row, _report, exercises

A = "01_two_phases"


def _row(student, cells, status="graded", mistakes=(), pending=0.0, manual=0.0, untagged=0, reason=""):
    score = sum(s for s, _ in cells.values())
    return Row(student, A, score, 40.0, pending, status, reason, dict(cells), list(mistakes), [], manual,
               10.0 if status == "graded" else 0.0, untagged)


def test_exercises_group_test_cells_under_their_heading():
    groups = exercises(A)
    assert groups["test_roofline_time_visible"] == groups["test_prefill_flops_hidden"]
    assert groups["test_roofline_time_visible"].startswith("Exercise 1")
    assert "points" not in groups["test_roofline_time_visible"]
    assert groups["test_ttft_itl_visible"] != groups["test_roofline_time_visible"]


def test_report_has_a_heatmap_a_mistake_chart_and_totals(tmp_path):
    full = {"test_roofline_time_visible": (1.0, 1.0), "test_roofline_time_hidden": (3.0, 3.0)}
    rows = [
        _row("ada", full, manual=8.0),
        _row("dmitri", {"test_roofline_time_visible": (0.0, 1.0), "test_roofline_time_hidden": (0.0, 3.0)},
             mistakes=[("test_roofline_time_visible", "milliseconds for seconds"),
                       ("test_roofline_time_hidden", "milliseconds for seconds")], pending=10.0),
        _row("eve", {"test_roofline_time_visible": (1.0, 1.0), "test_roofline_time_hidden": (0.0, 3.0)},
             untagged=1, manual=4.0),
        _row("katherine", {}, status="ungradable", reason="the notebook is not valid JSON"),
    ]
    _report(rows, tmp_path / "report")
    for figure in ("heatmap", "mistakes", "totals"):
        assert (tmp_path / "report" / f"{A}_{figure}.png").stat().st_size > 5_000
    text = (tmp_path / "report" / "README.md").read_text()
    assert "4 submissions: 3 graded (1 with written answers still to grade by hand), 1 ungradable." in text
    # Exercise 1's share: ada 4/4, dmitri 0/4, eve 1/4: mean 5/12 = 42 %, one full, one zero
    assert "| Exercise 1: your own roofline calculator | 42% | 1/3 | 1/3 |" in text
    # written answers graded for ada (8/10) and eve (4/10): mean 60 %; dmitri's waits
    assert "| written answer (by hand) | 60% | graded for 2/3 | |" in text
    # counted once for dmitri, though two test cells of the exercise caught it
    assert "- 1 x milliseconds for seconds, Exercise 1 (test_roofline_time_hidden, test_roofline_time_visible)" in text
    assert "and 1 failing test cell(s) whose message named no known mistake" in text
    assert "mean 1.7, median 1, lowest 0, highest 4" in text  # totals 4, 0, 1
    assert "- dmitri: 10 points" in text and "- katherine: the notebook is not valid JSON" in text


def test_no_named_mistake_is_said_plainly(tmp_path):
    rows = [_row("eve", {"test_roofline_time_hidden": (0.0, 3.0)}, untagged=1),
            _row("ada", {"test_roofline_time_hidden": (3.0, 3.0)})]
    _report(rows, tmp_path / "report")
    text = (tmp_path / "report" / "README.md").read_text()
    assert "- none" not in text and "named no known mistake" in text
    assert not (tmp_path / "report" / f"{A}_mistakes.png").exists()
    rows = [_row("ada", {"test_roofline_time_hidden": (3.0, 3.0)})]
    _report(rows, tmp_path / "again")
    assert "No test failed" in (tmp_path / "again" / "README.md").read_text()


def test_a_blank_answer_is_counted_apart_from_unnamed_mistakes(tmp_path):
    import json

    from course.review.report import _mistakes

    def test_cell(grade_id, ename, evalue):
        return {"cell_type": "code", "metadata": {"nbgrader": {"grade_id": grade_id}}, "source": "",
                "outputs": [{"output_type": "error", "ename": ename, "evalue": evalue, "traceback": []}]}

    notebook = {"cells": [test_cell("t1", "NameError", "name 'prefill_flops' is not defined"),
                          test_cell("t2", "AssertionError", "2.1e12 FLOP is not 2.0e12 FLOP"),
                          test_cell("t3", "AssertionError", "wrong [mistake: milliseconds for seconds]")]}
    path = tmp_path / "graded.ipynb"
    path.write_text(json.dumps(notebook))
    assert _mistakes(path) == ([("t3", "milliseconds for seconds")], 1, 1)

    rows = [_row("blaise", {"test_roofline_time_visible": (0.0, 1.0)})]
    rows[0].blank = 2
    _report(rows, tmp_path / "report")
    text = (tmp_path / "report" / "README.md").read_text()
    assert "2 failing test cell(s) of exercises left blank" in text and "named no known mistake" not in text


def test_every_student_and_assignment_has_a_row_and_lateness_costs_what_the_policy_says(tmp_path):
    import json

    from course.review.report import NOT_SUBMITTED, complete

    root = tmp_path / "nbgrader"
    root.mkdir()
    # due 16:00 UTC; dmitri handed in at 17:30 UTC: 1 h 30 min late, one started day at 10 % of 50 points = 5
    (root / "dates.json").write_text(json.dumps({"due": {A: "2026-02-06T16:00:00+00:00", "02_kv_cache":
                                                         "2026-02-13T16:00:00+00:00"},
                                                 "penalty_per_day": 0.1, "max_penalty": 0.5}))
    (root / "handins.json").write_text(json.dumps({f"dmitri/{A}": {"handed_in": "2026-02-06T17:30:00+00:00",
                                                                  "marked_late": False, "layout": "exchange"},
                                                   f"ada/{A}": {"handed_in": "2026-02-06T15:00:00+00:00",
                                                               "marked_late": False, "layout": "exchange"}}))
    rows = complete([_row("ada", {"t": (40.0, 40.0)}), _row("dmitri", {"t": (32.0, 40.0)})], root)
    table = {(r.student, r.assignment): r for r in rows}
    assert sorted(table) == [("ada", A), ("ada", "02_kv_cache"), ("dmitri", A), ("dmitri", "02_kv_cache")]
    assert table["ada", "02_kv_cache"].status == NOT_SUBMITTED and "2026-02-13" in table["ada", "02_kv_cache"].reason
    assert (table["ada", A].late, table["ada", A].score) == ("", 40.0)
    assert (table["dmitri", A].late, table["dmitri", A].late_penalty, table["dmitri", A].score) == \
        ("late by 1 h 30 min", 5.0, 27.0)
    assert table["dmitri", A].as_csv()["late"] == "late by 1 h 30 min"
