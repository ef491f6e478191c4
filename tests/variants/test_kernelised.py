"""The kernelised family against its papers' formulas: Performer's estimate of softmax attention and its random
features, cosFormer's re-weighting, Based's Taylor features and window layers. (Every kernel against the
reference, causality and padding: the registry-wide tests.)"""

import io
import math

import pytest
import torch
from cases import random_inputs

import variants
from variants.based import BasedLinear, BasedWindow, taylor_features
from variants.layouts import derived_seed
from variants.performer import positive_features, random_features

HEADS, HEAD_DIM = 2, 8


def inputs(seq_q=24, seq_k=24, seed=0, head_dim=HEAD_DIM):
    q, k, v, _ = random_inputs(2, seq_q, seq_k, seed=seed, heads=HEADS, head_dim=head_dim)
    return q.detach(), k.detach(), v.detach()


def relative_error(actual, expected):
    return ((actual - expected).norm() / expected.norm()).item()


# ----------------------------------------------------------------------------------------------------------
# Performer


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_performer_error_against_softmax_attention_falls_as_num_features_grows(causal):
    # q and k at half the unit scale: the estimator's variance grows as exp(|q' + k'|^2), so at larger norms the
    # error needs far more features to fall (at the unit scale, 4096 features still leave about 0.35).
    q, k, v = inputs()
    q, k = q / 2, k / 2
    exact = variants.create("dense", num_heads=HEADS, head_dim=HEAD_DIM, kernel="reference").double()(
        q, k, v, causal=causal)
    errors = []
    for num_features in (16, 256, 4096):
        per_seed = [relative_error(variants.create("performer", num_heads=HEADS, head_dim=HEAD_DIM, run_seed=seed,
                                                   num_features=num_features).double().eval()(q, k, v, causal=causal),
                                   exact)
                    for seed in range(4)]
        errors.append(sum(per_seed) / len(per_seed))
    assert errors[0] > errors[1] > errors[2], errors
    assert errors[0] > 6 * errors[2], errors  # 1/sqrt(m) predicts 16 once m is large
    assert errors[2] < 0.05, errors


def test_performer_features_estimate_the_softmax_kernel_without_bias_orthogonal_ones_with_a_lower_error():
    generator = torch.Generator().manual_seed(0)
    x, y = (torch.randn(1, 1, 4, HEAD_DIM, generator=generator, dtype=torch.float64) for _ in range(2))
    draws = 400

    def estimates(scale, orthogonal):
        """(draws, 4, 4) estimates of exp(x.y / sqrt(d)) over that value, from draws of m = d features."""
        exact = torch.exp((x * scale) @ (y * scale).transpose(-2, -1) / math.sqrt(HEAD_DIM))[0, 0]
        drawn = []
        for seed in range(draws):
            projection = random_features(HEAD_DIM, HEAD_DIM, seed, orthogonal)
            phi_x, phi_y = (positive_features(z * scale, projection, ())[0, 0] for z in (x, y))
            drawn.append(phi_x @ phi_y.T / exact)
        return torch.stack(drawn)

    for orthogonal in (True, False):  # small norms, light tails: the mean is 1 within 4 standard errors
        drawn = estimates(0.25, orthogonal)
        assert ((drawn.mean(dim=0) - 1).abs() < 4 * drawn.std(dim=0) / math.sqrt(draws)).all()
    # Larger norms, where the paper's orthogonal features matter: a mean squared error several times lower.
    assert 3 * (estimates(0.7, True) - 1).square().mean() < (estimates(0.7, False) - 1).square().mean()


def naive_performer_weights(module, q, k, causal):
    """The paper's estimate without stabilisers: exp(W x' - |x'|^2/2) / sqrt(m) of each side, normalised."""
    projection = module.projection.double()

    def phi(x):
        scaled = x / HEAD_DIM**0.25
        return torch.exp(scaled @ projection.T - (scaled**2).sum(-1, keepdim=True) / 2) / math.sqrt(len(projection))

    similarities = phi(q) @ phi(k).transpose(-2, -1)
    if causal:
        similarities = similarities.tril()
    return similarities / similarities.sum(-1, keepdim=True)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_performer_stabilisers_cancel_exactly(causal):
    module = variants.create("performer", num_heads=HEADS, head_dim=HEAD_DIM, num_features=64).double().eval()
    q, k, v = inputs(seq_q=7, seq_k=9, seed=3)
    out, weights = module(q, k, v, causal=causal, return_weights=True)
    expected = naive_performer_weights(module, q, k, causal)
    torch.testing.assert_close(weights, expected, rtol=1e-12, atol=0)
    torch.testing.assert_close(module(q, k, v, causal=causal), expected @ v, rtol=1e-12, atol=1e-12)


