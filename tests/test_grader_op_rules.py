"""The run-time operator rules (grader/run/inside/op_rules.py): a shortcut scores
'forbidden' whatever its spelling, because the worker records the torch operators a
probe actually runs; correct code written with unusual operators keeps its points.

Every shortcut here is spelled so that the static scan cannot see it (getattr with a
string, or a public name no task lists), and the tamper scan is off, so each test
proves the recorder itself.
"""

from __future__ import annotations

import pytest

from grader.checks import catalogue
from grader.run.feedback import forbidden_words
from grader.run.results import FORBIDDEN, PASSED
from grader.run.scan_calls import scan
from grader.run.inside.messages import CaughtCall

from tests.hostile import hostile_sources, run

SHORTCUTS = {
    "layer_norm via torch.group_norm": ("layer_norm", """
        flat = x.reshape(-1, 1, x.shape[-1])
        return torch.group_norm(flat, 1, None, None, self.eps).reshape(x.shape) * self.weight + self.bias
    """, "group_norm"),
    "gelu via getattr(torch.ops, 'aten').gelu": ("gelu", """
        return getattr(torch, "o" + "ps").aten.gelu(x)
    """, "gelu"),
    "feedforward via the fused addmm + gelu kernel": ("feedforward", """
        aten = getattr(torch, "o" + "ps").aten
        hidden = aten._addmm_activation(self.fc1.bias, x.reshape(-1, x.shape[-1]), self.fc1.weight.T, use_gelu=True)
        return self.fc2(hidden.reshape(*x.shape[:-1], -1))
    """, "_addmm_activation"),
    "attention via getattr scaled_dot_product_attention": ("attention", """
        q = self.split_heads(self.q_proj(x))
        k = self.split_heads(self.k_proj(x))
        v = self.split_heads(self.v_proj(x))
        if past_key_value is not None:
            k = torch.cat([past_key_value[0], k], dim=2)
            v = torch.cat([past_key_value[1], v], dim=2)
        T, total = q.shape[2], k.shape[2]
        mask = torch.ones(T, total, dtype=torch.bool).tril(total - T)
        attend = getattr(getattr(torch, "_" + "C"), "_nn").scaled_dot_product_attention
        out = attend(q, k, v, attn_mask=mask)
        self.last_attention = torch.softmax((q @ k.transpose(-2, -1) / math.sqrt(self.d_head)).masked_fill(~mask, float("-inf")), -1)
        return self.o_proj(self.merge_heads(out)), ((k, v) if use_cache else None)
    """, "scaled_dot_product_attention"),
    "embedding via getattr(torch.ops, 'aten').embedding": ("embedding", """
        return getattr(torch, "o" + "ps").aten.embedding(self.weight, idx.long())
    """, "embedding"),
    "cross_entropy via getattr log_softmax and nll_loss": ("cross_entropy", """
        flat = logits.reshape(-1, logits.shape[-1])
        return getattr(torch.nn.functional, "nll" + "_loss")(getattr(flat, "log" + "_softmax")(-1), targets.reshape(-1))
    """, "log_softmax"),
    "layer_norm_backward via forward-mode autograd": ("layer_norm_backward", """
        dual = getattr(torch.autograd, "forward_ad")
        d = x.shape[-1]
        dx = torch.zeros_like(x)
        with dual.dual_level():
            for i in range(d):
                tangent = torch.zeros_like(x)
                tangent[..., i] = 1.0
                y = _layer_norm(dual.make_dual(x, tangent), gamma, torch.zeros_like(gamma), eps)
                dx[..., i] = (dual.unpack_dual(y).tangent * grad_out).sum(-1)
        mean = x.mean(-1, keepdim=True)
        normalised = (x - mean) / torch.sqrt(((x - mean) ** 2).mean(-1, keepdim=True) + eps)
        flat = lambda t: t.reshape(-1, t.shape[-1])
        return dx, flat(grad_out * normalised).sum(0), flat(grad_out).sum(0)
    """, "forward-mode autograd"),
    "gelu_backward via reverse-mode autograd behind getattr": ("gelu_backward", """
        leaf = x.detach().clone()
        getattr(leaf, "requires_" + "grad_")()
        with torch.enable_grad():
            y = 0.5 * leaf * (1.0 + torch.erf(leaf / math.sqrt(2.0)))
        return getattr(torch.autograd, "gr" + "ad")((y * grad_out).sum(), leaf)[0]
    """, "autograd"),
    "gelu_backward via torch.func.jvp behind getattr": ("gelu_backward", """
        jvp = getattr(getattr(torch, "func"), "jvp")
        f = lambda a: 0.5 * a * (1.0 + torch.erf(a / math.sqrt(2.0)))
        return grad_out * jvp(f, (x,), (torch.ones_like(x),))[1]
    """, "forward-mode autograd"),
    "gelu_backward via aten's backward kernel": ("gelu_backward", """
        return getattr(torch, "o" + "ps").aten.gelu_backward(grad_out, x)
    """, "gelu_backward"),
    "adamw_step via torch._fused_adamw_ behind getattr": ("adamw_step", """
        beta1, beta2 = self.betas
        fused = getattr(torch, "_fused_" + "adamw_")
        for i, p in enumerate(self.params):
            if p.grad is None:
                continue
            self.steps[i] += 1
            step = torch.tensor(float(self.steps[i]), dtype=p.dtype)
            fused([p], [p.grad], [self.exp_avg[i]], [self.exp_avg_sq[i]], [], [step], lr=self.lr, beta1=beta1,
                  beta2=beta2, weight_decay=self.weight_decay, eps=self.eps, amsgrad=False, maximize=False)
    """, "_fused_adamw_"),
    "clip_grad_norm via the private clip helpers behind getattr": ("clip_grad_norm", """
        helpers = getattr(torch.nn.utils, "clip_" + "grad")
        if isinstance(parameters, torch.Tensor):
            parameters = [parameters]
        unique = list({id(p): p for p in parameters if p.grad is not None}.values())
        if not unique:
            return torch.tensor(0.0)
        total = getattr(helpers, "_get_total" + "_norm")([p.grad for p in unique], 2.0)
        getattr(helpers, "_clip_grads" + "_with_norm_")(unique, max_norm, total)
        return total
    """, "torch.nn.utils.clip_grad"),
    "layer_norm computed in a thread": ("layer_norm", """
        import threading
        out = []
        worker = threading.Thread(target=lambda: out.append(torch.group_norm(
            x.reshape(-1, 1, x.shape[-1]), 1).reshape(x.shape) * self.weight + self.bias))
        worker.start()
        worker.join()
        return out[0]
    """, "thread"),
    "gelu with the recorder's dispatch mode popped": ("gelu", """
        modes = getattr(torch.utils, "_python" + "_dispatch")
        with modes._disable_current_modes():
            return getattr(torch, "o" + "ps").aten.gelu(x)
    """, "recorder"),
}


