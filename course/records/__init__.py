"""The class's records: who handed in what and when, the graded course on disk, and the grades for an LMS.

Hand-ins read as an LMS or nbgrader's exchange delivers them (intake), LMS ids named from the class list
(roster), due dates and the late penalty (lateness), where the gradebook lives (gradebook_db), the graded
course kept between runs (graded), and the gradebook exported for Canvas or Moodle (export).
"""
