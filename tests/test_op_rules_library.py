"""torch's library judged by where it runs (grader/run/inside/op_rules.py): a task's rule
says which of torch's Python code its probe may run, and an operator issued from inside
any other is torch doing the task, whatever the code is called and however it was
reached. Each shortcut below computes the task from kernels a hand-written answer may run
too (logsumexp, gather, softmax, sqrt), so no rule of names stops it; each is refused
with a sentence naming the module. The forms the lessons allow keep their marks.

The sandbox cases need bubblewrap; the tamper scan is off (as wherever tests/hostile.py
grades an attack) and each shortcut is spelled so that the static scan does not see it,
so what refuses it is the run-time rule.
"""

from __future__ import annotations

import pytest
import torch

from grader.checks import catalogue
from grader.run.feedback import _forbidden_call_text
from grader.run.inside import op_rules
from grader.run.results import FORBIDDEN, PASSED
from grader.run.scan_calls import scan
from grader.run.inside.messages import CaughtCall

from tests.hostile import hostile_sources, needs_bwrap, run

# case: (task, body, the module the student must read, code appended to the task's module)
SHORTCUTS = {
    "cross_entropy from a distribution's log_prob": ("cross_entropy", """
        flat, wanted = logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)
        return -torch.distributions.Categorical(logits=flat).log_prob(wanted).mean()
    """, "torch.distributions.categorical", ""),
    "cross_entropy from the distributions' helper that turns logits into probabilities": ("cross_entropy", """
        flat, wanted = logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)
        probabilities = torch.distributions.utils.logits_to_probs(flat)
        return -probabilities.gather(-1, wanted.unsqueeze(-1)).log().mean()
    """, "torch.distributions.utils", ""),
    "cross_entropy from a copy of a distribution helper's code, made at import": ("cross_entropy", """
        flat, wanted = logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)
        return -_rt_probabilities(flat).gather(-1, wanted.unsqueeze(-1)).log().mean()
    """, "torch.distributions.utils", """
        import types as _rt_types
        _rt_helper = torch.distributions.utils.logits_to_probs
        _rt_probabilities = _rt_types.FunctionType(_rt_helper.__code__, _rt_helper.__globals__, "mine",
                                                   _rt_helper.__defaults__)
    """),
    "cross_entropy from a distribution's log_prob traced into TorchScript at import": ("cross_entropy", """
        flat, wanted = logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)
        return _rt_traced(flat, wanted)
    """, "torch.jit", """
        _rt_traced = torch.jit.trace(
            lambda scores, wanted: -torch.distributions.Categorical(logits=scores, validate_args=False)
            .log_prob(wanted).mean(), (torch.randn(3, 5), torch.tensor([0, 1, 4])), check_trace=False)
    """),
    "attention from torch.ao's quantizable MultiheadAttention, given the task's projections": ("attention", """
        q = self.split_heads(self.q_proj(x))
        k = self.split_heads(self.k_proj(x))
        v = self.split_heads(self.v_proj(x))
        if past_key_value is not None:
            k = torch.cat([past_key_value[0], k], dim=2)
            v = torch.cat([past_key_value[1], v], dim=2)
        d, T, total = x.shape[-1], x.shape[1], k.shape[2]
        layer = torch.ao.nn.quantizable.MultiheadAttention(d, self.n_heads, bias=False, dtype=x.dtype)
        with torch.no_grad():
            layer.linear_Q.weight.copy_(self.q_proj.weight)
            layer.linear_K.weight.copy_(torch.eye(d, dtype=x.dtype))
            layer.linear_V.weight.copy_(torch.eye(d, dtype=x.dtype))
            layer.out_proj.weight.copy_(self.o_proj.weight)
        future = torch.ones(T, total, dtype=torch.bool).tril(total - T).logical_not()
        time_first = lambda t: t.transpose(0, 1)
        out, weights = layer(time_first(x), time_first(self.merge_heads(k)), time_first(self.merge_heads(v)),
                             attn_mask=future, need_weights=True, average_attn_weights=False)
        self.last_attention = weights
        return time_first(out), ((k, v) if use_cache else None)
    """, "torch.ao.nn.quantizable", ""),
    "layer_norm from a private torch._refs helper no rule names": ("layer_norm", """
        normalised, _, _ = getattr(getattr(torch, "_" + "refs"), "_normalize")(x, [x.dim() - 1], self.eps)
        return normalised * self.weight + self.bias
    """, "torch._refs", ""),
    "adamw_step from torch's sparse Adam, the decay decoupled by hand": ("adamw_step", """
        beta1, beta2 = self.betas
        functional = getattr(torch.optim, "_func" + "tional")
        for i, p in enumerate(self.params):
            if p.grad is None:
                continue
            self.steps[i] += 1
            p.mul_(1.0 - self.lr * self.weight_decay)
            functional.sparse_adam([p], [p.grad.to_sparse()], [self.exp_avg[i]], [self.exp_avg_sq[i]], [self.steps[i]],
                                   eps=self.eps * math.sqrt(1.0 - beta2 ** self.steps[i]), beta1=beta1, beta2=beta2,
                                   lr=self.lr, maximize=False)
    """, "torch.optim._functional", ""),
    "adamw_step with its moments from the averaging helpers of torch.optim.swa_utils": ("adamw_step", """
        beta1, beta2 = self.betas
        for i, p in enumerate(self.params):
            if p.grad is None:
                continue
            self.steps[i] += 1
            t = self.steps[i]
            p.mul_(1.0 - self.lr * self.weight_decay)
            m = torch.optim.swa_utils.get_ema_avg_fn(beta1)(self.exp_avg[i], p.grad, t)
            v = torch.optim.swa_utils.get_ema_avg_fn(beta2)(self.exp_avg_sq[i], p.grad * p.grad, t)
            self.exp_avg[i].copy_(m)
            self.exp_avg_sq[i].copy_(v)
            denom = (v.sqrt() / math.sqrt(1.0 - beta2 ** t)).add_(self.eps)
            p.addcdiv_(m, denom, value=-self.lr / (1.0 - beta1 ** t))
    """, "torch.optim.swa_utils", ""),
}


