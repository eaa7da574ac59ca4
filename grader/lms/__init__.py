"""Every LMS back end, one module each: Gradescope's autograder zip (gradescope), an
nbgrader course (nbgrader_course) and the call its autograded cells make
(notebook_cell), GitHub Classroom's workflow step (github_classroom), and the gradebook
files Canvas, Moodle and nbgrader import (gradebooks)."""
