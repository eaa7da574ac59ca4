"""Chapter 09: one draw (temperature, top-k, a seeded generator) and generation through
the KV cache.

Draws are judged by their properties: greedy at temperature 0, never outside the top k,
frequencies close to softmax(logits / temperature) over many draws (a tolerance a right
sampler misses with negligible probability), and the same ids from the same seed. The
generators are created inside the probe from a seed the grader sends. Generation is
judged against a full recompute of every prefix: in the sandbox with the certified
model for the public check, here in the grader with the reference model for the hidden
one.
"""

from __future__ import annotations


import re

import torch

from grader.checks._api import Task, check, exception_name, compare, matches, shape_problem, try_call

CHAPTER, TITLE = "09", "Sampling with the KV cache"

TASKS = [
    Task("sample_next", "sample", "sample_next", "one draw: temperature, top-k, a seeded generator"),
    Task("generate", "sample", "generate", "generation through the KV cache"),
]

F64 = torch.float64
# Frequencies from N draws have a standard deviation of at most sqrt(0.25 / N) = 0.0035 for
# N = 20000: a tolerance of 0.02 is 5.6 of them, which a right sampler exceeds with
# probability below 1e-7 per comparison.
DRAWS, FREQUENCY_TOLERANCE = 20000, 0.02

# ----------------------------------------------------------------------- helpers


def _raised(result, what):
    raised = result["raised"]
    return f"{what} raised {exception_name(raised)}"


def _ids_problem(ids, shape, V, what="the ids"):
    if problem := shape_problem(ids, shape, what):
        return problem
    if ids.dtype != torch.long:
        return f"{what} should be int64 ids (torch.long), got {ids.dtype}"
    if ids.numel() and (ids.min() < 0 or ids.max() >= V):
        return f"{what} contain values outside [0, V) = [0, {V})"
    return None


def _generator(seed):
    return torch.Generator().manual_seed(int(seed))


def _probabilities(logits, temperature, top_k=None):
    rows = logits.double()
    if top_k is not None and top_k < rows.shape[-1]:
        keep = torch.topk(rows, top_k, dim=-1).indices
        rows = torch.full_like(rows, float("-inf")).scatter(-1, keep, rows.gather(-1, keep))
    return torch.softmax(rows / temperature, dim=-1)


def _frequencies(ids, V):
    flat = ids.reshape(-1)
    return torch.bincount(flat, minlength=V).double() / flat.numel()


def _table(values):
    return "(" + ", ".join(f"{v:.4f}" for v in values) + ")"


# ================================================================ sample_next


def probe_sample_calls(ns, logits, calls, repeat=1):
    """sample_next on logits repeated `repeat` times along a new first axis, once per call
    (temperature, top_k, seed); each call gets its own generator made from its seed."""
    rows = logits.unsqueeze(0).repeat(repeat, *[1] * logits.dim()) if repeat > 1 else logits
    results = []
    for call in calls:
        generator = _generator(call["seed"]) if call.get("seed") is not None else None
        before = torch.random.get_rng_state()
        result = try_call(ns.sample.sample_next, rows.clone(), temperature=call["temperature"],
                          top_k=call.get("top_k"), generator=generator)
        result["global_rng_touched"] = not torch.equal(before, torch.random.get_rng_state())
        if call.get("advance_global"):
            torch.rand(3)
        results.append(result)
    return results


def judge_greedy(out, inputs, expected):
    logits = inputs["logits"]
    greedy = logits.argmax(dim=-1)
    V = logits.shape[-1]
    for call, result in zip(inputs["calls"], out):
        t = call["temperature"]
        if "raised" in result:
            if t == 0:
                return (f"{_raised(result, 'temperature 0')}: temperature 0 means greedy, the argmax, with no "
                        f"division and no draw")
            return (f"{_raised(result, f'temperature {t}')}: subtract each row's maximum before dividing by the "
                    f"temperature, so the best logit becomes 0 and the others go to -inf, never nan")
        ids = result["value"]
        if problem := _ids_problem(ids, greedy.shape, V, f"the ids at temperature {t}"):
            return problem
        if torch.equal(ids, greedy):
            continue
        wrong = int((ids != greedy).sum())
        if t == 0:
            return (f"temperature 0 must be greedy: the argmax of every row, no randomness; {wrong} of "
                    f"{ids.numel()} rows drew another id")
        return (f"temperature {t} should be as good as greedy ({wrong} of {ids.numel()} rows are not the argmax): "
                f"divide the max-shifted logits by the temperature before the softmax")
    return None


