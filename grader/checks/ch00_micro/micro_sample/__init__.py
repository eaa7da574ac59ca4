"""sample: drawing a name token by token, from BOS until BOS or block_size positions.

The probes drive sample with stand-ins: a scripted model whose logits are fixed per
position (recording every call) and a letters-only tokenizer, so a judge sees exactly
what was fed back at which position, where sampling stopped, how the rng was used and
how the temperature shaped the draws.
"""

from __future__ import annotations

import math
import random

from grader.checks._api import check, first_difference
from grader.checks.ch00_micro.common import SMALL, model_of, task_of

TASKS = [task_of("micro_sample", "sample", "sampling a name")]


class _Letters:
    """Stands in for chapter 01's tokenizer: the first `size` letters, then BOS."""

    def __init__(self, size):
        self.chars = "abcdefghijklmnopqrstuvwxyz"[:size]
        self.bos_id = size

    @property
    def vocab_size(self):
        return len(self.chars) + 1

    def decode(self, ids):
        # Letters are consecutive code points here: no table to look up (and no copy of
        # chapter 01's decode in a file students receive).
        return bytes(ord("a") + int(i) for i in ids if int(i) < self.bos_id).decode("ascii")


class _Scripted:
    """Stands in for MicroGPT: position p returns the logits script(p); records every call."""

    def __init__(self, Value, script, vocab_size, block_size):
        self.Value, self.script = Value, script
        self.vocab_size, self.block_size = vocab_size, block_size
        self.calls, self.open = [], False

    def start_sequence(self):
        self.calls, self.open = [], True

    def finish_sequence(self):
        self.open = False

    def forward(self, token_id, pos):
        self.calls.append([int(token_id), int(pos)])
        return [self.Value(x) for x in self.script(pos)]


def _peaked(script, vocab_size):
    """Position p strongly prefers script[p] (and the letter 0 past the script's end)."""
    def logits(pos):
        want = script[pos] if pos < len(script) else 0
        return [50.0 if v == want else 0.0 for v in range(vocab_size)]
    return logits


def probe_sample_script(ns, script, letters, block_size, temperature=1.0):
    tokenizer = _Letters(letters)
    model = _Scripted(ns.micro.Value, _peaked(script, tokenizer.vocab_size), tokenizer.vocab_size, block_size)
    text = ns.micro.sample(model, tokenizer, temperature, random.Random(0))
    return {"text": text, "calls": model.calls}


@check("stops_at_bos", 2, "a model that says a, b, BOS gives 'ab': BOS at position 0, each id fed back, stop at BOS",
       probe=probe_sample_script, inputs=lambda g: {"script": [0, 1, 26, 2, 3], "letters": 26, "block_size": 16})
def stops_at_bos(out, inputs, expected):
    bos = inputs["letters"]
    if not isinstance(out["text"], str):
        return f"sample should return the text (a str), got a {type(out['text']).__name__}"
    if out["calls"][:1] != [[bos, 0]]:
        return f"sampling starts by feeding BOS (id {bos}) at position 0; the first call was {out['calls'][:1]}"
    if out["text"].startswith("ab") and len(out["text"]) > 2:
        return (f"the model drew BOS after 'ab' but sampling went on ({len(out['text'])} characters): stop at BOS "
                f"(it ends the name and is not part of the text)")
    if out["text"] != "ab":
        return f"the scripted model says a, b, BOS: the sample should be 'ab'; {first_difference(out['text'], 'ab')}"
    if out["calls"] != [[bos, 0], [0, 1], [1, 2]]:
        return (f"the calls should be (BOS, 0), (a, 1), (b, 2): each drawn id is fed back at the next position; "
                f"got {out['calls']}")
    return None


@check("stops_at_block_size", 1, "a model that never says BOS stops after block_size positions",
       probe=probe_sample_script, inputs=lambda g: {"script": [], "letters": 26, "block_size": 5})
def stops_at_block_size(out, inputs, expected):
    T = inputs["block_size"]
    positions = [pos for _, pos in out["calls"]]
    if positions != list(range(T)):
        return (f"with block_size {T} and no BOS drawn, forward should be called at positions 0..{T - 1}, "
                f"got {positions[:T + 2]}")
    if out["text"] != "a" * T:
        return (f"with block_size {T} and no BOS drawn the sample is {T} letters 'a'; "
                f"{first_difference(out['text'], 'a' * T)}")
    return None


