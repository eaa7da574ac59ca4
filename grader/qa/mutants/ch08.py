"""Chapter 08: the training chapter's classic mistakes, and right ways to write it."""

from grader.qa.mutants import mutant, patch, variant

MUTANTS = [
    # AdamW.__init__
    mutant("adamw_init_keeps_duplicates", "adamw_init", patch("""
        - if id(p) in seen:
        -     continue  # a shared tensor: step it once, not once per appearance
        - seen.add(id(p))
    """), "ch08.adamw_init.each_parameter_once", "more than once", "a shared tensor held twice"),
    mutant("adamw_init_accepts_frozen", "adamw_init", patch("""
        - if not p.requires_grad:
        -     raise ValueError(
        -         f"AdamW: parameter {index} (shape {tuple(p.shape)}) does not require grad: "
        -         f"it would never receive a gradient, so it cannot be trained"
        -     )
    """), "ch08.adamw_init.rejects_frozen_and_empty", "does not require grad",
       "a frozen tensor accepted"),
    mutant("adamw_init_reads_generator_twice", "adamw_init", patch("""
        + if any(not p.requires_grad for p in params):
        +     raise ValueError("AdamW: a parameter does not require grad")
          self.params = []
        - if not self.params:
        -     raise ValueError("AdamW got an empty parameter list")
    """), "ch08.adamw_init.tied_model_generator", "read only once", "the generator read twice"),
    # AdamW.step
    mutant("adamw_no_bias_correction", "adamw_step", patch("""
        - denom = (v.sqrt() / math.sqrt(bias_correction2)).add_(self.eps)
        - p.addcdiv_(m, denom, value=-self.lr / bias_correction1)
        + denom = v.sqrt().add_(self.eps)
        + p.addcdiv_(m, denom, value=-self.lr)
    """), ("ch08.adamw_step.first_step", "ch08.adamw_step.matches_torch"), "bias correction",
       "no bias correction"),
    mutant("adamw_coupled_weight_decay", "adamw_step", patch("""
        - grad = p.grad
        + grad = p.grad + self.weight_decay * p
        - p.mul_(1.0 - self.lr * self.weight_decay)
    """), ("ch08.adamw_step.decoupled_decay", "ch08.adamw_step.matches_torch"), "L2",
       "weight decay added to the gradient (Adam + L2)"),
    mutant("adamw_eps_inside_sqrt", "adamw_step", patch("""
        - denom = (v.sqrt() / math.sqrt(bias_correction2)).add_(self.eps)
        + denom = (v / bias_correction2 + self.eps).sqrt()
    """), "ch08.adamw_step.matches_torch", "inside the square root", "eps inside the square root"),
    mutant("adamw_betas_swapped", "adamw_step", patch("""
        - beta1, beta2 = self.betas
        + beta2, beta1 = self.betas
    """), "ch08.adamw_step.matches_torch", "swapped", "beta1 and beta2 swapped"),
    mutant("adamw_decay_after_update", "adamw_step", patch("""
        - p.mul_(1.0 - self.lr * self.weight_decay)
          p.addcdiv_(m, denom, value=-self.lr / bias_correction1)
        + p.mul_(1.0 - self.lr * self.weight_decay)
    """), "ch08.adamw_step.matches_torch", "after the Adam update", "decay applied after the update"),
    mutant("adamw_moments_not_kept", "adamw_step", patch("""
        - m.mul_(beta1).add_(grad, alpha=1.0 - beta1)
        - v.mul_(beta2).addcmul_(grad, grad, value=1.0 - beta2)
        + m = (1.0 - beta1) * grad
        + v = (1.0 - beta2) * grad * grad
    """), "ch08.adamw_step.matches_torch", "not kept", "fresh m and v every step"),
    mutant("adamw_one_global_step_count", "adamw_step", patch("""
          beta1, beta2 = self.betas
        + self.t = getattr(self, 't', 0) + 1
        - t = self.steps[i]
        + t = self.t
    """), ("ch08.adamw_step.skipped_steps", "ch08.adamw_step.random_matches_torch"), "shared by all parameters",
       "one global t"),
    mutant("adamw_not_in_place", "adamw_step", patch("""
        - p.mul_(1.0 - self.lr * self.weight_decay)
        + p = p * (1.0 - self.lr * self.weight_decay)
        - p.addcdiv_(m, denom, value=-self.lr / bias_correction1)
        + p = p - self.lr / bias_correction1 * m / denom
    """), ("ch08.adamw_step.first_step", "ch08.adamw_step.matches_torch"), "in place",
       "the update assigned to a local name"),
    mutant("adamw_steps_a_copy", "adamw_step", patch("""
        - p.mul_(1.0 - self.lr * self.weight_decay)
        + p = p.detach().clone()  # a working copy: every update below lands on it
        + p.mul_(1.0 - self.lr * self.weight_decay)
    """), ("ch08.adamw_step.first_step", "ch08.adamw_step.matches_torch"), "did not move",
       "the update applied to a copy of the parameter"),
    mutant("adamw_rebinds_held_parameter", "adamw_step", patch("""
        - p.mul_(1.0 - self.lr * self.weight_decay)
        + p = p * (1.0 - self.lr * self.weight_decay)
        - p.addcdiv_(m, denom, value=-self.lr / bias_correction1)
        + self.params[i] = p - self.lr / bias_correction1 * m / denom
    """), ("ch08.adamw_step.first_step", "ch08.adamw_step.matches_torch"), "now holds a new tensor",
       "the updated value stored in self.params[i] instead of written into the parameter"),
    mutant("adamw_library", "adamw_step", """
        if not hasattr(self, "_inner"):
            self._inner = torch.optim.AdamW(self.params, lr=self.lr, betas=self.betas, eps=self.eps,
                                            weight_decay=self.weight_decay)
        self._inner.param_groups[0]["lr"] = self.lr
        self._inner.step()
    """, "ch08.adamw_step.matches_torch", "torch.optim.AdamW", "torch.optim.AdamW does the work"),
    # AdamW.zero_grad
    mutant("zero_grad_does_nothing", "adamw_zero_grad", patch("""
        - p.grad = None
        + grad = p.grad
        + grad = None
    """), "ch08.adamw_zero_grad.clears_gradients", "old gradient", "the gradients are never cleared"),
    mutant("zero_grad_resets_moments", "adamw_zero_grad", """
        for i, p in enumerate(self.params):
            p.grad = None
            self.exp_avg[i] = torch.zeros_like(p)
            self.exp_avg_sq[i] = torch.zeros_like(p)
    """, "ch08.adamw_zero_grad.clears_gradients", "optimizer's state", "the moments reset with the gradients"),
    mutant("zero_grad_assumes_a_gradient", "adamw_zero_grad", patch("""
        - p.grad = None
        + p.grad.zero_()
    """), "ch08.adamw_zero_grad.before_any_backward", "AttributeError", "p.grad.zero_() on a None gradient"),
    # clip_grad_norm
    mutant("clip_per_tensor", "clip_grad_norm", """
        total = torch.zeros((), dtype=torch.float64)
        for p in parameters:
            if p.grad is None:
                continue
            norm = torch.linalg.vector_norm(p.grad)
            total = torch.sqrt(total**2 + norm**2)
            if norm > max_norm:
                p.grad.mul_(max_norm / (norm + 1e-6))
        return total
    """, ("ch08.clip_grad_norm.global_norm", "ch08.clip_grad_norm.matches_torch"), "its own norm",
       "each tensor clipped on its own"),
    mutant("clip_always_scales", "clip_grad_norm", patch("""
        - scale = torch.clamp(max_norm / (total + 1e-6), max=1.0)
        + scale = max_norm / (total + 1e-6)
    """), ("ch08.clip_grad_norm.below_limit_untouched", "ch08.clip_grad_norm.matches_torch"), "below max_norm",
       "scales even below max_norm"),
    mutant("clip_returns_norm_after", "clip_grad_norm", patch("""
        - return total
        + return torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
    """), "ch08.clip_grad_norm.matches_torch", "after clipping", "returns the norm after clipping"),
    mutant("clip_reads_generator_twice", "clip_grad_norm", """
        unique = {id(p): p for p in parameters if p.grad is not None}
        total = torch.sqrt(sum((p.grad**2).sum() for p in unique.values()))
        scale = torch.clamp(max_norm / (total + 1e-6), max=1.0)
        seen = set()
        for p in parameters:
            if p.grad is not None and id(p) not in seen:
                seen.add(id(p))
                p.grad.mul_(scale)
        return total
    """, "ch08.clip_grad_norm.missing_and_shared", "generator", "a generator of parameters read twice"),
    mutant("clip_library", "clip_grad_norm", """
        return torch.nn.utils.clip_grad_norm_(list({id(p): p for p in parameters}.values()), max_norm)
    """, "ch08.clip_grad_norm.matches_torch", "clip_grad_norm_", "torch's clip_grad_norm_"),
    # make_batch
    mutant("make_batch_targets_not_shifted", "make_batch", patch("""
        - return inputs, targets, mask
        + return inputs, inputs.clone(), mask
    """), ("ch08.make_batch.lesson_example", "ch08.make_batch.padding_and_cropping"), "shift",
       "targets equal to the inputs"),
    mutant("make_batch_padding_scored", "make_batch", patch("""
        - mask = torch.zeros((len(windows), T), dtype=torch.bool)
        + mask = torch.ones((len(windows), T), dtype=torch.bool)
    """), ("ch08.make_batch.lesson_example", "ch08.make_batch.padding_and_cropping"), "padded positions",
       "the mask is True on padding"),
    mutant("make_batch_padding_in_front", "make_batch", patch("""
        - inputs[row, : len(x)] = torch.tensor(x, dtype=torch.long)
        - targets[row, : len(y)] = torch.tensor(y, dtype=torch.long)
        - mask[row, : len(x)] = True
        + inputs[row, T - len(x):] = torch.tensor(x, dtype=torch.long)
        + targets[row, T - len(y):] = torch.tensor(y, dtype=torch.long)
        + mask[row, T - len(x):] = True
    """), ("ch08.make_batch.lesson_example", "ch08.make_batch.padding_and_cropping"), "front",
       "padding at the front"),
    mutant("make_batch_always_block_size", "make_batch", patch("""
        - T = max(len(x) for x, _ in windows)
        + T = block_size
    """), "ch08.make_batch.lesson_example", "longest row", "T fixed at block_size"),
    # train_step
    mutant("train_step_no_zero_grad", "train_loop", patch("""
        - optimizer.zero_grad()
    """), ("ch08.train_loop.fresh_clipped_gradients", "ch08.train_loop.returns_loss_and_norm"), "accumulate",
       "no zero_grad: gradients pile up"),
    mutant("train_step_step_before_backward", "train_loop", patch("""
        + optimizer.step()
          loss.backward()
        - optimizer.step()
    """), ("ch08.train_loop.every_parameter_trains", "ch08.train_loop.fresh_clipped_gradients"),
       "before optimizer.step()", "optimizer.step() before backward()"),
    mutant("train_step_zero_grad_after_backward", "train_loop", patch("""
        - optimizer.zero_grad()

        - optimizer.step()
        + optimizer.zero_grad()  # a clean slate for the step
        + optimizer.step()
    """), ("ch08.train_loop.every_parameter_trains", "ch08.train_loop.fresh_clipped_gradients"),
       "zero_grad() ran after loss.backward()", "gradients cleared between backward and step"),
    mutant("train_step_loss_after_update", "train_loop", patch("""
        - return loss.item(), float(norm)
        + with torch.no_grad():
        +     after = masked_loss(model(inputs)[0], targets, mask)
        + return after.item(), float(norm)
    """), "ch08.train_loop.returns_loss_and_norm", "after the update", "returns the loss after the update"),
    mutant("train_step_clips_after_step", "train_loop", patch("""
        - optimizer.step()

        + optimizer.step()
          if max_norm is not None:
    """), "ch08.train_loop.fresh_clipped_gradients", "not clipped", "clipping after the step"),
    mutant("train_step_returns_tensors", "train_loop", patch("""
        - return loss.item(), float(norm)
        + return loss.detach(), norm
    """), "ch08.train_loop.returns_loss_and_norm", "floats", "tensors returned instead of floats"),
    # evaluate
    mutant("evaluate_mean_of_batch_means", "evaluate", patch("""
        - total, count = 0.0, 0
        + means = []
        - n = int(mask.sum())
        - total += masked_loss(logits, targets, mask).item() * n
        - count += n
        + means.append(masked_loss(logits, targets, mask).item())
        - return total / count
        + return sum(means) / len(means)
    """), ("ch08.evaluate.per_scored_character", "ch08.evaluate.matches_reference"), "batch means",
       "mean of per-batch means"),
    mutant("evaluate_padding_scored", "evaluate", patch("""
        - n = int(mask.sum())
        - total += masked_loss(logits, targets, mask).item() * n
        - count += n
        + total += cross_entropy(logits, targets).item() * targets.numel()
        + count += targets.numel()
    """), ("ch08.evaluate.per_scored_character", "ch08.evaluate.matches_reference"), "padded",
       "padded positions scored"),
    mutant("evaluate_in_training_mode", "evaluate", patch("""
        - model.eval()
    """), "ch08.evaluate.eval_mode_restored", "model.eval()", "dropout left on while evaluating"),
    mutant("evaluate_always_back_to_train", "evaluate", patch("""
        - model.train(was_training)
        + model.train()
    """), "ch08.evaluate.eval_mode_restored", "restore the mode", "always returns to training mode"),
    # bigram_baseline
    mutant("bigram_no_kv_in_denominator", "bigram_baseline", patch("""
        - log_probs = torch.log((counts + smoothing) / (counts.sum(dim=1, keepdim=True) + smoothing * V))
        + log_probs = torch.log((counts + smoothing) / (counts.sum(dim=1, keepdim=True) + smoothing))
    """), "ch08.bigram_baseline.by_hand", "k·V", "add-k without k·V in the denominator"),
    mutant("bigram_in_bits", "bigram_baseline", patch("""
        - log_probs = torch.log((counts + smoothing) / (counts.sum(dim=1, keepdim=True) + smoothing * V))
        + log_probs = torch.log2((counts + smoothing) / (counts.sum(dim=1, keepdim=True) + smoothing * V))
    """), "ch08.bigram_baseline.by_hand", "bits", "log2 instead of ln"),
    mutant("bigram_ignores_block_size", "bigram_baseline", patch("""
        - inputs, targets = training_windows(ids, block_size or len(ids))
        + inputs, targets = ids[:-1], ids[1:]
    """), ("ch08.bigram_baseline.by_hand", "ch08.bigram_baseline.cropped_and_smoothed"), "block_size",
       "every pair scored, block_size ignored"),
    mutant("bigram_counts_validation_too", "bigram_baseline", patch("""
        - for a, b in pairs(train_docs):
        + for a, b in pairs([*train_docs, *val_docs]):
    """), ("ch08.bigram_baseline.by_hand", "ch08.bigram_baseline.cropped_and_smoothed"), "validation names",
       "the validation names counted with the training names"),
    mutant("bigram_drops_opening_bos", "bigram_baseline", patch("""
        - ids = tokenizer.encode_document(doc)
        + ids = tokenizer.encode_document(doc)[1:]
    """), ("ch08.bigram_baseline.by_hand", "ch08.bigram_baseline.cropped_and_smoothed"),
       "no transition from BOS", "the opening BOS left out of every document"),
    mutant("zero_grad_zeroes_in_place", "adamw_zero_grad", patch("""
        - p.grad = None
        + if p.grad is not None:
        +     p.grad.zero_()
    """), "ch08.adamw_zero_grad.sets_none", "tensor of zeros", "gradients zeroed in place instead of set to None"),
    # torch's sparse Adam (its functional form, reached past the static scan) makes AdamW's
    # step once the decay is decoupled by hand and eps is scaled to where sparse Adam adds it.
    mutant("adamw_step_sparse_adam", "adamw_step", """
        beta1, beta2 = self.betas
        functional = getattr(torch.optim, "_functional")
        for i, p in enumerate(self.params):
            if p.grad is None:
                continue
            self.steps[i] += 1
            p.mul_(1.0 - self.lr * self.weight_decay)
            functional.sparse_adam([p], [p.grad.to_sparse()], [self.exp_avg[i]], [self.exp_avg_sq[i]], [self.steps[i]],
                                   eps=self.eps * math.sqrt(1.0 - beta2 ** self.steps[i]), beta1=beta1, beta2=beta2,
                                   lr=self.lr, maximize=False)
    """, "ch08.adamw_step.matches_torch", "torch.optim._functional", "torch's sparse Adam does the step"),
    # Families that code adapted from well-known implementations brings: AdamW computed in
    # float32 (hyper-parameters as float32 tensors, or a float32 working copy, as C and fused
    # code keep them), eps added before the bias correction with the decay after the update
    # (an older library AdamW), clipping by value or in float32, a loss over every position,
    # and counts in float32.
    mutant("adamw_step_float32_hyperparameters", "adamw_step", """
        lr = torch.tensor(self.lr, dtype=torch.float32)
        decay = torch.tensor(self.weight_decay, dtype=torch.float32)
        beta1, beta2 = (torch.tensor(b, dtype=torch.float32) for b in self.betas)
        for i, p in enumerate(self.params):
            if p.grad is None:
                continue
            self.steps[i] += 1
            t = self.steps[i]
            p.mul_(1 - lr * decay)
            m, v = self.exp_avg[i], self.exp_avg_sq[i]
            m.lerp_(p.grad, 1 - beta1)
            v.lerp_(p.grad.square(), 1 - beta2)
            denom = (v / (1 - beta2**t)).sqrt() + self.eps
            p.add_(m / denom * (-lr / (1 - beta1**t)))
    """, "ch08.adamw_step.matches_torch", "float32 precision", "hyper-parameters held as float32 tensors"),
    mutant("adamw_step_float32_working_copy", "adamw_step", """
        beta1, beta2 = self.betas
        for i, p in enumerate(self.params):
            if p.grad is None:
                continue
            self.steps[i] += 1
            t = self.steps[i]
            g, w = p.grad.float(), p.detach().float()  # the update worked out in float32
            m = self.exp_avg[i].float().mul_(beta1).add_(g, alpha=1 - beta1)
            v = self.exp_avg_sq[i].float().mul_(beta2).addcmul_(g, g, value=1 - beta2)
            self.exp_avg[i].copy_(m)
            self.exp_avg_sq[i].copy_(v)
            m_hat, v_hat = m / (1 - beta1**t), v / (1 - beta2**t)
            w -= self.lr * (m_hat / (v_hat.sqrt() + self.eps) + self.weight_decay * w)
            p.copy_(w)
    """, "ch08.adamw_step.matches_torch", "float32 precision", "the update computed on a float32 copy"),
    mutant("adamw_step_eps_before_correction", "adamw_step", patch("""
        - denom = (v.sqrt() / math.sqrt(bias_correction2)).add_(self.eps)
        - p.addcdiv_(m, denom, value=-self.lr / bias_correction1)
        + step_size = self.lr * math.sqrt(bias_correction2) / bias_correction1
        + p.addcdiv_(m, v.sqrt().add_(self.eps), value=-step_size)
    """), ("ch08.adamw_step.first_step", "ch08.adamw_step.matches_torch"), "before the bias correction",
       "eps added to sqrt(v) before the bias correction"),
    mutant("adamw_step_decay_after_eps_before_correction", "adamw_step", patch("""
        - p.mul_(1.0 - self.lr * self.weight_decay)

        - denom = (v.sqrt() / math.sqrt(bias_correction2)).add_(self.eps)
        - p.addcdiv_(m, denom, value=-self.lr / bias_correction1)
        + step_size = self.lr * math.sqrt(bias_correction2) / bias_correction1
        + p.addcdiv_(m, v.sqrt().add_(self.eps), value=-step_size)
        + p.add_(p, alpha=-self.lr * self.weight_decay)
    """), "ch08.adamw_step.matches_torch", "decay comes after the update",
       "eps before the bias correction and the decay after the update, at once"),
    mutant("clip_by_value", "clip_grad_norm", patch("""
        - scale = torch.clamp(max_norm / (total + 1e-6), max=1.0)
        - for g in grads:
        -     g.mul_(scale.to(g.dtype))
        + for g in grads:
        +     g.clamp_(-max_norm, max_norm)
    """), "ch08.clip_grad_norm.matches_torch", "by value", "each entry clamped to [-max_norm, max_norm]"),
    mutant("clip_norm_in_float32", "clip_grad_norm", patch("""
        - total = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g, 2.0) for g in grads]), 2.0)
        + total = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g.float(), 2.0) for g in grads]), 2.0)
    """), "ch08.clip_grad_norm.matches_torch", "float32 precision", "the norm computed in float32"),
    mutant("train_step_loss_over_every_position", "train_loop", patch("""
        - loss = masked_loss(logits, targets, mask)
        + loss = cross_entropy(logits, targets)
    """), "ch08.train_loop.returns_loss_and_norm", "padded positions", "the loss scores the padding too"),
    mutant("bigram_counts_in_float32", "bigram_baseline", patch("""
        - counts = torch.zeros((V, V), dtype=torch.float64)
        + counts = torch.zeros((V, V))
    """), "ch08.bigram_baseline.by_hand", "float32 precision", "counts in torch.zeros' default float32"),
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
    variant("adamw_step_out_of_place_then_copy", "adamw_step", """
        b1, b2 = self.betas
        for i, p in enumerate(self.params):
            g = p.grad
            if g is None:
                continue
            self.steps[i] = t = self.steps[i] + 1
            decayed = p * (1 - self.lr * self.weight_decay)
            self.exp_avg[i].copy_(b1 * self.exp_avg[i] + (1 - b1) * g)
            self.exp_avg_sq[i].copy_(b2 * self.exp_avg_sq[i] + (1 - b2) * g * g)
            m_hat = self.exp_avg[i] / (1 - b1**t)
            v_hat = self.exp_avg_sq[i] / (1 - b2**t)
            p.copy_(decayed - self.lr * m_hat / (torch.sqrt(v_hat) + self.eps))
    """, "the formulas out of place, written back with copy_"),
    variant("adamw_step_lerp_and_addcdiv", "adamw_step", """
        beta1, beta2 = self.betas
        for i, p in enumerate(self.params):
            if p.grad is None:
                continue
            self.steps[i] += 1
            t = self.steps[i]
            m, v = self.exp_avg[i], self.exp_avg_sq[i]
            m.lerp_(p.grad, 1 - beta1)
            v.mul_(beta2).add_(p.grad.square(), alpha=1 - beta2)
            p.mul_(1 - self.lr * self.weight_decay)
            step_size = self.lr / (1 - beta1**t)
            denom = v.div(1 - beta2**t).sqrt_().add_(self.eps)
            p.addcdiv_(m, denom, value=-step_size)
    """, "torch.lerp_ for m, in-place addcdiv_ for the update"),
    variant("zero_grad_detach_then_none", "adamw_zero_grad", """
        for p in self.params:
            if p.grad is not None:
                p.grad.detach_()
                p.grad = None
    """, "each existing gradient detached, then dropped"),
    variant("clip_flattened_with_branch", "clip_grad_norm", """
        unique = []
        for p in ([parameters] if isinstance(parameters, torch.Tensor) else list(parameters)):
            if p.grad is not None and all(p is not q for q in unique):
                unique.append(p)
        if not unique:
            return torch.tensor(0.0)
        total = torch.cat([p.grad.reshape(-1) for p in unique]).pow(2).sum().sqrt()
        if total > max_norm:
            factor = max_norm / (total + 1e-6)
            for p in unique:
                p.grad.mul_(factor)
        return total
    """, "one flattened vector, scaling only in an if branch"),
    variant("make_batch_pad_sequence", "make_batch", """
        from torch.nn.utils.rnn import pad_sequence

        pairs = [training_windows(list(ids), block_size) for ids in documents]
        xs = [torch.tensor(x, dtype=torch.long) for x, _ in pairs]
        ys = [torch.tensor(y, dtype=torch.long) for _, y in pairs]
        inputs = pad_sequence(xs, batch_first=True, padding_value=pad_id)
        targets = pad_sequence(ys, batch_first=True, padding_value=pad_id)
        lengths = torch.tensor([len(x) for x in xs])
        mask = torch.arange(inputs.shape[1]).unsqueeze(0) < lengths.unsqueeze(1)
        return inputs, targets, mask
    """, "torch's pad_sequence and a length comparison for the mask"),
    variant("train_step_zero_grad_at_the_end", "train_loop", """
        logits = model(inputs)[0]
        loss = masked_loss(logits, targets, mask)
        loss.backward()
        grads = [p.grad for p in optimizer.params if p.grad is not None]
        norm = torch.sqrt(sum((g**2).sum() for g in grads))
        if max_norm is not None:
            clip_grad_norm(optimizer.params, max_norm)
        optimizer.step()
        optimizer.zero_grad()
        return float(loss), norm.item()
    """, "the gradients cleared after the step instead of before the forward"),
    variant("evaluate_document_by_document", "evaluate", """
        was_training = model.training
        model.eval()
        total, count = 0.0, 0
        for ids in encode_documents(docs, tokenizer):
            x, y = training_windows(ids, model.cfg.block_size)
            logits = model(torch.tensor([x]))[0]
            total += cross_entropy(logits[0], torch.tensor(y)).item() * len(x)
            count += len(x)
        model.train(was_training)
        return total / count
    """, "one document at a time, no padding at all"),
    variant("bigram_with_dicts", "bigram_baseline", """
        from collections import Counter

        def pairs(docs):
            out = []
            for doc in docs:
                ids = tokenizer.encode_document(doc)
                n = len(ids) - 1 if block_size is None else min(block_size, len(ids) - 1)
                out += list(zip(ids[:n], ids[1 : n + 1]))
            return out

        counts = Counter(pairs(train_docs))
        totals = Counter(a for a, _ in pairs(train_docs))
        V = tokenizer.vocab_size
        scored = pairs(val_docs)
        nll = [-math.log((counts[(a, b)] + smoothing) / (totals[a] + smoothing * V)) for a, b in scored]
        return sum(nll) / len(nll)
    """, "Counter of pairs and math.log, no tensors"),
    variant("adamw_step_decay_inside_the_update", "adamw_step", """
        beta1, beta2 = self.betas
        for i, p in enumerate(self.params):
            if p.grad is None:
                continue
            self.steps[i] += 1
            t = self.steps[i]
            m = self.exp_avg[i].mul_(beta1).add_(p.grad, alpha=1 - beta1)
            v = self.exp_avg_sq[i].mul_(beta2).add_(p.grad * p.grad, alpha=1 - beta2)
            m_hat, v_hat = m / (1 - beta1**t), v / (1 - beta2**t)
            p.sub_(self.lr * (m_hat / (v_hat.sqrt() + self.eps) + self.weight_decay * p))
    """, "decay and Adam in one expression, both from the current p (float64 throughout)"),
    variant("adamw_step_lerp_both_moments", "adamw_step", """
        beta1, beta2 = self.betas
        for i, p in enumerate(self.params):
            g = p.grad
            if g is None:
                continue
            self.steps[i] += 1
            t = self.steps[i]
            p.mul_(1 - self.lr * self.weight_decay)
            self.exp_avg[i].lerp_(g, 1 - beta1)
            self.exp_avg_sq[i].lerp_(g.square(), 1 - beta2)
            denom = (self.exp_avg_sq[i] / (1 - beta2**t)).sqrt() + self.eps
            p.add_(self.exp_avg[i] / denom, alpha=-self.lr / (1 - beta1**t))
    """, "lerp_ for both moments, the step size folded into add_'s alpha"),
    variant("clip_parameters_to_vector", "clip_grad_norm", """
        if isinstance(parameters, torch.Tensor):
            parameters = [parameters]
        unique = list({id(p): p for p in parameters if p.grad is not None}.values())
        if not unique:
            return torch.tensor(0.0)
        total = torch.nn.utils.parameters_to_vector([p.grad for p in unique]).norm()
        factor = (max_norm / (total + 1e-6)).clamp(max=1.0)
        for p in unique:
            p.grad.mul_(factor)
        return total
    """, "every gradient entry as one vector (parameters_to_vector), a clamped factor"),
    variant("train_step_model_zero_grad", "train_loop", """
        model.zero_grad(set_to_none=True)
        logits = model(inputs)[0]
        loss = masked_loss(logits, targets, mask)
        loss.backward()
        norm = clip_grad_norm(optimizer.params, float("inf") if max_norm is None else max_norm)
        optimizer.step()
        return loss.item(), norm.item()
    """, "the model's own zero_grad(set_to_none=True), an infinite max_norm for no clipping"),
]

# The lesson's common mistakes (quoted from its README) and the mutants that make them.
LESSON = {
    "No `zero_grad`": ("train_step_no_zero_grad",),
    "`zero_grad` filling the gradients with zeros": ("zero_grad_zeroes_in_place",),
    "Weight decay added to g": ("adamw_coupled_weight_decay",),
    "applied after the update": ("adamw_decay_after_update",),
    "one global t for all parameters": ("adamw_one_global_step_count",),
    "Clipping each tensor on its own": ("clip_per_tensor",),
    "Padding at the front": ("make_batch_padding_in_front",),
    "letting padded positions into the loss or the count": ("make_batch_padding_scored", "evaluate_padding_scored"),
    "Working in float32": ("adamw_step_float32_hyperparameters", "adamw_step_float32_working_copy",
                           "bigram_counts_in_float32"),
}
