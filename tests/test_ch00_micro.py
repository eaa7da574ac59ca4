"""Chapter 00: the scalar-autograd GPT of hero_transformer/micro.py.

The decisive check is the cross-check at the bottom: a torch twin of the same
architecture (RMSNorm without gain, no biases, ReLU, 4 heads, no final norm), loaded
with the scalar model's weights, gives the same logits, loss and gradients in float64.
"""

from __future__ import annotations

import ast
import math
import random
import string

import pytest
import torch
import torch.nn.functional as F

from hero_transformer import micro
from hero_transformer.micro import Adam, MicroGPT, Value, document_loss, parameter_count, rmsnorm, sample, softmax
from hero_transformer.tokenizer import CharTokenizer

V_NAMES = 27  # a-z + BOS


@pytest.fixture(scope="module")
def tokenizer():
    # The same 27-id vocabulary as the names list (26 letters, BOS = 26), without the data.
    return CharTokenizer([string.ascii_lowercase])


@pytest.fixture(scope="module")
def model():
    return MicroGPT(V_NAMES, seed=0)


def spread_weights(model, std=0.5, seed=1):
    """Larger weights than the 0.08 init, so attention is far from uniform."""
    rng = random.Random(seed)
    for p in model.params:
        p.data = rng.gauss(0.0, std)
    return model


def run(model, ids):
    """Logits (as floats) of every position of ids, one sequence."""
    model.start_sequence()
    out = [[v.data for v in model.forward(token, pos)] for pos, token in enumerate(ids)]
    model.finish_sequence()
    return out


# ------------------------------------------------------------------ scalar autograd


def test_value_ops_and_backward_match_torch_autograd():
    a, b, c = Value(1.3), Value(-0.7), Value(2.1)
    y = ((a * b + c) ** 2).exp() / (c - a).log() + (b * 3.0).relu() - (-c).relu() * a
    y = 2.0 - y / 4.0 + 1.5 / (a + 2.0) + 0.5 * b - (a ** -0.5)
    y.backward()

    ta, tb, tc = (torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in (1.3, -0.7, 2.1))
    t = ((ta * tb + tc) ** 2).exp() / (tc - ta).log() + (tb * 3.0).relu() - (-tc).relu() * ta
    t = 2.0 - t / 4.0 + 1.5 / (ta + 2.0) + 0.5 * tb - ta**-0.5
    t.backward()

    assert y.data == pytest.approx(t.item(), rel=1e-12)
    for value, tensor in ((a, ta), (b, tb), (c, tc)):
        assert value.grad == pytest.approx(tensor.grad.item(), rel=1e-12, abs=1e-15)


def test_each_primitive_gradient_against_finite_differences():
    h = 1e-6
    cases = {
        "add": lambda x: x + 0.3,
        "mul": lambda x: x * x * 1.7,
        "pow": lambda x: x**3.5,
        "exp": lambda x: x.exp(),
        "log": lambda x: x.log(),
        "relu": lambda x: (x - 0.2).relu(),
        "div": lambda x: 1.0 / x,
    }
    for name, f in cases.items():
        x = Value(0.9)
        f(x).backward()
        numeric = (f(Value(0.9 + h)).data - f(Value(0.9 - h)).data) / (2 * h)
        assert x.grad == pytest.approx(numeric, rel=1e-6), name


def test_backward_adds_the_contributions_of_a_reused_node():
    x = Value(3.0)
    y = x * x + x  # dy/dx = 2x + 1
    y.backward()
    assert x.grad == 7.0
    (x * 2.0).backward()  # leaf grads accumulate across graphs
    assert x.grad == 9.0


def test_backward_walks_a_graph_deeper_than_the_recursion_limit():
    x = Value(1.0)
    y = x
    for _ in range(5000):
        y = y + x * 1.0
    y.backward()
    assert x.grad == 5001.0


def test_relu_at_zero_and_log_of_zero():
    x = Value(0.0)
    x.relu().backward()
    assert x.grad == 0.0
    with pytest.raises(ValueError):
        Value(0.0).log()


# ------------------------------------------------------------- norm and softmax


