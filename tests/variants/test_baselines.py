"""Baselines (LSTM, GRU, convolution, Mamba): listed apart, strictly causal when the config is, bidirectional
when it is not, the chunked selective scan equal to the plain recurrence, the convolution's reach exactly as
its options say, and each trains through the real loop."""

import json
from functools import partial

import optuna
import pytest
import torch

import variants
from experiments import sweep as sweeps
from experiments import tasks
from experiments.run import config as configs
from experiments.run.model import Transformer
from experiments.run.records import RunRecord
from experiments.run.train import train
from experiments.schemas.sweep import SweepOptions
from variants.baselines import mamba
from variants.baselines.scan import chunked_scan, sequential_scan
from variants.kernels import KERNELS

# Options that change a baseline's reach or its scan, tested beside each baseline's defaults.
BASELINE_CASES = [(name, {}) for name in variants.list_baselines()] + [
    ("conv", {"kernel_size": 3, "dilation_growth": 2}),
    ("conv", {"kernel_size": 3, "gate": True}),
    ("mamba", {"chunk_size": 5, "scan": "chunked"}),
    ("mamba", {"scan": "sequential"}),
]
CASE_IDS = ["-".join([name] + [f"{key}={value}" for key, value in options.items()]) for name, options in BASELINE_CASES]
DIM, VOCAB, CLASSES = 16, 11, 5


def tiny_model(name: str, options: dict, *, causal: bool, depth: int = 2) -> Transformer:
    config = configs.ModelConfig(dim=DIM, depth=depth, heads=4, positions="none", causal=causal)
    torch.manual_seed(0)
    model = Transformer(config, vocab_size=VOCAB, num_classes=CLASSES, max_len=64, variant=name,
                        variant_options=options)
    return model.double().eval()


def random_tokens(length: int) -> torch.Tensor:
    """(1, length) token ids, the same for a length on every call."""
    return torch.randint(0, VOCAB, (1, length), generator=torch.Generator().manual_seed(length))


def logits_before_and_after_changing(model: Transformer, length: int, position: int):
    """The model's logits (seq, classes) on a random sequence, and on the same with one token changed."""
    tokens = random_tokens(length)
    changed = tokens.clone()
    changed[0, position] = (tokens[0, position] + 1) % VOCAB
    with torch.no_grad():
        return model(tokens)[0], model(changed)[0]


def moved(before: torch.Tensor, after: torch.Tensor) -> torch.Tensor:
    """Per position: whether the output changed beyond float64 rounding."""
    return (before - after).abs().amax(dim=-1) > 1e-9


# -- the registry -----------------------------------------------------------------------------------------


def test_baselines_are_listed_apart_from_the_attention_variants():
    assert variants.list_baselines() == ["conv", "gru", "lstm", "mamba"]
    assert not set(variants.list_baselines()) & set(variants.list_variants())
    assert all(issubclass(variants.variant_class(name), variants.Attention) for name in variants.list_variants())
    listing = variants.describe_variants()
    header = listing.index("\nBaselines")
    assert all(listing.index(f"\n{name}: ") > header for name in variants.list_baselines())
    assert all(listing.startswith(f"{name}: ") or listing.index(f"\n{name}: ") < header
               for name in variants.list_variants())


def test_baseline_names_collide_with_no_variant_task_or_kernel():
    names = set(variants.list_baselines())
    assert not names & (set(variants.list_variants()) | set(tasks.list_tasks()) | set(KERNELS))
    with pytest.raises(ValueError, match="'lstm' is already registered"):
        variants.register("lstm")(mamba.Mamba)  # one name space: a name cannot be taken twice


def test_every_baseline_has_frozen_documented_options_and_a_docstring():
    for name in variants.list_baselines():
        cls = variants.variant_class(name)
        assert cls.__doc__ and cls.__module__ and cls.Options.__dataclass_params__.frozen, name
        assert not cls.kernels  # no attention kernel runs a baseline


