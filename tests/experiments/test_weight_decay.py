"""AdamW's weight decay: the weights of linear layers and the token embedding, never gains, biases, position
tables or per-head scalars; the run records which parameters it decayed."""

import pytest
from torch import nn

import variants
from experiments.run import config as configs
from experiments.run.model import Transformer
from experiments.run.optimizer import build_optimizer
from variants.per_head import PerHeadLinear

MODEL = configs.ModelConfig(dim=32, depth=2, heads=2)
# Every registered variant with its defaults, and the options that add parameters of their own.
CASES = [(name, {}) for name in variants.list_variants() + variants.list_baselines()] + [
    ("relative", {"kind": "t5"}), ("relative", {"kind": "shaw"}), ("temperature", {"learnable": True}),
    ("qknorm", {"norm": "rms"}),
]


# Per-head projections that variants hold as parameters of their own, decayed as the matrices of linear maps.
LINEAR_WEIGHTS = {"additive": ("query_proj", "key_proj", "score_vector"),
                  "based": ("query_projection", "key_projection"),
                  "linformer": ("key_projection", "value_projection")}
# How many such matrices the model has: additive's 3 in each block, Based's 2 in its linear blocks (block 0 of 2;
# block 1 is a sliding-window softmax layer), Linformer's E and F in each block, and in each block the dense
# Synthesizer's two-layer MLP and the Sinkhorn sorting network's two layers (each a PerHeadLinear, a linear map).
EXTRA_DECAYED = {"additive": 3 * MODEL.depth, "based": 2, "linformer": 2 * MODEL.depth,
                 "synthesizer": 2 * MODEL.depth, "sinkhorn": 2 * MODEL.depth}


def model_of(variant, options):
    return Transformer(MODEL, vocab_size=8, num_classes=4, max_len=16, variant=variant, variant_options=options)




@pytest.mark.parametrize(("variant", "options"), CASES)
def test_only_linear_and_embedding_weights_are_decayed_and_every_one_of_them_is(variant, options):
    model = model_of(variant, options)
    optimizer, decayed = build_optimizer(model, configs.TrainConfig(weight_decay=0.1))
    expected = [f"{prefix}.{name}".lstrip(".") for prefix, module in model.named_modules()
                for name, parameter in module.named_parameters(recurse=False)
                if (isinstance(module, (nn.Linear, nn.Embedding, nn.Conv1d, PerHeadLinear)) and name == "weight")
                or (isinstance(module, nn.RNNBase) and name.startswith(("weight_ih", "weight_hh")))
                or name in LINEAR_WEIGHTS.get(variant, ())]
    assert sorted(decayed) == sorted(expected)
    if not variants.is_baseline(variant):  # embedding, head, per block qkv, out and two MLP layers, and the variant's
        assert len(decayed) == 2 + 4 * MODEL.depth + EXTRA_DECAYED.get(variant, 0)
    parameters = dict(model.named_parameters())
    decaying, sparing = optimizer.param_groups
    assert (decaying["weight_decay"], sparing["weight_decay"]) == (0.1, 0.0)
    assert {id(p) for p in decaying["params"]} == {id(parameters[name]) for name in decayed}
    assert {id(p) for p in sparing["params"]} == {id(p) for n, p in parameters.items() if n not in decayed}


@pytest.mark.parametrize(("variant", "options", "spared"), [
    ("qknorm", {}, "blocks.0.attn.query_gain"), ("qknorm", {}, "blocks.0.attn.query_bias"),
    ("relative", {"kind": "t5"}, "blocks.0.attn.bucket_bias"),
    ("relative", {"kind": "shaw"}, "blocks.0.attn.distance_embedding"),
    ("temperature", {"learnable": True}, "blocks.0.attn.log_temperature"),
    ("dense", {}, "positions"), ("dense", {}, "blocks.0.attn_norm.weight"), ("dense", {}, "blocks.0.qkv.bias"),
    ("lstm", {}, "blocks.0.mixer.rnn.bias_ih_l0"), ("mamba", {}, "blocks.0.mixer.directions.0.A_log"),
    ("mamba", {}, "blocks.0.mixer.directions.0.D"), ("conv", {}, "blocks.0.mixer.depthwise.bias"),
    ("synthesizer", {"kind": "random"}, "blocks.0.attn.table"),  # logits per position pair: a position table
    ("synthesizer", {"kind": "factorized_random"}, "blocks.0.attn.left"),
    ("synthesizer", {}, "blocks.0.attn.hidden.bias"), ("sinkhorn", {}, "blocks.0.attn.sort_scores.bias"),
])
def test_gains_biases_position_tables_and_temperatures_are_not_decayed(variant, options, spared):
    model = model_of(variant, options)
    assert spared in dict(model.named_parameters())
    assert spared not in build_optimizer(model, configs.TrainConfig())[1]
