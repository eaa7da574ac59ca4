"""One attention head for one position, over the keys and values cached so far.

The judges compare with the float head: weights softmax(q·k / sqrt(d_head)), output the
weighted sum of the values, and name the classic scaling and mixing mistakes; on the
public checks' inputs those are data the kit computed (grader/checks/facts.py). Hidden,
every gradient is compared with the reference's.
"""

from __future__ import annotations

from grader.checks._api import check
from grader.checks.ch00_micro.common import NEAR, all_close, data_of, kind_of, off_by, task_of, values_of
from grader.checks.facts import known_facts

TASKS = [task_of("micro_attention", "attention_head", "one attention head for one position", numbers_only=True)]


def probe_attention(ns, query, keys, values, c=None, e=None):
    q = values_of(ns, query)
    ks = [values_of(ns, k) for k in keys]
    vs = [values_of(ns, v) for v in values]
    result = ns.micro.attention_head(q, ks, vs)
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        return {"form": kind_of(result)}
    output, weights = result
    out = {"output": data_of(output, "the head's output"), "weights": data_of(weights, "the attention weights")}
    if c is not None:
        loss = ns.micro.vsum([ci * o for ci, o in zip(c, output)] + [ei * w for ei, w in zip(e, weights)])
        loss.backward()
        out["grads"] = {"query": [v.grad for v in q], "keys": [[v.grad for v in k] for k in ks],
                        "values": [[v.grad for v in v_] for v_ in vs]}
    return out


def judge_attention_values(out, q, keys, values, reveal, facts):
    """facts: the head's output and weights ("out", "weights") and the classic mistakes'
    ("mistakes", [(text, output, weights)])."""
    if "form" in out:
        return "attention_head should return (output, weights), got something else"
    want_out, want_w = facts["out"], facts["weights"]
    if len(out["weights"]) != len(keys):
        return f"with {len(keys)} cached positions there should be {len(keys)} weights, got {len(out['weights'])}"
    if len(out["output"]) != len(q):
        return f"the head's output should have d_head = {len(q)} values, got {len(out['output'])}"
    if abs(sum(out["weights"]) - 1.0) > 1e-9:
        return f"the attention weights sum to {sum(out['weights']):.6g}, not 1: softmax the scores"
    if all_close(out["weights"], want_w, 1e-10) and all_close(out["output"], want_out, 1e-10):
        return None
    for text, wrong_out, wrong_w in facts["mistakes"]:
        if all_close(out["weights"], wrong_w, NEAR) and all_close(out["output"], wrong_out, NEAR):
            return text
    if not all_close(out["weights"], want_w, 1e-10):
        if reveal:
            return f"the weights are {out['weights']}, expected softmax(dot(q, k_t) / sqrt(d_head)) = {want_w}"
        return f"the attention weights are off by up to {off_by(out['weights'], want_w):.3g}"
    if reveal:
        return f"the weights are right but the output {out['output']} is not sum_t w_t * v_t = {want_out}"
    return f"the weights are right but the output is off by up to {off_by(out['output'], want_out):.3g}"


@check("scaled_weights", 2,
       "3 cached positions, d_head = 4: weights softmax(q·k / 2), output the weighted sum of the values",
       probe=probe_attention,
       inputs=lambda g: {"query": [1.0, -0.5, 2.0, 0.25],
                         "keys": [[0.5, 1.0, -1.0, 2.0], [1.5, -0.5, 0.75, 0.0], [-1.0, 0.5, 1.25, 1.0]],
                         "values": [[1.0, 2.0, 3.0, 4.0], [-1.0, 0.0, 1.0, 0.5], [0.25, -2.0, 0.5, 1.5]]})
def scaled_weights(out, inputs, expected):
    return judge_attention_values(out, inputs["query"], inputs["keys"], inputs["values"], True, known_facts(inputs))


@check("single_position", 1, "one cached position: weight exactly 1 and output = that value vector",
       probe=probe_attention, inputs=lambda g: {"query": [0.3, -2.0], "keys": [[1.0, 4.0]], "values": [[0.7, -1.1]]})
def single_position(out, inputs, expected):
    if "form" in out:
        return "attention_head should return (output, weights), got something else"
    if out["weights"] != [1.0] and not all_close(out["weights"], [1.0], 1e-15):
        return f"with one cached position the only weight must be 1, got {out['weights']}"
    if not all_close(out["output"], inputs["values"][0], 1e-15):
        return "with one cached position the output must be that position's value vector"
    return None


def _all_zero(numbers) -> bool:
    return all(abs(x) < 1e-300 for x in (numbers if not isinstance(numbers[0], list) else sum(numbers, [])))


@check("gradients_flow", 2,
       "loss = sum_i c_i * output_i: its gradients reach the query, every key and every value, as autograd's do",
       probe=probe_attention,
       inputs=lambda g: {"query": [0.5, -1.0, 1.5], "keys": [[1.0, 0.5, -0.5], [-1.5, 1.0, 0.25]],
                         "values": [[2.0, -1.0, 0.5], [0.5, 1.5, -2.0]], "c": [1.0, -2.0, 0.5], "e": [0.0, 0.0]})
def gradients_flow(out, inputs, expected):
    if "form" in out:
        return "attention_head should return (output, weights), got something else"
    said = known_facts(inputs)
    if not all_close(out["output"], said["out"], 1e-9):
        return "the head's output is not the weighted sum of the values yet (see scaled_weights)"
    want = said["grads"]
    got = out["grads"]
    cut = [name for name in ("query", "keys", "values") if _all_zero(got[name]) and not _all_zero(want[name])]
    if len(cut) == 3:
        return ("the output's values are right but no gradient flows back through it: the query, the keys and the "
                "values all keep .grad = 0, so the output is cut off from the graph (built from .data floats, or "
                "wrapped in a new Value); build it from the Values themselves, e.g. dot(weights, ...)")
    if cut == ["values"]:
        return ("gradients reach the query and the keys but not the values: the value vectors enter the output as "
                ".data floats, cut off from the graph; multiply the weights by the value Values")
    if cut and "values" not in cut:
        return (f"gradients reach the values but not the {' or the '.join(cut)}: the weights enter the output as "
                f".data floats, cut off from the graph; use the weight Values themselves")
    for name in ("query", "keys", "values"):
        if not all_close(got[name], want[name], 1e-9):
            return (f"the output is right but the gradient reaching the {name} is off by up to "
                    f"{off_by(got[name], want[name]):.3g}: check the backward of the ops the head uses")
    return None
