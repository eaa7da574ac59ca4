"""Chapter 00: the whole GPT in miniature, in plain Python.

No torch and no numpy: every number is a `Value`, a scalar that remembers which
Values it was computed from and how strongly it depends on each of them. Calling
`backward()` on the loss walks that graph once and fills in every `.grad`.

The model scores ONE token at ONE position per call. Keys and values of the earlier
positions of the same sequence wait in a cache, so attention can look back at them:

    embed (token row + position row) -> RMSNorm
    per layer:  x = x + WO(attention(RMSNorm(x)))      # attention over the cache
                x = x + FC2(relu(FC1(RMSNorm(x))))
    logits[v] = dot(LMHead[v], x)                      # no final norm, no bias

A matrix is a list of rows; a row is as long as the layer's input, so
`linear(x, W)[i] = dot(W[i], x)`. Sizes for the names list: V = 27 (a-z and BOS),
E = 16, T = 16 positions, L = 1 layer, 4 heads, MLP width H*E = 64: 4192 parameters.

Given, not graded: `vsum` and `dot` build a sum (of products) as one node, with the
gradients a chain of + and * would have; they keep the graph small enough to train
in seconds. The graded parts are the ones that raise NotImplementedError in your copy.

Run it:  make micro    (or python check.py micro; options after it: --steps 50)
"""

from __future__ import annotations

import math
import random

INIT_STD = 0.08
RMS_NORM_EPS = 1e-5


# --------------------------------------------------------------- scalar autograd


class Value:
    """One scalar of the computation graph.

    data         the number
    grad         d(root)/d(this), filled in by root.backward()
    _children    the Values this one was computed from
    _local_grads d(this)/d(child) for each child, computed when this Value is made
    """

    __slots__ = ("data", "grad", "_children", "_local_grads")

    def __init__(self, data, children=(), local_grads=()):
        self.data = float(data)
        self.grad = 0.0
        self._children = tuple(children)
        self._local_grads = tuple(local_grads)

    def __repr__(self) -> str:
        return f"Value(data={self.data:.6g}, grad={self.grad:.6g})"

    @staticmethod
    def lift(other) -> "Value":
        """A plain number becomes a constant leaf; a Value stays itself."""
        return other if isinstance(other, Value) else Value(other)

    # The primitive operations. Each returns a new Value holding the result, its
    # inputs as children and the derivative of the result with respect to each input.

    def __add__(self, other) -> "Value":
        other = Value.lift(other)
        ### BEGIN SOLUTION micro_value_add
        return Value(self.data + other.data, (self, other), (1.0, 1.0))
        ### END SOLUTION

    def __mul__(self, other) -> "Value":
        other = Value.lift(other)
        ### BEGIN SOLUTION micro_value_mul
        return Value(self.data * other.data, (self, other), (other.data, self.data))
        ### END SOLUTION

    def __pow__(self, exponent) -> "Value":
        """self ** exponent for a plain number exponent (not a Value)."""
        if isinstance(exponent, Value) or not isinstance(exponent, (int, float)):
            raise TypeError("Value ** k needs a plain int or float k")
        ### BEGIN SOLUTION micro_value_pow
        return Value(self.data**exponent, (self,), (exponent * self.data ** (exponent - 1),))
        ### END SOLUTION

    def exp(self) -> "Value":
        ### BEGIN SOLUTION micro_value_exp
        result = math.exp(self.data)
        return Value(result, (self,), (result,))
        ### END SOLUTION

    def log(self) -> "Value":
        """Natural logarithm; the input must be positive."""
        if self.data <= 0.0:
            raise ValueError(f"log of a non-positive number {self.data!r}")
        ### BEGIN SOLUTION micro_value_log
        return Value(math.log(self.data), (self,), (1.0 / self.data,))
        ### END SOLUTION

    def relu(self) -> "Value":
        """max(0, x); the derivative at exactly 0 is taken to be 0."""
        ### BEGIN SOLUTION micro_value_relu
        positive = self.data > 0.0
        return Value(self.data if positive else 0.0, (self,), (1.0 if positive else 0.0,))
        ### END SOLUTION

    # Everything else is built from the primitives above.

    def __neg__(self) -> "Value":
        return self * -1.0

    def __radd__(self, other) -> "Value":
        return self + other

    def __sub__(self, other) -> "Value":
        return self + (-Value.lift(other))

    def __rsub__(self, other) -> "Value":
        return Value.lift(other) + (-self)

    def __rmul__(self, other) -> "Value":
        return self * other

    def __truediv__(self, other) -> "Value":
        return self * Value.lift(other) ** -1

    def __rtruediv__(self, other) -> "Value":
        return Value.lift(other) * self**-1

    def backward(self) -> None:
        """Fill in d(self)/d(node) for every node of the graph below self.

        Set self.grad to 1, then visit the nodes in reverse topological order (a node
        only after every node that uses it) and push each node's grad to its children
        with the chain rule. Grads are ADDED (+=): a node used twice gets both
        contributions, and leaf grads keep accumulating until someone resets them.
        The graph can be thousands of nodes deep, deeper than Python's recursion
        limit, so walk it with an explicit stack."""
        ### BEGIN SOLUTION micro_backward
        order, visited = [], set()
        stack = [(self, False)]
        while stack:
            node, children_done = stack.pop()
            if children_done:
                order.append(node)
                continue
            if node in visited:
                continue
            visited.add(node)
            stack.append((node, True))
            for child in node._children:
                if child not in visited:
                    stack.append((child, False))
        self.grad = 1.0
        for node in reversed(order):
            for child, local in zip(node._children, node._local_grads):
                child.grad += local * node.grad
        ### END SOLUTION


