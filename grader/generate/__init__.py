"""What course authors generate from solutions/: the student copy (student_copy), the
lessons' generated tables (lesson_tables) and figures (figures), the chapters'
notebooks (notebooks) and the student release (release, from release_template/).
`python -m grader.generate` (`make student`) runs every step that writes a generated file.
LMS packaging (Gradescope, nbgrader courses) lives in grader/lms/."""