def test_performer_key_stabiliser_ignores_padded_keys():
    module = variants.create("performer", num_heads=1, head_dim=4, num_features=8).double()
    generator = torch.Generator().manual_seed(3)
    q, k = (torch.randn(1, 1, 5, 4, generator=generator, dtype=torch.float64) for _ in range(2))
    real = torch.tensor([[True, True, True, False, False]])
    far = k.clone()
    far[:, :, 3:] = module.projection[0].double() * 4**0.25  # padded keys at the largest exponent a row allows
    _, phi_k = module.features(q, k, None, None, False, real)
    _, phi_far = module.features(q, far, None, None, False, real)
    assert torch.equal(phi_far[:, :, :3], phi_k[:, :, :3])  # the real keys' scale is theirs alone


def test_performer_defaults_to_the_papers_d_log_d_features():
    assert variants.create("performer", num_heads=1, head_dim=16).projection.shape == (44, 16)  # 16 ln 16 = 44.4
    assert variants.create("performer", num_heads=1, head_dim=64).projection.shape == (266, 64)
    assert variants.create("performer", num_heads=1, head_dim=64, num_features=7).projection.shape == (7, 64)


def test_orthogonal_random_features_are_orthogonal_within_a_block_with_gaussian_norms():
    dim, num_features = 8, 20  # blocks of rows 0-7, 8-15 and 16-19
    rows = random_features(num_features, dim, seed=1, orthogonal=True)
    directions = rows / rows.norm(dim=-1, keepdim=True)
    for block in (slice(0, 8), slice(8, 16), slice(16, 20)):
        gram = directions[block] @ directions[block].T
        torch.testing.assert_close(gram, torch.eye(len(gram), dtype=torch.float64), rtol=0, atol=1e-12)
    across = directions[0:8] @ directions[8:16].T
    assert across.abs().max() > 0.1  # blocks are drawn independently
    assert rows.norm(dim=-1).std() > 0.1  # each row rescaled by the norm of its own Gaussian vector
    iid = random_features(num_features, dim, seed=1, orthogonal=False)
    iid_directions = iid[:8] / iid[:8].norm(dim=-1, keepdim=True)
    assert (iid_directions @ iid_directions.T - torch.eye(8, dtype=torch.float64)).abs().max() > 0.1


def drawn(module, draws):
    """W as drawn for the module's run seed and layer after `draws` redraws."""
    seed = derived_seed(module.run_seed, module.layer_index, draws)
    return random_features(module.num_features, HEAD_DIM, seed, module.options.orthogonal).float()


def test_performer_redraws_exactly_every_redraw_training_calls_and_never_in_eval():
    module = variants.create("performer", num_heads=HEADS, head_dim=HEAD_DIM, num_features=16, redraw=3,
                             run_seed=4, layer_index=1)
    q, k, v = (x.float() for x in inputs(seq_q=5, seq_k=5))
    assert torch.equal(module.projection, drawn(module, 0))
    seen = []
    for _ in range(7):
        module(q, k, v)
        seen.append(next(draws for draws in range(4) if torch.equal(module.projection, drawn(module, draws))))
    assert seen == [0, 0, 0, 1, 1, 1, 2]
    module.eval()
    for _ in range(5):
        module(q, k, v)
    assert torch.equal(module.projection, drawn(module, 2))
    never = variants.create("performer", num_heads=HEADS, head_dim=HEAD_DIM, num_features=16, redraw=0)
    for _ in range(5):
        never(q, k, v)
    assert torch.equal(never.projection, drawn(never, 0))