def probe_sample_seeded(ns, sizes, seed, letters):
    tokenizer = _Letters(letters)
    model = model_of(ns.micro, sizes, seed, spread=0.3)
    # Whether the module-level generator moved: three equal names can happen by chance
    # with it, a moved state cannot without it.
    before = random.getstate()
    same = [ns.micro.sample(model, tokenizer, 1.0, random.Random(7)) for _ in range(3)]
    global_moved = random.getstate() != before
    rng = random.Random(7)
    shared = [ns.micro.sample(model, tokenizer, 1.0, rng) for _ in range(4)]
    return {"same": same, "shared": shared, "global_moved": global_moved}


@check("seeded", 1, "the same seed gives the same name; one rng gives different names",
       probe=probe_sample_seeded, inputs=lambda g: {"sizes": dict(SMALL), "seed": 1, "letters": 6})
def seeded(out, inputs, expected):
    same, shared = out["same"], out["shared"]
    if not all(isinstance(s, str) for s in same + shared):
        return "sample should return the text (a str)"
    if len(set(same)) != 1 or out.get("global_moved"):
        seen = ("drew from the module-level random generator" if out.get("global_moved")
                else "gave different names for three samples with random.Random(7)")
        return (f"sample {seen}: draw with the rng passed in (rng.choices or rng.random), not the module-level "
                f"random functions")
    if shared[0] != same[0]:
        return "the first sample of a fresh random.Random(7) differs from the other runs with the same seed"
    if len(set(shared)) == 1:
        return ("four samples from one rng are all the same name: the draw should be random "
                "(rng.choices with the weights)")
    return None


def probe_sample_temperature(ns, seed, temperature, draws):
    tokenizer = _Letters(2)  # a, b, BOS = 2
    a_logit = math.log(3.0)  # at temperature 1: p(a) = 3/4, p(b) = 1/4

    def script(pos):
        return [a_logit, 0.0, -60.0] if pos == 0 else [0.0, 0.0, 60.0]

    model = _Scripted(ns.micro.Value, script, tokenizer.vocab_size, 4)
    rng = random.Random(seed)
    counts = {}
    for _ in range(draws):
        text = ns.micro.sample(model, tokenizer, temperature, rng)
        counts[text] = counts.get(text, 0) + 1
    return {"counts": counts}


@check("temperature", 2,
       "p(a) = 3/4 at temperature 1 becomes 9/10 at temperature 0.5 (softmax(logits / T)), over 600 draws",
       probe=probe_sample_temperature, inputs=lambda g: {"seed": 5, "temperature": 0.5, "draws": 600})
def temperature(out, inputs, expected):
    T, draws = inputs["temperature"], inputs["draws"]
    counts = out["counts"]
    strange = sorted(k for k in counts if k not in ("a", "b"))
    if strange:
        return f"the scripted model allows only 'a' or 'b' (then BOS); samples included {strange[:3]}"
    p = 3.0 ** (1 / T) / (3.0 ** (1 / T) + 1)  # softmax(logits / T): p(a) = 3^(1/T) / (3^(1/T) + 1)
    share = counts.get("a", 0) / draws
    sd = math.sqrt(p * (1 - p) / draws)
    if abs(share - p) <= 5 * sd:
        return None
    ignored, multiplied = 0.75, 3.0**T / (3.0**T + 1)
    if abs(share - ignored) <= 5 * math.sqrt(ignored * (1 - ignored) / draws):
        return (f"at temperature {T} 'a' came {share:.0%} of the time, as at temperature 1: "
                f"divide the logits by the temperature")
    if abs(share - multiplied) <= 5 * math.sqrt(multiplied * (1 - multiplied) / draws):
        return (f"at temperature {T} 'a' came {share:.0%} of the time: the logits are multiplied by the "
                f"temperature; divide them (softmax(logits / temperature))")
    return (f"at temperature {T} 'a' should come about {p:.0%} of the time (softmax(logits / T)), "
            f"it came {share:.0%}: draw the next id from those probabilities")
