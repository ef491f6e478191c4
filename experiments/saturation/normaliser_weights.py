"""Study A's normalisers: the weights each normaliser a dot-product variant may choose gives the drawn dot
products, and its Jacobian, for `experiments.saturation.tables.init_stats`.

The weights come from the functions the variants run (`variants.normalisers`), over all n keys of a row (no
mask), so that study A measures what training would see at initialisation:

    softmax          p_j = exp(s_j) / sum exp(s_j')             a distribution; never exactly 0 but by underflow
    sigmoid          w_j = sigmoid(s_j - log n)                 each weight on its own: a row sums to about 1
                                                                while the logits are small, to anything in (0, n)
    sparsemax        the projection of s onto the simplex       a distribution, exactly 0 below a threshold
    entmax15         1.5-entmax                                 a distribution, exactly 0 below a threshold
    entmax_adaptive  alpha-entmax, alpha learned per head       at the alphas a model starts with (below)

Entropy is defined for distributions, which sigmoid's rows are not: for sigmoid the table reports the entropy of
the weights divided by their row sum (`distribution`), which says how evenly a query spreads what it takes, while
the row sum itself (`weight_sum`) says how much it takes; its largest weight is the raw one, what the query
gives the key.

entmax_adaptive starts each head at a random alpha = 1 + sigmoid(a), a ~ N(0, 1), clamped to [1.01, 2]
(`variants.normalisers.adaptive_alpha`): sample i of `samples` gets the alpha at the quantile (i + 1/2) / samples
of that law (`initial_alphas`), a stratified draw over the heads a model may start with that takes no random
numbers, so its dot products are those every other row of the table draws.

The Jacobian dw/ds of each is a diagonal matrix less a rank-one one, diag(d) - u u^T (`jacobian`):

    softmax          d = p,            u = p
    sigmoid          d = w (1 - w),    u = 0                     (each weight depends on its own logit only)
    alpha-entmax     d = g,            u = g / sqrt(sum_j g_j),  g_j = p_j^(2 - alpha) where p_j > 0, else 0
                     (Peters et al. 2019; sparsemax is alpha = 2, g the support's indicator; entmax15 alpha 1.5)

so one secular-equation bisection (`jacobian_norm`) gives the spectral norm of every one of them, and the
diagonal d - u^2, the derivative of each weight by its own logit, is what passes back to that logit
(`own_derivatives`).
"""

from __future__ import annotations

import torch
from torch import Tensor

from variants import normalisers

MEASURED = normalisers.DOT_PRODUCT_NORMALISERS  # softmax, sigmoid, sparsemax, entmax15, entmax_adaptive
ENTMAX_ALPHA = {"sparsemax": 2.0, "entmax15": 1.5}  # the fixed alphas of the entmax family
BISECTION_STEPS = 64  # the bracket is at most as wide as the root: 64 halvings pass float64's 53 bits


def initial_alphas(start: int, count: int, samples: int) -> Tensor:
    """entmax_adaptive's alpha of samples start .. start + count - 1 of `samples`, (count,) float64: the
    quantiles (i + 1/2) / samples of alpha = 1 + sigmoid(a), a ~ N(0, 1), clamped as the module clamps it."""
    quantiles = (torch.arange(start, start + count, dtype=torch.float64) + 0.5) / samples
    return normalisers.adaptive_alpha(torch.special.ndtri(quantiles))


def weights(normaliser: str, logits: Tensor, alphas: Tensor | None = None) -> Tensor:
    """The normaliser's weights of (samples, n) logits over all n keys, in the logits' dtype; entmax_adaptive
    takes one alpha per sample, (samples,)."""
    if normaliser == "entmax_adaptive":  # the samples as heads, so that each row has its own alpha
        return normalisers.entmax_adaptive(logits[None], None, alphas)[0]
    return normalisers.NORMALISERS[normaliser](logits, None)


def distribution(normaliser: str, row_weights: Tensor) -> Tensor:
    """The distribution whose entropy the table reports: the weights, or sigmoid's divided by their row sum."""
    if normaliser == "sigmoid":
        return row_weights / row_weights.sum(dim=-1, keepdim=True)
    return row_weights


