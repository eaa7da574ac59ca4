"""What students and LMSs receive, generated from solutions/: the student copy
(student_copy), the lessons' generated tables (lesson_tables) and figures (figures),
nbgrader notebooks (notebooks) and courses (nbgrader_course), the Gradescope
autograder (gradescope) and the student release (release, from release_template/)."""