def test_a_block_with_a_baseline_has_its_mixer_in_place_of_the_attention_projections():
    model = tiny_model("lstm", {}, causal=True)
    block = model.blocks[0]
    assert not hasattr(block, "qkv") and not hasattr(block, "attn") and isinstance(block.mixer, variants.Baseline)
    assert model.variant_module is block.mixer and model.kernel == "torch"
    assert tiny_model("mamba", {}, causal=True).kernel == "sequential-scan"  # auto, on a CPU
    assert tiny_model("mamba", {"scan": "chunked"}, causal=True).kernel == "chunked-scan"


@pytest.mark.parametrize("name", variants.list_baselines())
def test_every_baseline_declares_a_space_of_its_own_options_that_yields_runnable_configs(tmp_path, name):
    cls = variants.variant_class(name)
    assert set(cls.search_space) <= set(cls.Options.__dataclass_fields__)
    plan = sweeps.build(SweepOptions(variant=name, task="passkey", sets=("task.seq_len=12", "task.num_buckets=4",
                                                                         "task.test_size=16", "model.dim=16"),
                                     trials=1, pruner="none", prune_after=0, heartbeat_seconds=1),
                        device="cpu", runs_dir=tmp_path)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0), direction="maximize")
    for _ in range(8):
        config = plan.config(plan.space.suggest(study.ask()))
        mixer = variants.create_baseline(name, dim=16, causal=True, options=config.variant_options)
        assert torch.isfinite(mixer(torch.randn(1, 12, 16))).all(), config.variant_options


# -- causality --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name, options", BASELINE_CASES, ids=CASE_IDS)
def test_every_baseline_is_strictly_causal_and_prefix_consistent_in_causal_configs(name, options):
    length, position = 23, 11
    model = tiny_model(name, options, causal=True)
    before, after = logits_before_and_after_changing(model, length, position)
    changed = moved(before, after)
    assert not changed[:position].any(), changed.nonzero().flatten().tolist()
    assert changed[position]  # the change itself shows, so the check above is not vacuous
    with torch.no_grad():  # the first `position` tokens alone give the outputs the whole sequence gives there
        torch.testing.assert_close(model(random_tokens(length)[:, :position])[0], before[:position], rtol=0, atol=1e-12)


@pytest.mark.parametrize("name, options", BASELINE_CASES, ids=CASE_IDS)
def test_bidirectional_forms_see_the_future_in_non_causal_configs(name, options):
    length = 23
    model = tiny_model(name, options, causal=False)
    before, after = logits_before_and_after_changing(model, length, position=length - 1)
    reach = length - 1 if name != "conv" else sum(mixer.reach[1] for mixer in (b.mixer for b in model.blocks))
    assert moved(before, after)[length - 1 - reach]


def test_bidirectional_recurrent_forms_keep_the_width_and_no_more_parameters():
    for name in ("lstm", "gru"):
        one_way = variants.create_baseline(name, dim=DIM, causal=True)
        both_ways = variants.create_baseline(name, dim=DIM, causal=False)
        assert both_ways.rnn.bidirectional and both_ways.rnn.hidden_size == DIM // 2
        assert both_ways(torch.randn(2, 5, DIM)).shape == (2, 5, DIM)
        count = [sum(param.numel() for param in mixer.parameters()) for mixer in (one_way, both_ways)]
        assert 0.6 * count[0] <= count[1] <= count[0], count


# -- the convolution's reach ------------------------------------------------------------------------------


@pytest.mark.parametrize("kernel_size, growth, depth", [(4, None, 2), (3, 2, 3), (2, 3, 2), (1, None, 1)])
def test_conv_receptive_field_is_exactly_what_its_options_say(kernel_size, growth, depth):
    options = {"kernel_size": kernel_size, "dilation_growth": growth}
    reach = sum((kernel_size - 1) * (growth or 1) ** layer for layer in range(depth))
    model = tiny_model("conv", options, causal=True, depth=depth)
    length = reach + 6
    last = length - 1
    before, after = logits_before_and_after_changing(model, length, position=last - reach)
    assert moved(before, after)[last]  # a token exactly `reach` back is seen
    before, after = logits_before_and_after_changing(model, length, position=last - reach - 1)
    assert not moved(before, after)[last]  # one further back is not


