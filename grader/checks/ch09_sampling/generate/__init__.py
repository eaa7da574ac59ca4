"""Generation through the KV cache, generate.

Generation is judged against a full recompute of every prefix: in the sandbox with the
certified model for the public check, here in the grader with the reference model for
the hidden one. The generators are created inside the probe from a seed the grader
sends.
"""

from __future__ import annotations

import re

import torch

from grader.checks._api import (
    Task, check, compare, float32_close, float32_verdict, int64_ids_problem, matches, matches_to_float32, numbered,
    shape_problem, try_call,
)
from grader.checks.ch09_sampling.common import at_temperature, attempt, raised, seeded_generator
from grader.checks.course import config, load_state, random_lm_state

TASKS = [
    Task("generate", "sample", "generate", "generation through the KV cache", names_failing_operator=False,
         promises=(("prompt", "of shape [T] or [B, T]"),)),
]

SIZES = dict(vocab_size=13, block_size=10, d_model=8, n_heads=2, n_layers=2, d_ff=16, dropout=0.0)


def model_of(ns, sizes, state):
    return load_state(ns.model.TransformerLM(config(ns, SIZES, **sizes)), state)


def lm_state(g, sizes):
    """The course's random state_dict for the whole model, with the head drawn at scale 1, not 0.5,
    for lively logits (doubling is exact: the same numbers as drawing it at 1)."""
    state = random_lm_state(g, sizes)
    state["head.weight"] = state["head.weight"] * 2
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
    model = model_of(ns, sizes, state)
    result = {}
    if part != "recompute":
        calls = _recording(model)
        out = ns.sample.generate(model, prompt.tolist() if as_list else prompt.clone(), max_new_tokens,
                                 temperature=temperature, top_k=top_k, generator=seeded_generator(seed),
                                 stop_id=stop_id, return_logits=True)
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
        recomputed, alone, stale, offsets = [], [], [], []
        with torch.no_grad():
            prompt_cache = model(ids[:, :P], use_cache=True)[2]
            for step in range(ids.shape[1] - P):
                recomputed.append(model(ids[:, :P + step])[0][:, -1])
                alone.append(model(ids[:, P + step - 1:P + step])[0][:, -1])
                # The new id fed with the prompt's cache only, and fed with the right cache at
                # each other position: what a cache that was not passed back, or positions
                # that do not continue from the cache, give.
                token = ids[:, P + step - 1:P + step]
                stale.append(model(token, past_key_values=prompt_cache, use_cache=True)[0][:, -1])
                offsets.append(_at_each_position(model, ids, P + step - 1) if step else None)
        result["recomputed"] = torch.stack(recomputed, dim=1) if recomputed else None
        result["alone"] = torch.stack(alone, dim=1) if alone else None
        result["stale"] = torch.stack(stale, dim=1) if stale else None
        result["offsets"] = offsets
    return result


def _at_each_position(model, ids, fed):
    """{position: the last logits} of ids[:, fed] fed after the cache of ids[:, :fed], had it
    sat at each position but `fed` (the certified model's parts). Every position is worked
    out at once, as a batch row of its own: a row of L copies of the token gets each
    position's embedding in one call, and each row then meets the same cache."""
    cache = model(ids[:, :fed], use_cache=True)[2]
    token = model.token_embedding(ids[:, fed:fed + 1])  # [B, 1, d]
    B, L = token.shape[0], model.cfg.block_size
    placed = model.position_embedding(token.expand(B, L, token.shape[-1]), 0)  # row p: at position p
    hidden = model.embedding_dropout(placed.transpose(0, 1).reshape(L * B, 1, -1))  # rows (position, b)
    for block, past in zip(model.blocks, cache):
        repeated = tuple(t.repeat(L, *([1] * (t.dim() - 1))) for t in past)
        hidden, _ = block(hidden, repeated, False)
    logits = model.head(model.ln_final(hidden))[:, -1].reshape(L, B, -1)
    return {position: logits[position] for position in range(L) if position != fed}