@needs_bwrap
@pytest.mark.parametrize("case", list(SHORTCUTS))
def test_torchs_library_doing_the_task_is_refused_and_named(reference, sandbox, case):
    task_name, body, module, append = SHORTCUTS[case]
    sources = hostile_sources(reference, {task_name: body}, append)
    declared = catalogue.tasks()[task_name]
    assert not scan(sources[f"{declared.module}.py"], declared.qualname, declared.forbidden,
                    declared.forbidden_methods), "the static scan already sees this shortcut"
    results = run(reference, sandbox, task_name, body, append=append)
    assert results and {r.status for r in results} == {FORBIDDEN}, [(r.check.name, r.status, r.diagnosis)
                                                                     for r in results]
    assert all(module in r.diagnosis and "torch's own implementation" in r.diagnosis for r in results), (
        results[0].diagnosis)


# The forms the lessons allow, written as a student would: each keeps every point.
FAIR = {
    "gelu as x * torch.special.ndtr(x)": ("gelu", """
        return x * torch.special.ndtr(x)
    """),
    "gelu as x * Normal(0, 1).cdf(x)": ("gelu", """
        return x * torch.distributions.Normal(0.0, 1.0).cdf(x)
    """),
    "feedforward with Φ from Normal(0, 1).cdf written inline": ("feedforward", """
        hidden = self.fc1(x)
        return self.fc2(hidden * torch.distributions.Normal(0.0, 1.0).cdf(hidden))
    """),
    "gelu_backward from Normal(0, 1)'s cdf and density": ("gelu_backward", """
        normal = torch.distributions.Normal(torch.zeros((), dtype=x.dtype), torch.ones((), dtype=x.dtype))
        return grad_out * (normal.cdf(x) + x * normal.log_prob(x).exp())
    """),
    "cross_entropy as logsumexp − gather": ("cross_entropy", """
        flat, wanted = logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)
        return (torch.logsumexp(flat, dim=-1) - flat.gather(-1, wanted.unsqueeze(-1)).squeeze(-1)).mean()
    """),
    "layer_norm with torch.var_mean": ("layer_norm", """
        variance, mean = torch.var_mean(x, dim=-1, keepdim=True, correction=0)
        return (x - mean) / torch.sqrt(variance + self.eps) * self.weight + self.bias
    """),
    "attention with torch.einsum and F.softmax": ("attention", """
        q = self.split_heads(self.q_proj(x))
        k = self.split_heads(self.k_proj(x))
        v = self.split_heads(self.v_proj(x))
        if past_key_value is not None:
            k = torch.cat([past_key_value[0], k], dim=2)
            v = torch.cat([past_key_value[1], v], dim=2)
        T, total = q.shape[2], k.shape[2]
        allowed = torch.ones(T, total, dtype=torch.bool).tril(total - T)
        scores = torch.einsum("bhtd,bhsd->bhts", q, k) / math.sqrt(self.d_head)
        weights = torch.nn.functional.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
        self.last_attention = weights
        out = self.merge_heads(self.attn_dropout(weights) @ v)
        return self.o_proj(out), ((k, v) if use_cache else None)
    """),
    "clip_grad_norm with torch.norm and split, printing the norm": ("clip_grad_norm", """
        if isinstance(parameters, torch.Tensor):
            parameters = [parameters]
        grads = list({id(p): p.grad for p in parameters if p.grad is not None}.values())
        if not grads:
            return torch.tensor(0.0)
        flat = torch.cat([g.reshape(-1) for g in grads])
        total = torch.norm(torch.stack([piece.norm() for piece in flat.split(7)]))
        print("norm before clipping", total)
        scale = torch.clamp(max_norm / (total + 1e-6), max=1.0)
        for g in grads:
            g.mul_(scale.to(g.dtype))
        return total
    """),
    "clip_grad_norm with every gradient as one vector from parameters_to_vector": ("clip_grad_norm", """
        if isinstance(parameters, torch.Tensor):
            parameters = [parameters]
        grads = list({id(p): p.grad for p in parameters if p.grad is not None}.values())
        if not grads:
            return torch.tensor(0.0)
        total = torch.nn.utils.parameters_to_vector(grads).norm()
        scale = torch.clamp(max_norm / (total + 1e-6), max=1.0)
        for g in grads:
            g.mul_(scale.to(g.dtype))
        return total
    """),
}


