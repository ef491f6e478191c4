"""The saturation studies' tables computed without training: study A at initialisation, and the fading of
study D. Why attention divides q.k by sqrt(d_k), measured.

With q and k drawn N(0, I_d) (d = head_dim) the dot product q.k has mean 0 and variance d. Unscaled, the
logits of one query spread over about sqrt(d) units, the softmax puts nearly all its weight on one key, and
its Jacobian diag(p) - p p^T, through which every gradient reaches the logits, shrinks towards 0. Dividing
by sqrt(d) gives the logits unit variance again; a temperature tau divides by tau sqrt(d).

    >>> import torch
    >>> from experiments.saturation.tables import init_stats, init_table, fading_table
    >>> init_stats(1024, 16, scale=1.0, dtype=torch.float32, samples=256, seed=0)["frac_max_above_0.99"]
    >>> table = init_table([16, 64, 256, 1024], [16, 256, 4096], [0.5, 2.0], samples=256, seed=0)
    >>> table.to_csv("runs/saturation/init.csv", index=False)
    >>> fading_table([16, 256, 4096], strong_logit=2.0, length_scales=[0.5], kernelised=[("linear", {})])

The harness's own model does not draw q and k with unit variance: `model_variance(config)` builds the
model a run of `config` trains, at initialisation, feeds it a training batch of its task and measures the
per-component variance of q and k at each layer (PyTorch's default Linear initialisation gives about 1/3).
`init_table(..., variances=[(q_variance, k_variance)])` adds unscaled and scaled rows drawn at that variance.

The softmax is the default normaliser, not the only one (`variants.normalisers`): `init_table(...,
normalisers=["sigmoid", "sparsemax", "entmax15", "entmax_adaptive"])` adds each one's unscaled and scaled rows at
unit variance, on the draws of the softmax rows, its weights and Jacobian as `experiments.saturation.normaliser_weights`
computes them (`normaliser` names the row's; what entropy means for sigmoid, whose rows are not distributions,
and at which alphas entmax_adaptive is measured, are said there).

Draws. Sample i draws its query q_i (d values), then n standard normals z_ij (n = num_keys), in float64,
from one torch.Generator seeded with `seed`, sample after sample. Its dot products are q_i.k_ij =
|q_i| z_ij: given q, the products q.k_j of independent keys k_j ~ N(0, I_d) are independent N(0, |q|^2)
(the keys' law is rotation invariant), so this is exactly the law of drawing the keys, at d + n normals
per sample instead of n d (drawing the keys at d = 1024, n = 4096 and 256 samples is 2^30 normals, about
40 s on one core). From |q_i| (of q_i cast to `dtype`) times z_ij on, everything is computed in `dtype`;
in float32 a dot product is thus rounded once rather than summed over d float32 terms, a relative
difference of order 1e-7 in the logits. The draws depend on neither the scale, the dtype nor the chunking
(chunks hold at most CHUNK_ELEMENTS logits), so the rows of a table compare on common random numbers.
At variances (v_q, v_k) other than 1 the query is sqrt(v_q) q_i and the normals sqrt(v_k) z_ij, scaled in
float64 before the cast: the same draws, the law of q ~ N(0, v_q I) and k ~ N(0, v_k I).

Statistics, each the mean over samples with its Monte-Carlo standard error `<name>_se` (the standard
deviation over samples over sqrt(samples): samples are independent, the keys of one sample share its query):

- `qk_variance`: the mean of (q.k_j)^2 over a sample's keys (q.k has mean 0), unscaled; its closed form is
  d v_q v_k (d at unit variance).
- `max_weight`: the largest weight max_j p_j.
- `frac_max_above_0.99`: whether the largest weight exceeds 0.99 (so the mean is a fraction of samples).
- `entropy_over_log_n`: the entropy H(p) in nats over log n, 1 for uniform weights (NaN when n = 1); for
  sigmoid that of its weights divided by their row sum.
- `jacobian_norm`: the spectral norm of the normaliser's Jacobian dp/ds, for the softmax diag(p) - p p^T, 1/n
  for uniform weights, 0 for one-hot ones.
- `frac_grad_below_1e-10`: the fraction of keys whose derivative by their own logit (the Jacobian's diagonal,
  p_j (1 - p_j) for the softmax) is below 1e-10, in dtype: in float32, 1 - p is 0 for p within 6e-8 of 1, so
  saturated rows lose their largest gradient earlier; a sparse normaliser's zeros pass none.
- `zero_fraction`: the fraction of a row's keys whose weight is exactly 0 in dtype: a sparse normaliser's
  zeros; the softmax's and sigmoid's weights are never 0 but by underflow (float32 below about 1e-45).
- `weight_sum`: a row's sum of weights: 1 to rounding but for sigmoid's.

`fading_table` is study D's synthetic part: one strong logit among n - 1 zeros, whose weight plain
softmax lets fade as n grows, against SSMax (Nakanishi 2025, "Scalable-Softmax Is Superior for
Attention"), which multiplies the logits by s log n and so keeps it. The kernelised variants (linear
attention, Performer) weigh a pair by phi(q).phi(k), not by its logit alone, so their rows are drawn:
real q and keys in d dimensions whose scaled dot products are exactly the strong logit for the first key
and 0 for the others (`fading_vectors`), weighed by the variant's own reference formula, averaged over
draws with a standard error.
"""

