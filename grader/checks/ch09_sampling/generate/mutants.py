"""Task generate: the mistakes the lesson warns about, made in its region (mutants), and right
ways to write it (variants). grader/mutants.py says how an entry is written."""

from grader.checks.ch09_sampling.generate import (
    cached_equals_recompute, context_limit, eval_mode, finished_rows_wait, greedy_at_zero_temperature,
    one_token_per_step, stops_at_stop_id,
)
from grader.mutants import mutant, patch, variant


# A whole generate, simpler than the reference's, for the mutants whose diagnoses quote the
# line an error is raised at (so they keep this body and its line numbers) and for a variant.
_GENERATE = """
ids = torch.as_tensor(prompt_ids, dtype=torch.long)
single = ids.dim() == 1
if single:
    ids = ids.unsqueeze(0)
block_size = model.cfg.block_size
prompt_length = ids.shape[1]
room = block_size + 1 - prompt_length
if prompt_length > block_size or max_new_tokens > room:
    if not stop_at_block_size or prompt_length > block_size:
        raise ValueError(f"prompt + max_new_tokens may be at most block_size + 1 = {block_size + 1}")
    max_new_tokens = room
was_training = model.training
model.eval()
B = ids.shape[0]
pieces, step_logits = [ids], []
finished = torch.zeros(B, dtype=torch.bool)
if max_new_tokens > 0:
    logits, _, past = model(ids, use_cache=True)
    for step in range(max_new_tokens):
        last = logits[:, -1, :]
        step_logits.append(last)
        next_ids = sample_next(last, temperature, top_k, generator)
        if stop_id is not None:
            next_ids = torch.where(finished, torch.full_like(next_ids, stop_id), next_ids)
            finished |= next_ids == stop_id
        pieces.append(next_ids.unsqueeze(1))
        if step == max_new_tokens - 1 or (stop_id is not None and bool(finished.all())):
            break
        logits, _, past = model(next_ids.unsqueeze(1), past_key_values=past, use_cache=True)
model.train(was_training)
out = torch.cat(pieces, dim=1)
all_logits = torch.stack(step_logits, dim=1) if step_logits else torch.zeros(B, 0, model.cfg.vocab_size)
if single:
    out, all_logits = out[0], all_logits[0]
return (out, all_logits) if return_logits else out
"""


def _generate(*replacements: tuple[str, str]) -> str:
    body = _GENERATE
    for old, new in replacements:
        assert old in body, old
        body = body.replace(old, new)
    return body