@pytest.mark.parametrize("gate", [False, True])
def test_conv_is_its_formula_with_baseconvs_gate_where_asked_outputs_and_gradients(gate):
    mixer = variants.create_baseline("conv", dim=DIM, causal=True, kernel_size=3, gate=gate).double()
    x = torch.randn(2, 7, DIM, dtype=torch.float64, requires_grad=True)
    w = mixer.depthwise.weight[:, 0]  # (channels, taps): tap i meets x_{t - (k - 1 - i)}
    filtered = torch.stack([sum(w[:, i] * x[:, t - (2 - i)] for i in range(3) if t - (2 - i) >= 0)
                            for t in range(7)], dim=1) + mixer.depthwise.bias
    if gate:  # BaseConv: the filter's output times a linear projection of the input
        filtered = filtered * (x @ mixer.gate.weight.T + mixer.gate.bias)
    expected = filtered @ mixer.pointwise.weight.T + mixer.pointwise.bias
    output = mixer(x)
    assert torch.allclose(output, expected, atol=1e-12)
    (grad,) = torch.autograd.grad(output.square().sum(), x)
    (reference,) = torch.autograd.grad(expected.square().sum(), x)
    assert torch.allclose(grad, reference, atol=1e-12)
    assert (mixer.gate is not None) == gate and variants.create_baseline(
        "conv", dim=DIM, causal=True, kernel_size=3, gate=gate).describe() == ("conv_k3_gated" if gate else "conv_k3")


@pytest.mark.parametrize("kernel_size", [4, 5])
def test_non_causal_conv_centres_its_filter(kernel_size):
    mixer = variants.create_baseline("conv", dim=DIM, causal=False, kernel_size=kernel_size).double()
    past, future = (kernel_size - 1) // 2, kernel_size - 1 - (kernel_size - 1) // 2
    assert mixer.reach == (past, future)
    x = torch.randn(1, 12, DIM, dtype=torch.float64)
    seen = []
    for offset in range(-past - 1, future + 2):
        changed = x.clone()
        changed[0, 6 + offset] += 1.0
        seen.append(bool(moved(mixer(x)[0], mixer(changed)[0])[6]))
    assert seen == [False] + [True] * (past + future + 1) + [False]


# -- the selective scan -----------------------------------------------------------------------------------


def scan_inputs(length: int, dtype=torch.float64, decay: float = 1.0):
    generator = torch.Generator().manual_seed(length)
    batch, channels, state = 2, 3, 4

    def draw(*shape):
        return torch.randn(*shape, generator=generator, dtype=dtype)

    delta = decay * torch.rand(batch, length, channels, generator=generator, dtype=dtype)
    A = -torch.arange(1, state + 1, dtype=dtype).repeat(channels, 1) * (1 + draw(channels, state).abs())
    return [draw(batch, length, channels), delta, A, draw(batch, length, state), draw(batch, length, state),
            draw(channels)]


@pytest.mark.parametrize("length, chunk_size", [(1, 4), (7, 4), (8, 4), (19, 8), (37, 64)])
def test_mamba_chunked_scan_equals_the_sequential_recurrence_outputs_and_gradients(length, chunk_size):
    inputs = [tensor.requires_grad_() for tensor in scan_inputs(length)]
    expected, got = sequential_scan(*inputs), chunked_scan(*inputs, chunk_size=chunk_size)
    torch.testing.assert_close(got, expected, rtol=1e-10, atol=1e-12)
    grad = torch.randn_like(expected)
    wanted, had = torch.autograd.grad(expected, inputs, grad), torch.autograd.grad(got, inputs, grad)
    for want, have in zip(wanted, had, strict=True):
        torch.testing.assert_close(have, want, rtol=1e-9, atol=1e-11)


def _backward_nodes(output: torch.Tensor) -> list[str]:
    """The names of every node of the autograd graph behind `output`."""
    seen, stack, names = set(), [output.grad_fn], []
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        names.append(type(node).__name__)
        stack.extend(next_node for next_node, _ in node.next_functions)
    return names


