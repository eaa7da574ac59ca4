"""Chapter 00: the mistakes a scalar-autograd GPT invites, and right ways to write it."""

from grader.qa.mutants import mutant, patch, variant

MUTANTS = [
    # Value: the primitives
    mutant("add_gradient_to_one_side", "micro_value_add", """
        return Value(self.data + other.data, (self, other), (1.0, 0.0))
    """, "ch00.micro_value_add.value_and_gradients", "only one input", "+ passes the gradient to one input only"),
    mutant("mul_missing_term", "micro_value_mul", """
        return Value(self.data * other.data, (self,), (other.data,))
    """, "ch00.micro_value_mul.value_and_gradients", "missing", "a * b forgets the other factor's term"),
    mutant("mul_local_gradients_swapped", "micro_value_mul", """
        return Value(self.data * other.data, (self, other), (self.data, other.data))
    """, "ch00.micro_value_mul.value_and_gradients", "swapped", "d(ab)/da = a instead of b"),
    mutant("pow_exponent_not_lowered", "micro_value_pow", """
        return Value(self.data**exponent, (self,), (exponent * self.data**exponent,))
    """, "ch00.micro_value_pow.power_rule", "not lowered", "k·x^k instead of k·x^(k−1)"),
    mutant("pow_factor_k_missing", "micro_value_pow", """
        return Value(self.data**exponent, (self,), (self.data ** (exponent - 1),))
    """, "ch00.micro_value_pow.power_rule", "factor k", "x^(k−1) without the factor k"),
    mutant("exp_gradient_uses_input", "micro_value_exp", """
        return Value(math.exp(self.data), (self,), (self.data,))
    """, "ch00.micro_value_exp.value_and_gradient", "input", "exp's local gradient is x"),
    mutant("log_gradient_is_log", "micro_value_log", """
        return Value(math.log(self.data), (self,), (math.log(self.data),))
    """, "ch00.micro_value_log.value_and_gradient", "1/x", "log's local gradient is log x"),
    mutant("relu_gradient_for_negative_inputs", "micro_value_relu", """
        return Value(max(0.0, self.data), (self,), (1.0,))
    """, "ch00.micro_value_relu.value_and_gradient", "negative", "relu passes the gradient for x < 0"),
    mutant("relu_gradient_one_at_zero", "micro_value_relu", patch("""
        - positive = self.data > 0.0
        + positive = self.data >= 0.0
    """), "ch00.micro_value_relu.at_zero", "exactly", "relu'(0) = 1 against the docstring"),
    # a value computed with a neighbouring operation (named by grader.checks.confusions)
    mutant("log_common_logarithm", "micro_value_log", """
        return Value(math.log10(self.data), (self,), (1.0 / self.data,))
    """, "ch00.micro_value_log.value_and_gradient", "base 10", "log10 where the natural log belongs"),
    mutant("exp_expm1", "micro_value_exp", """
        result = math.expm1(self.data)
        return Value(result, (self,), (result + 1.0,))
    """, "ch00.micro_value_exp.value_and_gradient", "expm1", "math.expm1 picked for math.exp"),
    mutant("relu_leaky", "micro_value_relu", """
        positive = self.data > 0.0
        return Value(self.data if positive else 0.01 * self.data, (self,), (1.0 if positive else 0.0,))
    """, "ch00.micro_value_relu.value_and_gradient", "leaky", "negative inputs kept at a hundredth"),
    mutant("pow_base_and_exponent_swapped", "micro_value_pow", """
        return Value(exponent**self.data, (self,), (exponent * self.data ** (exponent - 1),))
    """, "ch00.micro_value_pow.power_rule", "swapped", "k ** x computed for x ** k"),
    # backward
    mutant("backward_overwrites", "micro_backward", patch("""
        - child.grad += local * node.grad
        + child.grad = local * node.grad
    """), "ch00.micro_backward.reused_node", "added", "child.grad = instead of +="),
    mutant("backward_breadth_first", "micro_backward", """
        self.grad = 1.0
        queue, seen = [self], {self}
        while queue:
            node = queue.pop(0)
            for child, local in zip(node._children, node._local_grads):
                child.grad += local * node.grad
                if child not in seen:
                    seen.add(child)
                    queue.append(child)
    """, "ch00.micro_backward.topological_order", "every node that uses it", "breadth-first instead of topological order"),
    mutant("backward_no_visited_set", "micro_backward", patch("""
        - if node in visited:
        -     continue
        - visited.add(node)
    """), "ch00.micro_backward.topological_order", "only once", "a shared node pushes its grad twice"),
    mutant("backward_root_grad_not_set", "micro_backward", patch("""
        - self.grad = 1.0
    """), "ch00.micro_backward.reused_node", "root", "the root's grad is never set to 1"),
    mutant("backward_recursive", "micro_backward", """
        order, visited = [], set()
        def build(node):
            if node not in visited:
                visited.add(node)
                for child in node._children:
                    build(child)
                order.append(node)
        build(self)
        self.grad = 1.0
        for node in reversed(order):
            for child, local in zip(node._children, node._local_grads):
                child.grad += local * node.grad
    """, "ch00.micro_backward.deep_graph", "recursion", "recursion breaks on deep graphs"),
    # RMSNorm
    mutant("rmsnorm_no_eps", "micro_rmsnorm", patch("""
        - scale = (mean_square + RMS_NORM_EPS) ** -0.5
        + scale = mean_square ** -0.5
    """), ("ch00.micro_rmsnorm.figure", "ch00.micro_rmsnorm.zero_vector"), "eps", "eps left out"),
    mutant("rmsnorm_eps_outside_sqrt", "micro_rmsnorm", patch("""
        - scale = (mean_square + RMS_NORM_EPS) ** -0.5
        + scale = 1.0 / (mean_square ** 0.5 + RMS_NORM_EPS)
    """), "ch00.micro_rmsnorm.figure", "outside", "eps added outside the square root"),
    mutant("rmsnorm_mean_not_mean_of_squares", "micro_rmsnorm", patch("""
        - mean_square = vsum([x * x for x in xs]) / len(xs)
        + mean_square = vsum(xs) / len(xs)
    """), "ch00.micro_rmsnorm.figure", "not the mean of squares", "mean(x) instead of mean(x²)"),
    mutant("rmsnorm_is_layernorm", "micro_rmsnorm", """
        mean = vsum(xs) / len(xs)
        centred = [x - mean for x in xs]
        scale = (vsum([c * c for c in centred]) / len(xs) + RMS_NORM_EPS) ** -0.5
        return [c * scale for c in centred]
    """, "ch00.micro_rmsnorm.figure", "LayerNorm", "the mean subtracted (LayerNorm)"),
    mutant("rmsnorm_scale_detached", "micro_rmsnorm", patch("""
        - mean_square = vsum([x * x for x in xs]) / len(xs)
        + mean_square = sum(x.data * x.data for x in xs) / len(xs)
    """), "ch00.micro_rmsnorm.gradient", "constant", "the scale computed from .data"),
    mutant("rmsnorm_no_square_root", "micro_rmsnorm", patch("""
        - scale = (mean_square + RMS_NORM_EPS) ** -0.5
        + scale = (mean_square + RMS_NORM_EPS) ** -1
    """), ("ch00.micro_rmsnorm.figure", "ch00.micro_rmsnorm.gradient"), "square root is missing",
       "divided by mean(x²) + eps, the root forgotten"),
    mutant("rmsnorm_square_of_the_mean_no_eps", "micro_rmsnorm", patch("""
        - mean_square = vsum([x * x for x in xs]) / len(xs)
        - scale = (mean_square + RMS_NORM_EPS) ** -0.5
        + mean = vsum(xs) / len(xs)
        + scale = (mean * mean) ** -0.5
    """), ("ch00.micro_rmsnorm.figure", "ch00.micro_rmsnorm.gradient"), "2 parts of rmsnorm differ",
       "two slips at once: mean(x)² for mean(x²), and no eps"),
    # softmax
    mutant("softmax_shift_reversed", "micro_softmax", patch("""
        - exps = [(value - largest).exp() for value in logits]
        + exps = [(largest - value).exp() for value in logits]
    """), ("ch00.micro_softmax.stable", "ch00.micro_softmax.gradient"), "negated",
       "exp(max - l): the order of the subtraction swapped"),
    mutant("softmax_is_log_softmax", "micro_softmax", patch("""
        - return [e / total for e in exps]
        + return [value - largest - total.log() for value in logits]
    """), ("ch00.micro_softmax.stable", "ch00.micro_softmax.gradient"), "log-softmax",
       "returns log-probabilities"),
    mutant("softmax_without_max", "micro_softmax", patch("""
        - exps = [(value - largest).exp() for value in logits]
        + exps = [value.exp() for value in logits]
    """), "ch00.micro_softmax.stable", "largest", "no max subtraction: overflow"),
    mutant("softmax_total_detached", "micro_softmax", patch("""
        - total = vsum(exps)
        + total = sum(e.data for e in exps)
    """), "ch00.micro_softmax.gradient", "constant", "the total computed from .data"),
    # attention
    mutant("attention_not_scaled", "micro_attention", patch("""
        - weights = softmax([dot(query, key) * scale for key in keys])
        + weights = softmax([dot(query, key) for key in keys])
    """), "ch00.micro_attention.scaled_weights", "not scaled", "no 1/sqrt(d_head)"),
    mutant("attention_scaled_by_d", "micro_attention", patch("""
        - scale = 1.0 / math.sqrt(len(query))
        + scale = 1.0 / len(query)
    """), "ch00.micro_attention.scaled_weights", "divided by d_head", "1/d_head instead of 1/sqrt(d_head)"),
    mutant("attention_output_from_floats", "micro_attention", patch("""
        - output = [dot(weights, [value[i] for value in values]) for i in range(len(query))]
        + output = [Value(sum(w.data * value[i].data for w, value in zip(weights, values))) for i in range(len(query))]
    """), "ch00.micro_attention.gradients_flow", "cut off from the graph",
       "the head's output rebuilt from .data floats: no gradient flows back through attention"),
    mutant("attention_values_as_floats", "micro_attention", patch("""
        - output = [dot(weights, [value[i] for value in values]) for i in range(len(query))]
        + output = [vsum([w * value[i].data for w, value in zip(weights, values)]) for i in range(len(query))]
    """), "ch00.micro_attention.gradients_flow", "not the values",
       "the value vectors mixed in as floats: the values get no gradient"),
    # the layer
    mutant("block_no_attention_residual", "micro_block", patch("""
        - x = [a + b for a, b in zip(x, linear(heads, self.table(layer, "wo")))]
        + x = linear(heads, self.table(layer, "wo"))
    """), ("ch00.micro_block.zero_branch_identity", "ch00.micro_block.formula"), "residual",
       "x = WO(heads) without x +"),
    mutant("block_mlp_reads_layer_input", "micro_block", patch("""
        - x = [a + b for a, b in zip(x, linear(heads, self.table(layer, "wo")))]
        + u = [a + b for a, b in zip(x, linear(heads, self.table(layer, "wo")))]
          h = [value.relu() for value in linear(rmsnorm(x), self.table(layer, "fc1"))]
        - return [a + b for a, b in zip(x, linear(h, self.table(layer, "fc2")))]
        + return [a + b for a, b in zip(u, linear(h, self.table(layer, "fc2")))]
    """), "ch00.micro_block.formula", "after the attention residual", "the MLP reads the layer input"),
    mutant("block_attends_only_to_itself", "micro_block", patch("""
        - keys, values = self.cache[layer]["keys"], self.cache[layer]["values"]
        - keys.append(k)
        - values.append(v)
        + keys, values = [k], [v]
    """), "ch00.micro_block.formula", "cache", "no KV cache: each position sees only itself"),
    mutant("block_output_normalised", "micro_block", patch("""
        - return [a + b for a, b in zip(x, linear(h, self.table(layer, "fc2")))]
        + return rmsnorm([a + b for a, b in zip(x, linear(h, self.table(layer, "fc2")))])
    """), ("ch00.micro_block.zero_branch_identity", "ch00.micro_block.formula"), "normalised",
       "the layer's output re-normalised"),
    mutant("block_keys_values_from_raw_stream", "micro_block", patch("""
        - k = linear(h, self.table(layer, "wk"))
        - v = linear(h, self.table(layer, "wv"))
        + k = linear(x, self.table(layer, "wk"))
        + v = linear(x, self.table(layer, "wv"))
    """), "ch00.micro_block.formula", "keys and values are computed from the raw stream",
       "only the queries read RMSNorm(x); keys and values project the raw stream"),
    mutant("block_heads_interleaved", "micro_block", patch("""
        - lo, hi = head * self.head_dim, (head + 1) * self.head_dim
        - out, weights = attention_head(q[lo:hi], [key[lo:hi] for key in keys], [val[lo:hi] for val in values])
        + part = slice(head, None, self.n_head)
        + out, weights = attention_head(q[part], [key[part] for key in keys], [val[part] for val in values])
    """), "ch00.micro_block.formula", "interleaved", "head h takes every H-th feature, not a contiguous slice"),
    mutant("block_queries_raw_and_no_mlp_residual", "micro_block", patch("""
        - q = linear(h, self.table(layer, "wq"))
        + q = linear(x, self.table(layer, "wq"))

        - return [a + b for a, b in zip(x, linear(h, self.table(layer, "fc2")))]
        + return linear(h, self.table(layer, "fc2"))
    """), "ch00.micro_block.formula", "2 parts of the layer differ",
       "two slips at once: queries from x and the MLP residual dropped"),
    mutant("block_values_through_wk", "micro_block", patch("""
        - v = linear(h, self.table(layer, "wv"))
        + v = linear(h, self.table(layer, "wk"))
    """), "ch00.micro_block.formula", "comes after the weights",
       "the values projected with WK: no catalogued layer gives this, the weights localise it"),
    # forward
    mutant("forward_final_norm", "micro_forward", patch("""
        - return linear(x, self.state["lm_head"])
        + return linear(rmsnorm(x), self.state["lm_head"])
    """), "ch00.micro_forward.formula", "final norm", "a final norm before the LM head"),
    mutant("forward_no_position_row", "micro_forward", patch("""
        - x = [t + p for t, p in zip(self.state["wte"][token_id], self.state["wpe"][pos])]
        + x = list(self.state["wte"][token_id])
    """), "ch00.micro_forward.formula", "position row", "WPE[pos] not added"),
    mutant("forward_embedding_not_normalised", "micro_forward", patch("""
        - x = rmsnorm(x)
    """), "ch00.micro_forward.formula", "not normalised", "no RMSNorm of the embedding sum"),
    mutant("forward_returns_features", "micro_forward", patch("""
        - return linear(x, self.state["lm_head"])
        + return x
    """), ("ch00.micro_forward.ana_walk_through", "ch00.micro_forward.formula"), "LM head",
       "E features returned instead of V logits"),
    mutant("forward_first_layer_only", "micro_forward", patch("""
        - for layer in range(self.n_layer):
        -     x = self.block(layer, x)
        + x = self.block(0, x)
    """), "ch00.micro_forward.formula", "every layer", "only layer 0 runs"),
    mutant("forward_imports_numpy", "micro_forward", patch("""
        + import numpy as np
          x = [t + p for t, p in zip(self.state["wte"][token_id], self.state["wpe"][pos])]
        - return linear(x, self.state["lm_head"])
        + head = np.array([[p.data for p in row] for row in self.state["lm_head"]])
        + return linear(x, self.state["lm_head"])[: head.shape[0]]
    """), "ch00.micro_forward.pure_python", "plain Python", "numpy imported inside forward"),
    mutant("forward_uses_torch", "micro_forward", """
        import torch
        x = rmsnorm([t + p for t, p in zip(self.state["wte"][token_id], self.state["wpe"][pos])])
        for layer in range(self.n_layer):
            x = self.block(layer, x)
        logits = torch.tensor([[p.data for p in row] for row in self.state["lm_head"]]) @ torch.tensor(
            [v.data for v in x])
        return [Value(v) for v in logits.tolist()]
    """, "ch00.micro_forward.formula", "torch.tensor", "torch for the LM head"),
    # loss
    mutant("loss_summed", "micro_loss", patch("""
        - return vsum(losses) / n
        + return vsum(losses)
    """), "ch00.micro_loss.ana_mean_nll", "SUM", "summed, not averaged"),
    mutant("loss_divided_by_len_ids", "micro_loss", patch("""
        - return vsum(losses) / n
        + return vsum(losses) / len(ids)
    """), "ch00.micro_loss.ana_mean_nll", "len(ids)", "divided by len(ids), not the scored positions"),
    mutant("loss_ignores_the_window", "micro_loss", patch("""
        - for pos in range(n):
        + for pos in range(len(ids) - 1):
        - return vsum(losses) / n
        + return vsum(losses) / (len(ids) - 1)
    """), "ch00.micro_loss.window", "pairs past the window", "scores every pair, past block_size"),
    mutant("loss_target_is_the_input", "micro_loss", patch("""
        - losses.append(-probs[ids[pos + 1]].log())
        + losses.append(-probs[ids[pos]].log())
    """), "ch00.micro_loss.ana_mean_nll", "ids[p + 1]", "the target is the input id, not the next one"),
    mutant("loss_keeps_the_previous_cache", "micro_loss", patch("""
        - model.start_sequence()
        + if model.cache is None:
        +     model.start_sequence()
    """), ("ch00.micro_loss.ana_mean_nll", "ch00.micro_loss.window"), "depends on the first",
       "a sequence is started only when none is open: a second call finds the first one's keys and values"),
    mutant("loss_never_starts_a_sequence", "micro_loss", patch("""
        - model.start_sequence()
    """), ("ch00.micro_loss.ana_mean_nll", "ch00.micro_loss.window"), "start_sequence",
       "forward called with no sequence open"),
    # Adam
    mutant("adam_no_bias_correction", "micro_adam", patch("""
        - m_hat = self.m[i] / correction1
        - v_hat = self.v[i] / correction2
        + m_hat, v_hat = self.m[i], self.v[i]
    """), ("ch00.micro_adam.hand_computation", "ch00.micro_adam.first_step_is_lr"), "bias correction",
       "no bias correction"),
    mutant("adam_no_lr_decay", "micro_adam", patch("""
        - p.data -= lr_t * m_hat / (math.sqrt(v_hat) + self.eps)
        + p.data -= self.lr * m_hat / (math.sqrt(v_hat) + self.eps)
    """), "ch00.micro_adam.hand_computation", "decay", "constant learning rate"),
    mutant("adam_grads_not_reset", "micro_adam", patch("""
        - p.grad = 0.0
    """), "ch00.micro_adam.hand_computation", "reset", "p.grad not zeroed after the step"),
    mutant("adam_bias_correction_off_by_one", "micro_adam", patch("""
        - correction1 = 1.0 - b1 ** (self.t + 1)
        - correction2 = 1.0 - b2 ** (self.t + 1)

        - m_hat = self.m[i] / correction1
        - v_hat = self.v[i] / correction2
        + m_hat = self.m[i] / (1.0 - b1 ** self.t)
        + v_hat = self.v[i] / (1.0 - b2 ** self.t)
    """), "ch00.micro_adam.hand_computation", "beta^(t+1)", "1 − β^t with t from 0: division by zero"),
    mutant("adam_rebinds_parameters", "micro_adam", patch("""
        - p.data -= lr_t * m_hat / (math.sqrt(v_hat) + self.eps)
        + self.params[i] = Value(p.data - lr_t * m_hat / (math.sqrt(v_hat) + self.eps))
    """), "ch00.micro_adam.hand_computation", "did not move",
       "a new Value bound to self.params[i]: the model's own parameters never change"),
    mutant("adam_step_counter_not_advanced", "micro_adam", patch("""
        - self.t += 1
    """), "ch00.micro_adam.hand_computation", "not advanced", "t stays 0: every step is the first"),
    mutant("adam_moments_not_kept", "micro_adam", patch("""
        - self.m[i] = b1 * self.m[i] + (1.0 - b1) * g
        - self.v[i] = b2 * self.v[i] + (1.0 - b2) * g * g
        - m_hat = self.m[i] / correction1
        - v_hat = self.v[i] / correction2
        + m = (1.0 - b1) * g
        + v = (1.0 - b2) * g * g
        + m_hat = m / correction1
        + v_hat = v / correction2
    """), "ch00.micro_adam.hand_computation", "start from 0 at every step",
       "the moments computed afresh each step, never accumulated"),
    # sampling
    mutant("sample_does_not_stop_at_bos", "micro_sample", patch("""
        - if token == bos:
        -     break
    """), "ch00.micro_sample.stops_at_bos", "stop at BOS", "goes on after BOS"),
    mutant("sample_global_random", "micro_sample", patch("""
        - token = rng.choices(range(model.vocab_size), weights=[p.data for p in probs])[0]
        + token = random.choices(range(model.vocab_size), weights=[p.data for p in probs])[0]
    """), "ch00.micro_sample.seeded", "rng passed in", "module-level random instead of rng"),
    mutant("sample_temperature_multiplied", "micro_sample", patch("""
        - probs = softmax([logit / temperature for logit in model.forward(token, pos)])
        + probs = softmax([logit * temperature for logit in model.forward(token, pos)])
    """), "ch00.micro_sample.temperature", "multiplied", "logits × temperature"),
    mutant("sample_greedy", "micro_sample", patch("""
        - probs = softmax([logit / temperature for logit in model.forward(token, pos)])
        - token = rng.choices(range(model.vocab_size), weights=[p.data for p in probs])[0]
        + logits = model.forward(token, pos)
        + token = max(range(model.vocab_size), key=lambda i: logits[i].data)
    """), "ch00.micro_sample.seeded", "same name", "argmax instead of a random draw"),
    mutant("block_attends_before_appending", "micro_block", patch("""
        - keys.append(k)
        - values.append(v)

        + keys.append(k)
        + values.append(v)
          x = [a + b for a, b in zip(x, linear(heads, self.table(layer, "wo")))]
    """), ("ch00.micro_block.formula", "ch00.micro_block.matches_reference"), "before appending",
       "attends before appending the current key"),
    # Families that arrive with code adapted from well-known implementations
    mutant("block_squared_relu", "micro_block", patch("""
        - h = [value.relu() for value in linear(rmsnorm(x), self.table(layer, "fc1"))]
        + h = [value.relu() ** 2 for value in linear(rmsnorm(x), self.table(layer, "fc1"))]
    """), "ch00.micro_block.formula", "squares its relu", "the MLP's ReLU squared, as one version of a well-known scalar GPT has it"),
    mutant("forward_head_tied_to_wte", "micro_forward", patch("""
        - return linear(x, self.state["lm_head"])
        + return linear(x, self.state["wte"])
    """), "ch00.micro_forward.formula", "tied", "the logits read from WTE (a tied head) instead of LMHead"),
    mutant("add_operation_label", "micro_value_add", """
        return Value(self.data + other.data, (self, other), "+")
    """, "ch00.micro_value_add.value_and_gradients", "label", "an operation label where the local gradients go"),
    mutant("mul_operation_label", "micro_value_mul", """
        return Value(self.data * other.data, (self, other), "*")
    """, "ch00.micro_value_mul.value_and_gradients", "label", "an operation label where the local gradients go"),
]