def test_rmsnorm_values_and_gradient():
    out = rmsnorm([Value(1.0), Value(3.0)])  # mean of squares = 5
    assert [v.data for v in out] == pytest.approx([1 / math.sqrt(5.00001), 3 / math.sqrt(5.00001)], rel=1e-14)
    # no gain, no mean shift: a constant vector stays (almost exactly) constant at 1
    assert [v.data for v in rmsnorm([Value(2.0)] * 4)] == pytest.approx([2 / math.sqrt(4.00001)] * 4)

    xs = [Value(v) for v in (0.5, -1.2, 2.0, 0.1)]
    weights = (0.3, -0.8, 1.1, 0.4)
    micro.vsum([w * v for w, v in zip(weights, rmsnorm(xs))]).backward()
    tx = torch.tensor([0.5, -1.2, 2.0, 0.1], dtype=torch.float64, requires_grad=True)
    ty = tx / torch.sqrt((tx * tx).mean() + 1e-5)
    (ty * torch.tensor(weights, dtype=torch.float64)).sum().backward()
    assert [v.grad for v in xs] == pytest.approx(tx.grad.tolist(), rel=1e-12)


def test_softmax_is_stable_and_sums_to_one():
    probs = softmax([Value(1000.0), Value(1001.0), Value(999.0)])
    expected = torch.softmax(torch.tensor([1000.0, 1001.0, 999.0], dtype=torch.float64), 0).tolist()
    assert [p.data for p in probs] == pytest.approx(expected, rel=1e-14)
    assert sum(p.data for p in probs) == pytest.approx(1.0, abs=1e-15)


# --------------------------------------------------------- parameters and tables


def test_4192_parameters_for_the_names_vocabulary(model):
    assert parameter_count(V_NAMES) == 4192
    assert len(model.params) == 4192
    assert len({id(p) for p in model.params}) == 4192  # every entry is its own leaf
    E = 16
    shapes = {name: (len(t), len(t[0])) for name, t in model.state.items()}
    assert shapes == {
        "wte": (V_NAMES, E), "wpe": (16, E),
        "layer0.wq": (E, E), "layer0.wk": (E, E), "layer0.wv": (E, E), "layer0.wo": (E, E),
        "layer0.fc1": (4 * E, E), "layer0.fc2": (E, 4 * E),
        "lm_head": (V_NAMES, E),
    }


def test_the_count_comes_from_the_real_names_list():
    from hero_transformer.data import load_names

    tok = CharTokenizer(load_names())
    assert tok.vocab_size == V_NAMES
    assert len(MicroGPT(tok.vocab_size).params) == 4192


def test_parameter_formula_for_other_sizes():
    m = MicroGPT(10, n_embd=8, n_layer=2, block_size=5, n_head=2, mlp_ratio=3)
    assert len(m.params) == parameter_count(10, 8, 2, 5, 3) == 2 * 10 * 8 + 5 * 8 + 2 * (4 * 64 + 2 * 3 * 64)


def test_constructor_rejects_a_wrong_count(monkeypatch):
    make_tables = MicroGPT._make_tables

    def lm_head_one_row_short(self, rng):
        tables = make_tables(self, rng)
        tables["lm_head"] = tables["lm_head"][:-1]
        return tables

    monkeypatch.setattr(MicroGPT, "_make_tables", lm_head_one_row_short)
    with pytest.raises(ValueError, match=r"4176 parameters but .* = 4192"):
        MicroGPT(V_NAMES)

    def with_a_logit_bias(self, rng):
        tables = make_tables(self, rng)
        tables["lm_bias"] = [[Value(0.0) for _ in range(self.vocab_size)]]
        return tables

    monkeypatch.setattr(MicroGPT, "_make_tables", with_a_logit_bias)
    with pytest.raises(ValueError, match="4219 parameters"):
        MicroGPT(V_NAMES)


def test_init_std_and_seeding(model):
    data = [p.data for p in model.params]
    mean = sum(data) / len(data)
    std = math.sqrt(sum((d - mean) ** 2 for d in data) / len(data))
    assert abs(mean) < 0.01 and 0.075 < std < 0.085
    assert [p.data for p in MicroGPT(V_NAMES, seed=0).params] == data
    assert [p.data for p in MicroGPT(V_NAMES, seed=1).params] != data


def test_adam_moments_are_not_parameters():
    m = MicroGPT(V_NAMES)
    opt = Adam(m.params)
    assert len(m.params) == 4192 and len(opt.params) == 4192
    assert all(isinstance(x, float) for x in opt.m + opt.v)


# ----------------------------------------------------------- the ana walk-through


