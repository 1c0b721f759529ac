"""The trusted grader: what runs for each submission, where student code cannot reach the grade.

nbgrader's Execute step, replaced (autograde); the student's kernel in a disposable sandbox (sandbox, and
kernel_runner inside it); the course's test cells run in the grader against plain data (trusted); derivations read
on the source (source_rules); notebooks mended before nbgrader reads them (preflight); what a submission may cost
(limits); the cell kinds and hidden-test markers (cells); the library as the sandbox imports it, answers
removed (library_copy); nbgrader loaded once per grading worker and forked for each student (warm_nbgrader); where the course
lives and how nbgrader is started (nbgrader_run); the kernels it starts talking over Unix sockets (kernels).
docs/design.md, "Trust model", says what each promises.
"""