def pair_of(out, prompt, V, what="generate(..., return_logits=True)"):
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
    if problem := int64_ids_problem(ids):
        return None, problem
    if ids2.shape[0] != B or n < 0:
        return None, f"the ids have shape {list(ids.shape)}; the prompt is {list(prompt.shape)}"
    if not torch.equal(ids2[:, :P], prompt.reshape(B, P)):
        return None, "the returned ids should start with the prompt"
    want_logits = (n, V) if single else (B, n, V)
    if problem := shape_problem(logits, want_logits, "the returned logits"):
        return None, f"{problem}: one row of V logits per new id"
    return (ids2, logits.unsqueeze(0) if single else logits, n), None


def generate_inputs(g, B=2, P=3, n=7):
    V, bos = SIZES["vocab_size"], SIZES["vocab_size"] - 1
    prompt = torch.randint(0, V - 1, (B, P), generator=g)
    prompt[:, 0] = bos
    return {"sizes": dict(SIZES), "state": lm_state(g, SIZES), "prompt": prompt, "max_new_tokens": n,
            "seed": int(torch.randint(0, 2**31, (1,), generator=g))}


def _one_token_inputs(g):
    inputs = generate_inputs(g, P=3, n=6)
    inputs["prompt"] = inputs["prompt"][0]
    inputs["as_list"] = True
    return inputs


@check("cached_equals_recompute", 3,
       "a [2, 3] prompt and 7 new ids: the logits of every draw equal a full forward over the sequence so far, "
       "to float64's precision",
       probe=probe_generate, inputs=generate_inputs, parts=("generate", "recompute"))
def cached_equals_recompute(out, inputs, expected):
    prompt, V = inputs["prompt"], inputs["sizes"]["vocab_size"]
    parsed, problem = pair_of(out, prompt, V)
    if problem:
        return problem
    ids, logits, n = parsed
    if n != inputs["max_new_tokens"]:
        return f"{n} new ids were generated; max_new_tokens={inputs['max_new_tokens']} and no stop_id were given"
    float32 = None
    for step in range(n):
        if matches(logits[:, step], out["recomputed"][:, step], atol=1e-10, rtol=1e-8):
            continue
        if step > 0 and matches(logits[:, step], out["alone"][:, step], atol=1e-10, rtol=1e-8):
            return (f"{numbered('step', step + 1)}: the new id was fed alone, without past_key_values: it sat at position 0 and "
                    f"saw nothing before it. Pass the presents of the previous call as past_key_values")
        if problem := _state_slip(logits[:, step], out, step, prompt.shape[-1]):
            return problem
        if float32_close(logits[:, step], out["recomputed"][:, step]):
            float32 = float32 or (step, logits[:, step], out["recomputed"][:, step])
            continue
        problem = compare(logits[:, step], out["recomputed"][:, step], "its logits", atol=1e-10, rtol=1e-8)
        return (f"{numbered('step', step + 1)}: {problem}, compared with a full forward over the whole sequence so far "
                f"(its last position)")
    if float32:  # the task's precision check: every other check passes this
        step, got, want = float32
        return float32_verdict(f"{numbered('step', step + 1)}: the returned logits", "your generate", "the model's dtype (float64 "
                               "here) for the logits it returns", got, want, plural=True,
                               against="a full forward's ")
    return None


