"""The attention statistics of the saturation studies: the entropy bound, and measure() against plain recomputation."""

import math
import tempfile
from pathlib import Path

import pytest
import torch
from einops import rearrange

from experiments import tasks
from experiments.run import attention_stats
from experiments.run import config as configs
from experiments.run.model import Transformer, scored_loss
from experiments.run.records import RunRecord
from experiments.run.train import train


def _entropy(weights: torch.Tensor) -> torch.Tensor:
    return -(weights * weights.clamp_min(1e-300).log()).sum(-1)


def test_the_entropy_bound_is_never_above_the_entropy_of_random_instances():
    generator = torch.Generator().manual_seed(0)
    checked = 0
    for num_keys in (2, 3, 7, 64, 1000):
        for sigma in (0.01, 0.3, 1.0, 3.0, 10.0, 40.0):
            # Logits anywhere in [-sigma, sigma], and the extreme ones: each logit at one end of the range.
            uniform = (torch.rand(200, num_keys, generator=generator, dtype=torch.float64) * 2 - 1) * sigma
            ends = torch.where(torch.rand(200, num_keys, generator=generator) < 0.5, -sigma, sigma).double()
            for logits in (uniform, ends):
                entropy = _entropy(torch.softmax(logits, dim=-1))
                bound = attention_stats.entropy_lower_bound(torch.tensor(sigma), torch.tensor(num_keys))
                assert (entropy >= bound - 1e-12).all(), (num_keys, sigma, float(entropy.min()), float(bound))
                checked += len(logits)
    assert checked == 2 * 200 * 5 * 6


def test_the_entropy_bound_holds_for_bilinear_logits_with_zhais_sigma():
    """Logits x_i^T M x_j of random inputs X and random M, sigma = ||M||_2 ||X X^T||_2: Zhai's setting."""
    generator = torch.Generator().manual_seed(1)
    for trial in range(50):
        length, width = int(torch.randint(2, 40, (1,), generator=generator)), 8
        inputs = torch.randn(length, width, generator=generator, dtype=torch.float64) * 10 ** (trial % 3 - 1)
        matrix = torch.randn(width, width, generator=generator, dtype=torch.float64) * 10 ** (trial % 4 - 2)
        logits = inputs @ matrix @ inputs.T  # (T, T)
        sigma = torch.linalg.matrix_norm(matrix, ord=2) * torch.linalg.matrix_norm(inputs @ inputs.T, ord=2)
        assert logits.abs().max() <= sigma * (1 + 1e-12)
        causal = torch.ones(length, length, dtype=torch.bool).tril()
        weights = torch.softmax(logits.masked_fill(~causal, -math.inf), dim=-1)
        bound = attention_stats.entropy_lower_bound(sigma, causal.sum(-1))
        assert (_entropy(weights) >= bound - 1e-12).all()


def test_the_bound_is_reached_by_two_level_logits_and_one_standout_key_is_not_always_the_minimum():
    sigma, num_keys = 2.0, 10_000
    bound = float(attention_stats.entropy_lower_bound(torch.tensor(sigma), torch.tensor(num_keys)))
    entropies = []
    for tops in range(1, num_keys, 37):
        logits = torch.full((num_keys,), -sigma, dtype=torch.float64)
        logits[:tops] = sigma
        entropies.append(float(_entropy(torch.softmax(logits, dim=-1))))
    assert min(entropies) == pytest.approx(bound, abs=1e-3)  # the grid of tops passes near the minimiser
    assert min(entropies) >= bound - 1e-12
    one_standout = entropies[0]
    assert one_standout > bound + 1.0  # with n e^(-2 sigma) large, many keys at the top give less entropy


def test_the_bound_of_a_single_key_is_zero_and_falls_with_sigma():
    assert float(attention_stats.entropy_lower_bound(torch.tensor(5.0), torch.tensor(1))) == 0.0
    bounds = attention_stats.entropy_lower_bound(torch.tensor([0.0, 0.5, 1.0, 2.0, 4.0, 8.0]), torch.tensor(64))
    assert float(bounds[0]) == pytest.approx(math.log(64))
    assert (bounds.diff() < 0).all()