def test_ana_walk_through(model, tokenizer):
    ids = tokenizer.encode_document("ana")
    assert ids == [26, 0, 13, 0, 26]
    assert micro.scored_positions(model, ids) == 4
    model.start_sequence()
    for pos in range(4):
        logits = model.forward(ids[pos], pos)
        assert len(logits) == V_NAMES  # V logits, not E
        for head in range(4):
            row = model.last_attention[0][head]
            assert len(row) == pos + 1
            assert sum(row) == pytest.approx(1.0, abs=1e-12)
    assert ids[4] == tokenizer.bos_id  # the last scored position's target is the closing BOS
    assert [len(model.last_attention[0][h]) for h in range(4)] == [4, 4, 4, 4]
    assert model.cache_length() == 4
    model.finish_sequence()


def test_long_document_scores_only_the_window(model, tokenizer):
    ids = tokenizer.encode_document("abcdefghijklmnopqrst")  # 22 ids
    assert micro.scored_positions(model, ids) == 16
    document_loss(model, ids)
    assert model.cache_length() == 16
    with pytest.raises(ValueError):
        micro.scored_positions(model, [tokenizer.bos_id])


# ------------------------------------------------------------- sequence handling


def test_sequence_protocol_errors(model):
    model.finish_sequence()
    with pytest.raises(RuntimeError, match="start_sequence"):
        model.forward(0, 0)
    model.start_sequence()
    with pytest.raises(ValueError, match="out of order"):
        model.forward(0, 1)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        model.forward(V_NAMES, 0)
    with pytest.raises(ValueError, match="block_size is 16"):
        model.forward(0, 16)
    for pos in range(16):
        model.forward(0, pos)
    with pytest.raises(ValueError, match="block_size is 16"):
        model.forward(0, 16)
    model.start_sequence()  # clears every cache: position 0 is next again
    assert model.cache_length() == 0
    model.forward(0, 0)
    model.finish_sequence()
    assert model.cache is None and len(model.params) == 4192


def test_start_sequence_gives_the_same_logits_again(model):
    ids = [26, 3, 7, 1]
    assert run(model, ids) == run(model, ids)


def test_causal_later_tokens_do_not_change_earlier_logits():
    m = spread_weights(MicroGPT(V_NAMES, seed=3))
    a = run(m, [26, 4, 9, 2, 11, 5])
    b = run(m, [26, 4, 9, 20, 0, 17])
    assert a[:3] == b[:3]
    assert a[3] != b[3]


# ---------------------------------------------------------------- loss and Adam


def test_document_loss_is_the_mean_nll(model, tokenizer):
    ids = tokenizer.encode_document("emma")
    loss = document_loss(model, ids)
    logits = run(model, ids[:-1])
    expected = sum(
        -torch.log_softmax(torch.tensor(row, dtype=torch.float64), 0)[target].item()
        for row, target in zip(logits, ids[1:])
    ) / (len(ids) - 1)
    assert loss.data == pytest.approx(expected, rel=1e-12)
    assert loss.data == pytest.approx(math.log(V_NAMES), rel=0.1)  # near-uniform at init


def test_adam_step_by_hand():
    p, q = Value(0.5), Value(-1.0)
    opt = Adam([p, q], lr=0.1, beta1=0.85, beta2=0.99, eps=1e-8, total_steps=4)
    grads = [(0.2, -3.0), (-0.1, 1.0)]
    m, v, expected = [0.0, 0.0], [0.0, 0.0], [0.5, -1.0]
    for t, (gp, gq) in enumerate(grads):
        p.grad, q.grad = gp, gq
        opt.step()
        lr_t = 0.1 * (1 - t / 4)
        for i, g in enumerate((gp, gq)):
            m[i] = 0.85 * m[i] + 0.15 * g
            v[i] = 0.99 * v[i] + 0.01 * g * g
            m_hat, v_hat = m[i] / (1 - 0.85 ** (t + 1)), v[i] / (1 - 0.99 ** (t + 1))
            expected[i] -= lr_t * m_hat / (math.sqrt(v_hat) + 1e-8)
        assert [p.data, q.data] == pytest.approx(expected, rel=1e-14)
        assert p.grad == 0.0 and q.grad == 0.0
    assert opt.t == 2
    # thanks to the bias correction, the first step moves a parameter by about lr,
    # whatever the size of its gradient
    for g in (1e-3, 50.0):
        r = Value(0.0)
        r.grad = g
        Adam([r], lr=0.1).step()
        assert r.data == pytest.approx(-0.1, rel=1e-4)


def test_a_few_steps_on_one_name_lower_its_loss(tokenizer):
    m = MicroGPT(V_NAMES, seed=5)
    opt = Adam(m.params, lr=0.01, total_steps=10)
    ids = tokenizer.encode_document("olivia")
    first = micro.train_step(m, opt, ids)
    for _ in range(4):
        last = micro.train_step(m, opt, ids)
    assert last < first - 0.3
    assert all(p.grad == 0.0 for p in m.params)


