"""One draw, sample_next: temperature, top-k and a seeded generator.

Draws are judged by their properties: greedy at temperature 0, never outside the top k,
frequencies close to softmax(logits / temperature) over many draws (a tolerance a right
sampler misses with negligible probability), and the same ids from the same seed. The
generators are created inside the probe from a seed the grader sends. What the right
sampler (and the classic wrong ones) draw from on the public checks' fixed logits is
data the kit computed (grader/checks/facts.py; hidden/sample_next.py).
"""

from __future__ import annotations

import torch

from grader.checks._api import Task, check, int64_ids_problem, numbered, shape_problem
from grader.checks.ch09_sampling.common import at_temperature, raised, seeded_generator
from grader.checks.course import F64
from grader.checks.facts import known_facts

TASKS = [
    Task("sample_next", "sample", "sample_next", "one draw: temperature, top-k, a seeded generator"),
]

# Frequencies from N draws have a standard deviation of at most sqrt(0.25 / N) = 0.0035 for
# N = 20000: a tolerance of 0.02 is 5.6 of them, which a right sampler exceeds with
# probability below 1e-7 per comparison.
DRAWS, FREQUENCY_TOLERANCE = 20000, 0.02

# ----------------------------------------------------------------------- helpers


def _ids_problem(ids, shape, V, what="the ids"):
    if problem := shape_problem(ids, shape, what):
        if isinstance(ids, torch.Tensor) and tuple(ids.shape) == (*shape, 1):
            return (f"{problem}: one id per row, [B], without the trailing axis of 1 that torch.multinomial(probs, 1) "
                    f"gives (reshape it to the rows' leading shape)")
        return problem
    if problem := int64_ids_problem(ids, what):
        return problem
    if ids.numel() and (ids.min() < 0 or ids.max() >= V):
        return f"{what} contain values outside [0, V) = [0, {V})"
    return None


def _frequencies(ids, V):
    flat = ids.reshape(-1)
    return torch.bincount(flat, minlength=V).double() / flat.numel()


def _table(values):
    return "(" + ", ".join(f"{v:.4f}" for v in values) + ")"


# ------------------------------------------------------------------------ draws


def probe_sample_calls(ns, logits, calls, repeat=1):
    """sample_next on logits repeated `repeat` times along a new first axis, once per call
    (temperature, top_k, seed); each call gets its own generator made from its seed."""
    rows = logits.unsqueeze(0).repeat(repeat, *[1] * logits.dim()) if repeat > 1 else logits
    results = []
    for call in calls:
        generator = seeded_generator(call["seed"]) if call.get("seed") is not None else None
        before = torch.random.get_rng_state()
        result = at_temperature(ns.sample.sample_next, rows.clone(), temperature=call["temperature"],
                                top_k=call.get("top_k"), generator=generator)
        result["global_rng_touched"] = not torch.equal(before, torch.random.get_rng_state())
        if call.get("advance_global"):
            torch.rand(3)
        results.append(result)
    return results


def _greedy_inputs(g):
    V = 13
    logits = torch.randn(64, V, generator=g, dtype=F64) * 2
    top2 = torch.topk(logits, 2, dim=-1)
    close = top2.values[:, 0] - top2.values[:, 1] < 0.05  # no near-ties: 1e-6 must be plainly greedy
    logits[close, top2.indices[close, 0]] += 1.0
    seed = int(torch.randint(0, 2**31, (1,), generator=g))
    # The last call, at temperature 1 with 1e-6's seed, is no greedy call: it tells a
    # temperature with no effect (draws the same as at 1) from one with the wrong effect.
    return {"logits": logits, "calls": [{"temperature": 0.0, "seed": seed}, {"temperature": 1e-6, "seed": seed},
                                        {"temperature": 0.0, "seed": None}, {"temperature": 1.0, "seed": seed}]}


@check("greedy_at_zero_temperature", 2,
       "temperature 0 (with or without a generator) and 1e-6 give the argmax of every row, as int64 ids [B]",
       probe=probe_sample_calls, inputs=_greedy_inputs, fixed_inputs=True)
