"""The count-based bigram baseline: add-k smoothed counts of the (input, target) pairs the
model is scored on, its validation loss in nats per scored character.

The baseline is compared with add-k counting and with each classic mistake the diagnoses
name (MISTAKES): on the public checks' inputs those values are data the kit
computed (grader/checks/facts.py; hidden/bigram_baseline.py counts).
"""

from __future__ import annotations

import torch

from grader.checks._api import Task, check, figures, float32_verdict, naming, numbered
from grader.checks.ch08_training.common import close_enough, float32_near, is_float
from grader.checks.facts import known_facts

TASKS = [
    Task("bigram_baseline", "train", "bigram_baseline", "the count-based bigram baseline"),
]


MISTAKES = {
    "no_kv": "the denominator lacks k·V: P(next | current) = (count + k) / (row total + k·V)",
    "bits": "the loss is in bits (log2); use nats (natural log), like the model's loss",
    "summed": "this is the summed negative log-likelihood; divide by the number of scored positions",
    "k_is_one": "the smoothing argument is ignored (k = 1 used always)",
    "ignore_block": "every pair is scored, ignoring block_size: count and score only the first "
                    "min(block_size, len(ids) - 1) positions of each document, as the model is scored",
    "val_counted": "the counts include the validation names: count the pairs of train_docs only, then score "
                   "val_docs with those counts (a baseline that has seen the names it is scored on is too good)",
    "no_bos": "the documents are not framed by BOS: no transition from or to BOS is counted; encode_document "
              "gives [BOS, ..., BOS], and the pairs (BOS, first letter) and (last letter, BOS) count",
    "leading_bos_only": "the closing BOS is missing: no transition to BOS is counted; the pair "
                        "(last letter, BOS) counts too",
    "closing_bos_only": "the opening BOS is missing: no transition from BOS is counted; each document starts "
                        "with BOS, so the pair (BOS, first letter) counts, and the first letter is scored",
}


def probe_bigram(ns, vocab_docs, calls):
    # What the code raises goes to the runner, which reports it as for every probe (its type,
    # and in `make check` its message and line): no input here asks for an error.
    tokenizer = ns.tokenizer.CharTokenizer(vocab_docs)
    return [{"value": ns.train.bigram_baseline(call["train"], call["val"], tokenizer, block_size=call["block_size"],
                                               smoothing=call["k"])} for call in calls]


def bigram_problem(out, inputs, facts, show=True, precision=False):
    """facts: per call, the right baseline ("right") and each mistake's ("mistakes", None for
    one that gives the right value on that call). A value right to float32's precision only
    is named by the precision check (precision=True: by_hand) and passes every other."""
    float32 = None
    for number, (call, result, said) in enumerate(zip(inputs["calls"], out, facts), start=1):
        label = (f"bigram_baseline({call['train']}, {call['val']}, block_size={call['block_size']}, "
                 f"smoothing={call['k']})" if show else numbered("call", number))
        value = result["value"]
        if isinstance(value, torch.Tensor) and value.numel() == 1:
            value = float(value)
        if not is_float(value):
            return f"{label} should return a float, got {type(value).__name__}"
        right = said["right"]
        if close_enough(value, right, 1e-9):
            continue
        for name, why in MISTAKES.items():
            wrong = said["mistakes"][name]
            if wrong is not None and close_enough(value, wrong, 1e-9):
                return naming(name, f"{label}: {why}")
        wanted, yours = figures(right, value, least=6)
        if float32_near(value, right):
            float32 = float32 or (label, wanted, yours)
            continue
        return f"{label} should be {wanted} nats per character, got {yours}" if show else (
            f"{label}: the baseline differs from add-k counting over the scored (input, target) pairs")
    if float32 and precision:
        label, wanted, yours = float32
        return float32_verdict(f"{label}: the baseline", "your counting or its logarithm",
                               "float64 (torch.zeros(V, V) without dtype= is float32)",
                               where=f"{yours} for {wanted}")
    return None


def _bigram_by_hand(g):
    # a=0, b=1, BOS=2, V=3; train pairs (BOS,a) (a,b) (b,BOS)
    return {"vocab_docs": ["ab"], "calls": [
        {"train": ["ab"], "val": ["b"], "block_size": None, "k": 1.0},  # (ln 4 + ln 2) / 2
        {"train": ["ab"], "val": ["b"], "block_size": None, "k": 0.5},  # -(ln 0.2 + ln 0.6) / 2
        {"train": ["ab"], "val": ["ab"], "block_size": 1, "k": 1.0},  # ln 2
    ]}


def _bigram_cropped(g):
    return {"vocab_docs": ["abc"], "calls": [
        {"train": ["abba", "ab", "cab"], "val": ["ba", "abcab", "c"], "block_size": 3, "k": 0.5},
        {"train": ["abba", "ab", "cab"], "val": ["ba", "abcab", "c"], "block_size": None, "k": 2.0},
    ]}


@check("by_hand", 2,
       "train 'ab', val 'b': (ln 4 + ln 2)/2 with add-one, −(ln 0.2 + ln 0.6)/2 with k = 0.5; block_size 1 "
       "on 'ab' gives ln 2, to float64's precision",
       probe=probe_bigram, inputs=_bigram_by_hand)
def by_hand(out, inputs, expected):
    return bigram_problem(out, inputs, known_facts(inputs), precision=True)


@check("cropped_and_smoothed", 1, "a small corpus with block_size 3 and k = 0.5, and with every position and k = 2",
       probe=probe_bigram, inputs=_bigram_cropped)
def cropped_and_smoothed(out, inputs, expected):
    return bigram_problem(out, inputs, known_facts(inputs))