def test_performer_features_differ_per_layer_and_run_seed():
    def projection(**where):
        return variants.create("performer", num_heads=HEADS, head_dim=HEAD_DIM, **where).projection

    assert torch.equal(projection(run_seed=1, layer_index=2), projection(run_seed=1, layer_index=2))
    assert not torch.equal(projection(run_seed=1, layer_index=2), projection(run_seed=1, layer_index=3))
    assert not torch.equal(projection(run_seed=1, layer_index=2), projection(run_seed=2, layer_index=2))


def test_performer_resumed_from_its_state_dict_continues_with_identical_features():
    def build():
        return variants.create("performer", num_heads=HEADS, head_dim=HEAD_DIM, num_features=16, redraw=2,
                               run_seed=7, layer_index=3)

    q, k, v = (x.float() for x in inputs(seq_q=6, seq_k=6))
    run = build()
    for _ in range(3):  # two draws so far, one call into the second
        run(q, k, v)
    saved = io.BytesIO()
    torch.save(run.state_dict(), saved)  # as a checkpoint is written and read back
    saved.seek(0)
    resumed, fresh = build(), build()
    resumed.load_state_dict(torch.load(saved, weights_only=True))
    outputs = {"run": [], "resumed": [], "fresh": []}
    for _ in range(5):
        for label, module in (("run", run), ("resumed", resumed), ("fresh", fresh)):
            outputs[label].append(module(q, k, v, causal=True))
    assert all(torch.equal(a, b) for a, b in zip(outputs["run"], outputs["resumed"], strict=True))
    assert not all(torch.equal(a, b) for a, b in zip(outputs["run"], outputs["fresh"], strict=True))


def test_an_interrupted_performer_run_resumes_bit_for_bit_across_redraws(tmp_path):
    from experiments.run import config as configs
    from experiments.run.records import RunRecord
    from experiments.run.train import train

    # Redraws every 7 training steps, a checkpoint every 10: the run stops at 23, mid-way through a draw.
    overrides = {"variant": {"num_features": 16, "redraw": 7},
                 "task": {"seq_len": 12, "num_keys": 4, "num_distractors": 4, "num_buckets": 4, "test_size": 32},
                 "model": {"dim": 32, "depth": 1, "heads": 2},
                 "train": {"steps": 30, "batch_size": 8, "warmup_steps": 5, "eval_every": 15, "checkpoint_every": 10,
                           "log_every": 5}}
    config = configs.resolve(variant="performer", task="passkey", profile="quick", seed=3, device="cpu",
                             overrides=overrides)

    def run(name, **kwargs):
        record = RunRecord.create(tmp_path, name)
        record.write_config(config.to_dict())
        return train(config, record, quiet=True, **kwargs)

    whole = run("whole")
    assert run("split", should_stop=lambda step: step == 23).status == "interrupted"
    resumed = train(config, RunRecord.open(tmp_path, "split"), quiet=True)
    assert (resumed.test_accuracy, resumed.test_loss) == (whole.test_accuracy, whole.test_loss)
    metrics = [[{key: value for key, value in line.items() if key != "wall_seconds"}
                for line in RunRecord(tmp_path / name).read_metrics()] for name in ("whole", "split")]
    assert metrics[0] == metrics[1]


def test_performer_redraw_leaves_a_pending_backward_intact():
    module = variants.create("performer", num_heads=HEADS, head_dim=HEAD_DIM, num_features=16, redraw=1)
    q, k, v = (x.float().requires_grad_() for x in inputs(seq_q=5, seq_k=5))
    first = module(q, k, v)
    second = module(q, k, v)  # redraws W before the first call's backward
    (first.sum() + second.sum()).backward()
    assert torch.isfinite(q.grad).all()


# ----------------------------------------------------------------------------------------------------------
# cosFormer


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("seq_q, seq_k, max_len", [(9, 9, 9), (5, 11, 11), (11, 5, 11), (9, 9, 20)])
def test_cosformer_similarity_is_relu_dot_product_times_cosine_of_the_distance_over_max_len(causal, seq_q, seq_k,
                                                                                             max_len):
    module = variants.create("cosformer", num_heads=HEADS, head_dim=HEAD_DIM, max_len=max_len).double()
    q, k, v = inputs(seq_q, seq_k, seed=seq_q)
    horizon = max_len  # M: the longest sequence of the run, whatever the call's length
    i, j = torch.arange(seq_q)[:, None], torch.arange(seq_k)[None, :]
    similarities = torch.relu(q) @ torch.relu(k).transpose(-2, -1) * torch.cos(math.pi / 2 * (i - j).double() / horizon)
    if causal:
        similarities = similarities * (j <= i)
    expected = similarities / similarities.sum(-1, keepdim=True).clamp_min(1e-6)
    out, weights = module(q, k, v, causal=causal, return_weights=True)
    torch.testing.assert_close(weights, expected, rtol=1e-12, atol=1e-15)
    torch.testing.assert_close(module(q, k, v, causal=causal), expected @ v, rtol=1e-10, atol=1e-12)


