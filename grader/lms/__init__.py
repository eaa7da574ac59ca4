"""Every LMS back end, one module each: Gradescope's autograder zip (gradescope), a
PrairieLearn external grader (prairielearn), an Autolab autograder (autolab), what those
two share (external), an nbgrader course (nbgrader_course) and the call its autograded
cells make (notebook_cell), GitHub Classroom's workflow step (github_classroom), and the
gradebook files Canvas, Moodle and nbgrader import (gradebooks)."""