def greedy_at_zero_temperature(out, inputs, expected):
    logits = inputs["logits"]
    greedy = known_facts(inputs)["greedy"]
    V = logits.shape[-1]
    *greedy_calls, at_one = zip(inputs["calls"], out)
    for call, result in greedy_calls:
        t = call["temperature"]
        if "raised" in result:  # and the same call at temperature 1 runs: the temperature is the cause
            return raised(result, "sample_next")
        ids = result["value"]
        if problem := _ids_problem(ids, greedy.shape, V, f"the ids at temperature {t}"):
            return problem
        if torch.equal(ids, greedy):
            continue
        wrong = int((ids != greedy).sum())
        if t == 0:
            return (f"temperature 0 must be greedy: the argmax of every row, no randomness; {wrong} of "
                    f"{ids.numel()} rows drew another id")
        said = f"temperature {t} should be as good as greedy ({wrong} of {ids.numel()} rows are not the argmax)"
        drawn_at_one = at_one[1].get("value")
        if isinstance(drawn_at_one, torch.Tensor) and drawn_at_one.shape == ids.shape:
            if torch.equal(drawn_at_one, ids):
                return (f"{said}, and it drew exactly what temperature 1 draws with the same generator: the "
                        f"temperature has no effect. Divide the max-shifted logits by it before the softmax; left "
                        f"out, or dividing the probabilities after the softmax (sampling scales them back to a sum "
                        f"of 1), it changes nothing")
            off_at_one = int((drawn_at_one != greedy).sum())
            if wrong > off_at_one:
                return (f"{said}, more than at temperature 1 ({off_at_one}): a small temperature flattened the "
                        f"distribution instead of sharpening it, as logits multiplied by the temperature do; divide "
                        f"the max-shifted logits by it before the softmax")
        return f"{said}: divide the max-shifted logits by the temperature before the softmax"
    return None


def _top_k_inputs(g):
    V = 13
    logits = torch.randn(V, generator=g, dtype=F64)
    seed = int(torch.randint(0, 2**31, (1,), generator=g))
    return {"logits": logits, "repeat": 4000,
            "calls": [{"temperature": 5.0, "top_k": 3, "seed": seed}, {"temperature": 5.0, "top_k": 5, "seed": seed + 1},
                      {"temperature": 1.0, "top_k": 1, "seed": seed + 2}]}


@check("top_k_support", 2,
       "4000 draws with top_k = 3 and 5 at temperature 5 use exactly the k largest logits; top_k = 1 is greedy",
       probe=probe_sample_calls, inputs=_top_k_inputs, fixed_inputs=True)
def top_k_support(out, inputs, expected):
    logits = inputs["logits"]
    V = logits.shape[-1]
    for call, result, top in zip(inputs["calls"], out, known_facts(inputs)["top_k"]):
        k = call["top_k"]
        if "raised" in result:
            return raised(result, f"top_k={k}")
        ids = result["value"]
        if problem := _ids_problem(ids, (inputs["repeat"],), V, f"the ids with top_k={k}"):
            return problem
        allowed = set(top)
        drawn = set(ids.tolist())
        outside = drawn - allowed
        if outside:
            if len(drawn) == k + 1:
                return (f"with top_k={k} the draws include {k + 1} different ids: keep exactly the k largest "
                        f"logits (k, not k + 1; off by one)")
            return (f"with top_k={k} some draws are not among the {k} largest logits: set every other logit to "
                    f"-inf before the softmax")
        if len(drawn) < k and call["temperature"] >= 2:
            return (f"with top_k={k} at temperature {call['temperature']} only {len(drawn)} of the {k} largest "
                    f"logits were ever drawn in {ids.numel()} draws: keep exactly k (not k - 1)")
    return None


@check("top_k_ties", 1, "with every logit tied, top_k = 4 draws exactly 4 different ids",
       probe=probe_sample_calls,
       inputs=lambda g: {"logits": torch.zeros(13, dtype=F64), "repeat": 2000,
                         "calls": [{"temperature": 1.0, "top_k": 4,
                                    "seed": int(torch.randint(0, 2**31, (1,), generator=g))}]})
def top_k_ties(out, inputs, expected):
    result = out[0]
    k = inputs["calls"][0]["top_k"]
    if "raised" in result:
        return raised(result, f"top_k={k} with tied logits")
    ids = result["value"]
    if problem := _ids_problem(ids, (inputs["repeat"],), inputs["logits"].shape[-1]):
        return problem
    drawn = len(set(ids.tolist()))
    if drawn == k:
        return None
    if drawn > k:
        return (f"with all {inputs['logits'].shape[-1]} logits tied and top_k={k}, {drawn} different ids were drawn: "
                f"keep exactly k logits even with ties (torch.topk's indices, not a >= threshold)")
    return f"with all logits tied and top_k={k}, only {drawn} different ids were drawn in {ids.numel()} draws"