def _model(variant: str, options: dict | None = None, *, head_dim: int = 8, seq_len: int = 16):
    config = configs.resolve(variant=variant, task="passkey", profile="quick", seed=0, device="cpu",
                             overrides={"variant": options or {}, "task": {"seq_len": seq_len, "num_buckets": 1,
                                                                           "test_size": 8},
                                        "model": {"dim": 16, "depth": 2, "heads": 2, "head_dim": head_dim},
                                        "train": {}})
    task = tasks.create_task("passkey", profile="quick", options=config.task_options)
    torch.manual_seed(0)
    model = Transformer(config.model, vocab_size=task.vocab_size, num_classes=task.num_classes,
                        max_len=task.max_len, variant=variant, variant_options=config.variant_options)
    with torch.no_grad():  # larger q/k weights than at initialisation, so that some rows saturate
        for block in model.blocks:
            block.qkv.weight.mul_(4.0)
    return model, task.test_set(torch.device("cpu"))


@pytest.mark.parametrize("variant, options", [("dense", {}), ("unscaled", {}), ("local", {"window": 3}),
                                              ("temperature", {"learnable": True, "temperature": 0.5}),
                                              ("additive", {})])
def test_measure_agrees_with_the_models_own_weights_and_gradients(variant, options):
    model, test_set = _model(variant, options)
    inputs, targets = test_set.inputs, test_set.targets
    measured = attention_stats.measure(model, inputs, targets)
    assert all(param.grad is None for param in model.parameters()) and model.training

    with torch.no_grad():
        _, weights = model(inputs, return_weights=True)  # [(B, H, T, T)] by the reference kernel
    model.zero_grad()
    scored_loss(model(inputs), targets).backward()
    for entry in measured:
        layer_weights = weights[entry["layer"]][:, entry["head"]].double()  # (B, T, T)
        rows = layer_weights[:, 1:]  # causal: row 0 sees one key, the rows after it more
        counts = (layer_weights > 0).sum(-1)[:, 1:] if variant != "local" else None
        expected_entropy = _entropy(rows).mean()
        assert entry["entropy"] == pytest.approx(float(expected_entropy), rel=1e-5)
        assert entry["max_weight"] == pytest.approx(float(rows.max(-1).values.mean()), rel=1e-5)
        assert entry["saturated_fraction"] == pytest.approx(float((rows.max(-1).values > 0.99).double().mean()))
        if counts is not None:
            expected = (_entropy(rows) / counts.double().log()).mean()
            assert entry["entropy_over_log_n"] == pytest.approx(float(expected), rel=1e-5)
        gradient = rearrange(model.blocks[entry["layer"]].qkv.weight.grad, "(three h d) e -> three h d e",
                             three=3, h=2)
        assert entry["grad_norm_q"] == pytest.approx(float(gradient[0, entry["head"]].norm()), rel=1e-4)
        assert entry["grad_norm_k"] == pytest.approx(float(gradient[1, entry["head"]].norm()), rel=1e-4)
        assert entry["sigma"] > 0
        if variant == "additive":  # not a bilinear form of the block's input: no bound
            assert entry["entropy_bound"] is None and entry["bound_violations"] is None
        else:
            assert entry["bound_violations"] == 0 and 0 <= entry["entropy_bound"] <= entry["entropy"]
    saturated = [entry["saturated_fraction"] for entry in measured]
    if variant == "unscaled":
        assert max(saturated) > 0  # the statistics see saturation where there is some