# ------------------------------------------------------------ vectors and matrices


def matrix(rng: random.Random, rows: int, cols: int, std: float = INIT_STD) -> list[list[Value]]:
    """rows x cols fresh leaves, each drawn independently from N(0, std^2)."""
    return [[Value(rng.gauss(0.0, std)) for _ in range(cols)] for _ in range(rows)]


def vsum(values) -> Value:
    """The sum of many Values as ONE node whose local grads are all 1: the same
    number and the same gradients as a chain of +, with far fewer nodes."""
    values = [Value.lift(v) for v in values]
    return Value(math.fsum(v.data for v in values), values, (1.0,) * len(values))


def dot(a, b) -> Value:
    """sum_i a_i * b_i of two equally long lists of Values, as ONE node with local
    grads d/da_i = b_i and d/db_i = a_i: the same number and gradients as
    vsum([x * y ...]) without the n product nodes. The matrix products are most of
    the graph, so this makes training several times faster."""
    if len(a) != len(b):
        raise ValueError(f"dot of vectors of different lengths {len(a)} and {len(b)}")
    return Value(
        sum(x.data * y.data for x, y in zip(a, b)),
        [*a, *b],
        [y.data for y in b] + [x.data for x in a],
    )


def linear(x, w) -> list[Value]:
    """w has one row per output; each row is as long as x."""
    return [dot(row, x) for row in w]


def rmsnorm(xs) -> list[Value]:
    """x / sqrt(mean(x^2) + 1e-5): unit root-mean-square, no gain, no mean shift."""
    ### BEGIN SOLUTION micro_rmsnorm
    mean_square = vsum([x * x for x in xs]) / len(xs)
    scale = (mean_square + RMS_NORM_EPS) ** -0.5
    return [x * scale for x in xs]
    ### END SOLUTION


def softmax(logits) -> list[Value]:
    """exp(l_i - max) / sum_j exp(l_j - max). Subtracting the largest logit (a plain
    number, not part of the graph) changes nothing mathematically and keeps exp from
    overflowing."""
    ### BEGIN SOLUTION micro_softmax
    largest = max(value.data for value in logits)
    exps = [(value - largest).exp() for value in logits]
    total = vsum(exps)
    return [e / total for e in exps]
    ### END SOLUTION


def attention_head(query, keys, values):
    """One head for one position: scores s_t = dot(query, keys[t]) / sqrt(d_head)
    over every cached position t (the current one is the last), weights =
    softmax(scores), output = sum_t weights[t] * values[t].

    Returns (output: d_head Values, weights: len(keys) Values)."""
    ### BEGIN SOLUTION micro_attention
    scale = 1.0 / math.sqrt(len(query))
    weights = softmax([dot(query, key) * scale for key in keys])
    output = [dot(weights, [value[i] for value in values]) for i in range(len(query))]
    return output, weights
    ### END SOLUTION