@pytest.mark.parametrize("case", list(SHORTCUTS))
def test_a_shortcut_is_forbidden_whatever_its_spelling(reference, sandbox, case):
    task_name, body, named = SHORTCUTS[case]
    sources = hostile_sources(reference, {task_name: body})
    declared = catalogue.tasks()[task_name]
    assert not scan(sources[f"{declared.module}.py"], declared.qualname, declared.forbidden,
                    declared.forbidden_methods), "the static scan already sees this shortcut"
    results = run(reference, sandbox, task_name, body)
    assert results and {r.status for r in results} == {FORBIDDEN}, [(r.check.name, r.status, r.diagnosis)
                                                                     for r in results]
    assert all(named in r.diagnosis for r in results), results[0].diagnosis


CORRECT = {
    "layer_norm via torch.var_mean": ("layer_norm", """
        variance, mean = torch.var_mean(x, dim=-1, keepdim=True, correction=0)
        return (x - mean) * torch.rsqrt(variance + self.eps) * self.weight + self.bias
    """),
    "layer_norm via einsum": ("layer_norm", """
        d = x.shape[-1]
        average = torch.full((d, d), 1.0 / d, dtype=x.dtype)
        centred = x - torch.einsum("...i,ij->...j", x, average)
        variance = torch.einsum("...i,ij->...j", centred * centred, average)
        return centred / torch.sqrt(variance + self.eps) * self.weight + self.bias
    """),
    "gelu via torch.special.ndtr": ("gelu", """
        return x * torch.special.ndtr(x)
    """),
    "gelu via torch.erfc": ("gelu", """
        return 0.5 * x * torch.erfc(-x / math.sqrt(2.0))
    """),
    "cross_entropy via logsumexp": ("cross_entropy", """
        flat, wanted = logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)
        picked = flat.gather(-1, wanted.unsqueeze(-1)).squeeze(-1)
        return (torch.logsumexp(flat, dim=-1) - picked).mean()
    """),
    "attention with softmax from exp and sum": ("attention", """
        q = self.split_heads(self.q_proj(x))
        k = self.split_heads(self.k_proj(x))
        v = self.split_heads(self.v_proj(x))
        if past_key_value is not None:
            k = torch.cat([past_key_value[0], k], dim=2)
            v = torch.cat([past_key_value[1], v], dim=2)
        T, total = q.shape[2], k.shape[2]
        allowed = torch.ones(T, total, dtype=torch.bool).tril(total - T)
        scores = torch.einsum("bhtd,bhsd->bhts", q, k) / math.sqrt(self.d_head)
        scores = torch.where(allowed, scores, torch.full_like(scores, float("-inf")))
        weights = torch.exp(scores - scores.max(dim=-1, keepdim=True).values)
        weights = weights / weights.sum(dim=-1, keepdim=True)
        self.last_attention = weights
        out = self.merge_heads(self.attn_dropout(weights) @ v)
        return self.o_proj(out), ((k, v) if use_cache else None)
    """),
    "gelu_backward printing its tensors": ("gelu_backward", """
        cdf = 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0)))
        pdf = torch.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
        print(f"cdf {cdf.shape}", cdf.flatten()[:2])
        return grad_out * (cdf + x * pdf)
    """),
}