@needs_bwrap
@pytest.mark.parametrize("case", list(FAIR))
def test_what_the_lesson_allows_keeps_every_point(reference, sandbox, case):
    task_name, body = FAIR[case]
    results = run(reference, sandbox, task_name, body)
    assert results
    lost = [(r.check.name, r.status, r.diagnosis) for r in results if r.status != PASSED]
    assert not lost, lost


# ------------------------------------------------------------ without a sandbox


def _judged(task_name: str, body) -> list[dict]:
    """What the task's rule records while `body` runs, in this process (the dispatch and
    function layers only: the kernel table and torch's code refused in place are armed
    in a worker, never here)."""
    declared = catalogue.tasks()[task_name]
    tripped: list[dict] = []
    try:
        with op_rules.watching(op_rules.Rules(declared.forbidden_ops, declared.no_autograd), tripped):
            body()
    except op_rules.ForbiddenCall:
        pass
    return tripped


def test_the_call_named_is_what_the_submission_called_and_is_repeated_to_the_student():
    logits, targets = torch.randn(4, 5, dtype=torch.float64), torch.tensor([0, 3, 1, 4])
    tripped = _judged("cross_entropy", lambda: torch.distributions.Categorical(logits=logits).log_prob(targets))
    # Named by the call the student made: the module of torch's code and what in it was called.
    assert tripped == [{"kind": "library", "name": "torch.distributions.categorical.Categorical.__init__"}], tripped
    said = _forbidden_call_text(CaughtCall.of(tripped[0]), catalogue.tasks()["cross_entropy"])
    assert "(torch.distributions.categorical.Categorical.__init__)" in said, said
    # A name a submission made up is not repeated: only a module of torch's own code and a
    # short qualified name in it.
    for forged in ("torch.distributions.categorical.Categorical.a.b.c.d", "torch.no_such_module"):
        assert forged not in _forbidden_call_text(CaughtCall.of({"kind": "library", "name": forged}),
                                                   catalogue.tasks()["cross_entropy"])


