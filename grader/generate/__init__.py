"""What course authors generate from solutions/: the student copy (student_copy), the
lessons' generated tables (lesson_tables) and figures (figures), the chapters'
notebooks (notebooks) and the student release (release, from release_template/).
LMS packaging (Gradescope, nbgrader courses) lives in grader/lms/."""
