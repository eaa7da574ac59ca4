"""Grading a class: what an LMS hands a TA read as uploads (uploads), every upload
graded and the gradebook written (gradebook), the files built from the results
(outputs), and which uploads look alike for a person to review (similarity)."""
