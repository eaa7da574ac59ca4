"""The grader's own quality: the table of what the checks catch on the tasks' mutants and
variants (catch_table, `make mutants`), bodies that compute nothing (trivial_bodies),
everything about one task (task_check, `make task-check`), verdicts before and after a
change (outcomes), speed figures (bench and model_speed, `make bench`) and the first
thing to run (demo, `make demo`)."""