def _greedy_inputs(g):
    V = 13
    logits = torch.randn(64, V, generator=g, dtype=F64) * 2
    top2 = torch.topk(logits, 2, dim=-1)
    close = top2.values[:, 0] - top2.values[:, 1] < 0.05  # no near-ties: 1e-6 must be plainly greedy
    logits[close, top2.indices[close, 0]] += 1.0
    seed = int(torch.randint(0, 2**31, (1,), generator=g))
    return {"logits": logits, "calls": [{"temperature": 0.0, "seed": seed}, {"temperature": 1e-6, "seed": seed},
                                        {"temperature": 0.0, "seed": None}]}


def judge_top_k(out, inputs, expected):
    logits = inputs["logits"]
    V = logits.shape[-1]
    for call, result in zip(inputs["calls"], out):
        k = call["top_k"]
        if "raised" in result:
            return _raised(result, f"top_k={k}")
        ids = result["value"]
        if problem := _ids_problem(ids, (inputs["repeat"],), V, f"the ids with top_k={k}"):
            return problem
        allowed = set(torch.topk(logits, k).indices.tolist())
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


def _top_k_inputs(g):
    V = 13
    logits = torch.randn(V, generator=g, dtype=F64)
    seed = int(torch.randint(0, 2**31, (1,), generator=g))
    return {"logits": logits, "repeat": 4000,
            "calls": [{"temperature": 5.0, "top_k": 3, "seed": seed}, {"temperature": 5.0, "top_k": 5, "seed": seed + 1},
                      {"temperature": 1.0, "top_k": 1, "seed": seed + 2}]}


def judge_top_k_ties(out, inputs, expected):
    result = out[0]
    k = inputs["calls"][0]["top_k"]
    if "raised" in result:
        return _raised(result, f"top_k={k} with tied logits")
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


