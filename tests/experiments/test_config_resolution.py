"""Config resolution as the command line does it (parse_sets, for_variant, resolve): the README's `--set`
commands, positions that a variant brings or that cannot reach the eval lengths, and tasks that need causal
attention."""

import dataclasses

import pytest

import variants
from experiments import config as configs
from experiments import tasks
from experiments.build import build
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


@pytest.mark.parametrize("name", tasks.list_tasks())
@pytest.mark.parametrize("profile", tasks.PROFILES)
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
    assert needing == ["flipflop"]
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
    config = resolve_as_the_cli(["task.seq_len=24", "task.eval_lengths=40", "model.positions=none",
                                 "variant.rank=8", "variant.share=kv"], variant="linformer")
    assert dataclasses.asdict(config.variant_options) == {"rank": 8, "share": "kv"}
    module = build(config).model.variant_module
    assert module.max_len == 40 and module.key_projection.shape == (8, 40)
    assert configs.described_variant(config) == "linformer_r8_sharekv"