MUTANTS = [
    mutant("generate_feeds_whole_sequence", "generate", patch("""
        - logits, _, past = model(next_ids.unsqueeze(1), past_key_values=past, use_cache=True)
        + logits, _, _ = model(torch.cat(pieces, dim=1))
    """), one_token_per_step, "whole sequence",
       "no cache: the whole sequence fed every step (right logits, quadratic cost)"),
    mutant("generate_forgets_the_cache", "generate", patch("""
        - logits, _, past = model(next_ids.unsqueeze(1), past_key_values=past, use_cache=True)
        + logits, _, past = model(next_ids.unsqueeze(1), use_cache=True)
    """), cached_equals_recompute, "without past_key_values",
       "new ids fed alone without past_key_values"),
    mutant("generate_ignores_stop_id", "generate", patch("""
        - if stop_id is not None:
        -     next_ids = torch.where(finished, torch.full_like(next_ids, stop_id), next_ids)
        -     finished |= next_ids == stop_id

        - if step == max_new_tokens - 1 or (stop_id is not None and bool(finished.all())):
        + if step == max_new_tokens - 1:
    """), stops_at_stop_id, "stops once", "no stopping at BOS"),
    mutant("generate_stops_every_row_at_the_first", "generate", patch("""
        - if step == max_new_tokens - 1 or (stop_id is not None and bool(finished.all())):
        + if step == max_new_tokens - 1 or (stop_id is not None and bool(finished.any())):
    """), finished_rows_wait, "every row", "all rows stop when one does"),
    mutant("generate_crops_silently", "generate", patch("""
        - if prompt_length > block_size:
        -     raise ValueError(
        -         f"the prompt has {prompt_length} ids but block_size is {block_size}: it does not fit the context"
        -     )
        + ids = ids[:, -block_size:]
        + prompt_length = ids.shape[1]

        - if max_new_tokens > room:
        -     if not stop_at_block_size:
        -         raise ValueError(
        -             f"prompt ({prompt_length} ids) + max_new_tokens ({max_new_tokens}) needs "
        -             f"{prompt_length + max_new_tokens - 1} positions but block_size is {block_size}: "
        -             f"ask for at most {room} new ids, or pass stop_at_block_size=True to stop at the limit"
        -         )
        -     max_new_tokens = room
        + max_new_tokens = min(max_new_tokens, room)
    """), context_limit, "crop", "output silently cut at block_size"),
    mutant("generate_limit_off_by_one", "generate",
           _generate(("room = block_size + 1 - prompt_length", "room = block_size - prompt_length")),
           context_limit, "block_size + 1", "prompt + max_new_tokens <= block_size"),
    mutant("generate_feeds_the_last_id", "generate",
           _generate(("if step == max_new_tokens - 1 or (", "if (")),
           one_token_per_step, "never fed", "the last new id fed to the model too"),
    mutant("generate_refeeds_last_prompt_token", "generate",
           _generate(("    logits, _, past = model(ids, use_cache=True)\n",
                      "    _, _, past = model(ids[:, :-1], use_cache=True) if prompt_length > 1 else (None, None, None)\n"
                      "    logits, _, past = model(ids[:, -1:], past_key_values=past, use_cache=True)\n"
                      "    logits, _, past = model(ids[:, -1:], past_key_values=past, use_cache=True)\n")),
           (one_token_per_step, cached_equals_recompute), "second time",
           "the last prompt token fed twice"),
    mutant("generate_cache_not_passed_back", "generate", patch("""
        - logits, _, past = model(next_ids.unsqueeze(1), past_key_values=past, use_cache=True)
        + logits, _, _ = model(next_ids.unsqueeze(1), past_key_values=past, use_cache=True)
    """), cached_equals_recompute, "not passed back",
       "every new id fed with the prompt's cache: the presents never kept"),
    mutant("generate_cache_length_from_heads_axis", "generate",
           _generate(("        logits, _, past = model(next_ids.unsqueeze(1), past_key_values=past, use_cache=True)\n",
                      "        start = past[0][0].shape[1]  # the cache length, read from the heads axis\n"
                      "        hidden = model.position_embedding(model.token_embedding(next_ids.unsqueeze(1)), start)\n"
                      "        presents = []\n"
                      "        for block, cache in zip(model.blocks, past):\n"
                      "            hidden, present = block(hidden, cache, True)\n"
                      "            presents.append(present)\n"
                      "        logits, past = model.head(model.ln_final(hidden)), presents\n")),
           cached_equals_recompute, "do not continue from the cache length",
           "a step of its own that places each new id at the cache's heads-axis size"),
    mutant("generate_in_training_mode", "generate", patch("""
        - model.eval()
    """), eval_mode, "dropout", "generation left in training mode (dropout on)"),
    mutant("generate_samples_dividing_by_temperature", "generate", _generate((
        "        next_ids = sample_next(last, temperature, top_k, generator)\n",
        "        scaled = last / temperature  # drawn here rather than by sample_next\n"
        "        if top_k is not None:\n"
        "            kth = torch.topk(scaled, min(top_k, scaled.shape[-1])).values[:, [-1]]\n"
        "            scaled = scaled.masked_fill(scaled < kth, float('-inf'))\n"
        "        next_ids = torch.multinomial(torch.softmax(scaled, dim=-1), 1, generator=generator).squeeze(1)\n")),
           greedy_at_zero_temperature, "temperature 0 means greedy",
           "its own draw, logits divided by the temperature (0 gives nan)"),
]