@pytest.mark.parametrize("options", [{}, {"feature_map": "relu"}])
def test_measure_of_linear_attention_reads_its_own_weights_never_a_softmax(options):
    model, test_set = _model("linear", options)
    assert not attention_stats.softmax_of_logits(model.blocks[0].attn)
    measured = attention_stats.measure(model, test_set.inputs, test_set.targets)
    with torch.no_grad():
        _, weights = model(test_set.inputs, return_weights=True)  # [(B, H, T, T)] by the reference formula
    length = test_set.inputs.shape[1]
    seen = torch.ones(length, length, dtype=torch.bool).tril()[1:]  # causal; row 0 sees one key
    zero_fractions = []
    for entry in measured:
        rows = weights[entry["layer"]][:, entry["head"], 1:].double()  # (B, T - 1, T)
        counts = seen.sum(-1).double().expand(rows.shape[:-1])
        weighted = rows.sum(-1) > 0  # ReLU features may give a row no weight at all: no entropy
        assert entry["entropy"] == pytest.approx(float(_entropy(rows)[weighted].mean()), rel=1e-5)
        assert entry["entropy_over_log_n"] == pytest.approx(
            float((_entropy(rows)[weighted] / counts[weighted].log()).mean()), rel=1e-5)
        assert entry["max_weight"] == pytest.approx(float(rows.max(-1).values.mean()), rel=1e-5)
        assert entry["saturated_fraction"] == pytest.approx(float((rows.max(-1).values > 0.99).double().mean()))
        zeros = ((rows == 0) & seen).sum(-1) / counts
        assert entry["zero_fraction"] == pytest.approx(float(zeros.mean()), abs=1e-12)
        zero_fractions.append(entry["zero_fraction"])
        # no logits, so no logit statistics and no bound (it holds for softmax rows only)
        assert entry["logit_std"] is entry["logit_max_abs"] is entry["entropy_bound"] is None
        assert entry["bound_violations"] is None and entry["sigma"] > 0
    if options:  # ReLU features: exact zeros, which elu + 1 never gives
        assert max(zero_fractions) > 0
    else:
        assert max(zero_fractions) == 0


def test_the_entropy_of_weights_that_are_not_distributions_is_none_and_the_largest_weight_is_still_measured():
    model, test_set = _model("linear", {"feature_map": "identity"})  # unnormalised: weights q.k / sqrt(d)
    measured = attention_stats.measure(model, test_set.inputs, test_set.targets)
    with torch.no_grad():
        _, weights = model(test_set.inputs, return_weights=True)
    length = test_set.inputs.shape[1]
    seen = torch.ones(length, length, dtype=torch.bool).tril()[1:]
    for entry in measured:
        rows = weights[entry["layer"]][:, entry["head"], 1:].double()
        assert entry["entropy"] is None and entry["entropy_over_log_n"] is None
        largest = rows.masked_fill(~seen, -math.inf).max(-1).values
        assert entry["max_weight"] == pytest.approx(float(largest.mean()), rel=1e-5)


def test_row_statistics_of_hand_made_weights():
    weights = torch.tensor([[0.5, 0.5, 0.0, 0.0], [0.25, 0.25, 0.25, 0.25], [1.5, -0.5, 0.0, 0.0],
                            [0.5, 0.25, 0.0, 0.0]], dtype=torch.float64)
    seen = torch.tensor([[True, True, True, False], [True] * 4, [True, True, False, False], [True] * 4])
    rows = attention_stats._weight_statistics(weights, seen)
    assert rows["count"].tolist() == [3, 4, 2, 4]
    assert rows["zeros"].tolist() == [1, 0, 0, 2]  # the unseen key of row 0 is not counted
    assert rows["max_weight"].tolist() == [0.5, 0.25, 1.5, 0.5]
    assert rows["entropy"][:2].tolist() == pytest.approx([math.log(2), math.log(4)], rel=1e-15)
    assert rows["entropy"][2:].isnan().all()  # a negative weight; a row summing to 0.75: not distributions


def test_sigma_bounds_every_logit_of_a_bilinear_variant():
    model, test_set = _model("unscaled", head_dim=32)
    measured = attention_stats.measure(model, test_set.inputs, test_set.targets)
    for entry in measured:
        assert entry["logit_max_abs"] <= entry["sigma"]  # sigma is a mean over examples; logits bounded per example
        assert entry["logit_std"] > 0