@pytest.mark.parametrize("scan", [sequential_scan, partial(chunked_scan, chunk_size=4)], ids=["sequential", "chunked"])
def test_mamba_scans_index_no_position_one_at_a_time(scan):
    """x[:, t]'s backward writes a zero gradient the size of the whole sequence at every step: O(n^2) time in
    all, which made the sequential scan's backward superlinear. Unbound slices keep it O(n): the graph's
    indexing nodes do not grow with the length."""
    def selects(length: int) -> int:
        nodes = _backward_nodes(scan(*[tensor.requires_grad_() for tensor in scan_inputs(length)]))
        return sum(name.startswith("SelectBackward") for name in nodes)

    assert selects(37) == selects(19)


def test_mamba_chunked_scan_stays_finite_where_a_plain_cumulative_sum_would_overflow():
    """A chunk whose decays sum past float32's exponent range: exp(-S) alone would be inf."""
    inputs = scan_inputs(40, dtype=torch.float32, decay=20.0)
    assert float((inputs[1][..., None] * inputs[2]).sum(dim=1).min()) < -1000  # exp(1000) overflows
    got = chunked_scan(*inputs, chunk_size=64)
    expected = sequential_scan(*[tensor.double() for tensor in inputs])
    assert torch.isfinite(got).all()
    torch.testing.assert_close(got.double(), expected, rtol=1e-3, atol=1e-3 * float(expected.abs().max()))


@pytest.mark.parametrize("causal", [True, False])
def test_mamba_block_chunked_equals_sequential_outputs_and_gradients_for_inputs_and_parameters(causal):
    torch.manual_seed(0)
    chunked = variants.create_baseline("mamba", dim=DIM, causal=causal, chunk_size=4).double()
    plain = variants.create_baseline("mamba", dim=DIM, causal=causal, scan="sequential").double()
    plain.load_state_dict(chunked.state_dict())
    x = torch.randn(2, 13, DIM, dtype=torch.float64, requires_grad=True)
    grad = torch.randn(2, 13, DIM, dtype=torch.float64)
    results = []
    for mixer in (chunked, plain):
        out = mixer(x)
        results.append((out, torch.autograd.grad(out, [x, *mixer.parameters()], grad)))
    torch.testing.assert_close(results[0][0], results[1][0], rtol=1e-10, atol=1e-12)
    for have, want in zip(results[0][1], results[1][1], strict=True):
        torch.testing.assert_close(have, want, rtol=1e-9, atol=1e-11)


def test_mamba_is_initialised_as_in_the_paper():
    mixer = variants.create_baseline("mamba", dim=32, causal=True, state_size=8)
    scan = mixer.directions[0]
    A = -torch.exp(scan.A_log.view(64, 8))
    torch.testing.assert_close(A, -torch.arange(1, 9, dtype=torch.float32).expand(64, 8))  # S4D-real
    step = torch.nn.functional.softplus(scan.dt_proj.bias.detach())
    assert 1e-3 * 0.999 <= float(step.min()) and float(step.max()) <= 0.1 * 1.001
    assert scan.dt_proj.in_features == 2 and torch.equal(scan.D, torch.ones(64))  # dt_rank = ceil(32 / 16)
    assert scan.A_log.dim() == 1  # flat, so the loop's matrices-only weight decay leaves it alone


def test_mamba_scans_in_float32_under_bf16_autocast(monkeypatch):
    seen = []

    def recording_scan(*inputs, chunk_size):
        seen.extend(tensor.dtype for tensor in inputs)
        return chunked_scan(*inputs, chunk_size=chunk_size)

    monkeypatch.setattr(mamba, "chunked_scan", recording_scan)
    mixer = variants.create_baseline("mamba", dim=DIM, causal=True, scan="chunked")
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = mixer(torch.randn(2, 9, DIM))
    assert seen and set(seen) == {torch.float32} and torch.isfinite(out).all()


# -- training and refusals --------------------------------------------------------------------------------

