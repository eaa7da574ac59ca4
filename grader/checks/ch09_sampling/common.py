"""What chapter 09's two task modules share: the generators, made inside the probe from
a seed the grader sends, and how the code is called where it might raise.

A probe calls the student's code plainly, so that an exception goes to the runner, which
reports it as for every chapter's probes: its type, where it was raised and, in `make
check`, its message and line (grader/run/feedback.py). Two exceptions are data instead:
a type the check asks for (a ValueError past the context limit: `attempt`), and one
raised at a temperature the same call at temperature 1 does not raise at
(`at_temperature`), whose cause the judge can then name."""

from __future__ import annotations

import torch

from grader.checks._api import exception_name


def _raised(error: Exception) -> dict:
    return {"type": type(error).__name__, "value_error": isinstance(error, ValueError), "message": str(error)[:500]}


def _passes_through(error: Exception) -> bool:
    """An unfinished task ('not implemented') and a forbidden call are the runner's to report."""
    return isinstance(error, NotImplementedError) or type(error).__name__ == "ForbiddenCall"


def attempt(function, *args, answers: tuple[type, ...] = (ValueError,), **kwargs) -> dict:
    """{'value': function(*args, **kwargs)}, or {'raised': {type, value_error, message}} for
    an exception of a type in `answers`, the error the check asks about; any other
    exception goes to the runner."""
    try:
        return {"value": function(*args, **kwargs)}
    except Exception as error:  # noqa: BLE001 - an error of the asked-for type is the answer here
        if _passes_through(error) or not isinstance(error, answers):
            raise
        return {"raised": _raised(error)}


def at_temperature(function, *args, temperature: float, **kwargs) -> dict:
    """{'value': function(*args, temperature=temperature, **kwargs)}. When that raises and the
    same call at temperature 1 does not, the temperature is the cause (temperature 0
    divided by, say): {'raised': {...}, 'temperature': temperature}, for the judge to name.
    Otherwise the exception goes to the runner, with the line it was raised at."""
    try:
        return {"value": function(*args, temperature=temperature, **kwargs)}
    except Exception as error:  # noqa: BLE001 - whether the temperature is the cause decides
        if _passes_through(error) or temperature == 1.0:
            raise
        try:
            function(*args, temperature=1.0, **kwargs)
        except Exception:  # noqa: BLE001 - not the temperature: the first error is reported
            raise error from None
        return {"raised": _raised(error), "temperature": temperature}


def raised(result, what):
    """'<what> raised <the exception's type>', for a result that holds an exception the probe
    kept (attempt, at_temperature); for at_temperature's, the temperature named as the cause."""
    said = f"{what} raised {exception_name(result['raised'])}"
    if "temperature" not in result:
        return said
    t = result["temperature"]
    said += f" at temperature {t:g}, where the same call at temperature 1 runs"
    if t == 0:
        return (f"{said}: temperature 0 means greedy, the argmax of the logits, with no division and no draw "
                f"(dividing by 0 gives inf and nan, which torch.multinomial refuses)")
    return (f"{said}: subtract each row's maximum before dividing by the temperature, so the best logit becomes 0 "
            f"and the others finite or -inf, never nan")


def seeded_generator(seed):
    return torch.Generator().manual_seed(int(seed))
