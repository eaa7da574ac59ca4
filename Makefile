# hero_transformer — every command a student, a TA or CI needs.
# The first command that needs Python creates .venv (CPU torch, pinned below 2.14).

VENV   ?= .venv
PYTHON := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
CH     ?=
TASK   ?=
FUNC   ?=
MODULE ?=
SUB    ?=
DEST   ?=
ARGS   ?=
IN     ?=
OUT    ?= grade-class-out

.DEFAULT_GOAL := help
.PHONY: need-SUB need-IN need-DEST need-TASK task-check new-task help setup test student figures check grade grade-class demo bench mutants micro train sample submit gradescope prairielearn autolab nbgrader-course release clean

help:
	@echo "make demo            grade the reference and typical wrong submissions (start here)"
	@echo "make check [CH=05]   run the public checks on ./hero_transformer (students)"
	@echo "make grade SUB=path  grade a submission folder or .zip with hidden checks (TAs; ARGS=... for more flags)"
	@echo "make grade-class IN=download OUT=folder   grade a class's LMS download (ARGS=--roster r.csv --format canvas ...)"
	@echo "make test            the kit's own test suite"
	@echo "make student         regenerate hero_transformer/ and the lessons' check tables"
	@echo "make figures         redraw the lessons' figures from the reference (assignments/chNN_*/figures/)"
	@echo "make mutants [CH=05] the grader's catch rate on known-wrong implementations (one chapter with CH)"
	@echo "make new-task CH=05 TASK=rms_norm   a new task's skeleton, and what is left to write"
	@echo "make task-check TASK=layer_norm   everything the kit asks of one task (about a minute)"
	@echo "make bench           grading speed and model speed figures"
	@echo "make micro | train | sample   chapter 00 / 08 / 09 programs"
	@echo "make submit          pack hero_transformer/ into submission.zip for upload"
	@echo "make gradescope [CH=05]          build autograder.zip for a Gradescope programming assignment"
	@echo "make prairielearn [CH=05] [DEST=prairielearn]   a PrairieLearn external grader: image, entry point, info.json"
	@echo "make autolab [CH=05] [DEST=autolab] [ARGS=--seed N]  autograde.tar, autograde-Makefile and the Tango image for Autolab"
	@echo "make nbgrader-course DEST=path [CH=05,07]   write a ready nbgrader course folder"
	@echo "make release [CH=00,01,05] [DEST=release]   the student bundle (folder + zip), scanned for leaks"

$(STAMP): pyproject.toml
	@sh .ci/get-bubblewrap
	@test -x $(PYTHON) || python3 -m venv $(VENV)
	$(PYTHON) -m pip install --quiet --upgrade pip
	$(PYTHON) -m pip install --quiet ".[course,dev]"
	@touch $(STAMP)

setup: $(STAMP)

test: $(STAMP)
	@sh .ci/get-chromium
	@# Three workers on two cores: much of the suite waits on the processes it grades
	@# (start-ups, time limits), and a third worker fills those waits.
	$(PYTHON) -m pytest -q -n 3 --durations=15

figures: $(STAMP)
	$(PYTHON) -m grader.generate.figures

student: $(STAMP)
	$(PYTHON) -m grader.generate
	$(PYTHON) -m grader.qa.accuracy_page

check: $(STAMP)
	$(PYTHON) -m grader check hero_transformer $(if $(CH),--chapters $(CH)) $(ARGS)

grade: need-SUB $(STAMP)
	$(PYTHON) -m grader grade "$(SUB)" --json results.json $(if $(CH),--chapters $(CH)) $(ARGS)

grade-class: need-IN $(STAMP)
	$(PYTHON) -m grader grade-class "$(IN)" --out "$(OUT)" $(if $(CH),--chapters $(CH)) $(ARGS)

demo: $(STAMP)
	$(PYTHON) -m grader demo

bench: $(STAMP)
	$(PYTHON) -m grader.qa.bench

mutants: $(STAMP)
	$(PYTHON) -m grader.qa.catch_table $(if $(CH),--chapters $(CH),--write-docs)
	$(PYTHON) -m grader.qa.own_parts $(if $(CH),--chapters $(CH))
	$(PYTHON) -m grader.qa.seeds $(if $(CH),--chapters $(CH),--write-docs)

task-check: need-TASK $(STAMP)
	$(PYTHON) -m grader.qa.task_check $(TASK)

new-task: need-TASK $(STAMP)
	@test -n "$(CH)" || { echo "usage: make new-task CH=05 TASK=rms_norm [FUNC=rms_norm] [MODULE=model]"; exit 2; }
	$(PYTHON) -m grader.generate.new_task $(CH) $(TASK) $(if $(FUNC),--function $(FUNC)) $(if $(MODULE),--module $(MODULE))

micro: $(STAMP)
	PYTHONPATH=solutions $(PYTHON) -P -m hero_transformer.micro $(ARGS)

train: $(STAMP)
	PYTHONPATH=solutions $(PYTHON) -P -m hero_transformer.train $(ARGS)

sample: $(STAMP)
	PYTHONPATH=solutions $(PYTHON) -P -m hero_transformer.sample $(ARGS)

submit: $(STAMP)
	$(PYTHON) -m grader submit hero_transformer

gradescope: $(STAMP)
	$(PYTHON) -m grader gradescope --output autograder.zip $(if $(CH),--chapters $(CH))

prairielearn: $(STAMP)
	$(PYTHON) -m grader prairielearn --output "$(or $(DEST),prairielearn)" $(if $(CH),--chapters $(CH)) $(ARGS)

autolab: $(STAMP)
	$(PYTHON) -m grader autolab --output "$(or $(DEST),autolab)" $(if $(CH),--chapters $(CH)) $(ARGS)

nbgrader-course: need-DEST $(STAMP)
	$(PYTHON) -m grader nbgrader-course "$(DEST)" $(if $(CH),--chapters $(CH)) $(ARGS)

release: $(STAMP)
	$(PYTHON) -m grader release --out "$(or $(DEST),release)" $(if $(CH),--chapters $(CH))

# A missing argument is said before any set-up runs (prerequisites run left to right).
need-SUB:
	@test -n "$(SUB)" || { echo "usage: make grade SUB=path/to/submission (folder or .zip)"; exit 2; }
need-IN:
	@test -n "$(IN)" || { echo "usage: make grade-class IN=path/to/download OUT=folder [ARGS='--roster roster.csv --format canvas']"; exit 2; }
need-TASK:
	@test -n "$(TASK)" || { echo "usage: make task-check TASK=layer_norm (a task's id, as its solution region names it)"; exit 2; }
need-DEST:
	@test -n "$(DEST)" || { echo "usage: make nbgrader-course DEST=path/to/new/course [CH=05,07]"; exit 2; }

clean:
	rm -rf $(VENV) .pytest_cache .worker_view results.json submission.zip autograder.zip grade-class-out release