VARIANTS = [
    variant("generate_limit_in_its_own_words", "generate", _generate(("""if prompt_length > block_size or max_new_tokens > room:
    if not stop_at_block_size or prompt_length > block_size:
        raise ValueError(f"prompt + max_new_tokens may be at most block_size + 1 = {block_size + 1}")
    max_new_tokens = room""", """if prompt_length > block_size:
    raise ValueError(f"a prompt of {prompt_length} ids is longer than the model's {block_size} positions")
if max_new_tokens > room:
    if not stop_at_block_size:
        raise ValueError(f"only {room} new ids fit after this prompt")
    max_new_tokens = room""")), "the limit stated without the word block_size"),
    variant("generate_while_loop", "generate", """
        prompt = torch.as_tensor(prompt_ids, dtype=torch.long)
        batched = prompt.dim() == 2
        seq = prompt if batched else prompt[None]
        limit = model.cfg.block_size + 1
        if seq.shape[1] > model.cfg.block_size or seq.shape[1] + max_new_tokens > limit:
            if stop_at_block_size and seq.shape[1] <= model.cfg.block_size:
                max_new_tokens = limit - seq.shape[1]
            else:
                raise ValueError(f"{seq.shape[1]} prompt ids + {max_new_tokens} new ids exceed block_size + 1 "
                                 f"= {limit}")
        mode = model.training
        model.eval()
        drawn_logits = []
        done = torch.zeros(seq.shape[0], dtype=torch.bool)
        feed, cache = seq, None
        while len(drawn_logits) < max_new_tokens and not (stop_id is not None and done.all()):
            logits, _, cache = model.forward(feed, past_key_values=cache, use_cache=True)
            drawn_logits.append(logits[:, -1])
            new = sample_next(logits[:, -1], temperature=temperature, top_k=top_k, generator=generator)
            if stop_id is not None:
                new[done] = stop_id
                done = done | (new == stop_id)
            seq = torch.cat([seq, new[:, None]], dim=1)
            feed = new[:, None]
            if len(drawn_logits) == max_new_tokens:
                break
        model.train(mode)
        V = model.cfg.vocab_size
        logits_out = torch.stack(drawn_logits, 1) if drawn_logits else seq.new_zeros((seq.shape[0], 0, V), dtype=torch.float32)
        if not batched:
            seq, logits_out = seq[0], logits_out[0]
        return (seq, logits_out) if return_logits else seq
    """, "a while loop feeding the prompt, then each new id, through one model.forward call site"),
    variant("generate_draws_inline_greedy_at_zero", "generate", _generate((
        "        next_ids = sample_next(last, temperature, top_k, generator)\n",
        "        if temperature == 0:\n"
        "            next_ids = last.argmax(dim=-1)\n"
        "        else:\n"
        "            scaled = last.double()\n"
        "            if top_k is not None and top_k < scaled.shape[-1]:\n"
        "                values, indices = torch.topk(scaled, top_k, dim=-1)\n"
        "                scaled = torch.full_like(scaled, float('-inf')).scatter(-1, indices, values)\n"
        "            probs = torch.softmax(scaled / temperature, dim=-1)\n"
        "            next_ids = torch.multinomial(probs, 1, generator=generator).squeeze(1)\n")),
        "its own draw: the argmax at temperature 0, else top-k by scatter and a seeded multinomial"),
]

# Phrases of the lesson's common mistakes, each with the mutants that make it.
LESSON = {
    'Feeding the whole sequence every step': ('generate_feeds_whole_sequence',),
    'feeding the last prompt token a second time': ('generate_refeeds_last_prompt_token',),
    'Calling the model without `past_key_values`': ('generate_forgets_the_cache',),
    'Stopping all rows when the first one produces `stop_id`': ('generate_stops_every_row_at_the_first',),
    'Generating with the model in training mode': ('generate_in_training_mode',),
    'Drawing inside `generate` by dividing the logits by the temperature': ('generate_samples_dividing_by_temperature',),
}
