"""A report quotes nothing the code chose.

Beside certified parts, the code a student uploads could read them and pick what it
raises, prints, returns or names by what it read: a report that quoted it would be a
wire out of the sandbox. So a graded run tells a student the grader's own sentence (a
crash names a type Python or torch defines and the student's file as they know it), and
a judge words its diagnosis from what the contract fixes and the grader computed, never
from text, names, shapes, counts or messages the code chose (SECRET below stands for
certified code the submission read). Course staff keep every word, line and frame; and
`make check`, which runs without a reference, shows students their own message and line.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from grader.checks import catalogue
from grader.mutants import apply, region_of
from grader.run.results import ERROR, PASSED
from grader.run.engine import grade_task
from grader.run.worker_session import Grading
from grader.regions import package_sources
from grader.run.submission import Submission
from tests.hostile import assert_no_points, grade_one, hostile_sources, run

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = ROOT / "solutions" / "hero_transformer"


# -------------------------------------------------------------------------------- a crash


CRASHING_GELU = """
    scale = 1.0 / math.sqrt(2.0)
    raise RuntimeError(f"a private note {scale}")
"""


def _graded(reference, sandbox, task_name, body, use_reference=True):
    task = catalogue.tasks()[task_name]
    sources = apply(reference.sources, task.module, task.name, textwrap.dedent(body))
    checks = [c for c in catalogue.all_checks() if c.task == task_name]
    return grade_task(task, checks,
                      Grading(Submission("upload", sources), reference if use_reference else None, sandbox, seed=3)), sources


def test_a_crash_is_a_sentence_naming_the_students_file(reference, sandbox):
    results, sources = _graded(reference, sandbox, "gelu", CRASHING_GELU)
    line = next(n for n, text in enumerate(sources["model.py"].splitlines(), start=1)
                if "a private note" in text)
    for result in results:
        assert result.status == ERROR
        shown = result.diagnosis
        # Beside certified parts the line is one the code could pick by what it read: staff keep it.
        assert shown.startswith("gelu raised RuntimeError (hero_transformer/model.py)"), shown
        assert f" line {line}" not in shown and "submission/" not in shown
        assert f"line {line}" in result.staff_diagnosis
        assert f"while this check ran ({result.check.summary})" in shown
        # The message is the code's own words: staff see it, the student does not.
        assert "a private note" in result.staff_diagnosis and "a private note 0.7" not in shown


def test_make_check_shows_the_message_and_the_same_place(reference, sandbox):
    results, _ = _graded(reference, sandbox, "gelu", CRASHING_GELU, use_reference=False)
    for result in results:
        assert "RuntimeError: a private note 0.7" in result.diagnosis
        assert "(hero_transformer/model.py line " in result.diagnosis and "submission/" not in result.diagnosis


# -------------------------------------------------------- what the code chose, never quoted


SECRET = "SECRET_PAYLOAD_0123456789_" * 3  # stands for certified code the submission read


def test_a_judge_never_builds_its_words_from_a_vocabulary_the_code_rewrote(reference, sandbox):
    """decode may rewrite the tokenizer's chars before returning: the judges work from the
    vocabulary the contract fixes, so neither a quoted 'right' text nor a pass follows."""
    for body in (f"self.chars = ['a', 'b', {SECRET!r}, '', 'x', 'y']\nreturn ''",
                 "self.chars = [''] * 10\nreturn ''"):
        results = run(reference, sandbox, "decode", body)
        assert_no_points(results)
        assert not any(SECRET in r.diagnosis for r in results)


def test_an_exception_message_the_code_chose_is_never_quoted(reference, sandbox):
    results = run(reference, sandbox, "micro_softmax", f"raise OverflowError({SECRET!r})")
    assert_no_points(results)
    overflow = [r.diagnosis for r in results if "exp overflowed" in r.diagnosis]
    assert overflow and not any(SECRET in r.diagnosis for r in results)


def test_names_in_the_submission_are_not_quoted_by_the_pure_python_check(reference, sandbox):
    append = f"""
        def {SECRET}():
            import numpy
            return numpy
    """
    results = grade_one(reference, sandbox, "micro_forward", hostile_sources(reference, append=append,
                                                                              module="micro"), only={"pure_python"})
    assert [r.status for r in results] == ["failed"] and "numpy" in results[0].diagnosis
    assert SECRET not in results[0].diagnosis


# A tensor whose .shape is text: a probe that reads list(t.shape) off what the code built
# gets the text back (the wire rebuilds real tensors, but a shape the probe read is data).
_TEXT_SHAPE = f"""
class _TextShape(torch.Tensor):
    @property
    def shape(self):
        return [{SECRET!r}]
