"""Write each check's answer form on the reference (grader/run/forms.py): forms.json in
every chapter's check package for its public checks, and in its hidden/ folder for the
hidden ones.

    python -m grader.generate.forms            (part of `make student`)
"""

from __future__ import annotations

import json

from grader.checks import catalogue
from grader.files import write_atomic
from grader.run.forms import FORMS_FILE, CHECKS_FOLDER, reference_form
from grader.run.reference import Reference


def computed(packages: "set[str] | None" = None) -> dict[str, dict[str, object]]:
    """{folder under grader/checks: {check name: form}} for every check probed in one call
    (of the given chapter packages only, where given)."""
    modules = Reference.available().modules
    found: dict[str, dict[str, object]] = {}
    for chapter in catalogue.chapters():
        if packages is not None and chapter.module not in packages:
            continue
        for check in chapter.checks:
            try:
                form = reference_form(check, modules)
            except NotImplementedError as unwritten:
                raise SystemExit(f"the form of {check.name}'s answer is read off the reference, which raises "
                                 f"NotImplementedError ({unwritten}): write the reference's body first") from None
            if form is not None:
                folder = f"{chapter.module}/{catalogue.HIDDEN}" if check.hidden else chapter.module
                found.setdefault(folder, {})[check.name] = form
    return found


def main() -> int:
    for folder, forms in computed().items():
        write_atomic(CHECKS_FOLDER / folder / FORMS_FILE, json.dumps(forms, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
