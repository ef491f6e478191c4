"""Config resolution as the command line does it (parse_sets, for_variant, resolve): the README's `--set`
commands, positions that a variant brings or that cannot reach the eval lengths, tasks that need causal
attention, and configs that cannot mean what they claim (blind to order, a causal form that reads later inputs,
terms indexed by position read past the training length), refused in one sentence or skipped by a benchmark."""

import dataclasses

import pytest

import variants
from experiments import tasks
from experiments.benchmark.definition import resolve_cell
from experiments.run import config as configs
from experiments.run.build import build
from variants.relative import KIND_DEFAULTS


def resolve_as_the_cli(sets, variant="dense", task="passkey", profile="quick"):
    overrides = configs.for_variant(configs.parse_sets(sets), variant, [variant])
    return configs.resolve(variant=variant, task=task, profile=profile, seed=0, device="cpu", overrides=overrides)


def refusal(sets, **where):
    with pytest.raises(configs.OptionError) as error:
        resolve_as_the_cli(sets, **where)
    message = str(error.value)
    assert message.count(". ") == 0 and message.endswith("."), message  # one sentence
    return message


@pytest.mark.parametrize(("sets", "variant", "check"), [
    (["model.positions=none"], "dense", lambda config: config.model.positions == "none"),
    (["model.positions=None"], "dense", lambda config: config.model.positions == "none"),
    (["model.positions=none", "task.eval_lengths=256,512"], "dense",
     lambda config: config.task_options.eval_lengths == (256, 512)),
    (["variant.window=32", "train.lr=3e-4"], "local",
     lambda config: config.variant_options.window == 32 and config.train.lr == 3e-4),
    (["model.head_dim=256"], "dense", lambda config: config.model.attention_head_dim == 256),
    (["train.attention_stats=true"], "dense", lambda config: config.train.attention_stats is True),
])
def test_the_readmes_set_commands_resolve_as_written(sets, variant, check):
    config = resolve_as_the_cli(sets, variant=variant)
    assert check(config)
    assert configs.from_dict(config.to_dict()) == config  # and resume from their config.json


def test_the_word_none_is_still_none_for_options_that_accept_none():
    assert resolve_as_the_cli(["model.head_dim=none"]).model.head_dim is None


def test_eval_lengths_beyond_learned_positions_are_refused_naming_the_fix():
    message = refusal(["task.eval_lengths=256,512"])
    assert "model.positions 'learned'" in message and "512" in message
    assert "model.positions=none" in message and "sinusoidal" in message
    for scheme in ("none", "sinusoidal"):
        assert resolve_as_the_cli(["task.eval_lengths=256,512", f"model.positions={scheme}"]).model.positions == scheme
    assert resolve_as_the_cli(["task.eval_lengths=64,128"]).model.positions == "learned"  # within seq_len 128


@pytest.mark.parametrize("name, profile", [(name, profile) for name in tasks.list_tasks()
                                           for profile in tasks.task_class(name).profiles])
def test_every_profile_that_evaluates_longer_defaults_to_positions_that_reach_its_lengths(name, profile):
    config = resolve_as_the_cli([], task=name, profile=profile)  # raises if a profile's positions cannot
    task = tasks.create_task(name, profile=profile)
    assert task.max_len == task.seq_len or config.model.positions != "learned"


@pytest.mark.parametrize("kind", sorted(KIND_DEFAULTS))
def test_a_relative_variant_runs_without_absolute_positions_unless_asked(kind):
    config = resolve_as_the_cli([f"variant.kind={kind}"], variant="relative")
    assert config.model.positions == "none" and config.to_dict()["model"]["positions"] == "none"
    learned = resolve_as_the_cli([f"variant.kind={kind}", "model.positions=learned"], variant="relative")
    assert learned.model.positions == "learned"
    assert configs.from_dict(learned.to_dict()) == learned  # the recorded value wins when the run resumes


def test_only_variants_with_position_terms_of_their_own_drop_absolute_positions():
    providing = [name for name in variants.list_variants() if variants.variant_class(name).provides_positions]
    assert providing == ["relative"]
    assert resolve_as_the_cli([], variant="dense").model.positions == "learned"


def test_a_non_causal_model_on_a_task_whose_later_inputs_give_the_answer_away_is_refused():
    message = refusal(["model.causal=false"], task="flipflop")
    assert "model.causal false" in message and "'flipflop'" in message and "model.causal=true" in message
    needing = [name for name in tasks.list_tasks() if tasks.task_class(name).needs_causal]
    assert needing == ["flipflop", "fuzzy_in_context_recall", "in_context_recall", "noisy_in_context_recall"]
    assert resolve_as_the_cli(["model.causal=false"], task="passkey").model.causal is False


@pytest.mark.parametrize("name", ["linformer", "nystromformer"])
def test_a_bidirectional_variant_runs_non_causal_where_the_task_allows_and_is_refused_where_it_cannot(name):
    assert resolve_as_the_cli([], variant="dense").model.causal is True  # the default the variant overrides
    config = resolve_as_the_cli([], variant=name)
    assert config.model.causal is False and config.to_dict()["model"]["causal"] is False
    assert configs.from_dict(config.to_dict()) == config
    message = refusal(["model.causal=true"], variant=name)
    assert f"variant {name!r} is bidirectional in its paper" in message and "accepted: model.causal=false" in message
    message = refusal([], variant=name, task="flipflop")
    assert f"variant {name!r} is bidirectional" in message and "task 'flipflop' needs causal attention" in message
    with pytest.raises(configs.Incompatible):  # what a suite skips with its reason, where a single run refuses
        resolve_as_the_cli([], variant=name, task="flipflop")