def _entmax_gradient_weights(normaliser: str, row_weights: Tensor, alphas: Tensor | None) -> Tensor:
    """g_j = p_j^(2 - alpha) where p_j > 0, else 0, in the weights' dtype."""
    alpha = alphas[:, None] if normaliser == "entmax_adaptive" else ENTMAX_ALPHA[normaliser]
    exponent = torch.as_tensor(2 - alpha, dtype=row_weights.dtype)
    return torch.where(row_weights > 0, row_weights.pow(exponent), 0.0)


def jacobian(normaliser: str, row_weights: Tensor, alphas: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """(d, u), (samples, n) float64 each: the Jacobian of the normaliser at these weights is diag(d) - u u^T."""
    wide = row_weights.to(torch.float64)
    if normaliser == "softmax":
        return wide, wide
    if normaliser == "sigmoid":
        return wide * (1 - wide), torch.zeros_like(wide)
    gradient = _entmax_gradient_weights(normaliser, wide, alphas)
    return gradient, gradient / gradient.sum(dim=-1, keepdim=True).sqrt()


def own_derivatives(normaliser: str, row_weights: Tensor, alphas: Tensor | None = None) -> Tensor:
    """The derivative of each weight by its own logit, the Jacobian's diagonal, in the weights' dtype: p (1 - p)
    for softmax and sigmoid, g (1 - g / sum g) for the entmax family (0 off its support)."""
    if normaliser in ("softmax", "sigmoid"):
        return row_weights * (1 - row_weights)
    gradient = _entmax_gradient_weights(normaliser, row_weights, alphas)
    return gradient * (1 - gradient / gradient.sum(dim=-1, keepdim=True))


def largest_eigenvalue(diagonal: Tensor, vector: Tensor) -> Tensor:
    """The spectral norm of diag(d) - u u^T for each row (d, u >= 0) over the last dimension, in float64,
    without building the n x n matrices.

    The matrices here are positive semi-definite (the Jacobians of `jacobian`), so the norm is the largest
    eigenvalue lambda, which lies in [d_(2), d_(1)], between the two largest entries of d (interlacing), and
    between the matrix's largest diagonal entry m = max_i d_i - u_i^2 and its Gershgorin bound
    max_i d_i - u_i^2 + u_i sum_(j != i) u_j. Off ties it is the root there of the secular equation
    1 = sum_i u_i^2 / (d_i - lambda), whose right side increases with lambda; bisecting a bracket no wider than
    lambda reaches float64's precision. A tie d_(1) = d_(2) leaves an empty bracket: lambda = d_(1). A single
    key (n = 1) has the 1 x 1 matrix d - u^2 (0 for a distribution)."""
    diagonal, vector = diagonal.to(torch.float64), vector.to(torch.float64)
    if diagonal.shape[-1] == 1:
        return (diagonal - vector.square()).squeeze(-1)
    largest, second = diagonal.topk(2, dim=-1).values.split(1, dim=-1)  # d_(1), d_(2): (..., 1) each
    squares = vector.square()
    entries = diagonal - squares
    gershgorin = entries + vector * (vector.sum(dim=-1, keepdim=True) - vector)
    low = torch.maximum(second, entries.amax(dim=-1, keepdim=True))
    high = torch.minimum(largest, gershgorin.amax(dim=-1, keepdim=True))
    for _ in range(BISECTION_STEPS):
        middle = (low + high) / 2
        root_above = (squares / (diagonal - middle)).sum(dim=-1, keepdim=True) < 1
        low, high = torch.where(root_above, middle, low), torch.where(root_above, high, middle)
    return ((low + high) / 2).squeeze(-1)


def jacobian_norm(row_weights: Tensor, normaliser: str = "softmax", alphas: Tensor | None = None) -> Tensor:
    """The spectral norm of the normaliser's Jacobian at each row of weights (samples,), float64; for the
    softmax, that of diag(p) - p p^T, 1/n for uniform weights and 0 for one-hot ones."""
    return largest_eigenvalue(*jacobian(normaliser, row_weights, alphas))
