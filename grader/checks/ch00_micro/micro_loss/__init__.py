"""document_loss: the mean negative log-likelihood of one document, over the
min(block_size, len(ids) - 1) positions the window scores.

The judges compare with the mean NLL of the model's own logits and name the classic
mistakes (a sum, the wrong divisor, the wrong sign or target, no softmax): on the public
checks' fixed documents those values, and the logits they come from, are data the kit
computed (grader/checks/facts.py). The gradients are checked against finite
differences, and hidden, against the reference's. The loss is asked for twice in a row
on the same model, the first call's sequence still open: a loss that does not start its
own sequence gives a second result that depends on the first, and the judge says so.
"""

from __future__ import annotations

import re

from grader.checks._api import check, constant, exception_name
from grader.checks.ch00_micro.common import ANA, NAMES, NEAR, SMALL, TOL, all_close, close_enough, kind_of, model_of, task_of
from grader.checks.facts import known_facts

TASKS = [task_of("micro_loss", "document_loss", "the mean NLL of one document")]


def _second_call(micro, model, ids) -> dict:
    """document_loss again on the same model and document, the first call's sequence still
    open (as the finite differences below, or any loop that does not finish_sequence()):
    the loss must start its own sequence, so this gives the first call's loss again."""
    try:
        return {"again": float(micro.document_loss(model, ids).data)}
    except NotImplementedError:
        raise
    except Exception as error:  # noqa: BLE001 - that the second call fails is the observable
        if type(error).__module__.startswith("grader."):
            raise  # the kit's own (a forbidden call, sys.exit, a missing module): reported as such
        return {"again": None, "again_raised": type(error).__name__, "cached_then": model.cache_length()}


def run_loss(micro, sizes, seed, spread, ids, fd=()):
    model = model_of(micro, sizes, seed, spread)
    try:
        loss = micro.document_loss(model, ids)
    except ValueError as error:
        return {"value_error": str(error)}
    except NotImplementedError:
        raise  # a stub, not a forward outside a sequence (NotImplementedError is a RuntimeError)
    except RuntimeError as error:
        if model.cache is None:  # forward() refuses to run outside a sequence
            return {"no_sequence": True}
        raise
    if not isinstance(loss, micro.Value):
        return {"type": kind_of(loss)}
    value = loss.data
    loss.backward()
    grads = [p.grad for p in model.params]
    second = _second_call(micro, model, ids)
    model.finish_sequence()
    n = min(model.block_size, len(ids) - 1)
    model.start_sequence()
    logits = [[v.data for v in model.forward(ids[pos], pos)] for pos in range(n)]
    model.finish_sequence()
    if "again_raised" in second:
        return {"loss": value, **second, "logits": logits, "grads": grads, "numeric": []}
    again = second["again"]
    numeric = []
    for index in fd:  # central differences of the loss along single parameters
        p, h = model.params[index], 1e-6
        keep = p.data
        p.data = keep + h
        up = micro.document_loss(model, ids).data
        p.data = keep - h
        down = micro.document_loss(model, ids).data
        p.data = keep
        model.finish_sequence()
        numeric.append((up - down) / (2 * h))
    return {"loss": value, "again": again, "logits": logits, "grads": grads, "numeric": numeric}


def probe_loss(ns, sizes, seed, ids, spread=None, fd=()):
    return run_loss(ns.micro, sizes, seed, spread, ids, fd)


_PAST_THE_TABLE = re.compile(r"position \d+ does not fit: block_size is \d+, so positions are 0\.\.\d+ "
                             r"\(WPE has \d+ rows\)")