# --------------------------------------------------------------------- the model


def parameter_count(
    vocab_size: int, n_embd: int = 16, n_layer: int = 1, block_size: int = 16, mlp_ratio: int = 4
) -> int:
    """2*V*E + T*E + L*(4*E^2 + 2*H*E^2): WTE, LMHead, WPE, and per layer WQ, WK, WV,
    WO, FC1, FC2. No biases, no norm gains."""
    V, E, T, L, H = vocab_size, n_embd, block_size, n_layer, mlp_ratio
    return 2 * V * E + T * E + L * (4 * E * E + 2 * H * E * E)


class MicroGPT:
    """A one-token-at-a-time GPT on scalar Values.

    Use: start_sequence(); logits = forward(id, 0); forward(id, 1); ...;
    finish_sequence(). Positions must come in order 0, 1, 2, ... because each call
    appends this position's key and value to every layer's cache.
    """

    def __init__(self, vocab_size: int, n_embd: int = 16, n_layer: int = 1, block_size: int = 16,
                 n_head: int = 4, mlp_ratio: int = 4, seed: int = 42):
        for name, value in (("vocab_size", vocab_size), ("n_embd", n_embd), ("n_layer", n_layer),
                            ("block_size", block_size), ("n_head", n_head), ("mlp_ratio", mlp_ratio)):
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"MicroGPT {name} must be a positive integer, got {value!r}")
        if n_embd % n_head:
            raise ValueError(f"n_head={n_head} does not divide n_embd={n_embd}: every head needs the same width")
        self.vocab_size, self.n_embd, self.n_layer = vocab_size, n_embd, n_layer
        self.block_size, self.n_head, self.mlp_ratio = block_size, n_head, mlp_ratio
        self.head_dim = n_embd // n_head

        self.state = self._make_tables(random.Random(seed))
        self.params = [p for table in self.state.values() for row in table for p in row]
        expected = parameter_count(vocab_size, n_embd, n_layer, block_size, mlp_ratio)
        if len(self.params) != expected:
            shapes = ", ".join(f"{name} {len(t)}x{len(t[0]) if t else 0}" for name, t in self.state.items())
            raise ValueError(
                f"the model created {len(self.params)} parameters but 2VE + TE + L(4E^2 + 2HE^2) = {expected} "
                f"(V={vocab_size}, E={n_embd}, T={block_size}, L={n_layer}, H={mlp_ratio}); tables: {shapes}"
            )
        self.cache = None  # per layer {"keys": [...], "values": [...]} while a sequence is open
        self.last_attention = [[[] for _ in range(n_head)] for _ in range(n_layer)]

    def _make_tables(self, rng: random.Random) -> dict[str, list[list[Value]]]:
        """Every weight table, in a fixed order (the order of self.params)."""
        V, E, T, H = self.vocab_size, self.n_embd, self.block_size, self.mlp_ratio
        tables = {"wte": matrix(rng, V, E), "wpe": matrix(rng, T, E)}
        for layer in range(self.n_layer):
            for name in ("wq", "wk", "wv", "wo"):
                tables[f"layer{layer}.{name}"] = matrix(rng, E, E)
            tables[f"layer{layer}.fc1"] = matrix(rng, H * E, E)
            tables[f"layer{layer}.fc2"] = matrix(rng, E, H * E)
        tables["lm_head"] = matrix(rng, V, E)
        return tables

    def table(self, layer: int, name: str) -> list[list[Value]]:
        """One layer's table: name is wq, wk, wv, wo, fc1 or fc2."""
        return self.state[f"layer{layer}.{name}"]

    def start_sequence(self) -> None:
        """A new sequence, a new graph: every layer's key/value cache starts empty."""
        self.cache = [{"keys": [], "values": []} for _ in range(self.n_layer)]
        self.last_attention = [[[] for _ in range(self.n_head)] for _ in range(self.n_layer)]

    def finish_sequence(self) -> None:
        """Drop the caches, and with them this model's references into the graph.
        The parameters stay (and so do their grads)."""
        self.cache = None

    def cache_length(self) -> int:
        return 0 if self.cache is None else len(self.cache[0]["keys"])

    def block(self, layer: int, x: list[Value]) -> list[Value]:
        """One pre-norm layer for the current position; extends this layer's cache.

            h = RMSNorm(x); q, k, v = WQ h, WK h, WV h; append k, v to the cache
            head i uses features i*d_head .. (i+1)*d_head - 1 of q and of every cached
            key and value (attention_head); the heads' outputs are concatenated
            x = x + WO(concat)
            x = x + FC2(relu(FC1(RMSNorm(x))))

        Also keep each head's weights as plain floats:
        self.last_attention[layer][head] = [w.data for w in weights]."""
        ### BEGIN SOLUTION micro_block
        h = rmsnorm(x)
        q = linear(h, self.table(layer, "wq"))
        k = linear(h, self.table(layer, "wk"))
        v = linear(h, self.table(layer, "wv"))
        keys, values = self.cache[layer]["keys"], self.cache[layer]["values"]
        keys.append(k)
        values.append(v)
        heads = []
        for head in range(self.n_head):
            lo, hi = head * self.head_dim, (head + 1) * self.head_dim
            out, weights = attention_head(q[lo:hi], [key[lo:hi] for key in keys], [val[lo:hi] for val in values])
            heads.extend(out)
            self.last_attention[layer][head] = [w.data for w in weights]
        x = [a + b for a, b in zip(x, linear(heads, self.table(layer, "wo")))]
        h = [value.relu() for value in linear(rmsnorm(x), self.table(layer, "fc1"))]
        return [a + b for a, b in zip(x, linear(h, self.table(layer, "fc2")))]
        ### END SOLUTION

    def forward(self, token_id: int, pos: int) -> list[Value]:
        """The V logits for the token after `token_id`, which sits at position `pos`.

        token row + position row, RMSNorm, every layer's block, then
        logit[v] = dot(LMHead[v], x). No final norm; no bias on the logits."""
        if self.cache is None:
            raise RuntimeError("forward() outside a sequence: call start_sequence() first")
        if not 0 <= token_id < self.vocab_size:
            raise ValueError(f"token id {token_id} is outside the vocabulary [0, {self.vocab_size})")
        if not 0 <= pos < self.block_size:
            raise ValueError(
                f"position {pos} does not fit: block_size is {self.block_size}, so positions are "
                f"0..{self.block_size - 1} (WPE has {self.block_size} rows)"
            )
        if pos != self.cache_length():
            raise ValueError(
                f"position {pos} out of order: the cache holds {self.cache_length()} positions, so the next "
                f"one is {self.cache_length()} (start_sequence() begins again at 0)"
            )
        ### BEGIN SOLUTION micro_forward
        x = [t + p for t, p in zip(self.state["wte"][token_id], self.state["wpe"][pos])]
        x = rmsnorm(x)
        for layer in range(self.n_layer):
            x = self.block(layer, x)
        return linear(x, self.state["lm_head"])
        ### END SOLUTION