"""


def _failed_without_secret(results, names):
    assert results and {r.check.name.rsplit(".", 1)[-1] for r in results} == set(names), results
    assert all(r.status != PASSED for r in results), [(r.check.name, r.status) for r in results]
    assert not any(SECRET in r.diagnosis for r in results), [r.diagnosis for r in results]
    return [r.diagnosis for r in results]


def test_a_projection_shape_the_code_reported_is_never_quoted(reference, sandbox):
    body = _TEXT_SHAPE + """
class _Projection:
    def __init__(self, d):
        self.weight = torch.zeros(d, d).as_subclass(_TextShape)
        self.bias = None
self.q_proj = _Projection(cfg.d_model)
self.k_proj = nn.Linear(cfg.d_model, cfg.d_model, bias=False)
self.v_proj = nn.Linear(cfg.d_model, cfg.d_model, bias=False)
self.o_proj = nn.Linear(cfg.d_model, cfg.d_model, bias=False)
"""
    said = _failed_without_secret(run(reference, sandbox, "attention_init", body, only={"projections"}),
                                  ["projections"])
    assert "q_proj.weight has shape" in said[0]


def test_a_cache_shape_the_code_reported_is_never_quoted(reference, sandbox):
    body = _TEXT_SHAPE + """
B, T, _ = x.shape
self.last_attention = torch.full((B, self.n_heads, T, T), 1.0 / T, dtype=x.dtype)
fake = torch.zeros(1).as_subclass(_TextShape)
return x.clone(), ((fake, fake) if use_cache else None)
"""
    said = _failed_without_secret(run(reference, sandbox, "attention", body, only={"cache_consistent"}),
                                  ["cache_consistent"])
    assert "the returned keys have shape" in said[0]


def test_a_class_name_the_code_chose_is_never_quoted_for_the_blocks_parts(reference, sandbox):
    body = f"""
self.ln_attention = LayerNorm(cfg.d_model)
self.attention = type({SECRET!r}, (CausalSelfAttention,), {{}})(cfg)
self.ln_feedforward = LayerNorm(cfg.d_model)
self.feedforward = FeedForward(cfg)
"""
    said = _failed_without_secret(run(reference, sandbox, "block_init", body, only={"parameter_ledger"}),
                                  ["parameter_ledger"])
    assert "block.attention should be a CausalSelfAttention" in said[0]


# The reference's own lm_init body, which the cases below extend with one change each.
_LM_PARTS = region_of(package_sources(SOLUTIONS), "lm_init")[1]


@pytest.mark.parametrize("check, change, words", [
    ("separate_blocks", f"self.blocks = nn.ModuleList([type({SECRET!r}, (TransformerBlock,), {{}})(cfg) "
                        f"for _ in range(cfg.n_layers)])", "should hold TransformerBlock objects"),
    ("separate_blocks", f"del self.blocks\nkind = {SECRET!r}\n"
                        "self.blocks = type(kind, (list,), {})(TransformerBlock(cfg) for _ in range(cfg.n_layers))",
     "parameters are not registered"),
    ("final_layer_norm", f"self.ln_final = type({SECRET!r}, (LayerNorm,), {{}})(cfg.d_model)",
     "ln_final should be the course's LayerNorm"),
    ("module_names", f"self.register_parameter({SECRET!r}, nn.Parameter(torch.zeros(1)))", "unexpected"),
    ("untied_bias_free_head", _TEXT_SHAPE + "del self.head\nself.head = type('Head', (), {})()\n"
                                            "self.head.weight = torch.zeros(1).as_subclass(_TextShape)",
     "head.weight has shape"),
])
def test_names_and_shapes_the_model_reported_are_never_quoted(reference, sandbox, check, change, words):
    said = _failed_without_secret(run(reference, sandbox, "lm_init", _LM_PARTS + change, only={check}), [check])
    assert words in said[0]


def test_a_presents_shape_the_model_reported_is_never_quoted(reference, sandbox):
    body = f"""
