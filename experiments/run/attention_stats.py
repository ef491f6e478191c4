"""Attention statistics per layer and head, on a fixed probe batch: what the saturation studies track.

With `train.attention_stats=true` every evaluation (and one before the first step) adds, per layer and
head, measured over the query rows that may see at least two keys (row i sees n_i keys):

    entropy              mean entropy of a row's weights, in nats
    entropy_over_log_n   mean of entropy / log(n_i): 1 for uniform weights, 0 for one-hot
    max_weight           mean largest weight of a row
    saturated_fraction   fraction of rows whose largest weight exceeds 0.99
    zero_fraction        mean over rows of the fraction of the keys a row sees that get a weight of exactly 0
    logit_std            standard deviation of a row's logits over the keys it sees, mean over rows
    logit_max_abs        largest |logit| over the attended pairs
    grad_norm_q/k        norm of the probe loss's gradient reaching this head's rows of W_q and W_k
    sigma                ||W_K W_Q^T||_2 * ||X X^T||_2 (Zhai et al. 2023), mean over the probe examples
    entropy_bound        the lower bound on the entropy that sigma implies, mean over rows
    bound_violations     rows whose measured entropy is below their bound: a check of the measurement, 0

sigma and its bound: for a variant whose logits are `logit_scale() * q.k` (dense, unscaled, temperature,
and the local and sparse layouts), the logit of a pair is x_i^T M x_j with x the block's normalised input
extended by a constant 1 (which carries the q and k biases) and M = scale * W_Q^T W_K over that extended
input. So |logit| <= ||M||_2 ||x_i|| ||x_j|| <= ||M||_2 ||X X^T||_2 = sigma, and a row's logits span at
most 2 sigma. Zhai et al. bound the entropy from below by a function of sigma that falls exponentially
fast; `entropy_lower_bound` is the tightest such function of (sigma, n): the least entropy of any
softmax over n logits spanning at most 2 sigma. For other variants (q/k transforms, per-pair scores,
additive scoring) sigma is reported for their q and k projections and the bound is NaN.

Each held-out set an evaluation reads (the test set, each extra split and length) also gets
`scored_max_weight`: the largest weight of the rows of its scored positions, the queries an answer is asked at,
mean over those rows, every layer and head (`scored_max_weight`); the run's summary keeps it per length
(`accuracy_by_length`), where the weight a query gives its evidence spreads as the keys grow in number.

Variants whose weights are not the softmax of their logits (another normaliser; the kernelised family's
feature maps; the low-rank family's factors) are measured on the weights their own reference formula returns
(`return_weights=True`, the normaliser the variant trains with), never through a softmax: the entropy, largest
weight, saturated and zero fractions of those rows (sparsemax's and entmax's zeros are exact, so zero_fraction
is their sparsity; sigmoid's rows do not sum to 1, so their entropy is None, their largest weight the raw one);
the logit statistics where the variant has logits (none for feature maps or factors: None); sigma of the q and
k projections, and no bound (it holds for softmax rows only). The entropy of a head is None when one
of its rows is not a distribution (a negative weight, or a sum off 1 by more than DISTRIBUTION_TOLERANCE: an
unnormalised or low-rank variant's rows may be either), for entropy is defined for distributions only; a row
that gives no key any weight (ReLU features whose products all vanish: its output is 0) has none, and is left
out of the entropy's mean (counted in the others, as a row of zeros).
"""

from __future__ import annotations

import math
from typing import Any

import torch
from einops import rearrange

from experiments import tasks
from experiments.run.model import Transformer, scored_loss
from variants.base import Attention
from variants.normalisers import softmax as masked_softmax

SATURATED = 0.99  # a row whose largest weight exceeds this is saturated
PROBE_SIZE = 16  # examples of the test set the statistics are measured on
SCORED_PROBE_SIZE = 128  # examples of a held-out set whose scored rows `scored_max_weight` reads
BOUND_CHUNK = 1 << 22  # two-level entropies evaluated at once by entropy_lower_bound
DISTRIBUTION_TOLERANCE = 1e-4  # a row of weights summing to 1 within this is a distribution (float32 sums)
STATISTICS = ("entropy", "entropy_over_log_n", "max_weight", "saturated_fraction", "zero_fraction", "logit_std",
              "logit_max_abs", "grad_norm_q", "grad_norm_k", "sigma", "entropy_bound", "bound_violations")