def test_recording_statistics_leaves_training_bit_for_bit_unchanged():
    def run(stats: bool):
        config = configs.resolve(variant="dense", task="passkey", profile="quick", seed=3, device="cpu",
                                 overrides={"variant": {}, "task": {"seq_len": 12, "num_buckets": 1, "test_size": 8},
                                            "model": {"dim": 16, "depth": 1, "heads": 2},
                                            "train": {"steps": 12, "batch_size": 4, "eval_every": 4, "log_every": 4,
                                                      "checkpoint_every": 12, "attention_stats": stats}})
        with tempfile.TemporaryDirectory() as folder:
            train(config, RunRecord.create(Path(folder), "run"), quiet=True)
            return RunRecord(Path(folder) / "run").read_metrics()

    plain, recorded = run(False), run(True)
    statistics = ("attention", "scored_max_weight", "wall_seconds")
    strip = [{key: value for key, value in line.items() if key not in statistics}
             for line in recorded if line["step"] > 0]
    assert strip == [{key: value for key, value in line.items() if key != "wall_seconds"} for line in plain]
    evaluations = [line for line in recorded if line["kind"] == "eval"]
    assert [line["step"] for line in evaluations] == [0, 4, 8, 12]  # the statistics start before the first step
    assert all(0 < line["scored_max_weight"] <= 1 for line in evaluations if line["step"] > 0)
    assert all(len(line["attention"]) == 2 for line in evaluations)  # 1 layer x 2 heads


@pytest.mark.parametrize("normaliser", ["softmax", "sparsemax", "sigmoid"])
def test_the_zero_fraction_counts_the_exact_zeros_of_the_normalisers_own_weights(normaliser):
    model, test_set = _model("dense", {"normaliser": normaliser})
    measured = attention_stats.measure(model, test_set.inputs, test_set.targets)
    length = test_set.inputs.shape[1]
    causal = torch.ones(length, length, dtype=torch.bool).tril()
    expected = []
    with torch.no_grad():
        x = model.embedded(test_set.inputs)
        for block in model.blocks:  # each layer's weights from its q and k, by the normaliser's own formula
            q, k, _ = block.heads_qkv(x)  # (B, H, T, d)
            logits = (q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])).double()
            if normaliser == "sparsemax":  # the sort-based projection onto the simplex, written out
                weights = _sparsemax(logits.masked_fill(~causal, -math.inf))
            elif normaliser == "sigmoid":
                weights = torch.sigmoid(logits - causal.sum(-1, keepdim=True).log()) * causal
            else:
                weights = torch.softmax(logits.masked_fill(~causal, -math.inf), dim=-1)
            rows = weights[:, :, 1:]  # row 0 sees one key
            expected.append((((rows == 0) & causal[1:]).sum(-1).double() / causal[1:].sum(-1)).mean(dim=(0, 2)))
            x, _ = block(x, causal=True)
    for entry in measured:
        assert entry["zero_fraction"] == pytest.approx(expected[entry["layer"]][entry["head"]].item(), abs=1e-12)
    fractions = [entry["zero_fraction"] for entry in measured]
    if normaliser == "sparsemax":
        assert min(fractions) > 0.1  # peaked rows (q and k weights x4): most keys get no weight at all
        assert all(entry["entropy"] is not None for entry in measured)  # rows that sum to 1
    else:
        assert max(fractions) == 0.0
    if normaliser == "sigmoid":  # rows that do not sum to 1: no entropy, their raw largest weight
        assert all(entry["entropy"] is None and 0 < entry["max_weight"] < 1 for entry in measured)


def _sparsemax(logits: torch.Tensor) -> torch.Tensor:
    """Martins & Astudillo's algorithm over the last dim: sort, the support size k(z), tau, [z - tau]_+."""
    ordered = logits.sort(dim=-1, descending=True).values
    ranks = torch.arange(1, logits.shape[-1] + 1, dtype=logits.dtype)
    cumulative = ordered.nan_to_num(neginf=0.0).cumsum(-1)
    support = ((1 + ranks * ordered) > cumulative).sum(-1, keepdim=True)  # -inf entries never count
    tau = (cumulative.gather(-1, support - 1) - 1) / support
    return (logits - tau).clamp_min(0)