# ----------------------------------------------------------- loss, Adam, sampling


def scored_positions(model: MicroGPT, ids) -> int:
    """min(block_size, len(ids) - 1): the last id has no target, and no more than
    block_size positions fit. Pairs past the window are simply not scored."""
    n = min(model.block_size, len(ids) - 1)
    if n < 1:
        raise ValueError(f"a document needs at least 2 ids to give a target, got {len(ids)}")
    return n


def document_loss(model: MicroGPT, ids) -> Value:
    """Mean negative log-likelihood of one document (ids framed by BOS): start a new
    sequence, run forward for positions 0..n-1 and score -log softmax(logits)[ids[p+1]],
    n = scored_positions(model, ids)."""
    n = scored_positions(model, ids)
    ### BEGIN SOLUTION micro_loss
    model.start_sequence()
    losses = []
    for pos in range(n):
        probs = softmax(model.forward(ids[pos], pos))
        losses.append(-probs[ids[pos + 1]].log())
    return vsum(losses) / n
    ### END SOLUTION


class Adam:
    """Adam with bias correction and a linearly decaying learning rate.

    Step t (0-based) uses lr_t = lr * (1 - t / total_steps). The moments m and v are
    plain floats held here: they are optimizer state, not model parameters."""

    def __init__(self, params, lr: float = 0.01, beta1: float = 0.85, beta2: float = 0.99,
                 eps: float = 1e-8, total_steps: int = 1000):
        if total_steps <= 0:
            raise ValueError(f"total_steps must be positive, got {total_steps}")
        self.params = list(params)
        self.lr, self.beta1, self.beta2, self.eps = lr, beta1, beta2, eps
        self.total_steps = total_steps
        self.m = [0.0] * len(self.params)
        self.v = [0.0] * len(self.params)
        self.t = 0  # steps taken so far

    def step(self) -> None:
        """One update of every parameter from its .grad, then reset every .grad to 0.

            m = b1 m + (1 - b1) g          v = b2 v + (1 - b2) g^2
            m_hat = m / (1 - b1^(t+1))     v_hat = v / (1 - b2^(t+1))
            p -= lr_t * m_hat / (sqrt(v_hat) + eps),   lr_t = lr * (1 - t / total_steps)
        and finally t += 1."""
        if self.t >= self.total_steps:
            raise RuntimeError(
                f"all {self.total_steps} steps are taken: the learning rate has decayed to 0 "
                f"(make a new Adam with a larger total_steps to train on)"
            )
        ### BEGIN SOLUTION micro_adam
        lr_t = self.lr * (1.0 - self.t / self.total_steps)
        b1, b2 = self.beta1, self.beta2
        correction1 = 1.0 - b1 ** (self.t + 1)
        correction2 = 1.0 - b2 ** (self.t + 1)
        for i, p in enumerate(self.params):
            g = p.grad
            self.m[i] = b1 * self.m[i] + (1.0 - b1) * g
            self.v[i] = b2 * self.v[i] + (1.0 - b2) * g * g
            m_hat = self.m[i] / correction1
            v_hat = self.v[i] / correction2
            p.data -= lr_t * m_hat / (math.sqrt(v_hat) + self.eps)
            p.grad = 0.0
        self.t += 1
        ### END SOLUTION