def _state_slip(logits, out, step, P) -> "str | None":
    """Which state went wrong at a draw whose logits are not the full forward's, from what
    the new id fed at that step gives under the natural slips (the recompute part computed
    them with the certified model)."""
    fed = P + step - 1  # the position of the id fed at this step, the cache's length then
    stale = out.get("stale")
    if step > 1 and isinstance(stale, torch.Tensor) and matches(logits, stale[:, step], atol=1e-10, rtol=1e-8):
        return (f"{numbered('step', step + 1)}: the logits are those of the new id fed with the prompt's cache only: the cache "
                f"was not passed back, so the new id sat at position {P} and saw none of the ids drawn since. Each "
                f"call's presents are the next call's past_key_values")
    offsets = out.get("offsets") or []
    at = offsets[step] if step < len(offsets) and isinstance(offsets[step], dict) else {}
    for position, wrong in at.items():
        if isinstance(wrong, torch.Tensor) and matches(logits, wrong, atol=1e-10, rtol=1e-8):
            return (f"{numbered('step', step + 1)}: the logits are those of the new id at position {position}, with the right "
                    f"cache before it; it belongs at position {fed}: the positions after the prompt do not continue "
                    f"from the cache length (the {fed} positions the cache holds, the time axis of its keys and "
                    f"values [B, h, T, d_h])")
    return None


def _shown_lengths(lengths, P, n) -> str:
    """How many ids each model call got, as the list when it is one a generation could
    make (at most n + 2 calls of at most P + n ids): the code chooses these numbers, and a
    longer list of them could spell out any text."""
    if len(lengths) <= n + 2 and all(isinstance(x, int) and -1 <= x <= P + n for x in lengths):
        return f"{lengths} ids"
    return f"other numbers of ids, in {len(lengths)} calls"


@check("one_token_per_step", 2,
       "the prompt goes through the model once; each later call gets exactly one token, with past_key_values",
       probe=probe_generate, inputs=_one_token_inputs)
def one_token_per_step(out, inputs, expected):
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
        return (f"the last prompt token is fed a second time (the model got {_shown_lengths(lengths, P, n)}): it "
                f"then takes two "
                f"positions; feed the whole prompt once, then only each new id")
    if calls[0]["length"] != P:
        first = lengths[0] if isinstance(lengths[0], int) and -1 <= lengths[0] <= P + n else "another number"
        return f"the first model call should get the whole prompt ({P} ids) once; it got {first}"
    if len(lengths) > 1 and lengths[1:] == list(range(P + 1, P + len(lengths))):
        return (f"each step feeds the whole sequence again (the model got {_shown_lengths(lengths, P, n)}): after "
                f"the prompt, feed "
                f"only the new id (one token) with past_key_values, the cache of the previous call")
    if any(length != 1 for length in lengths[1:]):
        return (f"after the prompt each model call should get exactly one token, the new id; the calls got "
                f"{_shown_lengths(lengths, P, n)}")
    if not all(c["past"] for c in calls[1:]):
        return "after the prompt each model call needs past_key_values (the presents of the previous call)"
    if len(lengths) == n + 1:
        return (f"the model was called {n + 1} times for {n} new ids: the last new id is predicted, never fed "
                f"(feeding it wastes a call and needs a position past the limit)")
    return (f"for a {P}-id prompt and {n} new ids the model calls should get {want} ids; they got "
            f"{_shown_lengths(lengths, P, n).removesuffix(' ids')}")


def probe_generate_stop(ns, sizes, state, prompt, max_new_tokens, seed, stop_id):
    model = model_of(ns, sizes, state)
    with torch.no_grad():  # the head prefers stop_id by far, at every position
        model.ln_final.weight.zero_()
        model.ln_final.bias.zero_()
        model.ln_final.bias[0] = 1.0
        model.head.weight.zero_()
        model.head.weight[stop_id, 0] = 50.0
    return {"stopped": {"value": ns.sample.generate(model, prompt.clone(), max_new_tokens,
                                                    generator=seeded_generator(seed), stop_id=stop_id)},
            "batch": {"value": ns.sample.generate(model, torch.stack([prompt, prompt.flip(0)]), max_new_tokens,
                                                  generator=seeded_generator(seed), stop_id=stop_id)},
            "no_stop": {"value": ns.sample.generate(model, prompt.clone(), max_new_tokens,
                                                    generator=seeded_generator(seed))}}


def _stop_inputs(g):
    inputs = generate_inputs(g, B=1, P=2, n=8)
    bos = SIZES["vocab_size"] - 1
    return {**inputs, "prompt": torch.tensor([bos, 4]), "stop_id": bos}


