"""Makes `pytest` in this folder run the course's public checks (see README.md, "In your editor")."""

pytest_plugins = ["grader.pytest_plugin"]