TINY = {"task": {"seq_len": 12, "num_keys": 4, "num_distractors": 4, "num_buckets": 4, "test_size": 16},
        "model": {"dim": 16, "depth": 2},
        "train": {"steps": 4, "batch_size": 8, "warmup_steps": 1, "eval_every": 4, "checkpoint_every": 4,
                  "log_every": 2}}


def tiny_config(name: str, variant=None, model=None, train_overrides=None, kernel="auto"):
    overrides = {"variant": variant or {}, "task": dict(TINY["task"]), "model": {**TINY["model"], **(model or {})},
                 "train": {**TINY["train"], **(train_overrides or {})}}
    return configs.resolve(variant=name, task="passkey", profile="quick", seed=0, device="cpu", kernel=kernel,
                           overrides=overrides)


@pytest.mark.parametrize("name", variants.list_baselines())
def test_each_baseline_trains_a_few_steps_through_the_training_loop_without_nan(tmp_path, name):
    config = tiny_config(name)
    record = RunRecord.create(tmp_path, name)
    record.write_config(config.to_dict())
    summary = train(config, record, quiet=True)
    assert summary.status == "completed" and summary.steps == 4
    assert summary.test_loss == summary.test_loss and summary.test_loss < float("inf")
    lines = [json.loads(line) for line in (record.path / "metrics.jsonl").read_text().splitlines()]
    assert all(line["loss"] == line["loss"] for line in lines if line["kind"] == "train")
    assert summary.variant_name == configs.described_variant(config)
    assert configs.from_dict(config.to_dict()) == config  # a saved baseline config reads back (resume, report)


def test_the_run_summary_records_the_parameter_count(tmp_path):
    counts = {}
    for name in ("lstm", "conv"):
        config = tiny_config(name, train_overrides={"steps": 1, "eval_every": 1, "checkpoint_every": 1})
        record = RunRecord.create(tmp_path, name)
        summary = train(config, record, quiet=True)
        model = Transformer(config.model, vocab_size=9, num_classes=4, max_len=12, variant=name,
                            variant_options=config.variant_options)
        counts[name] = summary.parameters
        assert summary.parameters == sum(param.numel() for param in model.parameters())
    assert counts["lstm"] > counts["conv"]


@pytest.mark.parametrize(
    "call, expected",
    [
        (lambda: variants.create_baseline("conv", dim=8, causal=True, kernel_size=0),
         ["'kernel_size'", "0", ">= 1"]),
        (lambda: variants.create_baseline("conv", dim=8, causal=True, kernel_sise=3),
         ["'kernel_sise'", "did you mean 'kernel_size'"]),
        (lambda: variants.create_baseline("mamba", dim=8, causal=True, scan="cuda"),
         ["'scan'", "'cuda'", "'chunked'", "'sequential'"]),
        (lambda: variants.create_baseline("lstm", dim=7, causal=False), ["model.dim", "7", "even"]),
        (lambda: variants.create_baseline("dense", dim=8, causal=True), ["'dense'", "not a baseline", "lstm"]),
        (lambda: variants.create("lstm", num_heads=2, head_dim=4), ["'lstm'", "is a baseline", "dense"]),
        (lambda: tiny_config("lstm", kernel="sdpa"), ["'lstm'", "'sdpa'", "auto"]),
        (lambda: tiny_config("gru", model={"heads": 2}), ["model.heads=2", "'gru'", "4"]),
        (lambda: tiny_config("conv", model={"head_dim": 8}), ["model.head_dim=8", "'conv'", "none"]),
        (lambda: tiny_config("mamba", train_overrides={"attention_stats": True}),
         ["train.attention_stats", "'mamba'", "false"]),
        (lambda: tiny_config("lstm", variant={"window": 3}), ["'window'", "no option"]),
    ],
)
def test_a_bad_baseline_setting_gets_one_sentence(call, expected):
    with pytest.raises(ValueError) as error:
        call()
    message = str(error.value)
    assert message.count("\n") == 0 and message.endswith("."), message
    for part in expected:
        assert part in message, (part, message)