@check("stops_at_stop_id", 1,
       "a model that always prefers BOS gives [BOS, 4, BOS] with stop_id = BOS: it stops and keeps stop_id",
       probe=probe_generate_stop, inputs=_stop_inputs)
def stops_at_stop_id(out, inputs, expected):
    prompt, stop, n = inputs["prompt"], inputs["stop_id"], inputs["max_new_tokens"]
    V = inputs["sizes"]["vocab_size"]
    want = [*prompt.tolist(), stop]
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
    return f"a model that always prefers stop_id = {stop} should give {want}; got {_shown_ids(got, len(want) + n, V)}"


def _shown_ids(ids, limit, V) -> str:
    """Returned ids as a list when there are at most `limit` of them, each an id of the
    vocabulary: any other list of numbers the code returned could spell out any text."""
    if ids.dim() != 1:
        return f"a tensor of shape {list(ids.shape)}"
    if ids.numel() > limit:
        return f"{ids.numel()} ids"
    if ids.numel() and not ((ids >= 0).all() and (ids < V).all()):
        return f"{ids.numel()} values, not all of them ids of the vocabulary"
    return str(ids.tolist())


def probe_generate_rows(ns, sizes, state, prompt, max_new_tokens, seed, stop_id, temperature):
    model = model_of(ns, sizes, state)
    return at_temperature(ns.sample.generate, model, prompt.clone(), max_new_tokens, temperature=temperature,
                          generator=seeded_generator(seed), stop_id=stop_id)


def _rows_inputs(g):
    inputs = generate_inputs(g, B=40, P=1, n=9)
    return {**inputs, "stop_id": 3, "temperature": 2.0}


@check("finished_rows_wait", 1,
       "40 rows with stop_id: a finished row is padded with stop_id, generation ends only when all have stopped",
       probe=probe_generate_rows, inputs=_rows_inputs)
def finished_rows_wait(out, inputs, expected):
    if "raised" in out:
        return raised(out, "generate")
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


def probe_generate_limit(ns, sizes, state, bos, seed):
    """Draws at temperature 1 from a seeded generator: the limit is judged here, temperature 0
    by greedy_at_zero_temperature. Past the limit any exception is the answer (it must be a
    ValueError); within it only a ValueError is (the limit placed one too early, or an id fed
    past the last position, which the model refuses), any other goes to the runner."""
    model = model_of(ns, dict(sizes, block_size=6), state)

    def drawn():
        return dict(generator=seeded_generator(seed))

    return {"fits": attempt(ns.sample.generate, model, [bos, 1], 5, **drawn()),
            "one_more": try_call(ns.sample.generate, model, [bos, 1], 6, **drawn()),
            "long_prompt": try_call(ns.sample.generate, model, [bos] * 7, 1, **drawn()),
            "asked_to_stop": attempt(ns.sample.generate, model, [bos, 1], 50, stop_at_block_size=True, **drawn()),
            "nothing": attempt(ns.sample.generate, model, [bos, 2], 0, **drawn())}


def _states_limit(message) -> bool:
    """A message states the limit when it names block_size or the context, or gives the
    figure itself (6 positions, 7 ids in all, or the 5 new ids that still fit)."""
    return isinstance(message, str) and bool(
        re.search(r"block[_ -]?size|context|\b[567]\b", message, flags=re.IGNORECASE))


def _limit_inputs(g):
    bos = SIZES["vocab_size"] - 1
    return {"sizes": dict(SIZES), "state": lm_state(g, dict(SIZES, block_size=6)), "bos": bos,
            "seed": int(torch.randint(0, 2**31, (1,), generator=g))}


@check("context_limit", 2,
       "block_size 6: a 2-id prompt + 5 new ids fits, + 6 raises a ValueError (no silent cropping), "
       "stop_at_block_size=True stops at 7 ids",
       probe=probe_generate_limit, inputs=_limit_inputs)