def sample(model: MicroGPT, tokenizer, temperature: float = 0.5, rng: random.Random | None = None) -> str:
    """One new document: start from BOS at position 0, draw the next id from
    softmax(logits / temperature) with rng, feed it back at the next position, and
    stop at BOS or when block_size positions are used. Returns the text without BOS."""
    if temperature <= 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    rng = random.Random() if rng is None else rng
    ### BEGIN SOLUTION micro_sample
    bos = tokenizer.bos_id
    model.start_sequence()
    token, out = bos, []
    for pos in range(model.block_size):
        probs = softmax([logit / temperature for logit in model.forward(token, pos)])
        token = rng.choices(range(model.vocab_size), weights=[p.data for p in probs])[0]
        if token == bos:
            break
        out.append(token)
    model.finish_sequence()
    return tokenizer.decode(out)
    ### END SOLUTION


def train_step(model: MicroGPT, optimizer: Adam, ids) -> float:
    """Loss of one document, backward, one Adam step; returns the loss."""
    loss = document_loss(model, ids)
    loss.backward()
    optimizer.step()
    model.finish_sequence()
    return loss.data


def mean_loss(model: MicroGPT, documents) -> float:
    """The average document loss over already-encoded documents (no update)."""
    total = 0.0
    for ids in documents:
        total += document_loss(model, ids).data
        model.finish_sequence()
    return total / len(documents)


# ------------------------------------------------------------------------ program


def _walk_through(model: MicroGPT, tokenizer, text: str = "ana"):
    """Forward over one document; returns its ids and per position (input, target,
    p(target)) plus the attention rows of the last scored position."""
    ids = tokenizer.encode_document(text)
    n = scored_positions(model, ids)
    model.start_sequence()
    rows = []
    for pos in range(n):
        probs = softmax(model.forward(ids[pos], pos))
        rows.append((pos, ids[pos], ids[pos + 1], probs[ids[pos + 1]].data))
    attention = [list(head) for head in model.last_attention[0]]
    model.finish_sequence()
    return ids, rows, attention