def test_linformer_resolves_with_the_tasks_longest_sequence_as_its_max_len():
    config = resolve_as_the_cli(["task.seq_len=24", "task.eval_lengths=16", "model.positions=none",
                                 "variant.rank=8", "variant.share=kv"], variant="linformer")
    assert dataclasses.asdict(config.variant_options) == {"rank": 8, "share": "kv"}
    module = build(config).model.variant_module
    assert module.max_len == 24 and module.key_projection.shape == (8, 24)
    assert configs.described_variant(config) == "linformer_r8_sharekv"


# -- configs that cannot mean what they claim: blind to order, a causal form that reads later inputs, terms per
# position read past the training length -----------------------------------------------------------------------


def test_the_capabilities_are_stated_where_they_hold():
    def stating(flag, value):
        return [name for name in [*variants.list_variants(), *variants.list_baselines()]
                if getattr(variants.variant_class(name), flag) is value]

    assert stating("prefix_consistent", False) == ["reformer"]
    assert stating("position_indexed", True) == ["cosformer", "linformer", "sinkhorn", "synthesizer"]
    assert stating("order_aware", False) == ["additive", "dense", "linear", "nystromformer", "performer", "qknorm",
                                             "reformer", "softcap", "ssmax", "temperature", "unscaled"]
    assert [name for name in tasks.list_tasks() if not tasks.task_class(name).depends_on_order] == ["max_retrieval",
                                                                                              "passkey"]


ORDER_BLIND = ("model.positions 'none' with model.causal false leaves variant 'nystromformer' blind to the order of "
               "its inputs, on which the answers of task 'induction' depend; accepted: model.positions=sinusoidal.")


def test_a_bidirectional_model_without_positions_is_refused_on_a_task_that_depends_on_order():
    assert refusal([], variant="nystromformer", task="induction") == ORDER_BLIND
    message = refusal(["model.causal=false", "model.positions=none"], variant="dense", task="mqar")
    assert message.endswith("task 'mqar' depend; accepted: model.positions=sinusoidal or model.positions=learned or "
                            "model.causal=true.")
    with pytest.raises(configs.Incompatible):
        resolve_as_the_cli([], variant="nystromformer", task="induction")
    assert resolve_as_the_cli(["model.positions=sinusoidal"], variant="nystromformer", task="induction").model.causal \
        is False
    for variant in ("nystromformer", "relative", "local", "lstm"):  # order does not matter, or the variant reads it
        task = "passkey" if variant == "nystromformer" else "induction"
        config = resolve_as_the_cli(["model.causal=false", "model.positions=none"], variant=variant, task=task)
        assert (config.model.causal, config.model.positions) == (False, "none")


def test_a_causal_form_that_is_not_prefix_consistent_runs_only_bidirectionally():
    config = resolve_as_the_cli([], variant="reformer")
    assert config.model.causal is False and configs.from_dict(config.to_dict()) == config
    assert refusal(["model.causal=true"], variant="reformer") == (
        "variant 'reformer' has a causal form that is not prefix-consistent (a later input changes earlier outputs), "
        "so it cannot run model.causal=true; accepted: model.causal=false, on a task that allows it.")
    message = refusal([], variant="reformer", task="flipflop")
    assert message.startswith("variant 'reformer' has a causal form that is not prefix-consistent")
    assert "task 'flipflop' needs causal attention" in message and "prefix-consistent causal form." in message


@pytest.mark.parametrize("variant", ["cosformer", "linformer", "sinkhorn", "synthesizer"])
def test_evaluation_past_the_training_length_is_refused_for_terms_indexed_by_position(variant):
    assert refusal([], variant=variant, task="induction") == (
        f"variant {variant!r} has terms indexed by absolute position, which eval length 128 of task 'induction' "
        "would read past the training length 32, where they never trained; accepted: eval lengths up to 32, or a "
        "variant without position-indexed terms.")
    with pytest.raises(configs.Incompatible):
        resolve_as_the_cli([], variant=variant, task="induction")
    assert resolve_as_the_cli(["task.eval_lengths=32"], variant=variant, task="induction").task_options.eval_lengths \
        == (32,)
    assert resolve_as_the_cli(["task.eval_lengths=256"], variant="dense", task="induction")  # nothing per position


def test_a_benchmark_skips_a_cell_that_cannot_mean_what_it_claims_with_the_reason():
    cell = resolve_cell("nystromformer", "induction", profile="quick", seed=0, device="cpu", kernel="auto",
                        overrides=configs.parse_sets([]), reference=(None, "no model is sized in this test"))
    assert cell.skipped == ORDER_BLIND and cell.base_lr is None
    cell = resolve_cell("linformer", "induction", profile="quick", seed=0, device="cpu", kernel="auto",
                        overrides=configs.parse_sets([]), reference=(None, "no model is sized in this test"))
    assert cell.skipped.startswith("variant 'linformer' has terms indexed by absolute position")
