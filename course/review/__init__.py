"""What instructors and students read once grading is done, and where the instructor grades by hand.

Feedback pages for students (feedback, finished by feedback_page), nbgrader's formgrader for the written
answers (formgrader, with the formgrader_page extension that says when a save failed), grades.csv and the
report of named mistakes (report), and the grade table printed in a terminal (show).
"""