def context_limit(out, inputs, expected):
    if "raised" in out["fits"]:
        return (f"{raised(out['fits'], 'a 2-id prompt with 5 new ids and block_size 6')}: this fits, because the "
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
            return f"{raised(result, what)}; it should be a ValueError that mentions block_size"
        if not _states_limit(result["raised"].get("message")):
            return (f"{what} raised a ValueError whose message does not say what the limit is: name block_size "
                    f"or the context, or give the number of ids that fit")
    if "raised" in out["asked_to_stop"]:
        return (f"{raised(out['asked_to_stop'], 'stop_at_block_size=True with 50 new ids')}: it asks to stop at the "
                f"limit (7 ids in all here, the last one predicted, never fed), not to raise")
    if shape_problem(out["asked_to_stop"]["value"], (7,)):
        return "with stop_at_block_size=True a 2-id prompt and block_size 6 should stop at 7 ids"
    nothing = out["nothing"].get("value")
    if not isinstance(nothing, torch.Tensor) or nothing.tolist() != [inputs["bos"], 2]:
        return "max_new_tokens=0 should return the prompt"
    return None


def probe_generate_greedy(ns, sizes, state, prompt, max_new_tokens, seed):
    model = model_of(ns, sizes, state)
    result = at_temperature(ns.sample.generate, model, prompt.clone(), max_new_tokens, temperature=0.0,
                            generator=seeded_generator(seed), return_logits=True)
    if "value" in result:
        value = result["value"]
        result["value"] = list(value) if isinstance(value, (tuple, list)) else value
    return result


def _greedy_generate_inputs(g):
    inputs = generate_inputs(g, B=2, P=2, n=5)
    return {k: inputs[k] for k in ("sizes", "state", "prompt", "max_new_tokens", "seed")}


@check("greedy_at_zero_temperature", 1,
       "temperature 0 is greedy, as for sample_next: every new id is the argmax of the logits it follows, "
       "with no division by 0 and no draw",
       probe=probe_generate_greedy, inputs=_greedy_generate_inputs, gated_by="cached_equals_recompute")
def greedy_at_zero_temperature(out, inputs, expected):
    if "raised" in out:  # and the same call at temperature 1 runs: temperature 0 is the cause
        return raised(out, "generate")
    prompt, V = inputs["prompt"], inputs["sizes"]["vocab_size"]
    parsed, problem = pair_of({"returned": out["value"]}, prompt, V)
    if problem:
        return problem
    ids, logits, n = parsed
    if n != inputs["max_new_tokens"]:
        return f"{n} new ids were generated; max_new_tokens={inputs['max_new_tokens']} and no stop_id were given"
    P = prompt.shape[-1]
    for step in range(n):
        drawn = int((ids[:, P + step] != logits[:, step].argmax(dim=-1)).sum())
        if drawn:
            return (f"{numbered('step', step + 1)}: at temperature 0, {drawn} of {ids.shape[0]} new ids are not the argmax of "
                    f"their logits: temperature 0 means greedy (sample_next(logits, 0) is the argmax), no draw")
    return None

def probe_generate_seeded(ns, sizes, state, prompt, max_new_tokens, seed):
    model = model_of(ns, sizes, state)
    return [ns.sample.generate(model, prompt.clone(), max_new_tokens, generator=seeded_generator(s))
            for s in (seed, seed, seed + 1)]


def _seeded_generate_inputs(g):
    inputs = generate_inputs(g, B=8, P=1, n=9)
    # Nearly even odds for every id: a random model with lively logits put almost all its
    # mass on one id under 1 seed in 500, and two seeds then drew the same 72 ids.
    inputs["state"]["head.weight"] = inputs["state"]["head.weight"] * 0.02
    return {k: inputs[k] for k in ("sizes", "state", "prompt", "max_new_tokens", "seed")}


@check("seeded_runs_repeat", 1, "8 rows of 9 new ids: the same seed gives the same ids, another seed other ids",
       probe=probe_generate_seeded, inputs=_seeded_generate_inputs)
def seeded_runs_repeat(out, inputs, expected):
    first, again, other = out
    if not all(isinstance(x, torch.Tensor) for x in out):
        return "generate should return a tensor of ids"
    if not torch.equal(first, again):
        return "two runs with generators seeded the same way gave different ids: pass the generator to sample_next"
    if torch.equal(first, other):
        return "runs with different seeds gave the same ids: the generator is not used for the draws"
    return None


def probe_generate_mode(ns, sizes, state, bos, seed):
    model = model_of(ns, sizes, state).train()
    out = {"value": ns.sample.generate(model, [bos], 4, generator=seeded_generator(seed), return_logits=True)}
    in_train = model.training
    model.eval()
    ns.sample.generate(model, [bos, 2], 2, generator=seeded_generator(seed))
    return {"out": out, "after_train": in_train, "after_eval": model.training,
            "grad": bool("value" in out and isinstance(out["value"], (tuple, list)) and len(out["value"]) == 2
                         and isinstance(out["value"][1], torch.Tensor) and out["value"][1].requires_grad)}


@check("mode_restored", 1, "the model's mode (train or eval) is restored and the logits carry no graph",
       probe=probe_generate_mode,
       inputs=lambda g: {"sizes": dict(SIZES), "state": lm_state(g, SIZES), "bos": SIZES["vocab_size"] - 1,
                         "seed": 7},
       gated_by="one_token_per_step")
def mode_restored(out, inputs, expected):
    if not out["after_train"]:
        return "a model in training mode came back in eval mode: restore the mode it had"
    if out["after_eval"]:
        return "a model in eval mode came back in training mode: restore the mode it had"
    if out["grad"]:
        return "the returned logits require grad: generate under torch.no_grad()"
    return None


def probe_generate_dropout(ns, sizes, state, prompt, max_new_tokens, seed):
    model = load_state(ns.model.TransformerLM(config(ns, SIZES, **{**sizes, "dropout": 0.5})), state)
    P, runs = prompt.shape[1], {}
    for mode in ("eval", "train"):
        model.train(mode == "train")
        torch.manual_seed(0)
        ids, logits = ns.sample.generate(model, prompt.clone(), max_new_tokens, generator=seeded_generator(seed),
                                         return_logits=True)
        model.eval()
        with torch.no_grad():
            full = model(ids.clone())[0]
        runs[mode] = {"logits": logits, "recomputed": full[:, P - 1:ids.shape[1] - 1]}
    return {**runs["train"], "eval_run": runs["eval"]}


@check("eval_mode", 1,
       "a model with dropout 0.5 left in training mode generates with dropout off: its logits equal the "
       "eval-mode forward",
       probe=probe_generate_dropout,
       inputs=lambda g: {"sizes": dict(SIZES), "state": lm_state(g, SIZES),
                         "prompt": torch.randint(0, SIZES["vocab_size"], (2, 3), generator=g),
                         "max_new_tokens": 4, "seed": int(torch.randint(0, 2**31, (1,), generator=g))})
def eval_mode(out, inputs, expected):
    # Judged to float32's precision: cached_equals_recompute, the precision check, names float32.
    if not matches_to_float32(out["eval_run"]["logits"], out["eval_run"]["recomputed"], atol=1e-9, rtol=1e-7):
        return ("even with the model already in eval mode, the logits of the draws differ from the model's forward "
                "over the sequence so far: see ch09.generate.cached_equals_recompute for why")
    if matches_to_float32(out["logits"], out["recomputed"], atol=1e-9, rtol=1e-7):
        return None
    if problem := compare(out["logits"], out["recomputed"], "the logits of the draws", atol=1e-9, rtol=1e-7):
        return (f"with dropout 0.5 and the model in training mode, {problem} from the model's eval-mode forward: "
                f"generate must switch the model to eval mode (model.eval(), so dropout is off) and restore the "
                f"mode afterwards")
    return None