def main(argv=None) -> int:
    import argparse
    import gc

    parser = argparse.ArgumentParser(description="Chapter 00: train the scalar-autograd GPT on names.")
    parser.add_argument("--steps", type=int, default=500, help="training steps, one name each (default 500)")
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--eval-names", type=int, default=50, help="validation names for the loss before/after")
    parser.add_argument("--samples", type=int, default=8)
    parser.add_argument("--temperature", type=float, default=0.5)
    args = parser.parse_args(argv)

    # A Value graph has no reference cycles (children never point back), so reference
    # counting frees every graph; the cycle collector would only rescan the hundreds of
    # thousands of live Values again and again, which makes the run ~3x slower.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _run(args)
    finally:
        if was_enabled:
            gc.enable()


def _run(args) -> int:
    import time

    from rich.console import Console
    from rich.table import Table

    from .data import load_names, train_validation_split
    from .tokenizer import CharTokenizer

    console = Console()
    started = time.perf_counter()
    tokenizer = CharTokenizer(load_names())
    train, validation = train_validation_split()
    model = MicroGPT(tokenizer.vocab_size, seed=args.seed)
    console.rule("[bold]Chapter 00: a GPT on scalar Values")
    console.print(
        f"vocabulary V={model.vocab_size} (a-z + BOS={tokenizer.bos_id}), E={model.n_embd}, "
        f"T={model.block_size}, L={model.n_layer}, heads={model.n_head}, MLP={model.mlp_ratio * model.n_embd}"
    )
    console.print(f"parameters: [bold]{len(model.params)}[/bold] "
                  f"(2·V·E + T·E + L·(4·E² + 2·H·E²) = {parameter_count(model.vocab_size)})")

    held_out = [tokenizer.encode_document(name) for name in validation[: max(1, args.eval_names)]]
    before = mean_loss(model, held_out)
    console.print(f"validation loss before training ({len(held_out)} names): {before:.4f}  "
                  f"(uniform: ln {model.vocab_size} = {math.log(model.vocab_size):.4f})")

    optimizer = Adam(model.params, lr=args.lr, total_steps=args.steps)
    recent = []
    for step in range(args.steps):
        loss = train_step(model, optimizer, tokenizer.encode_document(train[step % len(train)]))
        recent.append(loss)
        if (step + 1) % max(1, args.steps // 5) == 0 or step + 1 == args.steps:
            console.print(f"  step {step + 1:4d}/{args.steps}  loss (mean of last {len(recent)}) "
                          f"{sum(recent) / len(recent):.4f}")
            recent = []
    after = mean_loss(model, held_out)
    console.print(f"validation loss after {args.steps} steps: [bold]{after:.4f}[/bold] (before {before:.4f})")

    ids, rows, attention = _walk_through(model, tokenizer)
    def show(i):
        return "BOS" if i == tokenizer.bos_id else tokenizer.decode([i])
    console.rule("[bold]the document 'ana'")
    console.print(f"ids {ids}: {len(ids)} ids, {len(rows)} scored positions 0-{len(rows) - 1}")
    table = Table("pos", "input", "target", "p(target)")
    for pos, inp, target, p in rows:
        table.add_row(str(pos), show(inp), show(target), f"{p:.4f}")
    console.print(table)
    last = rows[-1][0]
    console.print(f"position {last} (target {show(rows[-1][2])}) attends to positions 0-{last}:")
    heads = Table("head", *[f"→{pos} ({show(ids[pos])})" for pos in range(last + 1)], "sum")
    for head, weights in enumerate(attention):
        heads.add_row(str(head), *[f"{w:.4f}" for w in weights], f"{sum(weights):.4f}")
    console.print(heads)

    console.rule(f"[bold]samples (temperature {args.temperature})")
    rng = random.Random(args.seed)
    console.print(", ".join(sample(model, tokenizer, args.temperature, rng) or "''" for _ in range(args.samples)))
    console.print(f"[dim]done in {time.perf_counter() - started:.1f} s[/dim]")
    return 0


if __name__ == "__main__":
    from . import run_program

    raise SystemExit(run_program(main))