from __future__ import annotations

import json
import math
import numbers
from collections.abc import Iterable
from typing import Any

import pandas as pd
import torch
from einops import rearrange
from torch import Tensor
from tqdm import tqdm

import variants
from common.statistics import standard_error
from experiments import tasks
from experiments.run.attention_stats import SATURATED
from experiments.run.build import build
from experiments.run.config import RunConfig
from experiments.saturation import normaliser_weights

# The key columns as they always were, then `normaliser`; the statistics as they were, then the two the other
# normalisers call for (each with its standard error).
KEY_COLUMNS = ("normalisation", "temperature", "head_dim", "num_keys", "dtype", "q_variance", "k_variance",
               "normaliser")
STATISTICS = ("qk_variance", "max_weight", "frac_max_above_0.99", "entropy_over_log_n", "jacobian_norm",
              "frac_grad_below_1e-10", "zero_fraction", "weight_sum")
COLUMNS = (*KEY_COLUMNS, *(name for statistic in STATISTICS for name in (statistic, f"{statistic}_se")))
# fading_table's columns: the first six as they always were, then those the drawn rows need (see fading_table).
FADING_STATISTICS = ("max_weight", "entropy_over_log_n", "strong_weight")
FADING_COLUMNS = ("normaliser", "length_scale", "num_keys", "strong_logit", "max_weight", "entropy_over_log_n",
                  "strong_weight", "max_weight_se", "entropy_over_log_n_se", "strong_weight_se", "draws", "head_dim",
                  "variant_options")
DTYPES = {torch.float32: "float32", torch.float64: "float64"}
VARIANCE_COLUMNS = ("head_dim", "layer", "q_variance", "k_variance")
VANISHING_DERIVATIVE = 1e-10
CHUNK_ELEMENTS = 2**20  # logits per chunk, (samples, num_keys); the bisection holds a few such float64 tensors


def _integer(name: str, value: Any, minimum: int) -> int:
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{name} {value!r} is not accepted; accepted: an integer >= {minimum}.")
    return int(value)


def _positive(name: str, value: Any, accepted: str = "a finite number > 0") -> float:
    if (not isinstance(value, numbers.Real) or isinstance(value, bool) or not math.isfinite(value)
            or value <= 0):
        raise ValueError(f"{name} {value!r} is not accepted; accepted: {accepted}.")
    return float(value)


def _dtype_name(dtype: Any) -> str:
    if dtype not in DTYPES:
        raise ValueError(f"dtype {dtype!r} is not accepted; accepted: torch.float32 or torch.float64.")
    return DTYPES[dtype]


def entropy(p: Tensor) -> Tensor:
    """The entropy -sum p log p in nats over the last dimension (0 log 0 = 0), in p's dtype."""
    return -torch.special.xlogy(p, p).sum(dim=-1)