def judge_loss(out, inputs, reveal, facts_of):
    """facts_of(out): the mean NLL of out's logits ("mean") and the classic mistakes' losses
    ("wrong", [(text, value)])."""
    ids, sizes = inputs["ids"], inputs["sizes"]
    n = min(sizes["block_size"], len(ids) - 1)
    if "value_error" in out:
        if len(ids) - 1 > sizes["block_size"]:
            if not reveal:
                return constant("a document longer than the window raised ValueError: score only "
                                "min(T, len(ids) - 1) positions; the pairs past the window are not scored")
            # The model's own words for a position past its table: quoted only when they are those.
            said = f" ({out['value_error']})" if _PAST_THE_TABLE.fullmatch(str(out["value_error"])) else ""
            return (f"a document of {len(ids)} ids raised ValueError{said}: score only "
                    f"min(T, len(ids) - 1) = {n} positions; the pairs past the window are not scored")
        return "document_loss raised ValueError on a document that fits the window"
    if "no_sequence" in out:
        return ("document_loss called model.forward with no sequence open (forward raised RuntimeError): "
                "call model.start_sequence() at the top of document_loss, every call")
    if "type" in out:
        return "document_loss returned something else; it should return a Value (the graph's root for backward)"
    facts = facts_of(out)
    mean, wrong = facts["mean"], facts["wrong"]
    if not close_enough(out["loss"], mean, TOL):
        for text, value in wrong:
            if close_enough(out["loss"], value, NEAR):
                return text
        if reveal:
            return f"the loss is {out['loss']!r}; the mean -log softmax(logits)[target] over {n} positions is {mean!r}"
        return f"the loss is off by {abs(out['loss'] - mean):.3g} from the mean NLL over the scored positions"
    if "again_raised" in out:
        return (f"the second call's result depends on the first: called again on the same model and document, "
                f"with no finish_sequence() in between, document_loss raised {exception_name({'type': out['again_raised']})} "
                f"where the first call ran"
                + (f": the cache still held the first call's {n} positions when it raised"
                   if out.get("cached_then") == n else "")
                + "; start a new sequence (model.start_sequence()) at the top of every call")
    if not close_enough(out["again"], mean, TOL):
        return (f"the second call's result depends on the first: called again on the same model and document, "
                f"document_loss gave {out['again']!r} where the first call gave {out['loss']!r}: start a new "
                f"sequence (model.start_sequence()) at the top of every call, so that nothing of an earlier call "
                f"is left in the cache")
    if not any(g != 0.0 for g in out["grads"]):
        return "loss.backward() gives every parameter a zero gradient: build the loss from Values, not floats"
    return None


# One judge for both, declared in the lesson's order.
@check("ana_mean_nll", 3,
       "'ana' on the names model: the mean of -log softmax(logits)[next id] over its 4 positions, "
       "a Value whose gradients match finite differences",
       probe=probe_loss,
       inputs=lambda g: {"sizes": dict(NAMES), "seed": 0, "spread": 0.3, "ids": ANA, "fd": [0, 700, 4000]})
def ana_mean_nll(out, inputs, expected):
    facts = known_facts(inputs)
    if "logits" in out and not all_close(out["logits"], facts["logits"], TOL):
        return ("the model's logits on this document are not the ones MicroGPT.forward gives (is micro_forward "
                "right? see ch00.micro_forward.formula): this check compares the loss with the NLL of those logits")
    if problem := judge_loss(out, inputs, True, lambda out: facts):
        return problem
    for index, numeric in zip(inputs.get("fd", ()), out["numeric"]):
        if abs(out["grads"][index] - numeric) > 1e-5 * max(1.0, abs(numeric)):
            return (f"the gradient of parameter {index} is {out['grads'][index]!r} but finite differences of the "
                    f"loss give {numeric!r}: keep every step of the loss in the graph")
    return None


window = check(
    "window", 2, "a 9-id document with block_size 6 scores min(T, len(ids) - 1) = 6 positions",
    probe=probe_loss,
    inputs=lambda g: {"sizes": dict(SMALL), "seed": 2, "spread": 0.4, "ids": [6, 1, 2, 3, 0, 4, 5, 1, 6]})(ana_mean_nll)
