"""Task adamw_init: the mistakes the lesson warns about, made in its region (mutants), and right
ways to write it (variants). grader/mutants.py says how an entry is written."""

from grader.checks.ch08_training.adamw_init import each_parameter_once, rejects_frozen_and_empty, tied_model_generator
from grader.mutants import mutant, patch, variant

MUTANTS = [
    mutant("adamw_init_keeps_duplicates", "adamw_init", patch("""
        - if id(p) in seen:
        -     continue  # a shared tensor: step it once, not once per appearance
        - seen.add(id(p))
    """), each_parameter_once, "more than once", "a shared tensor held twice"),
    mutant("adamw_init_accepts_frozen", "adamw_init", patch("""
        - if not p.requires_grad:
        -     raise ValueError(
        -         f"AdamW: parameter {index} (shape {tuple(p.shape)}) does not require grad: "
        -         f"it would never receive a gradient, so it cannot be trained"
        -     )
    """), rejects_frozen_and_empty, "does not require grad",
       "a frozen tensor accepted"),
    mutant("adamw_init_reads_generator_twice", "adamw_init", patch("""
        + if any(not p.requires_grad for p in params):
        +     raise ValueError("AdamW: a parameter does not require grad")
          self.params = []
        - if not self.params:
        -     raise ValueError("AdamW got an empty parameter list")
    """), tied_model_generator, "read only once", "the generator read twice"),
]

VARIANTS = [
    variant("adamw_init_dict_of_ids", "adamw_init", """
        if isinstance(params, torch.Tensor):
            raise TypeError("pass an iterable of tensors")
        unique = {}
        for p in params:
            if not p.requires_grad:
                raise ValueError(f"a parameter of shape {tuple(p.shape)} does not require grad")
            unique.setdefault(id(p), p)
        if not unique:
            raise ValueError("no parameters to optimize")
        self.params = list(unique.values())
        self.exp_avg = [p.detach().new_zeros(p.shape) for p in self.params]
        self.exp_avg_sq = [p.detach().new_zeros(p.shape) for p in self.params]
        self.steps = [0] * len(self.params)
    """, "a dict keyed by id() keeps first-seen order"),
]