# -------------------------------------------------------------------- sampling


class ScriptedModel:
    """Stands in for MicroGPT: position p strongly prefers script[p]."""

    def __init__(self, script, vocab_size=V_NAMES, block_size=16):
        self.script, self.vocab_size, self.block_size = script, vocab_size, block_size
        self.calls = []

    def start_sequence(self):
        self.calls.clear()

    def finish_sequence(self):
        pass

    def forward(self, token_id, pos):
        self.calls.append((token_id, pos))
        want = self.script[pos] if pos < len(self.script) else 0
        return [Value(50.0 if v == want else 0.0) for v in range(self.vocab_size)]


def test_sampling_stops_at_bos(tokenizer):
    fake = ScriptedModel([0, 1, tokenizer.bos_id, 2, 3])
    assert sample(fake, tokenizer, 1.0, random.Random(0)) == "ab"
    assert fake.calls == [(tokenizer.bos_id, 0), (0, 1), (1, 2)]  # fed back, positions in order


def test_sampling_stops_at_block_size(tokenizer):
    fake = ScriptedModel([])  # always "a", never BOS
    assert sample(fake, tokenizer, 1.0, random.Random(0)) == "a" * 16
    assert [pos for _, pos in fake.calls] == list(range(16))


def test_sampling_is_seeded_and_repeatable(model, tokenizer):
    first = [sample(model, tokenizer, 1.0, random.Random(7)) for _ in range(3)]
    rng = random.Random(7)
    second = [sample(model, tokenizer, 1.0, rng) for _ in range(3)]
    assert first == [first[0]] * 3
    assert second[0] == first[0] and len(set(second)) > 1
    with pytest.raises(ValueError):
        sample(model, tokenizer, 0.0, random.Random(0))


# ------------------------------------------------------------------ the module


def test_micro_is_pure_python():
    tree = ast.parse(open(micro.__file__, encoding="utf-8").read())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            imported.add(node.module.split(".")[0])
    assert not imported & {"torch", "numpy"}, imported


def test_main_prints_the_figures(capsys):
    assert micro.main(["--steps", "2", "--eval-names", "3", "--samples", "2"]) == 0
    out = capsys.readouterr().out
    assert "4192" in out
    assert "[26, 0, 13, 0, 26]" in out and "4 scored positions 0-3" in out
    assert "position 3 (target BOS)" in out


# ------------------------------------------------------------- the torch twin


def torch_twin(model, ids):
    """The same network in torch, on copies of the scalar model's weights (float64).
    Returns (logits [n, V], attention [layers][heads, n, n], weight tensors)."""
    W = {
        name: torch.tensor([[p.data for p in row] for row in table], dtype=torch.float64, requires_grad=True)
        for name, table in model.state.items()
    }
    n, H, hd = len(ids), model.n_head, model.head_dim

    def norm(x):
        return x / torch.sqrt((x * x).mean(-1, keepdim=True) + 1e-5)

    def heads(x):
        return x.view(n, H, hd).transpose(0, 1)

    x = norm(W["wte"][torch.tensor(ids)] + W["wpe"][:n])
    future = torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)
    attention = []
    for layer in range(model.n_layer):
        w = {k: W[f"layer{layer}.{k}"] for k in ("wq", "wk", "wv", "wo", "fc1", "fc2")}
        h = norm(x)
        q, k, v = heads(h @ w["wq"].T), heads(h @ w["wk"].T), heads(h @ w["wv"].T)
        scores = (q @ k.transpose(-1, -2) / math.sqrt(hd)).masked_fill(future, float("-inf"))
        weights = torch.softmax(scores, -1)
        attention.append(weights)
        x = x + (weights @ v).transpose(0, 1).reshape(n, H * hd) @ w["wo"].T
        x = x + torch.relu(norm(x) @ w["fc1"].T) @ w["fc2"].T
    return x @ W["lm_head"].T, attention, W


@pytest.mark.parametrize("n_layer", [1, 2])
def test_cross_check_against_a_torch_twin(n_layer, tokenizer):
    m = spread_weights(MicroGPT(V_NAMES, n_layer=n_layer, seed=11), std=0.4)
    ids = tokenizer.encode_document("abcdefghijklmn")  # 16 ids: the full window
    inputs = ids[:-1]
    scalar = torch.tensor(run(m, inputs), dtype=torch.float64)
    logits, attention, _ = torch_twin(m, inputs)
    assert scalar.shape == (15, V_NAMES)
    assert torch.allclose(scalar, logits.detach(), rtol=0, atol=1e-9)
    # the attention rows of the last position, every head, every layer
    for layer in range(n_layer):
        for head in range(4):
            twin = attention[layer][head, -1].detach()
            mine = torch.tensor(m.last_attention[layer][head], dtype=torch.float64)
            assert torch.allclose(mine, twin, rtol=0, atol=1e-12)


