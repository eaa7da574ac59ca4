"""Task micro_sample: the mistakes the lesson warns about, made in its region (mutants), and right
ways to write it (variants). grader/mutants.py says how an entry is written."""

from grader.checks.ch00_micro.micro_sample import seeded, stops_at_bos, temperature
from grader.mutants import mutant, patch, variant

MUTANTS = [
    mutant("sample_does_not_stop_at_bos", "micro_sample", patch("""
        - if token == bos:
        -     break
    """), stops_at_bos, "stop at BOS", "goes on after BOS"),
    mutant("sample_global_random", "micro_sample", patch("""
        - token = rng.choices(range(model.vocab_size), weights=[p.data for p in probs])[0]
        + token = random.choices(range(model.vocab_size), weights=[p.data for p in probs])[0]
    """), seeded, "rng passed in", "module-level random instead of rng"),
    mutant("sample_temperature_multiplied", "micro_sample", patch("""
        - probs = softmax([logit / temperature for logit in model.forward(token, pos)])
        + probs = softmax([logit * temperature for logit in model.forward(token, pos)])
    """), temperature, "multiplied", "logits × temperature"),
    mutant("sample_greedy", "micro_sample", patch("""
        - probs = softmax([logit / temperature for logit in model.forward(token, pos)])
        - token = rng.choices(range(model.vocab_size), weights=[p.data for p in probs])[0]
        + logits = model.forward(token, pos)
        + token = max(range(model.vocab_size), key=lambda i: logits[i].data)
    """), seeded, "same name", "argmax instead of a random draw"),
]

VARIANTS = [
    variant("sample_inverse_cdf", "micro_sample", """
        bos = tokenizer.bos_id
        model.start_sequence()
        token, ids = bos, []
        pos = 0
        while pos < model.block_size:
            probs = softmax([l * (1.0 / temperature) for l in model.forward(token, pos)])
            r, acc = rng.random(), 0.0
            token = len(probs) - 1
            for i, p in enumerate(probs):
                acc += p.data
                if r < acc:
                    token = i
                    break
            if token == bos:
                break
            ids.append(token)
            pos += 1
        model.finish_sequence()
        return tokenizer.decode(ids)
    """, "inverse-CDF draw with rng.random()"),
]