def _frequency_problem(out, inputs, hidden=False):
    logits = inputs["logits"]
    V = logits.shape[-1]
    for number, (call, result) in enumerate(zip(inputs["calls"], out), start=1):
        t, k = call["temperature"], call.get("top_k")
        label = f"call {number}" if hidden else f"temperature {t}" + ("" if k is None else f", top_k={k}")
        if "raised" in result:
            return _raised(result, label)
        ids = result["value"]
        if problem := _ids_problem(ids, (inputs["repeat"], *logits.shape[:-1]), V, f"the ids at {label}"):
            return problem
        rows = logits.reshape(-1, V)
        drawn = ids.reshape(inputs["repeat"], -1)
        for r in range(rows.shape[0]):
            want = _probabilities(rows[r], t, k)
            got = _frequencies(drawn[:, r], V)
            if (got - want).abs().max() <= FREQUENCY_TOLERANCE:
                continue
            if (got[want == 0] > 0).any():
                return (f"{label}: ids outside the top k were drawn" if k else
                        f"{label}: ids whose probability is 0 were drawn")
            candidates = [
                (_probabilities(rows[r], 1.0, k), "the temperature has no effect: divide the logits by it before the "
                                                  "softmax (scaling the probabilities and renormalising undoes it)"),
                (_probabilities(rows[r], 1.0 / t, k), "the logits are multiplied by the temperature; divide them by it"),
                (_probabilities(rows[r], t, None), "top_k is ignored: keep only the k largest logits"),
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


def judge_frequencies(out, inputs, expected):
    return _frequency_problem(out, inputs)


def judge_frequencies_hidden(out, inputs, expected):
    return _frequency_problem(out, inputs, hidden=True)


LESSON_LOGITS = [2.0, 1.0, 0.0]  # the lesson's table: τ = 0.5, 1, 2


def _softmax_inputs(g):
    seed = int(torch.randint(0, 2**31, (1,), generator=g))
    return {"logits": torch.tensor(LESSON_LOGITS, dtype=F64), "repeat": DRAWS,
            "calls": [{"temperature": 1.0, "seed": seed}]}


def _temperature_inputs(g):
    seed = int(torch.randint(0, 2**31, (1,), generator=g))
    return {"logits": torch.tensor(LESSON_LOGITS, dtype=F64), "repeat": DRAWS,
            "calls": [{"temperature": 2.0, "seed": seed}, {"temperature": 0.5, "seed": seed + 1}]}


def _random_sampling_inputs(g):
    V, R = 7, 3
    logits = torch.randn(R, V, generator=g, dtype=F64) * 1.5
    seed = int(torch.randint(0, 2**31, (1,), generator=g))
    t = float(torch.empty(1).uniform_(0.5, 2.0, generator=g))
    k = int(torch.randint(2, V, (1,), generator=g))
    return {"logits": logits, "repeat": DRAWS,
            "calls": [{"temperature": t, "top_k": k, "seed": seed}, {"temperature": 1.0, "top_k": V + 2, "seed": seed + 1},
                      {"temperature": t, "top_k": None, "seed": seed + 2}]}


def judge_seeded(out, inputs, expected):
    first, again, other = out
    for result, what in ((first, "the first call"), (again, "the second call"), (other, "the third call")):
        if "raised" in result:
            return _raised(result, what)
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


def _seeded_inputs(g):
    seed = int(torch.randint(0, 2**31, (1,), generator=g))
    return {"logits": torch.randn(100, 13, generator=g, dtype=F64),
            "calls": [{"temperature": 1.0, "seed": seed, "advance_global": True},
                      {"temperature": 1.0, "seed": seed, "advance_global": True},
                      {"temperature": 1.0, "seed": seed + 1}]}


# =================================================================== generate

SIZES = dict(vocab_size=13, block_size=10, d_model=8, n_heads=2, n_layers=2, d_ff=16, dropout=0.0)


def _model(ns, sizes, state):
    model = ns.model.TransformerLM(ns.model.Config(**{**SIZES, **sizes})).double()
    model.load_state_dict({k: v.clone() for k, v in state.items()}, strict=True)
    return model.eval()


def random_lm_state(g, sizes):
    """A state_dict for the contract's module names (chapter 07), with lively logits."""
    s = {**SIZES, **sizes}
    V, C, d, f = s["vocab_size"], s["block_size"], s["d_model"], s["d_ff"]
    r = lambda *shape, s=1.0: torch.randn(*shape, generator=g, dtype=F64) * s  # noqa: E731
    state = {"token_embedding.weight": r(V, d), "position_embedding.weight": r(C, d)}
    for i in range(s["n_layers"]):
        p = f"blocks.{i}."
        state.update({p + "ln_attention.weight": 1 + r(d, s=0.3), p + "ln_attention.bias": r(d, s=0.3),
                      p + "attention.q_proj.weight": r(d, d, s=0.5), p + "attention.k_proj.weight": r(d, d, s=0.5),
                      p + "attention.v_proj.weight": r(d, d, s=0.5), p + "attention.o_proj.weight": r(d, d, s=0.5),
                      p + "ln_feedforward.weight": 1 + r(d, s=0.3), p + "ln_feedforward.bias": r(d, s=0.3),
                      p + "feedforward.fc1.weight": r(f, d, s=0.5), p + "feedforward.fc1.bias": r(f, s=0.5),
                      p + "feedforward.fc2.weight": r(d, f, s=0.5), p + "feedforward.fc2.bias": r(d, s=0.5)})
    state.update({"ln_final.weight": 1 + r(d, s=0.3), "ln_final.bias": r(d, s=0.3), "head.weight": r(V, d)})
    return state


def _recording(model):
    """Record every model call, whether through model(...) or model.forward(...): how many
    ids it got and whether it had a cache."""
    calls, forward = [], model.forward

    def recording_forward(*args, **kwargs):
        idx = args[0] if args else kwargs.get("idx")
        past = args[2] if len(args) > 2 else kwargs.get("past_key_values")
        calls.append({"length": int(idx.shape[-1]) if isinstance(idx, torch.Tensor) else -1,
                      "past": past is not None})
        return forward(*args, **kwargs)

    model.forward = recording_forward
    return calls


def probe_generate(ns, sizes, state, prompt, max_new_tokens, seed, temperature=1.0, top_k=None, stop_id=None,
                   as_list=False, part=None, earlier=None):
    """part="generate" only generates; part="recompute" (a fresh worker) recomputes the
    logits of the ids the generate part returned with full forwards; no part does both."""
    model = _model(ns, sizes, state)
    result = {}
    if part != "recompute":
        calls = _recording(model)
        out = ns.sample.generate(model, prompt.tolist() if as_list else prompt.clone(), max_new_tokens,
                                 temperature=temperature, top_k=top_k, generator=_generator(seed), stop_id=stop_id,
                                 return_logits=True)
        del model.forward  # back to the class's forward for the recomputation
        result = {"calls": calls, "returned": list(out) if isinstance(out, (tuple, list)) else out}
        if part == "generate":
            return result
    returned = result["returned"] if part is None else (earlier or {}).get("generate", {}).get("returned")
    ids = returned[0] if (isinstance(returned, (tuple, list)) and len(returned) == 2
                          and isinstance(returned[0], torch.Tensor)) else None
    # Ids that are no ids get no recomputation: the judge names what is wrong with them.
    if ids is not None and ids.dtype == torch.long and 1 <= ids.dim() <= 2 and ids.numel() and \
            0 <= int(ids.min()) and int(ids.max()) < sizes["vocab_size"]:
        ids = ids if ids.dim() == 2 else ids.unsqueeze(0)
        P = prompt.shape[-1]
        recomputed, alone = [], []
        with torch.no_grad():
            for step in range(ids.shape[1] - P):
                recomputed.append(model(ids[:, :P + step])[0][:, -1])
                alone.append(model(ids[:, P + step - 1:P + step])[0][:, -1])
        result["recomputed"] = torch.stack(recomputed, dim=1) if recomputed else None
        result["alone"] = torch.stack(alone, dim=1) if alone else None
    return result


def _pair(out, prompt, V, what="generate(..., return_logits=True)"):
    """(ids [B, T + n], logits [B, n, V]) from the returned pair, or a problem."""
    returned = out["returned"]
    if not isinstance(returned, list) or len(returned) != 2:
        return None, f"{what} should return (ids, logits)"
    ids, logits = returned
    if not isinstance(ids, torch.Tensor) or not isinstance(logits, torch.Tensor):
        return None, f"{what} should return two tensors"
    single = prompt.dim() == 1
    B, P = (1, prompt.shape[0]) if single else prompt.shape
    if ids.dim() != prompt.dim():
        return None, (f"the ids have shape {list(ids.shape)}: a {'1-D' if single else '[B, T]'} prompt gives "
                      f"{'[T + n]' if single else '[B, T + n]'} ids")
    ids2 = ids.unsqueeze(0) if single else ids
    n = ids2.shape[1] - P
    if ids.dtype != torch.long:
        return None, f"the ids should be int64, got {ids.dtype}"
    if ids2.shape[0] != B or n < 0:
        return None, f"the ids have shape {list(ids.shape)}; the prompt is {list(prompt.shape)}"
    if not torch.equal(ids2[:, :P], prompt.reshape(B, P)):
        return None, "the returned ids should start with the prompt"
    want_logits = (n, V) if single else (B, n, V)
    if problem := shape_problem(logits, want_logits, "the returned logits"):
        return None, f"{problem}: one row of V logits per new id"
    return (ids2, logits.unsqueeze(0) if single else logits, n), None


def judge_cached_equals_recompute(out, inputs, expected):
    prompt, V = inputs["prompt"], inputs["sizes"]["vocab_size"]
    parsed, problem = _pair(out, prompt, V)
    if problem:
        return problem
    ids, logits, n = parsed
    if n != inputs["max_new_tokens"]:
        return f"{n} new ids were generated; max_new_tokens={inputs['max_new_tokens']} and no stop_id were given"
    for step in range(n):
        if matches(logits[:, step], out["recomputed"][:, step], atol=1e-10, rtol=1e-8):
            continue
        if step > 0 and matches(logits[:, step], out["alone"][:, step], atol=1e-10, rtol=1e-8):
            return (f"step {step + 1}: the new id was fed alone, without past_key_values: it sat at position 0 and "
                    f"saw nothing before it. Pass the presents of the previous call as past_key_values")
        problem = compare(logits[:, step], out["recomputed"][:, step], "its logits", atol=1e-10, rtol=1e-8)
        return (f"step {step + 1}: {problem}, compared with a full forward over the whole sequence so far "
                f"(its last position)")
    return None


def judge_one_token_per_step(out, inputs, expected):
    prompt = inputs["prompt"]
    P, n = prompt.shape[-1], inputs["max_new_tokens"]
    calls = out["calls"]
    lengths = [c["length"] for c in calls]
    want = [P] + [1] * (n - 1)
    if lengths == want and all(c["past"] for c in calls[1:]) and not calls[0]["past"]:
        return None
    if not calls:
        return "the model was never called"
    if P > 1 and lengths[:3] == [P - 1, 1, 1] and len(lengths) == n + 2:
        return (f"the last prompt token is fed a second time (the model got {lengths} ids): it then takes two "
                f"positions; feed the whole prompt once, then only each new id")
    if calls[0]["length"] != P:
        return f"the first model call should get the whole prompt ({P} ids) once; it got {calls[0]['length']}"
    if len(lengths) > 1 and lengths[1:] == list(range(P + 1, P + len(lengths))):
        return (f"each step feeds the whole sequence again (the model got {lengths} ids): after the prompt, feed "
                f"only the new id (one token) with past_key_values, the cache of the previous call")
    if any(length != 1 for length in lengths[1:]):
        return (f"after the prompt each model call should get exactly one token, the new id; the calls got {lengths} "
                f"ids")
    if not all(c["past"] for c in calls[1:]):
        return "after the prompt each model call needs past_key_values (the presents of the previous call)"
    if len(lengths) == n + 1:
        return (f"the model was called {n + 1} times for {n} new ids: the last new id is predicted, never fed "
                f"(feeding it wastes a call and needs a position past the limit)")
    return f"for a {P}-id prompt and {n} new ids the model calls should get {want} ids; they got {lengths}"


def _generate_inputs(g, B=2, P=3, n=7):
    V, bos = SIZES["vocab_size"], SIZES["vocab_size"] - 1
    prompt = torch.randint(0, V - 1, (B, P), generator=g)
    prompt[:, 0] = bos
    return {"sizes": dict(SIZES), "state": random_lm_state(g, SIZES), "prompt": prompt, "max_new_tokens": n,
            "seed": int(torch.randint(0, 2**31, (1,), generator=g))}


def _one_token_inputs(g):
    inputs = _generate_inputs(g, P=3, n=6)
    inputs["prompt"] = inputs["prompt"][0]
    inputs["as_list"] = True
    return inputs


def _expect_generate(ref, inputs):
    """A recompute function over the reference model with the same weights."""
    model = _model(ref, inputs["sizes"], inputs["state"])

    def recompute(ids, P):
        with torch.no_grad():
            return torch.stack([model(ids[:, :P + s])[0][:, -1] for s in range(ids.shape[1] - P)], dim=1)

    return {"recompute": recompute}


def judge_generate_reference(out, inputs, expected):
    prompt, V = inputs["prompt"], inputs["sizes"]["vocab_size"]
    parsed, problem = _pair(out, prompt, V)
    if problem:
        return problem
    ids, logits, n = parsed
    P = prompt.shape[-1]
    if n != inputs["max_new_tokens"]:
        return f"{n} new ids were generated; {inputs['max_new_tokens']} were asked for, with no stop_id"
    if n == 0:
        return None
    right = expected["recompute"](ids, P)
    for step in range(n):
        if problem := compare(logits[:, step], right[:, step], "its logits", atol=1e-10, rtol=1e-8):
            return f"step {step + 1}: {problem}, compared with the reference model's full recompute"
        new = ids[:, P + step]
        if inputs.get("temperature", 1.0) == 0.0 and not torch.equal(new, right[:, step].argmax(dim=-1)):
            return f"step {step + 1}: at temperature 0 the new id should be the argmax of its logits"
        if inputs.get("top_k"):
            allowed = torch.topk(right[:, step], inputs["top_k"], dim=-1).indices
            if not (allowed == new.unsqueeze(-1)).any(dim=-1).all():
                return f"step {step + 1}: a new id is outside the top {inputs['top_k']} of its logits"
    return None


def _random_generate_inputs(temperature, top_k):
    def make(g):
        C = SIZES["block_size"]
        P = int(torch.randint(1, 4, (1,), generator=g))
        inputs = _generate_inputs(g, B=3, P=P, n=C + 1 - P)  # right up to the limit
        inputs.update(temperature=temperature, top_k=top_k)
        return inputs
    return make


def probe_generate_stop(ns, sizes, state, prompt, max_new_tokens, seed, stop_id):
    model = _model(ns, sizes, state)
    with torch.no_grad():  # the head prefers stop_id by far, at every position
        model.ln_final.weight.zero_()
        model.ln_final.bias.zero_()
        model.ln_final.bias[0] = 1.0
        model.head.weight.zero_()
        model.head.weight[stop_id, 0] = 50.0
    return {"stopped": try_call(ns.sample.generate, model, prompt.clone(), max_new_tokens, generator=_generator(seed),
                                stop_id=stop_id),
            "batch": try_call(ns.sample.generate, model, torch.stack([prompt, prompt.flip(0)]), max_new_tokens,
                              generator=_generator(seed), stop_id=stop_id),
            "no_stop": try_call(ns.sample.generate, model, prompt.clone(), max_new_tokens, generator=_generator(seed))}


def judge_generate_stop(out, inputs, expected):
    prompt, stop, n = inputs["prompt"], inputs["stop_id"], inputs["max_new_tokens"]
    want = [*prompt.tolist(), stop]
    for key in ("stopped", "batch", "no_stop"):
        if "raised" in out[key]:
            return _raised(out[key], "generate")
    got = out["stopped"]["value"]
    if not isinstance(got, torch.Tensor):
        return f"generate should return a tensor of ids, got {type(got).__name__}"
    if got.tolist() == want:
        batch = out["batch"]["value"]
        if not isinstance(batch, torch.Tensor) or batch.tolist() != [want, [*prompt.flip(0).tolist(), stop]]:
            return ("with two rows that both produce stop_id at once, generation should end there: "
                    f"[B, {prompt.shape[0] + 1}] ids, each row ending with stop_id")
        no_stop = out["no_stop"]["value"]
        if not isinstance(no_stop, torch.Tensor) or no_stop.shape[0] != prompt.shape[0] + n:
            return f"without stop_id generation should go on for all {n} new ids"
        return None
    if got.tolist()[:len(want)] == want and len(got) > len(want):
        return (f"the model produced stop_id (BOS) at once but generation went on to {len(got) - prompt.shape[0]} "
                f"new ids: a row stops once it has produced stop_id")
    if got.tolist() == prompt.tolist():
        return "stop_id must stay in the output: the ids end with it"
    return f"a model that always prefers stop_id = {stop} should give {want}; got {got.tolist()}"


def _stop_inputs(g):
    inputs = _generate_inputs(g, B=1, P=2, n=8)
    bos = SIZES["vocab_size"] - 1
    return {**inputs, "prompt": torch.tensor([bos, 4]), "stop_id": bos}


def probe_generate_rows(ns, sizes, state, prompt, max_new_tokens, seed, stop_id, temperature):
    model = _model(ns, sizes, state)
    return try_call(ns.sample.generate, model, prompt.clone(), max_new_tokens, temperature=temperature,
                    generator=_generator(seed), stop_id=stop_id)


def judge_generate_rows(out, inputs, expected):
    if "raised" in out:
        return _raised(out, "generate")
    ids = out["value"]
    prompt, stop, n = inputs["prompt"], inputs["stop_id"], inputs["max_new_tokens"]
    B, P = prompt.shape
    if not isinstance(ids, torch.Tensor) or ids.dim() != 2 or ids.shape[0] != B:
        return "generate should return [B, T + n] ids for a [B, T] prompt"
    new = ids[:, P:].tolist()
    if len(new[0]) > n:
        return f"more than max_new_tokens = {n} new ids"
    for row in new:
        if stop in row:
            first = row.index(stop)
            if any(t != stop for t in row[first:]):
                return "a row went on after producing stop_id: a finished row is padded with stop_id"
    if len(new[0]) < n:
        if not all(stop in row for row in new):
            return ("generation ended while some rows had not produced stop_id: end only when every row has "
                    "stopped (a finished row is padded with stop_id while the others go on)")
        if not all(row[-1] == stop for row in new):
            return "generation ended early although not every row had stopped"
    return None


def _rows_inputs(g):
    inputs = _generate_inputs(g, B=40, P=1, n=9)
    return {**inputs, "stop_id": 3, "temperature": 2.0}


def probe_generate_limit(ns, sizes, state, bos):
    model = _model(ns, dict(sizes, block_size=6), state)
    greedy = dict(temperature=0.0)
    return {"fits": try_call(ns.sample.generate, model, [bos, 1], 5, **greedy),
            "one_more": try_call(ns.sample.generate, model, [bos, 1], 6, **greedy),
            "long_prompt": try_call(ns.sample.generate, model, [bos] * 7, 1, **greedy),
            "asked_to_stop": try_call(ns.sample.generate, model, [bos, 1], 50, stop_at_block_size=True, **greedy),
            "nothing": try_call(ns.sample.generate, model, [bos, 2], 0, **greedy)}


def _states_limit(message) -> bool:
    """A message states the limit when it names block_size or the context, or gives the
    figure itself (6 positions, 7 ids in all, or the 5 new ids that still fit)."""
    return isinstance(message, str) and bool(
        re.search(r"block[_ -]?size|context|\b[567]\b", message, flags=re.IGNORECASE))


def judge_generate_limit(out, inputs, expected):
    if "raised" in out["fits"]:
        return (f"{_raised(out['fits'], 'a 2-id prompt with 5 new ids and block_size 6')}: this fits, because the "
                f"last new id is predicted, never fed: prompt + max_new_tokens may be block_size + 1")
    if shape_problem(out["fits"]["value"], (7,)):
        return "a 2-id prompt with 5 new ids should give 7 ids"
    for key, what in (("one_more", "a 2-id prompt with 6 new ids (block_size 6)"),
                      ("long_prompt", "a 7-id prompt (block_size 6) with one new id")):
        result = out[key]
        if "value" in result:
            value = result["value"]
            shorter = isinstance(value, torch.Tensor) and value.dim() == 1
            return (f"{what} returned {list(value.shape) if shorter else type(value).__name__} ids instead of "
                    f"raising: more than block_size + 1 ids in all must raise a ValueError that says what the limit is "
                    f"(never crop silently)")
        if not result["raised"]["value_error"]:
            return f"{_raised(result, what)}; it should be a ValueError that mentions block_size"
        if not _states_limit(result["raised"].get("message")):
            return (f"{what} raised a ValueError whose message does not say what the limit is: name block_size "
                    f"or the context, or give the number of ids that fit")
    if "raised" in out["asked_to_stop"]:
        return f"{_raised(out['asked_to_stop'], 'stop_at_block_size=True')}: it asks to stop at the limit"
    if shape_problem(out["asked_to_stop"]["value"], (7,)):
        return "with stop_at_block_size=True a 2-id prompt and block_size 6 should stop at 7 ids"
    if "raised" in out["nothing"] or out["nothing"]["value"].tolist() != [inputs["bos"], 2]:
        return "max_new_tokens=0 should return the prompt"
    return None


def _limit_inputs(g):
    bos = SIZES["vocab_size"] - 1
    return {"sizes": dict(SIZES), "state": random_lm_state(g, dict(SIZES, block_size=6)), "bos": bos}


def probe_generate_seeded(ns, sizes, state, prompt, max_new_tokens, seed):
    model = _model(ns, sizes, state)
    return [ns.sample.generate(model, prompt.clone(), max_new_tokens, generator=_generator(s))
            for s in (seed, seed, seed + 1)]


def judge_generate_seeded(out, inputs, expected):
    first, again, other = out
    if not all(isinstance(x, torch.Tensor) for x in out):
        return "generate should return a tensor of ids"
    if not torch.equal(first, again):
        return "two runs with generators seeded the same way gave different ids: pass the generator to sample_next"
    if torch.equal(first, other):
        return "runs with different seeds gave the same ids: the generator is not used for the draws"
    return None


def _seeded_generate_inputs(g):
    inputs = _generate_inputs(g, B=8, P=1, n=9)
    return {k: inputs[k] for k in ("sizes", "state", "prompt", "max_new_tokens", "seed")}


def probe_generate_mode(ns, sizes, state, bos, seed):
    model = _model(ns, sizes, state).train()
    out = try_call(ns.sample.generate, model, [bos], 4, generator=_generator(seed), return_logits=True)
    in_train = model.training
    model.eval()
    try_call(ns.sample.generate, model, [bos, 2], 2, generator=_generator(seed))
    return {"out": out, "after_train": in_train, "after_eval": model.training,
            "grad": bool("value" in out and isinstance(out["value"], (tuple, list)) and len(out["value"]) == 2
                         and isinstance(out["value"][1], torch.Tensor) and out["value"][1].requires_grad)}


def judge_generate_mode(out, inputs, expected):
    if "raised" in out["out"]:
        return _raised(out["out"], "generate")
    if not out["after_train"]:
        return "a model in training mode came back in eval mode: restore the mode it had"
    if out["after_eval"]:
        return "a model in eval mode came back in training mode: restore the mode it had"
    if out["grad"]:
        return "the returned logits require grad: generate under torch.no_grad()"
    return None


def probe_generate_dropout(ns, sizes, state, prompt, max_new_tokens):
    model = ns.model.TransformerLM(ns.model.Config(**{**SIZES, **sizes, "dropout": 0.5})).double()
    model.load_state_dict({k: v.clone() for k, v in state.items()}, strict=True)
    P, runs = prompt.shape[1], {}
    for mode in ("eval", "train"):
        model.train(mode == "train")
        torch.manual_seed(0)
        out = try_call(ns.sample.generate, model, prompt.clone(), max_new_tokens, temperature=0.0, return_logits=True)
        if "raised" in out:
            return {"out": out}
        ids, logits = out["value"]
        model.eval()
        with torch.no_grad():
            full = model(ids.clone())[0]
        runs[mode] = {"logits": logits, "recomputed": full[:, P - 1:ids.shape[1] - 1]}
    return {"out": {"value": True}, **runs["train"], "eval_run": runs["eval"]}


def judge_generate_dropout(out, inputs, expected):
    if "raised" in out["out"]:
        return _raised(out["out"], "generate")
    if compare(out["eval_run"]["logits"], out["eval_run"]["recomputed"], atol=1e-9, rtol=1e-7) is not None:
        return ("even with the model already in eval mode, the logits of the draws differ from the model's forward "
                "over the sequence so far: see ch09.generate.cached_equals_recompute for why")
    if problem := compare(out["logits"], out["recomputed"], "the logits of the draws", atol=1e-9, rtol=1e-7):
        return (f"with dropout 0.5 and the model in training mode, {problem} from the model's eval-mode forward: "
                f"generate must switch the model to eval mode (model.eval(), so dropout is off) and restore the "
                f"mode afterwards")
    return None


# ----------------------------------------------------------------------- checks

CHECKS = [
    # sample_next
    check("ch09.sample_next.greedy_at_zero_temperature", "sample_next", 2,
          "temperature 0 (with or without a generator) and 1e-6 give the argmax of every row, as int64 ids [B]",
          probe_sample_calls, judge_greedy, inputs=_greedy_inputs),
    check("ch09.sample_next.top_k_support", "sample_next", 2,
          "4000 draws with top_k = 3 and 5 at temperature 5 use exactly the k largest logits; top_k = 1 is greedy",
          probe_sample_calls, judge_top_k, inputs=_top_k_inputs),
    check("ch09.sample_next.top_k_ties", "sample_next", 1,
          "with every logit tied, top_k = 4 draws exactly 4 different ids",
          probe_sample_calls, judge_top_k_ties,
          inputs=lambda g: {"logits": torch.zeros(13, dtype=F64), "repeat": 2000,
                            "calls": [{"temperature": 1.0, "top_k": 4,
                                       "seed": int(torch.randint(0, 2**31, (1,), generator=g))}]}),
    check("ch09.sample_next.follows_softmax", "sample_next", 2,
          f"{DRAWS} draws from logits (2, 1, 0) at temperature 1 have frequencies within "
          f"{FREQUENCY_TOLERANCE} of (0.6652, 0.2447, 0.0900)",
          probe_sample_calls, judge_frequencies, inputs=_softmax_inputs),
    check("ch09.sample_next.temperature_scaling", "sample_next", 2,
          "at temperature 2 the frequencies follow (0.5065, 0.3072, 0.1863), at 0.5 (0.8668, 0.1173, 0.0159)",
          probe_sample_calls, judge_frequencies, inputs=_temperature_inputs),
    check("ch09.sample_next.seeded_draws_repeat", "sample_next", 1,
          "generators seeded alike give the same ids, different seeds different ones; torch's global random "
          "state is left alone",
          probe_sample_calls, judge_seeded, inputs=_seeded_inputs),
    check("ch09.sample_next.random_rows", "sample_next", 2,
          "random logits [N, 3, V] with a random temperature and top_k (also k > V): ids [N, 3] whose "
          "frequencies follow the top-k softmax",
          probe_sample_calls, judge_frequencies_hidden, inputs=_random_sampling_inputs, hidden=True),
    # generate
    check("ch09.generate.cached_equals_recompute", "generate", 3,
          "a [2, 3] prompt and 7 new ids: the logits of every draw equal a full forward over the sequence so far",
          probe_generate, judge_cached_equals_recompute, inputs=_generate_inputs, parts=("generate", "recompute")),
    check("ch09.generate.one_token_per_step", "generate", 2,
          "the prompt goes through the model once; each later call gets exactly one token, with past_key_values",
          probe_generate, judge_one_token_per_step, inputs=_one_token_inputs),
    check("ch09.generate.stops_at_stop_id", "generate", 1,
          "a model that always prefers BOS gives [BOS, 4, BOS] with stop_id = BOS: it stops and keeps stop_id",
          probe_generate_stop, judge_generate_stop, inputs=_stop_inputs),
    check("ch09.generate.finished_rows_wait", "generate", 1,
          "40 rows with stop_id: a finished row is padded with stop_id, generation ends only when all have stopped",
          probe_generate_rows, judge_generate_rows, inputs=_rows_inputs),
    check("ch09.generate.context_limit", "generate", 2,
          "block_size 6: a 2-id prompt + 5 new ids fits, + 6 raises a ValueError (no silent cropping), "
          "stop_at_block_size=True stops at 7 ids",
          probe_generate_limit, judge_generate_limit, inputs=_limit_inputs),
    check("ch09.generate.seeded_runs_repeat", "generate", 1,
          "8 rows of 9 new ids: the same seed gives the same ids, another seed other ids",
          probe_generate_seeded, judge_generate_seeded, inputs=_seeded_generate_inputs),
    check("ch09.generate.mode_restored", "generate", 1,
          "the model's mode (train or eval) is restored and the logits carry no graph",
          probe_generate_mode, judge_generate_mode,
          inputs=lambda g: {"sizes": dict(SIZES), "state": random_lm_state(g, SIZES), "bos": SIZES["vocab_size"] - 1,
                            "seed": 7}),
    check("ch09.generate.eval_mode", "generate", 1,
          "a model with dropout 0.5 left in training mode generates with dropout off: its logits equal the "
          "eval-mode forward",
          probe_generate_dropout, judge_generate_dropout,
          inputs=lambda g: {"sizes": dict(SIZES), "state": random_lm_state(g, SIZES),
                            "prompt": torch.randint(0, SIZES["vocab_size"], (2, 3), generator=g),
                            "max_new_tokens": 4}),
    check("ch09.generate.matches_reference_sampled", "generate", 2,
          "3 rows up to the context limit, top_k = 3: every draw's logits equal the reference model's full "
          "recompute and every id is in its top 3",
          probe_generate, judge_generate_reference, inputs=_random_generate_inputs(1.0, 3),
          expect=_expect_generate, hidden=True),
    check("ch09.generate.matches_reference_greedy", "generate", 2,
          "greedy generation up to the context limit equals the reference model's argmax at every step",
          probe_generate, judge_generate_reference, inputs=_random_generate_inputs(0.0, None),
          expect=_expect_generate, hidden=True),
]