def test_cosformer_needs_its_max_len_and_refuses_a_longer_sequence():
    with pytest.raises(ValueError, match=r"max_len is None; accepted: variants.create\(..., max_len=N\)"):
        variants.create("cosformer", num_heads=HEADS, head_dim=HEAD_DIM)
    module = variants.create("cosformer", num_heads=HEADS, head_dim=HEAD_DIM, max_len=8)
    with pytest.raises(ValueError, match="at most max_len=8 .* got 9 queries and 9 keys, accepted: at most 8"):
        module(*inputs(9, 9))


# ----------------------------------------------------------------------------------------------------------
# Based


def test_taylor_features_give_one_plus_s_plus_half_s_squared():
    generator = torch.Generator().manual_seed(0)
    q, k = (torch.randn(3, 5, 16, generator=generator, dtype=torch.float64) * 2 for _ in range(2))
    s = q @ k.transpose(-2, -1) / math.sqrt(16)
    torch.testing.assert_close(taylor_features(q) @ taylor_features(k).transpose(-2, -1), 1 + s + s**2 / 2,
                               rtol=1e-12, atol=1e-12)
    assert taylor_features(q).shape[-1] == 1 + 16 + 16**2


def test_based_linear_layer_weights_are_the_taylor_similarities_of_the_projected_q_and_k():
    module = variants.create("based", num_heads=HEADS, head_dim=HEAD_DIM, feature_dim=4).double()
    assert isinstance(module, BasedLinear)
    q, k, v = inputs(7, 7, seed=2)
    projected_q = torch.einsum("bhnd,hde->bhne", q, module.query_projection.detach())
    projected_k = torch.einsum("bhnd,hde->bhne", k, module.key_projection.detach())
    s = projected_q @ projected_k.transpose(-2, -1) / math.sqrt(4)
    similarities = (1 + s + s**2 / 2).tril()
    _, weights = module(q, k, v, causal=True, return_weights=True)
    torch.testing.assert_close(weights.detach(), similarities / similarities.sum(-1, keepdim=True),
                               rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("window_every, window_layers", [(2, [1, 3, 5]), (3, [2, 5]), (1, [0, 1, 2, 3, 4, 5]),
                                                          (0, [])])
def test_based_window_layers_are_every_window_every_th_block(window_every, window_layers):
    kinds = [type(variants.create("based", num_heads=HEADS, head_dim=HEAD_DIM, layer_index=layer,
                                  window_every=window_every)) for layer in range(6)]
    assert [layer for layer, kind in enumerate(kinds) if kind is BasedWindow] == window_layers
    assert all(kind is BasedLinear for layer, kind in enumerate(kinds) if layer not in window_layers)


def test_based_window_layers_attend_exactly_the_query_and_the_half_window_keys_before_it():
    module = variants.create("based", num_heads=HEADS, head_dim=HEAD_DIM, layer_index=1, window=10).double()
    assert isinstance(module, BasedWindow) and module.kernel == "blocked"
    i, j = torch.arange(20)[:, None], torch.arange(20)[None, :]
    assert torch.equal(module.layout(20, 20, causal=True), (i - j >= 0) & (i - j <= 5))
    assert torch.equal(module.layout(20, 20), (i - j).abs() <= 5)
    q, k, v = inputs(20, 20, seed=5)
    out, weights = module(q, k, v, causal=True, return_weights=True)
    assert torch.equal(weights > 0, ((i - j >= 0) & (i - j <= 5)).expand_as(weights))  # softmax: each key weighs
    torch.testing.assert_close(module(q, k, v, causal=True), out, rtol=1e-12, atol=1e-12)  # blocked = reference