VARIANTS = [
    variant("value_add_lists_and_ints", "micro_value_add", """
        return Value(other.data + self.data, [self, other], [1, 1])
    """, "children and local gradients as lists, integer gradients"),
    variant("value_pow_math_pow", "micro_value_pow", """
        value = math.pow(self.data, exponent)
        return Value(value, (self,), (exponent * math.pow(self.data, exponent - 1),))
    """, "math.pow"),
    variant("value_relu_float_of_comparison", "micro_value_relu", """
        return Value(max(0.0, self.data), (self,), (float(self.data > 0),))
    """, "max and float(x > 0)"),
    variant("backward_recursive_topological_sort", "micro_backward", """
        import sys
        order, visited = [], set()
        def build(node):
            if node not in visited:
                visited.add(node)
                for child in node._children:
                    build(child)
                order.append(node)
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(max(limit, 100_000))
        try:
            build(self)
        finally:
            sys.setrecursionlimit(limit)
        self.grad = 1.0
        for node in reversed(order):
            for child, local in zip(node._children, node._local_grads):
                child.grad += local * node.grad
    """, "micrograd's recursive topological sort (with the recursion limit raised)"),
    variant("backward_kahn_counting_parents", "micro_backward", """
        users, seen, stack = {}, {self}, [self]
        while stack:
            node = stack.pop()
            for child in node._children:
                users[child] = users.get(child, 0) + 1
                if child not in seen:
                    seen.add(child)
                    stack.append(child)
        self.grad = 1.0
        ready = [self]
        while ready:
            node = ready.pop()
            for child, local in zip(node._children, node._local_grads):
                child.grad += local * node.grad
                users[child] -= 1
                if users[child] == 0:
                    ready.append(child)
    """, "Kahn's algorithm: a node is ready once all its users have pushed"),
    variant("rmsnorm_via_pow_half", "micro_rmsnorm", """
        n = len(xs)
        mean_square = sum((x ** 2 for x in xs), Value(0.0)) * (1.0 / n)
        inverse = 1.0 / (mean_square + RMS_NORM_EPS) ** 0.5
        return [x * inverse for x in xs]
    """, "sum of x ** 2, then 1 / (…) ** 0.5"),
    variant("softmax_reciprocal_of_total", "micro_softmax", """
        top = max(l.data for l in logits)
        exps = [(l + (-top)).exp() for l in logits]
        inverse = vsum(exps) ** -1
        return [e * inverse for e in exps]
    """, "exp of shifted values, multiplied by the total's reciprocal"),
    variant("softmax_max_as_a_value", "micro_softmax", """
        largest = max(logits, key=lambda v: v.data)
        exps = [(v - largest).exp() for v in logits]
        total = exps[0]
        for e in exps[1:]:
            total = total + e
        return [e / total for e in exps]
    """, "the max kept in the graph, the total as a chain of +"),
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
    variant("block_feature_loops", "micro_block", """
        cache = self.cache[layer]
        h = rmsnorm(x)
        cache["keys"].append(linear(h, self.table(layer, "wk")))
        cache["values"].append(linear(h, self.table(layer, "wv")))
        q = linear(h, self.table(layer, "wq"))
        d = self.head_dim
        concat = []
        for head in range(self.n_head):
            part = slice(head * d, head * d + d)
            out, weights = attention_head(q[part], [k[part] for k in cache["keys"]],
                                          [v[part] for v in cache["values"]])
            self.last_attention[layer][head] = [float(w.data) for w in weights]
            concat += out
        attended = linear(concat, self.table(layer, "wo"))
        x = [x[i] + attended[i] for i in range(self.n_embd)]
        hidden = linear(rmsnorm(x), self.table(layer, "fc1"))
        hidden = [z.relu() for z in hidden]
        mlp = linear(hidden, self.table(layer, "fc2"))
        return [x[i] + mlp[i] for i in range(self.n_embd)]
    """, "slices and index loops"),
    variant("forward_index_loop", "micro_forward", """
        wte, wpe = self.state["wte"][token_id], self.state["wpe"][pos]
        x = rmsnorm([wte[i] + wpe[i] for i in range(self.n_embd)])
        for layer in range(self.n_layer):
            x = self.block(layer, x)
        return [dot(row, x) for row in self.state["lm_head"]]
    """, "index loop and explicit dot per vocabulary row"),
    variant("loss_log_sum_exp", "micro_loss", """
        model.start_sequence()
        total = Value(0.0)
        for pos in range(n):
            logits = model.forward(ids[pos], pos)
            top = max(l.data for l in logits)
            log_total = vsum([(l - top).exp() for l in logits]).log() + top
            total = total + (log_total - logits[ids[pos + 1]])
        return total * (1.0 / n)
    """, "cross-entropy as log-sum-exp minus the target logit"),
    variant("adam_count_first", "micro_adam", """
        self.t += 1
        t = self.t
        lr_t = self.lr * (1 - (t - 1) / self.total_steps)
        for i, p in enumerate(self.params):
            self.m[i] = self.beta1 * self.m[i] + (1 - self.beta1) * p.grad
            self.v[i] = self.beta2 * self.v[i] + (1 - self.beta2) * p.grad ** 2
            m_hat = self.m[i] / (1 - self.beta1 ** t)
            v_hat = self.v[i] / (1 - self.beta2 ** t)
            p.data = p.data - lr_t * m_hat / (v_hat ** 0.5 + self.eps)
            p.grad = 0
    """, "t incremented first, ** 0.5, integer zero grads"),
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
    variant("value_relu_boolean_local_gradient", "micro_value_relu", """
        return Value(0.0 if self.data < 0 else self.data, (self,), (self.data > 0,))
    """, "the local gradient as the boolean self.data > 0"),
    variant("value_exp_computed_twice", "micro_value_exp", """
        return Value(math.exp(self.data), (self,), (math.exp(self.data),))
    """, "math.exp called for the value and again for the local gradient"),
    variant("softmax_builtin_sum", "micro_softmax", """
        max_val = max(val.data for val in logits)
        exps = [(val - max_val).exp() for val in logits]
        total = sum(exps)
        return [e / total for e in exps]
    """, "Python's sum over the exponentials (0 + Value through __radd__)"),
    variant("attention_generator_sums", "micro_attention", """
        head_dim = len(query)
        scores = [sum(query[j] * key[j] for j in range(head_dim)) / head_dim ** 0.5 for key in keys]
        weights = softmax(scores)
        output = [sum((weights[t] * values[t][j] for t in range(len(values))), Value(0)) for j in range(head_dim)]
        return output, weights
    """, "generator sums with Python's sum, the scores divided by head_dim ** 0.5"),
    variant("rmsnorm_builtin_sum_literal_eps", "micro_rmsnorm", """
        ms = sum(xi * xi for xi in xs) / len(xs)
        scale = (ms + 1e-5) ** -0.5
        return [xi * scale for xi in xs]
    """, "Python's sum of squares, eps written as 1e-5"),
    variant("loss_reciprocal_times_sum", "micro_loss", """
        model.start_sequence()
        losses = []
        for pos in range(n):
            probs = softmax(model.forward(ids[pos], pos))
            losses.append(-probs[ids[pos + 1]].log())
        return (1 / n) * sum(losses, Value(0))
    """, "(1 / n) times Python's sum of the position losses"),
]

# The lesson's common mistakes (quoted from its README) and the mutants that make them.
LESSON = {
    "`=` instead of `+=` in backward": ("backward_overwrites",),
    "a multiplication whose two local derivatives are swapped": ("mul_local_gradients_swapped",),
    "relu's derivative 1 at exactly 0": ("relu_gradient_one_at_zero",),
    "Logits of length E instead of V": ("forward_returns_features",),
    "a final norm before the LM head": ("forward_final_norm",),
    "Attending before appending the current key": ("block_attends_before_appending",),
    "Grads not reset after an Adam step": ("adam_grads_not_reset",),
    "A squared ReLU in the MLP": ("block_squared_relu",),
    "logits read from WTE (a tied head)": ("forward_head_tied_to_wte",),
    "An operation label": ("add_operation_label", "mul_operation_label"),
}
