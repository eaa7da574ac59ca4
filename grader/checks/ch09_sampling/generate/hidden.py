"""The hidden checks of grader/checks/ch09_sampling/generate/__init__.py."""

from __future__ import annotations

import torch

from grader.checks._api import check, compare, matches_to_float32, numbered
from grader.checks.ch09_sampling.generate import SIZES, generate_inputs, model_of, pair_of, probe_generate


# ---------------------------------------------------------- against the reference


def _expect_generate(ref, inputs):
    """A recompute function over the reference model with the same weights."""
    model = model_of(ref, inputs["sizes"], inputs["state"])

    def recompute(ids, P):
        with torch.no_grad():
            return torch.stack([model(ids[:, :P + s])[0][:, -1] for s in range(ids.shape[1] - P)], dim=1)

    return {"recompute": recompute}


def _random_generate_inputs(temperature, top_k):
    def make(g):
        C = SIZES["block_size"]
        P = int(torch.randint(1, 4, (1,), generator=g))
        inputs = generate_inputs(g, B=3, P=P, n=C + 1 - P)  # right up to the limit
        inputs.update(temperature=temperature, top_k=top_k)
        return inputs
    return make


@check("matches_reference_sampled", 2,
       "3 rows up to the context limit, top_k = 3: every draw's logits equal the reference model's full "
       "recompute and every id is in its top 3",
       probe=probe_generate, inputs=_random_generate_inputs(1.0, 3), expect=_expect_generate, hidden=True)
def matches_reference_sampled(out, inputs, expected):
    prompt, V = inputs["prompt"], inputs["sizes"]["vocab_size"]
    parsed, problem = pair_of(out, prompt, V)
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
        # Judged to float32's precision: cached_equals_recompute, the precision check, names float32.
        if matches_to_float32(logits[:, step], right[:, step], atol=1e-10, rtol=1e-8):
            pass
        elif problem := compare(logits[:, step], right[:, step], "its logits", atol=1e-10, rtol=1e-8):
            return f"{numbered('step', step + 1)}: {problem}, compared with the reference model's full recompute"
        new = ids[:, P + step]
        if inputs.get("temperature", 1.0) == 0.0 and not torch.equal(new, right[:, step].argmax(dim=-1)):
            return f"{numbered('step', step + 1)}: at temperature 0 the new id should be the argmax of its logits"
        if inputs.get("top_k"):
            allowed = torch.topk(right[:, step], inputs["top_k"], dim=-1).indices
            if not (allowed == new.unsqueeze(-1)).any(dim=-1).all():
                return f"{numbered('step', step + 1)}: a new id is outside the top {inputs['top_k']} of its logits"
    return None


matches_reference_greedy = check(
    "matches_reference_greedy", 2,
    "greedy generation up to the context limit equals the reference model's argmax at every step",
    probe=probe_generate, inputs=_random_generate_inputs(0.0, None), expect=_expect_generate,
    hidden=True)(matches_reference_sampled)