def test_a_fair_helper_run_by_unfair_code_is_unfair():
    # torch.functional.broadcast_tensors is fair anywhere; a distribution's log_prob runs it.
    value = torch.tensor([0, 1])
    tripped = _judged("layer_norm", lambda: torch.distributions.Categorical(logits=torch.zeros(2, 3)).log_prob(value))
    assert tripped and tripped[0]["name"].startswith("torch.distributions.categorical."), tripped
    assert _judged("layer_norm", lambda: torch.broadcast_tensors(torch.zeros(2, 1), torch.zeros(1, 3))) == []


def test_a_building_block_is_fair_only_in_the_task_that_names_it():
    x = torch.linspace(-3, 3, 7, dtype=torch.float64)
    normal_cdf = lambda: x * torch.distributions.Normal(0.0, 1.0).cdf(x)
    assert _judged("gelu", normal_cdf) == []
    assert _judged("cross_entropy", normal_cdf) == [{"kind": "library", "name": "torch.distributions.normal.Normal.__init__"}]


def test_torch_code_the_grader_or_the_submission_reaches_through_a_mode_is_still_judged():
    # A mode's handler, the submission's or the grader's own (chapter 04's probe keeps one),
    # is looked through: the code that called torch decides, not the handler in between.
    class Passing(torch.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    logits, targets = torch.randn(3, 4), torch.tensor([0, 1, 2])

    def through_a_mode():
        with Passing():
            torch.distributions.Categorical(logits=logits).log_prob(targets)

    assert _judged("cross_entropy", through_a_mode)[0]["name"].startswith("torch.distributions.categorical.")


def _torch_code_names() -> set[str]:
    """module.qualname of every function torch's loaded modules hold, and their classes'."""
    import sys
    import types
    import warnings

    names = set()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a deprecated name of torch's warns when looked at
        for name, module in list(sys.modules.items()):
            if module is None or not (name == "torch" or name.startswith("torch.")):
                continue
            for value in list(vars(module).values()):
                for member in (list(vars(value).values()) if isinstance(value, type) else [value]):
                    function = member.__func__ if isinstance(member, (staticmethod, classmethod)) else member
                    if isinstance(function, types.FunctionType) and op_rules.code_name(function.__code__):
                        names.add(op_rules.code_name(function.__code__))
    return names


def test_every_fair_pattern_still_names_code_of_this_torch():
    """A pattern left behind by a torch release that moved its code would make a fair
    form unfair without a word: each of those fair everywhere and each task's building
    blocks must match some function torch defines (those of code a function makes at run
    time, '<locals>', '<module>', aside)."""
    from fnmatch import fnmatchcase

    import torch.distributions  # noqa: F401 - the building blocks' modules

    names = _torch_code_names()
    blocks = {block for task in catalogue.tasks().values()
              for block in op_rules.Rules(task.forbidden_ops).building_blocks}
    patterns = [p for p in op_rules.FAIR_EVERYWHERE + tuple(sorted(blocks)) if "<" not in p]
    unmatched = [p for p in patterns if not any(fnmatchcase(name, p) for name in names)]
    assert not unmatched, unmatched


def test_every_task_with_operator_rules_judges_torchs_library_by_where_it_runs():
    for task in catalogue.tasks().values():
        if task.forbidden_ops:
            assert op_rules.Rules(task.forbidden_ops).by_where, task.name


@needs_bwrap
def test_a_rule_made_to_call_everything_fair_is_reported(reference, sandbox):
    # The rule's class is compared after every probe with the class as imported before
    # any student code, like the recorder's handlers.
    body = SHORTCUTS["cross_entropy from a distribution's log_prob"][1]
    append = """
        import sys as _rt_sys
        _rt_sys.modules["grader.run.inside." + "op_rules"].Rules.fair = lambda self, name: True
    """
    results = run(reference, sandbox, "cross_entropy", body, append=append)
    assert results and {r.status for r in results} == {FORBIDDEN}, [(r.check.name, r.status, r.diagnosis)
                                                                     for r in results]