def test_cross_check_loss_and_every_gradient(tokenizer):
    m = spread_weights(MicroGPT(V_NAMES, seed=12), std=0.3)
    ids = tokenizer.encode_document("sophia")
    loss = document_loss(m, ids)
    loss.backward()
    m.finish_sequence()
    logits, _, W = torch_twin(m, ids[:-1])
    twin_loss = F.cross_entropy(logits, torch.tensor(ids[1:]))
    twin_loss.backward()
    assert loss.data == pytest.approx(twin_loss.item(), rel=1e-12)
    for name, table in m.state.items():
        grads = torch.tensor([[p.grad for p in row] for row in table], dtype=torch.float64)
        assert torch.allclose(grads, W[name].grad, rtol=1e-8, atol=1e-12), name


@pytest.mark.parametrize("n_layer, n_head", [(1, 1), (1, 4), (2, 2)])
def test_the_judges_twin_is_the_scalar_model(n_layer, n_head, tokenizer):
    """The judges of micro_block and micro_forward compare with a torch float64 twin
    written for a whole sequence at once (a causal mask, no cache; the kit's own, in
    hidden/oracles.py, which also writes the public checks' facts); it must give what
    the scalar model gives position by position."""
    from grader.checks.ch00_micro.hidden import oracles as judges

    sizes = {"vocab_size": V_NAMES, "n_embd": 16, "n_layer": n_layer, "block_size": 16, "n_head": n_head,
             "mlp_ratio": 4}
    m = spread_weights(MicroGPT(**sizes, seed=21), std=0.4)
    tables = {name: [[p.data for p in row] for row in table] for name, table in m.state.items()}
    ids = tokenizer.encode_document("abcdefghijklmn")[:-1]
    f64 = lambda rows: torch.tensor(rows, dtype=torch.float64)  # noqa: E731
    torch.testing.assert_close(f64(judges.twin_logits(tables, sizes, ids)), f64(run(m, ids)), rtol=1e-12, atol=1e-11)

    rng = random.Random(3)
    xs = [[rng.gauss(0.0, 1.0) for _ in range(16)] for _ in range(5)]
    m.start_sequence()
    ys, rows = [], []
    for x in xs:
        ys.append([v.data for v in m.block(0, [Value(v) for v in x])])
        rows.append([list(head) for head in m.last_attention[0]])
    m.finish_sequence()
    want_y, want_rows = judges.block_twin(tables, sizes, xs)
    torch.testing.assert_close(f64(want_y), f64(ys), rtol=1e-12, atol=1e-11)
    assert [[len(r) for r in p] for p in want_rows] == [[len(r) for r in p] for p in rows]
    for got, want in zip(rows, want_rows):
        for got_head, want_head in zip(got, want):
            torch.testing.assert_close(f64(want_head), f64(got_head), rtol=1e-12, atol=1e-14)


def test_dot_and_vsum_give_the_gradients_of_their_expansion():
    a = [Value(v) for v in (0.3, -1.2, 2.0)]
    b = [Value(v) for v in (1.5, 0.4, -0.7)]
    y = micro.dot(a, b) * micro.dot(a, a) + micro.vsum([*b, 2.0])
    y.backward()
    ta = torch.tensor([0.3, -1.2, 2.0], dtype=torch.float64, requires_grad=True)
    tb = torch.tensor([1.5, 0.4, -0.7], dtype=torch.float64, requires_grad=True)
    t = (ta @ tb) * (ta @ ta) + tb.sum() + 2.0
    t.backward()
    assert y.data == pytest.approx(t.item(), rel=1e-14)
    assert [v.grad for v in a] == pytest.approx(ta.grad.tolist(), rel=1e-13)
    assert [v.grad for v in b] == pytest.approx(tb.grad.tolist(), rel=1e-13)
    with pytest.raises(ValueError):
        micro.dot(a, b[:2])


def test_adam_refuses_to_step_past_total_steps():
    p = Value(1.0)
    opt = Adam([p], total_steps=1)
    opt.step()
    with pytest.raises(RuntimeError, match="1 steps are taken"):
        opt.step()
