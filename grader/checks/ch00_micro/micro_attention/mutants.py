"""Task micro_attention: the mistakes the lesson warns about, made in its region (mutants), and right
ways to write it (variants). grader/mutants.py says how an entry is written."""

from grader.checks.ch00_micro.micro_attention import gradients_flow, scaled_weights
from grader.mutants import mutant, patch, variant

MUTANTS = [
    mutant("attention_not_scaled", "micro_attention", patch("""
        - weights = softmax([dot(query, key) * scale for key in keys])
        + weights = softmax([dot(query, key) for key in keys])
    """), scaled_weights, "not scaled", "no 1/sqrt(d_head)"),
    mutant("attention_scaled_by_d", "micro_attention", patch("""
        - scale = 1.0 / math.sqrt(len(query))
        + scale = 1.0 / len(query)
    """), scaled_weights, "divided by d_head", "1/d_head instead of 1/sqrt(d_head)"),
    mutant("attention_output_from_floats", "micro_attention", patch("""
        - output = [dot(weights, [value[i] for value in values]) for i in range(len(query))]
        + output = [Value(sum(w.data * value[i].data for w, value in zip(weights, values))) for i in range(len(query))]
    """), gradients_flow, "cut off from the graph",
       "the head's output rebuilt from .data floats: no gradient flows back through attention"),
    mutant("attention_values_as_floats", "micro_attention", patch("""
        - output = [dot(weights, [value[i] for value in values]) for i in range(len(query))]
        + output = [vsum([w * value[i].data for w, value in zip(weights, values)]) for i in range(len(query))]
    """), gradients_flow, "not the values",
       "the value vectors mixed in as floats: the values get no gradient"),
]

VARIANTS = [
    variant("attention_explicit_loops", "micro_attention", """
        d = len(query)
        scores = []
        for key in keys:
            s = Value(0.0)
            for a, b in zip(query, key):
                s = s + a * b
            scores.append(s / math.sqrt(d))
        weights = softmax(scores)
        output = []
        for i in range(d):
            output.append(vsum([w * value[i] for w, value in zip(weights, values)]))
        return output, weights
    """, "plain loops, division by math.sqrt(d)"),
    variant("attention_generator_sums", "micro_attention", """
        head_dim = len(query)
        scores = [sum(query[j] * key[j] for j in range(head_dim)) / head_dim ** 0.5 for key in keys]
        weights = softmax(scores)
        output = [sum((weights[t] * values[t][j] for t in range(len(values))), Value(0)) for j in range(head_dim)]
        return output, weights
    """, "generator sums with Python's sum, the scores divided by head_dim ** 0.5"),
]