def _dot_products(generator: torch.Generator, head_dim: int, num_keys: int, count: int, dtype: torch.dtype,
                  q_variance: float, k_variance: float) -> Tensor:
    """The next `count` samples' unscaled dot products q.k_j = |q| z_j, (count, num_keys) in dtype."""
    queries = torch.empty(count, head_dim, dtype=torch.float64)
    normals = torch.empty(count, num_keys, dtype=torch.float64)
    for query, row in zip(queries, normals, strict=True):  # sample by sample: the stream ignores chunking
        query.normal_(generator=generator)
        row.normal_(generator=generator)
    queries, normals = queries * math.sqrt(q_variance), normals * math.sqrt(k_variance)
    lengths = torch.linalg.vector_norm(queries.to(dtype), dim=-1, keepdim=True)  # |q|: (count, 1)
    return lengths * normals.to(dtype)


def _per_sample(dot_products: Tensor, scale: float, normaliser: str = "softmax",
                alphas: Tensor | None = None) -> dict[str, Tensor]:
    """Each statistic of each sample, (count,) in float64, from its unscaled dot products (count, num_keys),
    under `normaliser` (entmax_adaptive at one alpha per sample, `alphas`)."""
    num_keys = dot_products.shape[-1]
    weights = normaliser_weights.weights(normaliser, scale * dot_products, alphas)
    largest = weights.amax(dim=-1)
    derivatives = normaliser_weights.own_derivatives(normaliser, weights, alphas)
    values = {
        "qk_variance": dot_products.square().mean(dim=-1),
        "max_weight": largest,
        "frac_max_above_0.99": largest > SATURATED,
        "entropy_over_log_n": entropy(normaliser_weights.distribution(normaliser, weights)) / math.log(num_keys),
        "jacobian_norm": normaliser_weights.jacobian_norm(weights, normaliser, alphas),
        "frac_grad_below_1e-10": (derivatives < VANISHING_DERIVATIVE).double().mean(dim=-1),
        "zero_fraction": (weights == 0).double().mean(dim=-1),
        "weight_sum": weights.sum(dim=-1),
    }
    return {name: value.to(torch.float64) for name, value in values.items()}


def _mean_and_standard_error(values: Tensor) -> tuple[float, float]:
    """The mean of independent samples and its standard error (NaN from a single sample)."""
    return values.mean().item(), standard_error(values.numpy())


def _normaliser(name: Any) -> str:
    if name not in normaliser_weights.MEASURED:
        raise ValueError(f"normaliser {name!r} is not accepted; accepted: "
                         f"{', '.join(normaliser_weights.MEASURED)}.")
    return name


