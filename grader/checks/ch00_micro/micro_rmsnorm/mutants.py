"""Task micro_rmsnorm: the mistakes the lesson warns about, made in its region (mutants), and right
ways to write it (variants). grader/mutants.py says how an entry is written."""

from grader.checks.ch00_micro.micro_rmsnorm import figure, gradient, zero_vector
from grader.mutants import mutant, patch, variant

MUTANTS = [
    mutant("rmsnorm_no_eps", "micro_rmsnorm", patch("""
        - scale = (mean_square + RMS_NORM_EPS) ** -0.5
        + scale = mean_square ** -0.5
    """), (figure, zero_vector), "eps", "eps left out"),
    mutant("rmsnorm_eps_outside_sqrt", "micro_rmsnorm", patch("""
        - scale = (mean_square + RMS_NORM_EPS) ** -0.5
        + scale = 1.0 / (mean_square ** 0.5 + RMS_NORM_EPS)
    """), figure, "outside", "eps added outside the square root"),
    mutant("rmsnorm_mean_not_mean_of_squares", "micro_rmsnorm", patch("""
        - mean_square = vsum([x * x for x in xs]) / len(xs)
        + mean_square = vsum(xs) / len(xs)
    """), figure, "not the mean of squares", "mean(x) instead of mean(x²)"),
    mutant("rmsnorm_is_layernorm", "micro_rmsnorm", """
        mean = vsum(xs) / len(xs)
        centred = [x - mean for x in xs]
        scale = (vsum([c * c for c in centred]) / len(xs) + RMS_NORM_EPS) ** -0.5
        return [c * scale for c in centred]
    """, figure, "LayerNorm", "the mean subtracted (LayerNorm)"),
    mutant("rmsnorm_scale_detached", "micro_rmsnorm", patch("""
        - mean_square = vsum([x * x for x in xs]) / len(xs)
        + mean_square = sum(x.data * x.data for x in xs) / len(xs)
    """), gradient, "constant", "the scale computed from .data"),
    mutant("rmsnorm_no_square_root", "micro_rmsnorm", patch("""
        - scale = (mean_square + RMS_NORM_EPS) ** -0.5
        + scale = (mean_square + RMS_NORM_EPS) ** -1
    """), (figure, gradient), "square root is missing",
       "divided by mean(x²) + eps, the root forgotten"),
    mutant("rmsnorm_square_of_the_mean_no_eps", "micro_rmsnorm", patch("""
        - mean_square = vsum([x * x for x in xs]) / len(xs)
        - scale = (mean_square + RMS_NORM_EPS) ** -0.5
        + mean = vsum(xs) / len(xs)
        + scale = (mean * mean) ** -0.5
    """), (figure, gradient), "2 parts of rmsnorm differ",
       "two slips at once: mean(x)² for mean(x²), and no eps"),
]

VARIANTS = [
    variant("rmsnorm_via_pow_half", "micro_rmsnorm", """
        n = len(xs)
        mean_square = sum((x ** 2 for x in xs), Value(0.0)) * (1.0 / n)
        inverse = 1.0 / (mean_square + RMS_NORM_EPS) ** 0.5
        return [x * inverse for x in xs]
    """, "sum of x ** 2, then 1 / (…) ** 0.5"),
    variant("rmsnorm_builtin_sum_literal_eps", "micro_rmsnorm", """
        ms = sum(xi * xi for xi in xs) / len(xs)
        scale = (ms + 1e-5) ** -0.5
        return [xi * scale for xi in xs]
    """, "Python's sum of squares, eps written as 1e-5"),
]
