"""The grader's own quality: known-wrong and known-right submissions (mutants/), the
table of what the checks catch (catch_table, `make mutants`), speed figures (bench and
model_speed, `make bench`) and the first thing to run (demo, `make demo`)."""