def frequency_problem(out, inputs, facts, hidden=False):
    """facts: per call, the probabilities of each row, softmax(logits / temperature) over the
    top k ("want"), and what a sampler that ignores the temperature ("no_temperature"),
    multiplies by it ("multiplied") or ignores top_k ("no_top_k") draws from."""
    logits = inputs["logits"]
    V = logits.shape[-1]
    for number, (call, result, said) in enumerate(zip(inputs["calls"], out, facts), start=1):
        t, k = call["temperature"], call.get("top_k")
        label = numbered("call", number) if hidden else f"temperature {t}" + ("" if k is None else f", top_k={k}")
        if "raised" in result:
            return raised(result, label)
        ids = result["value"]
        if problem := _ids_problem(ids, (inputs["repeat"], *logits.shape[:-1]), V, f"the ids at {label}"):
            return problem
        rows = logits.reshape(-1, V)
        drawn = ids.reshape(inputs["repeat"], -1)
        for r in range(rows.shape[0]):
            want = said["want"][r]
            got = _frequencies(drawn[:, r], V)
            if (got - want).abs().max() <= FREQUENCY_TOLERANCE:
                continue
            if (got[want == 0] > 0).any():
                return (f"{label}: ids outside the top k were drawn" if k else
                        f"{label}: ids whose probability is 0 were drawn")
            candidates = [
                (said["no_temperature"][r], "the temperature has no effect: divide the logits by it before the "
                                            "softmax (scaling the probabilities and renormalising undoes it)"),
                (said["multiplied"][r], "the logits are multiplied by the temperature; divide them by it"),
                (said["no_top_k"][r], "top_k is ignored: keep only the k largest logits"),
            ]
            for wrong, why in candidates:
                if (wrong - want).abs().max() > 2 * FREQUENCY_TOLERANCE and (got - wrong).abs().max() <= FREQUENCY_TOLERANCE:
                    return f"{label}: {why}"
            if hidden:
                return (f"{label}: over {drawn.shape[0]} draws the frequencies of some row differ from "
                        f"softmax(logits / temperature) (restricted to the top k) by up to "
                        f"{(got - want).abs().max().item():.3f}")
            return (f"{label}: over {drawn.shape[0]} draws the frequencies were {_table(got.tolist())}; "
                    f"softmax(logits / {t}) is {_table(want.tolist())}")
    return None


LESSON_LOGITS = [2.0, 1.0, 0.0]  # the lesson's table: τ = 0.5, 1, 2


def _softmax_inputs(g):
    seed = int(torch.randint(0, 2**31, (1,), generator=g))
    return {"logits": torch.tensor(LESSON_LOGITS, dtype=F64), "repeat": DRAWS,
            "calls": [{"temperature": 1.0, "seed": seed}]}


def _temperature_inputs(g):
    seed = int(torch.randint(0, 2**31, (1,), generator=g))
    return {"logits": torch.tensor(LESSON_LOGITS, dtype=F64), "repeat": DRAWS,
            "calls": [{"temperature": 2.0, "seed": seed}, {"temperature": 0.5, "seed": seed + 1}]}


@check("follows_softmax", 2,
       f"{DRAWS} draws from logits (2, 1, 0) at temperature 1 have frequencies within "
       f"{FREQUENCY_TOLERANCE} of (0.6652, 0.2447, 0.0900)",
       probe=probe_sample_calls, inputs=_softmax_inputs, fixed_inputs=True)
def follows_softmax(out, inputs, expected):
    return frequency_problem(out, inputs, known_facts(inputs))


temperature_scaling = check(
    "temperature_scaling", 2,
    "at temperature 2 the frequencies follow (0.5065, 0.3072, 0.1863), at 0.5 (0.8668, 0.1173, 0.0159)",
    probe=probe_sample_calls, inputs=_temperature_inputs, fixed_inputs=True)(follows_softmax)


def _seeded_inputs(g):
    seed = int(torch.randint(0, 2**31, (1,), generator=g))
    return {"logits": torch.randn(100, 13, generator=g, dtype=F64),
            "calls": [{"temperature": 1.0, "seed": seed, "advance_global": True},
                      {"temperature": 1.0, "seed": seed, "advance_global": True},
                      {"temperature": 1.0, "seed": seed + 1}]}


@check("seeded_draws_repeat", 1,
       "generators seeded alike give the same ids, different seeds different ones; torch's global random "
       "state is left alone",
       probe=probe_sample_calls, inputs=_seeded_inputs)
def seeded_draws_repeat(out, inputs, expected):
    first, again, other = out
    for result, what in ((first, "the first call"), (again, "the second call"), (other, "the third call")):
        if "raised" in result:
            return raised(result, what)
    V = inputs["logits"].shape[-1]
    if problem := _ids_problem(first["value"], inputs["logits"].shape[:-1], V):
        return problem
    if any(r["global_rng_touched"] for r in out):
        return ("sample_next used or reseeded torch's global random state: draw with "
                "torch.multinomial(..., generator=generator) and nothing else random (no torch.manual_seed)")
    if not torch.equal(first["value"], again["value"]):
        return ("two generators seeded the same way gave different ids: draw with "
                "torch.multinomial(probs, 1, generator=generator)")
    if torch.equal(first["value"], other["value"]):
        return "generators with different seeds gave the same 100 ids: the draws do not use the generator"
    return None
