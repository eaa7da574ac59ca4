"""Every LMS back end, one module each: Gradescope's autograder zip (gradescope), a
PrairieLearn external grader (prairielearn), an Autolab autograder (autolab), what those
two share (external), an nbgrader course (nbgrader_course) and the call its autograded
cells make (notebook_cell), and GitHub Classroom's workflow step (github_classroom). The gradebook
files Canvas, Moodle and nbgrader import are a class run's output
(grader/grade_class/lms_gradebooks.py)."""