def init_stats(head_dim: int, num_keys: int, *, scale: float, dtype: torch.dtype, samples: int,
               seed: int, q_variance: float = 1.0, k_variance: float = 1.0,
               normaliser: str = "softmax") -> dict[str, Any]:
    """One row of the saturation table: the statistics of normaliser(scale * q.k_j) (the softmax unless
    named) over `num_keys` keys, for `samples` independent queries, drawn and computed as the module docstring
    describes (q and k of per-component variance `q_variance` and `k_variance`); every normaliser sees the same
    draws.

    `scale` 1 is "unscaled", 1/sqrt(head_dim) "scaled", 1/(tau sqrt(head_dim)) temperature tau; the row's
    `normalisation` is "unscaled" when scale == 1 and "scaled" otherwise, its `temperature`
    1/(scale sqrt(head_dim)). Keys are COLUMNS, in order."""
    normaliser = _normaliser(normaliser)
    head_dim, num_keys = _integer("head_dim", head_dim, 1), _integer("num_keys", num_keys, 1)
    samples, seed = _integer("samples", samples, 1), _integer("seed", seed, 0)
    scale = _positive("scale", scale, "a finite number > 0 (1 unscaled, 1/sqrt(head_dim) scaled)")
    q_variance, k_variance = _positive("q_variance", q_variance), _positive("k_variance", k_variance)
    row: dict[str, Any] = {"normalisation": "unscaled" if scale == 1 else "scaled",
                           "temperature": 1 / (scale * math.sqrt(head_dim)), "head_dim": head_dim,
                           "num_keys": num_keys, "dtype": _dtype_name(dtype), "q_variance": q_variance,
                           "k_variance": k_variance, "normaliser": normaliser}

    generator = torch.Generator().manual_seed(seed)
    chunk = max(1, CHUNK_ELEMENTS // num_keys)
    per_sample: dict[str, list[Tensor]] = {name: [] for name in STATISTICS}
    for start in range(0, samples, chunk):
        count = min(chunk, samples - start)
        dot_products = _dot_products(generator, head_dim, num_keys, count, dtype, q_variance, k_variance)
        alphas = (normaliser_weights.initial_alphas(start, count, samples) if normaliser == "entmax_adaptive"
                  else None)
        for name, values in _per_sample(dot_products, scale, normaliser, alphas).items():
            per_sample[name].append(values)
    for name in STATISTICS:
        row[name], row[f"{name}_se"] = _mean_and_standard_error(torch.cat(per_sample[name]))
    return row


def _init_plan(head_dims: list[int], key_counts: list[int], temperatures: list[float], dtypes: list[torch.dtype],
               variances: list[tuple[float, float]], normalisers: list[str]) -> list[tuple]:
    """(normaliser, normalisation, temperature, scale, head_dim, num_keys, dtype, q_variance, k_variance) per row."""
    plan = []
    for head_dim in head_dims:
        root = math.sqrt(head_dim)
        normalisations = [("unscaled", 1 / root, 1.0), ("scaled", 1.0, 1 / root),
                          *(("temperature", tau, 1 / (tau * root)) for tau in temperatures if tau != 1)]
        for q_variance, k_variance in [(1.0, 1.0), *variances]:
            # at a measured variance, the two normalisations a model uses; temperatures at unit variance only
            shown = normalisations if (q_variance, k_variance) == (1.0, 1.0) else normalisations[:2]
            plan += [("softmax", normalisation, temperature, scale, head_dim, num_keys, dtype, q_variance, k_variance)
                     for num_keys in key_counts for normalisation, temperature, scale in shown for dtype in dtypes]
        # the other normalisers: unscaled and scaled at unit variance, on the softmax rows' draws
        plan += [(normaliser, normalisation, temperature, scale, head_dim, num_keys, dtype, 1.0, 1.0)
                 for normaliser in normalisers for num_keys in key_counts
                 for normalisation, temperature, scale in normalisations[:2] for dtype in dtypes]
    return plan


def init_table(head_dims: Iterable[int], key_counts: Iterable[int], temperatures: Iterable[float], *,
               dtypes: Iterable[torch.dtype] = (torch.float32, torch.float64), samples: int, seed: int,
               variances: Iterable[tuple[float, float]] = (), normalisers: Iterable[str] = (),
               quiet: bool = False) -> pd.DataFrame:
    """`init_stats` over a grid, one row per (normaliser, normalisation, temperature, head_dim, num_keys, dtype,
    q_variance, k_variance): for every head_dim d and key count, softmax rows at unit variance "unscaled"
    (scale 1, temperature 1/sqrt(d)), "scaled" (scale 1/sqrt(d), temperature 1) and "temperature" for each tau
    in `temperatures` other than 1 (scale 1/(tau sqrt(d))); at each (q_variance, k_variance) of `variances`
    (other than (1, 1)), "unscaled" and "scaled"; and for each of `normalisers` (others than the softmax),
    "unscaled" and "scaled" at unit variance. Every row draws from the same `seed`. Columns are COLUMNS, in
    order; `attrs` holds `samples` and `seed`. A progress bar counts rows unless `quiet`."""
    head_dims = [_integer("head_dim", head_dim, 1) for head_dim in head_dims]
    key_counts = [_integer("num_keys", num_keys, 1) for num_keys in key_counts]
    temperatures = [_positive("temperature", temperature) for temperature in temperatures]
    variances = [(_positive("q_variance", q), _positive("k_variance", k)) for q, k in variances if (q, k) != (1, 1)]
    dtypes = list(dtypes)
    for dtype in dtypes:
        _dtype_name(dtype)
    normalisers = [_normaliser(name) for name in normalisers if name != "softmax"]  # softmax: the full grid

    plan = _init_plan(head_dims, key_counts, temperatures, dtypes, variances, normalisers)
    rows = []
    with tqdm(total=len(plan), disable=quiet, unit="row", desc="init_table") as bar:
        for normaliser, normalisation, temperature, scale, head_dim, num_keys, dtype, q_variance, k_variance in plan:
            bar.set_postfix_str(f"d={head_dim} n={num_keys} {normaliser} {normalisation} {DTYPES[dtype]}")
            row = init_stats(head_dim, num_keys, scale=scale, dtype=dtype, samples=samples, seed=seed,
                             q_variance=q_variance, k_variance=k_variance, normaliser=normaliser)
            rows.append({**row, "normalisation": normalisation, "temperature": temperature})
            bar.update()
    table = pd.DataFrame(rows, columns=list(COLUMNS))
    table.attrs.update(samples=samples, seed=seed)
    return table


def _component_variance(values: Tensor) -> float:
    """The variance of each component (head, dim) over examples and positions, averaged over the
    components. values: (batch, heads, seq, head_dim)."""
    per_token = rearrange(values.double(), "b h t d -> (b t) (h d)")
    return per_token.var(dim=0).mean().item()


def model_variance(config: RunConfig, *, batch_size: int = 16) -> pd.DataFrame:
    """The per-component variance of q and k at each layer of the model a run of `config`
    trains, at its initialisation (seeded as the training loop seeds it), on one training batch of its
    task. Columns are VARIANCE_COLUMNS; the global random state is left as it was."""
    batch_size = _integer("batch_size", batch_size, 2)
    rows = []
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        parts = build(config)
        task, model = parts.task, parts.model
        inputs = task.batch(batch_size, tasks.train_generator(config.seed), "cpu").inputs
        x = model.embedded(inputs)  # (B, T, dim)
        for layer, block in enumerate(model.blocks):
            q, k, _ = block.heads_qkv(x)  # (B, H, T, head_dim) each
            rows.append({"head_dim": config.model.attention_head_dim, "layer": layer,
                         "q_variance": _component_variance(q), "k_variance": _component_variance(k)})
            x, _ = block(x, config.model.causal)
    return pd.DataFrame(rows, columns=list(VARIANCE_COLUMNS))


def fading_vectors(generator: torch.Generator, head_dim: int, num_keys: int,
                   strong_logit: float) -> tuple[Tensor, Tensor]:
    """One draw of study D's vectors, in float64: a query q ~ N(0, I_d) (d = head_dim), then `num_keys` keys
    k_j ~ N(0, I_d), each projected onto the hyperplane orthogonal to q; the first (the strong key) then gets the
    component along q that makes its scaled dot product q.k_0 / sqrt(d) = strong_logit, the others keep 0 (both
    to rounding). Returns q (d,) and the keys (num_keys, d)."""
    query = torch.randn(head_dim, generator=generator, dtype=torch.float64)
    keys = torch.randn(num_keys, head_dim, generator=generator, dtype=torch.float64)
    direction = query / torch.linalg.vector_norm(query)
    keys = keys - (keys @ direction)[:, None] * direction  # (n, d), orthogonal to q
    keys[0] += strong_logit * math.sqrt(head_dim) / torch.linalg.vector_norm(query) * direction
    return query, keys


def drawn_weights(name: str, options: dict[str, Any], num_keys: int, *, strong_logit: float, head_dim: int,
                  draws: int, seed: int) -> Tensor:
    """(draws, num_keys) float64: the weights the one query of each draw (`fading_vectors`, from a generator
    seeded with `seed`) gives its keys under variant `name` with `options`, by its reference formula
    (return_weights). Draw i builds the module with run_seed i, so a variant with random features draws
    them afresh per draw, and the same features at every key count; bidirectional (one query sees every key)."""
    generator = torch.Generator().manual_seed(seed)
    rows = []
    for draw in range(draws):
        query, keys = fading_vectors(generator, head_dim, num_keys, strong_logit)
        module = variants.create(name, num_heads=1, head_dim=head_dim, kernel="reference", run_seed=draw,
                                 max_len=num_keys, **options).double().eval()
        values = torch.zeros(1, 1, num_keys, 1, dtype=torch.float64)  # the output is not used, only the weights
        with torch.no_grad():
            _, weights = module(query[None, None, None], keys[None, None], values, return_weights=True)
        rows.append(weights[0, 0, 0])  # (num_keys,): (batch, head, query) 0
    return torch.stack(rows)


def _drawn_rows(name: str, options: dict[str, Any], key_counts: list[int], *, strong_logit: float, head_dim: int,
                draws: int, seed: int) -> list[dict[str, Any]]:
    """fading_table's rows of one drawn variant: the mean over draws of each FADING_STATISTICS and its se."""
    rows = []
    for num_keys in key_counts:
        weights = drawn_weights(name, options, num_keys, strong_logit=strong_logit, head_dim=head_dim, draws=draws,
                                seed=seed)
        row: dict[str, Any] = {"normaliser": name, "length_scale": math.nan, "num_keys": num_keys,
                               "strong_logit": float(strong_logit), "draws": draws, "head_dim": head_dim,
                               "variant_options": json.dumps(options, sort_keys=True)}
        per_draw = {"max_weight": weights.amax(dim=-1), "entropy_over_log_n": entropy(weights) / math.log(num_keys),
                    "strong_weight": weights[:, 0]}
        for statistic, values in per_draw.items():
            row[statistic], row[f"{statistic}_se"] = _mean_and_standard_error(values)
        rows.append(row)
    return rows


def fading_table(key_counts: Iterable[int], *, strong_logit: float, length_scales: Iterable[float],
                 kernelised: Iterable[tuple[str, dict[str, Any]]] = (), head_dim: int = 64, draws: int = 32,
                 seed: int = 0) -> pd.DataFrame:
    """One logit `strong_logit` = a among n - 1 logits 0, for each n in `key_counts`: the largest weight and
    the normalised entropy under "softmax" (largest weight e^a / (e^a + n - 1), fading as n grows) and
    "ssmax" for each length scale s (logits times s log n: n^(s a) / (n^(s a) + n - 1), which stays
    n / (2n - 1), about 1/2, when s a = 1). Weights come from torch.softmax in float64 over the logit
    vectors; these rows are exact: `draws` 0, standard errors and `head_dim` NaN, `variant_options` empty.

    Then for each (variant name, options) of `kernelised` (meant for the kernelised family, whose weight of a
    pair is not a function of its logit; any attention variant runs, dense giving the softmax rows again): the
    rows of `draws` draws of q and keys in `head_dim` dimensions whose scaled dot products are a and 0
    (`drawn_weights`), `normaliser` the variant's name, `variant_options` its options as JSON, each statistic
    the mean over draws with its standard error `<statistic>_se`. `strong_weight` is the strong key's weight
    (the largest when a > 0 for softmax and ssmax, not always for the drawn rows). Columns are FADING_COLUMNS;
    `length_scale` is NaN but for ssmax; `attrs` holds `draws` and `seed`."""
    key_counts = [_integer("num_keys", num_keys, 2) for num_keys in key_counts]
    if not isinstance(strong_logit, numbers.Real) or isinstance(strong_logit, bool) or not math.isfinite(strong_logit):
        raise ValueError(f"strong_logit {strong_logit!r} is not accepted; accepted: a finite number.")
    normalisers = [("softmax", math.nan), *(("ssmax", _positive("length_scale", scale)) for scale in length_scales)]
    kernelised = list(kernelised)
    head_dim, draws, seed = _integer("head_dim", head_dim, 1), _integer("draws", draws, 1), _integer("seed", seed, 0)

    rows = []
    for normaliser, length_scale in normalisers:
        for num_keys in key_counts:
            logits = torch.zeros(num_keys, dtype=torch.float64)
            logits[0] = strong_logit
            if normaliser == "ssmax":
                logits *= length_scale * math.log(num_keys)
            weights = torch.softmax(logits, dim=-1)
            rows.append({"normaliser": normaliser, "length_scale": length_scale, "num_keys": num_keys,
                         "strong_logit": float(strong_logit), "max_weight": weights.max().item(),
                         "entropy_over_log_n": entropy(weights).item() / math.log(num_keys),
                         "strong_weight": weights[0].item(), "max_weight_se": math.nan,
                         "entropy_over_log_n_se": math.nan, "strong_weight_se": math.nan, "draws": 0,
                         "head_dim": math.nan, "variant_options": ""})
    for name, options in kernelised:
        rows += _drawn_rows(name, dict(options), key_counts, strong_logit=float(strong_logit), head_dim=head_dim,
                            draws=draws, seed=seed)
    table = pd.DataFrame(rows, columns=list(FADING_COLUMNS))
    table.attrs.update(draws=draws, seed=seed)
    return table