def _max_retrieval_run(folder: Path, stats: bool, variant: str = "dense"):
    config = configs.resolve(variant=variant, task="max_retrieval", profile="quick", seed=0, device="cpu",
                             overrides={"variant": {}, "task": {"seq_len": 9, "eval_lengths": (17, 33),
                                                                "test_size": 16},
                                        "model": {"dim": 16}, "train": {"steps": 4, "batch_size": 4, "eval_every": 4,
                                                                        "attention_stats": stats}})
    return train(config, RunRecord.create(folder, "run"), quiet=True)


def test_the_largest_weight_of_a_query_that_sees_every_key_alike_is_one_over_their_number():
    config = configs.resolve(variant="dense", task="max_retrieval", profile="quick", seed=0, device="cpu",
                             overrides={"variant": {}, "task": {}, "model": {"dim": 16}, "train": {}})
    task = tasks.create_task("max_retrieval", eval_lengths=(65,), test_size=8)
    model = Transformer(config.model, vocab_size=task.vocab_size, num_classes=task.num_classes, max_len=task.max_len,
                        variant="dense", variant_options=config.variant_options)
    with torch.no_grad():
        model.blocks[0].qkv.weight.zero_()  # q = k = 0: every logit 0, every key of a row the same weight
        model.blocks[0].qkv.bias.zero_()
    held_out = [task.test_set("cpu"), task.extra_test_sets("cpu")["length=65"]]
    # The query, last, sees all 17 (65) tokens under the causal mask.
    assert [attention_stats.scored_max_weight(model, batch) for batch in held_out] == pytest.approx([1 / 17, 1 / 65])


def test_a_run_with_attention_statistics_keeps_the_largest_weight_of_the_scored_rows_at_every_length(tmp_path):
    summary = _max_retrieval_run(tmp_path / "stats", stats=True)
    assert [entry["length"] for entry in summary.accuracy_by_length] == [9, 17, 33]
    metrics = RunRecord(tmp_path / "stats" / "run").read_metrics()
    last = [line for line in metrics if line["kind"] == "eval"][-1]
    weights = [last["scored_max_weight"], *(last["splits"][f"length={length}"]["scored_max_weight"]
                                            for length in (17, 33))]
    assert [entry["scored_max_weight"] for entry in summary.accuracy_by_length] == weights
    assert all(1 / length <= weight <= 1 for length, weight in zip((9, 17, 33), weights, strict=True))
    plain = _max_retrieval_run(tmp_path / "plain", stats=False)
    assert all(entry.keys() == {"length", "accuracy"} for entry in plain.accuracy_by_length)
    assert [entry["accuracy"] for entry in plain.accuracy_by_length] == \
        [entry["accuracy"] for entry in summary.accuracy_by_length]  # measuring changes nothing it measures


@pytest.mark.parametrize("variant, options", [("dense", {}), ("ssmax", {}), ("additive", {}),
                                              ("relative", {"kind": "shaw"}), ("linear", {})])
def test_the_largest_weight_of_the_scored_rows_is_the_models_own_at_each_scored_position(variant, options):
    config = configs.resolve(variant=variant, task="mqar", profile="quick", seed=0, device="cpu",
                             overrides={"variant": options, "task": {"test_size": 8},
                                        "model": {"dim": 16, "depth": 2, "heads": 2}, "train": {}})
    task = tasks.create_task("mqar", profile="quick", options=config.task_options)
    torch.manual_seed(0)
    model = Transformer(config.model, vocab_size=task.vocab_size, num_classes=task.num_classes, max_len=task.max_len,
                        variant=variant, variant_options=config.variant_options)
    held_out = task.test_set("cpu")
    with torch.no_grad():
        _, weights = model(held_out.inputs, return_weights=True)  # [(B, H, T, T)] by the reference formula
    scored = held_out.targets != tasks.IGNORE  # (B, T): several answers per example, apart from each other
    expected = torch.cat([layer.double().amax(-1).transpose(1, 2)[scored].flatten() for layer in weights]).mean()
    assert attention_stats.scored_max_weight(model, held_out) == pytest.approx(float(expected), rel=1e-5)