def entropy_lower_bound(sigma: torch.Tensor, num_keys: torch.Tensor) -> torch.Tensor:
    """The least entropy (nats) of softmax(z) over `num_keys` logits z with max(z) - min(z) <= 2 * sigma,
    elementwise over tensors that broadcast together (float64).

    Those distributions are the polytope {p : min(p) >= exp(-2 sigma) max(p)}; entropy is concave, so its
    minimum is at a vertex, and the vertices put weight a on k keys and a * exp(-2 sigma) on the other
    n - k. The bound is the least of those n - 1 two-level entropies: with c = exp(-2 sigma),

        H_k = log(k + (n - k) c) + 2 sigma (n - k) c / (k + (n - k) c).

    k = 1 (one key stands out) is the minimum while n c is small; for large n c more keys at the top give
    less entropy, so the one-key expression alone is not a lower bound there. 0 for n = 1.
    """
    sigma, num_keys = torch.broadcast_tensors(sigma.double(), num_keys.double())
    shape, sigma, num_keys = sigma.shape, sigma.reshape(-1), num_keys.reshape(-1)
    largest = int(num_keys.max()) if num_keys.numel() else 1
    tops = torch.arange(1, max(largest, 2), dtype=torch.float64, device=sigma.device)  # k = 1 .. n_max - 1
    bound = torch.empty_like(sigma)
    chunk = max(1, BOUND_CHUNK // len(tops))  # rows per chunk: (chunk, n_max - 1) two-level entropies at once
    for start in range(0, len(sigma), chunk):
        spread = 2 * sigma[start : start + chunk, None]
        keys = num_keys[start : start + chunk, None]
        rest = (keys - tops) * torch.exp(-spread)  # (n - k) c
        total = tops + rest
        entropies = (torch.log(total) + spread * rest / total).masked_fill(tops >= keys, math.inf)  # k <= n - 1
        bound[start : start + chunk] = entropies.min(dim=-1).values
    return bound.masked_fill(num_keys <= 1, 0.0).reshape(shape)


def _bilinear(attn: Attention, q: torch.Tensor, k: torch.Tensor, q_pos: torch.Tensor, causal: bool) -> bool:
    """Whether the variant's logits are `logit_scale() * q.k` of the unprepared q and k (sigma bounds them)."""
    cls = type(attn)
    return (cls.prepare is Attention.prepare and cls.logits is Attention.logits
            and attn.score_mod(q, k, q_pos, causal) is None)


def _sigma(block, x: torch.Tensor, scale: float | torch.Tensor) -> torch.Tensor:
    """sigma per (example, head), (B, H): ||scale * W_Q^T W_K||_2 over the input extended by 1, times
    ||X X^T||_2 = ||X||_2^2 of that input."""
    heads = block.attn.num_heads
    extended = torch.cat([block.qkv.weight, block.qkv.bias[:, None]], dim=1).double()  # (3 H d, dim + 1)
    w_q, w_k = rearrange(extended, "(three h d) e -> three h d e", three=3, h=heads)[:2]  # (H, d, dim + 1)
    scale = torch.as_tensor(scale, dtype=torch.float64).reshape(-1)  # (1,) or (H,)
    product = torch.linalg.matrix_norm(w_q.transpose(1, 2) @ w_k, ord=2) * scale.abs()  # (H,)
    normed = block.attn_norm(x).double()
    inputs = torch.cat([normed, torch.ones_like(normed[..., :1])], dim=-1)  # (B, T, dim + 1)
    gram = torch.linalg.matrix_norm(inputs, ord=2) ** 2  # (B,)
    return gram[:, None] * product[None, :]


def _head_gradients(model: Transformer, inputs: torch.Tensor, targets: torch.Tensor) -> list[torch.Tensor]:
    """Per layer, (2, H): the norms of the probe loss's gradient w.r.t. each head's rows of W_q and W_k.
    Through autograd.grad, so the parameters' .grad (the optimiser's) is never touched."""
    weights = [block.qkv.weight for block in model.blocks]
    loss = scored_loss(model(inputs), targets)
    gradients = torch.autograd.grad(loss, weights)
    norms = []
    for block, gradient in zip(model.blocks, gradients, strict=True):
        per_head = rearrange(gradient, "(three h d) e -> three h (d e)", three=3, h=block.attn.num_heads)[:2]
        norms.append(per_head.double().norm(dim=-1))
    return norms


def softmax_of_logits(attn: Attention) -> bool:
    """Whether the variant's weights are the softmax of its logits: no other normaliser, no feature maps, no
    factors. Only those rows are recomputed from the logits, and only those have the entropy bound."""
    hooks = type(attn).overridden_hooks()
    return attn.normaliser == "softmax" and "features" not in hooks and "factors" not in hooks


def _weight_statistics(weights: torch.Tensor, seen: torch.Tensor) -> dict[str, torch.Tensor]:
    """Per row of (B, H, T, S) float64 weights, over the keys it sees: entropy (NaN where the row is not a
    distribution), largest weight, exact zeros, n."""
    count = seen.sum(-1)  # (B, H, T)
    plogp = torch.where(weights > 0, weights * torch.log(weights.clamp_min(1e-300)), 0.0)
    distribution = ((weights >= 0) | ~seen).all(-1) & ((weights.sum(-1) - 1).abs() <= DISTRIBUTION_TOLERANCE)
    zeros = ((weights == 0) & seen).sum(-1)
    return {"entropy": torch.where(distribution | (zeros == count), -plogp.sum(-1), math.nan), "count": count,
            "max_weight": weights.masked_fill(~seen, -math.inf).amax(-1), "zeros": zeros}


def _logit_statistics(logits: torch.Tensor, seen: torch.Tensor) -> dict[str, torch.Tensor]:
    """Per row of (B, H, T, S) float64 logits, over the keys it sees: the standard deviation, the largest |logit|."""
    count = seen.sum(-1).clamp_min(1)
    masked = logits.masked_fill(~seen, 0.0)
    mean = masked.sum(-1) / count
    variance = ((masked - mean[..., None]) ** 2).masked_fill(~seen, 0.0).sum(-1) / count
    return {"logit_std": variance.sqrt(), "logit_max_abs": masked.abs().amax(-1)}


def _rows(attn: Attention, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> dict[str, torch.Tensor]:
    """The row statistics of one layer's q, k, v (B, H, T, d): from the softmax of the logits where the variant's
    weights are that (`softmax_of_logits`), else from the weights its reference formula returns."""
    positions = torch.arange(q.shape[2], device=q.device)
    allowed = attn.allowed(positions, positions, causal, None)
    shape = (q.shape[0], q.shape[1], q.shape[2], k.shape[2])
    seen = torch.ones(shape, dtype=torch.bool, device=q.device) if allowed is None else allowed.expand(shape)
    has_logits = not {"features", "factors"} & set(type(attn).overridden_hooks())
    logits = None
    if has_logits:
        prepared_q, prepared_k = attn.prepare(q, k)
        logits = attn.logits(prepared_q, prepared_k, positions, positions, causal).double()  # (B, H, T, T)
    if softmax_of_logits(attn):
        weights = masked_softmax(logits, allowed)
    else:
        weights = attn(q, k, v, causal=causal, return_weights=True)[1].double()  # (B, H, T, T), reference formula
    rows = _weight_statistics(weights, seen)
    return rows if logits is None else {**rows, **_logit_statistics(logits, seen)}


def _layers(model: Transformer, inputs: torch.Tensor):
    """Each layer's block, its input x (B, T, dim) and its q, k, v (B, H, T, d), the model's forward run through
    them in turn."""
    x = model.embedded(inputs)
    for block in model.blocks:
        yield block, x, *block.heads_qkv(x)
        x, _ = block(x, model.config.causal)


@torch.no_grad()
def _forward_statistics(model: Transformer, inputs: torch.Tensor) -> list[dict[str, torch.Tensor]]:
    causal = model.config.causal
    layers = []
    for block, x, q, k, v in _layers(model, inputs):
        attn = block.attn
        rows = _rows(attn, q, k, v, causal)
        positions = torch.arange(q.shape[2], device=q.device)
        if softmax_of_logits(attn) and _bilinear(attn, q, k, positions, causal):
            sigma = _sigma(block, x, attn.logit_scale())  # (B, H)
            rows["bound"] = entropy_lower_bound(sigma[..., None], rows["count"])  # (B, H, T)
        else:
            sigma = _sigma(block, x, 1.0 / math.sqrt(attn.head_dim))
        rows["sigma"] = sigma
        layers.append(rows)
    return layers


def measure(model: Transformer, inputs: torch.Tensor, targets: torch.Tensor) -> list[dict[str, Any]]:
    """The statistics of every layer and head on (inputs, targets), one dict per (layer, head) with
    `layer`, `head` and the STATISTICS. Leaves the model's mode, parameters and gradients as they were."""
    was_training = model.training
    model.eval()
    try:
        with torch.autocast(inputs.device.type, enabled=False):
            gradients = _head_gradients(model, inputs, targets)
            layers = _forward_statistics(model, inputs)
    finally:
        model.train(was_training)
    results = []
    for layer, (rows, norms) in enumerate(zip(layers, gradients, strict=True)):
        counted = rows["count"] >= 2  # (B, H, T): rows with a choice to make
        weighted = counted & (rows["zeros"] < rows["count"])  # and some weight to spread (the entropy's rows)

        def mean(values: torch.Tensor, used: torch.Tensor = counted) -> torch.Tensor:  # (H,); NaN with no row
            number = used.sum(dim=(0, 2)).double()
            return torch.where(number > 0, torch.where(used, values.double(), 0.0).sum(dim=(0, 2)) / number, math.nan)

        log_n = torch.log(rows["count"].double().clamp_min(2))
        statistics = {
            "entropy": mean(rows["entropy"], weighted),
            "entropy_over_log_n": mean(rows["entropy"] / log_n, weighted),
            "max_weight": mean(rows["max_weight"]),
            "saturated_fraction": mean((rows["max_weight"] > SATURATED).double()),
            "zero_fraction": mean(rows["zeros"].double() / rows["count"].clamp_min(1)),
            "grad_norm_q": norms[0], "grad_norm_k": norms[1],
            "sigma": rows["sigma"].mean(0),
        }
        if "logit_std" in rows:  # a variant with feature maps or factors has no logits
            statistics["logit_std"] = mean(rows["logit_std"])
            statistics["logit_max_abs"] = torch.where(counted, rows["logit_max_abs"], 0.0).amax(dim=(0, 2))
        if "bound" in rows:
            statistics["entropy_bound"] = mean(rows["bound"])
            # A bound above the measured entropy is a bug in one or the other (rounding aside).
            below = rows["entropy"] < rows["bound"] - 1e-6 * (1 + rows["bound"])
            statistics["bound_violations"] = (below & counted).sum(dim=(0, 2)).double()
        for head in range(model.blocks[layer].attn.num_heads):
            entry: dict[str, Any] = {"layer": layer, "head": head}
            for name in STATISTICS:  # None: not defined for this variant (NaN: a row that is not a distribution)
                value = float(statistics[name][head]) if name in statistics else math.nan
                entry[name] = None if math.isnan(value) else value
            if entry["bound_violations"] is not None:
                entry["bound_violations"] = int(entry["bound_violations"])
            results.append(entry)
    return results


def probe_batch(test_set: tasks.Batch) -> tuple[torch.Tensor, torch.Tensor]:
    """The fixed examples the statistics are measured on: the test set's first PROBE_SIZE."""
    return test_set.inputs[:PROBE_SIZE], test_set.targets[:PROBE_SIZE]



def _weights_of_rows(attn: Attention, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, rows: torch.Tensor,
                     causal: bool) -> torch.Tensor:
    """The weights (B, H, len(rows), T) of the query rows `rows` (ascending) of one layer's q, k, v (B, H, T, d): the
    softmax of their logits alone where the variant's weights are that (`softmax_of_logits`; scored over the span of
    rows from the first to the last, which a position term indexed from the span's first row needs), else the rows
    of the weights its reference formula returns."""
    if not softmax_of_logits(attn):
        return attn(q, k, v, causal=causal, return_weights=True)[1][:, :, rows]
    positions = torch.arange(q.shape[2], device=q.device)
    span = positions[rows[0] : rows[-1] + 1]
    prepared_q, prepared_k = attn.prepare(q, k)
    logits = attn.logits(prepared_q[:, :, span], prepared_k, span, positions, causal)[:, :, rows - rows[0]]
    allowed = attn.allowed(positions, positions, causal, None)
    return masked_softmax(logits.double(), None if allowed is None else allowed[:, :, rows])


@torch.no_grad()
def scored_max_weight(model: Transformer, held_out: tasks.Batch) -> float:
    """The largest weight of each scored position's row (where an answer is asked for), mean over those rows and
    every layer and head, on the first SCORED_PROBE_SIZE examples of `held_out`: 1 where each such query puts all
    its weight on one key, 1/n where it spreads evenly over n. One example at a time, the scored rows' logits only
    (`_weights_of_rows`), so that a long evaluation length costs one row per answer rather than the whole matrix."""
    was_training = model.training
    model.eval()
    largest = []
    try:
        with torch.autocast(held_out.inputs.device.type, enabled=False):
            for inputs, targets in zip(held_out.inputs[:SCORED_PROBE_SIZE], held_out.targets[:SCORED_PROBE_SIZE],
                                       strict=True):
                rows = (targets != tasks.IGNORE).nonzero()[:, 0]  # (rows,) ascending
                largest += [_weights_of_rows(block.attn, q, k, v, rows, model.config.causal).amax(-1).flatten()
                            for block, _, q, k, v in _layers(model, inputs[None])]
    finally:
        model.train(was_training)
    return float(torch.cat(largest).mean())