@pytest.mark.parametrize("case", list(CORRECT))
def test_correct_code_with_unusual_operators_keeps_every_point(reference, sandbox, case):
    task_name, body = CORRECT[case]
    results = run(reference, sandbox, task_name, body)
    assert results
    lost = [(r.check.name, r.status, r.diagnosis) for r in results if r.status != PASSED]
    assert not lost, lost


def test_the_recorder_leaves_no_mode_behind_and_reports_tampering():
    import torch

    from grader.run.inside import op_rules

    rules = op_rules.Rules(("native_group_norm",))
    x = torch.randn(2, 4, dtype=torch.float64)
    tripped: list[dict] = []
    with op_rules.watching(rules, tripped):
        torch.var_mean(x, -1)
    assert tripped == []
    with pytest.raises(op_rules.ForbiddenCall):
        with op_rules.watching(rules, tripped):
            torch.group_norm(x.reshape(2, 1, 4), 1)
    assert tripped[0] == {"kind": "op", "layer": "kernel", "name": "native_group_norm"}
    said = forbidden_words(CaughtCall.of(tripped[0]))
    assert "aten.native_group_norm" in said and "mean and the variance" in said
    tripped.clear()
    with op_rules.watching(rules, tripped):
        torch.utils._python_dispatch._pop_mode()
    assert any(code["kind"] == "recorder_off" for code in tripped), tripped
    assert any("switched off" in forbidden_words(CaughtCall.of(code)) for code in tripped), tripped
    assert torch._C._len_torch_dispatch_stack() == 0 and torch._C._len_torch_function_stack() == 0
    tripped.clear()
    with op_rules.watching(op_rules.Rules(), tripped):  # no rule: no mode at all
        assert torch._C._len_torch_dispatch_stack() == 0