class _Cached:
    shape = [{SECRET!r}]
B, T = idx.shape
logits = torch.zeros(B, T, self.cfg.vocab_size, dtype=torch.float64)
return logits, None, ([(_Cached(), _Cached()) for _ in self.blocks] if use_cache else None)
"""
    said = _failed_without_secret(run(reference, sandbox, "lm_forward", body, only={"cache_matches_full"}),
                                  ["cache_matches_full"])
    assert "cached keys/values should be" in said[0]


def test_parameter_names_the_code_gave_the_model_are_never_quoted(reference, sandbox):
    """train.py renames the model's parameters at import; train_step backpropagates, then
    drops some parameters' gradients before the step (so the judge lists parameters)."""
    append = f"""
        def _renamed(self, *args, **kwargs):
            for name, p in torch.nn.Module.named_parameters(self, *args, **kwargs):
                yield {SECRET!r} + name, p


        TransformerLM.named_parameters = _renamed
    """
    sources = hostile_sources(reference, {"train_loop": "logits, _, _ = model(inputs)\nmasked_loss(logits, targets, mask).backward()\n"
                                                "for p in optimizer.params[:3]:\n    p.grad = None\n"
                                                "optimizer.step()\nreturn 0.0, 0.0"}, append=append,
                              module="train")
    said = _failed_without_secret(grade_one(reference, sandbox, "train_loop", sources,
                                            only={"every_parameter_trains"}), ["every_parameter_trains"])
    assert "had no (or an all-zero) gradient" in said[0]


CODES = [ord(c) for c in SECRET]  # text spelt in numbers


def test_returned_ids_that_spell_text_are_never_quoted(reference, sandbox):
    results = run(reference, sandbox, "generate", f"return torch.tensor({CODES!r})", only={"stops_at_stop_id"})
    assert [r.status for r in results] == ["failed"]
    assert ", ".join(map(str, CODES[:8])) not in results[0].diagnosis, results[0].diagnosis


def test_call_lengths_that_spell_text_are_never_quoted(reference, sandbox):
    body = f"""
model(torch.tensor([list(prompt_ids)]))
for code in {CODES!r}:
    try:
        model(torch.zeros(1, code, dtype=torch.long))
    except Exception:
        pass
return None
"""
    results = run(reference, sandbox, "generate", body, only={"one_token_per_step"})
    assert [r.status for r in results] == ["failed"]
    assert ", ".join(map(str, CODES[:8])) not in results[0].diagnosis, results[0].diagnosis


BIG = int.from_bytes(SECRET.encode(), "big")  # text spelt as one integer
_HUGE_PARAMETER = f"""
class _Huge(nn.Parameter):
    def numel(self):
        return {BIG}
self.spelt = _Huge(torch.zeros(1))
"""


@pytest.mark.parametrize("task, check, body", [
    ("parameter_count", "published_figures", f"return {BIG}"),
    ("attention_init", "projections", "\n".join(f"self.{p} = nn.Linear(cfg.d_model, cfg.d_model, bias=False)"
                                                for p in ("q_proj", "k_proj", "v_proj", "o_proj")) + _HUGE_PARAMETER),
    ("block_init", "parameter_ledger", "self.ln_attention = LayerNorm(cfg.d_model)\nself.attention = "
     "CausalSelfAttention(cfg)\nself.ln_feedforward = LayerNorm(cfg.d_model)\nself.feedforward = FeedForward(cfg)"
     + _HUGE_PARAMETER),
    ("lm_init", "parameter_ledger", _LM_PARTS + _HUGE_PARAMETER),
])
def test_a_count_that_spells_text_is_never_quoted(reference, sandbox, task, check, body):
    said = _failed_without_secret(run(reference, sandbox, task, body, only={check}), [check])
    assert str(BIG)[:30] not in said[0] and f"{BIG:,}"[:30] not in said[0], said[0]
    assert "parameters" in said[0] or "got" in said[0]
