"""The course workflow around nbgrader: build, grade, demo, self-check.  See `course --help`."""
