"""The additive kernel: additive attention (Bahdanau's w . tanh(a_i + b_j) per head), its logits and their
gradients in closed form, chunk by chunk.

For a variant of the additive family, which gives its score vector w (`additive_scorer`) and whose prepared q and k
are already through the tanh layer's projections (a_i = W_q q_i, b_j = W_k k_j, hidden wide), with g_ij the
gradient of the logit s_ij:

    s_ij     = sum_e w_e t_ije,     t = tanh(a_ie + b_je) = 1 - 2 r,     r = sigmoid(-2 (a_ie + b_je))
    dL/da_ie = 4 w_e sum_j g_ij r_ije (1 - r_ije)                          (1 - t^2 = 4 r (1 - r))
    dL/db_je = 4 w_e sum_i g_ij r_ije (1 - r_ije)
    dL/dw_e  = sum_ij g_ij (1 - 2 r_ije)

r = exp(-2a) / (exp(-2a) + exp(2b)), and the exponentials are taken once per call, O(n hidden): a pair element costs
an add and a division where a tanh would cost a transcendental function (on a CPU torch.tanh costs many times a
multiply). Where a pre-activation is too large for that (|a| or |b| above `exponent_limit`: 21.3 in
float32, 176.6 in float64) the call takes r = sigmoid(-2 (a + b)) pair by pair instead: exact at any size, slower.
Under autocast (CUDA's or the CPU's) it computes in float32.

The whole attention is one autograd function (`_Attention`) over chunks of batch elements and queries holding at
most `CHUNK_ELEMENTS` pair elements (batch x heads x queries x keys x hidden). Forward: each chunk's r, logits,
normaliser and product with the values, keeping nothing of the chunk. Backward: each chunk's r and logits again,
the normaliser (any of them) and the values differentiated through autograd on that chunk's logits, then the closed
forms above, which reduce r over the keys, the queries and the pairs in one pass each. So training evaluates each
pair element twice and keeps no (queries x keys x hidden) tensor from forward to backward: memory is O(batch heads n
(head_dim + hidden)) plus O(CHUNK_ELEMENTS), whatever n. With causality the queries come in at least
`CAUSAL_BLOCKS` blocks, each scoring only the keys up to its last query. The reference and chunked kernels compute
the same logits through autograd (the variant's `logits`, keeping a chunk's tanh for backward): the naive twin the
tests hold this kernel to.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator

import torch
from einops import rearrange
from torch.autograd.function import once_differentiable

from variants.kernels.call import Call
from variants.kernels.reference import normalised

CHUNK_ELEMENTS = 1 << 21  # pair elements per chunk: r is 8 MiB of float32, within a CPU's last-level cache
# With causality, query blocks per sequence at least: block i of them scores i / CAUSAL_BLOCKS of the keys, so the
# pairs scored fall to (CAUSAL_BLOCKS + 1) / (2 CAUSAL_BLOCKS) of all pairs.
CAUSAL_BLOCKS = 4


def exponent_limit(dtype: torch.dtype) -> float:
    """The largest |a| and |b| for which exp(-2a) / (exp(-2a) + exp(2b)) is computed in normal floats of `dtype`
    (an overflow would be wrong, a denormal slow): a quarter of -log(smallest normal), less a half."""
    return -math.log(torch.finfo(dtype).tiny) / 4 - 0.5


def _pair_factors(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, bool]:
    """The queries' and the keys' pre-activations a (B, H, seq_q, hidden) and b (B, H, seq_k, hidden) laid out as
    (H, hidden, B, seq), and whether they are exponentiated, to exp(-2a) and exp(2b): unless one is too large."""
    left, right = (rearrange(x, "b h n e -> h e b n").contiguous() for x in (a, b))
    exponentiated = bool(torch.maximum(left.abs().amax(), right.abs().amax()) <= exponent_limit(a.dtype))
    if exponentiated:
        left, right = left.mul_(-2).exp_(), right.mul_(2).exp_()
    return left, right, exponentiated


def _workspace(call: Call, factors: torch.Tensor) -> torch.Tensor:
    """Room for the largest chunk's r, reused by every chunk of a pass: a fresh tensor per chunk would have its
    pages mapped anew each time, which costs about as much as the arithmetic on them."""
    batches, queries = chunk_sizes(call)
    heads, hidden = factors.shape[:2]
    return factors.new_empty(batches * heads * hidden * queries * call.k.shape[2])


def _scores(left: torch.Tensor, right: torch.Tensor, w: torch.Tensor, exponentiated: bool,
            workspace: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A chunk's logits (B, H, queries, keys) and r = sigmoid(-2 (a_ie + b_je)) (H, hidden, B, queries, keys, in
    `workspace`), from its (H, hidden, B, queries) and (H, hidden, B, keys) factors."""
    left, right = left[..., :, None], right[..., None, :]
    shape = (*left.shape[:-1], right.shape[-1])
    pairs = torch.add(left, right, out=workspace[: math.prod(shape)].view(shape))
    if exponentiated:  # exp(-2a) / (exp(-2a) + exp(2b)): two passes, where 1 / (1 + exp(2a) exp(2b)) takes three
        torch.div(left, pairs, out=pairs)
    else:
        pairs.mul_(-2).sigmoid_()
    heads, hidden, batch, queries, keys = pairs.shape
    # s = sum_e w_e (1 - 2 r_e): one (1 x hidden) @ (hidden x pairs) product per head
    logits = torch.baddbmm(w.sum(-1)[:, None, None], w[:, None, :], pairs.view(heads, hidden, -1), alpha=-2)
    # contiguous: the normaliser keeps its input's strides, and a product of permuted weights with the values would
    # copy them, and in backward multiply them matrix by matrix
    return rearrange(logits.view(heads, batch, queries, keys), "h b q k -> b h q k").contiguous(), pairs


def _score_gradients(pairs: torch.Tensor, w: torch.Tensor,
                     grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The gradients for a chunk's a (B, H, queries, hidden), b (B, H, keys, hidden) and w (H, hidden), from its r
    (`_scores`, overwritten) and the gradient of its logits (B, H, queries, keys)."""
    heads, hidden = w.shape
    grad = rearrange(grad, "b h q k -> h b q k").contiguous()
    flat = grad.view(heads, 1, -1)
    # dw = sum g (1 - 2 r) as (1 x pairs) @ (pairs x hidden), r transposed: as fast as the forward's product, where
    # (hidden x pairs) @ (pairs x 1) is many times slower on a CPU
    grad_w = torch.baddbmm(flat.sum(2, keepdim=True), flat, pairs.view(heads, hidden, -1).mT, alpha=-2)
    slopes = pairs.addcmul_(pairs, pairs, value=-1).mul_(grad[:, None])  # g r (1 - r), in place
    scale = 4 * w[:, :, None, None]
    return (rearrange(slopes.sum(4) * scale, "h e b q -> b h q e"),
            rearrange(slopes.sum(3) * scale, "h e b k -> b h k e"), grad_w[:, 0])


def chunk_sizes(call: Call) -> tuple[int, int]:
    """(batch elements, queries) per chunk: as many queries as keep a chunk within CHUNK_ELEMENTS (at least one),
    with causality at most ceil(seq_q / CAUSAL_BLOCKS), so that the chunks of early queries skip the keys they cannot
    see; then as many batch elements as fit."""
    batch, heads, seq_q, hidden = call.q.shape
    per_query = heads * call.k.shape[2] * hidden
    queries = min(seq_q, max(1, CHUNK_ELEMENTS // per_query))
    if call.causal:
        queries = min(queries, -(-seq_q // CAUSAL_BLOCKS))
    return min(batch, max(1, CHUNK_ELEMENTS // (per_query * queries))), queries


def _chunks(call: Call) -> Iterator[tuple[Call, slice, slice, slice]]:
    """Each chunk's call (its positions and key mask: what the normaliser reads), batch elements, queries and keys.
    Query i sits at position i and key j at j, so with causality no query of a chunk sees a key past its last."""
    (batch, _, seq_q, _), seq_k = call.q.shape, call.k.shape[2]
    batches, queries = chunk_sizes(call)
    for first_batch in range(0, batch, batches):
        for first in range(0, seq_q, queries):
            rows, chunk = slice(first_batch, first_batch + batches), slice(first, first + queries)
            keys = slice(0, first + queries if call.causal else seq_k)
            mask = None if call.key_padding_mask is None else call.key_padding_mask[rows, keys]
            yield (dataclasses.replace(call, q_pos=call.q_pos[chunk], k_pos=call.k_pos[keys], key_padding_mask=mask),
                   rows, chunk, keys)


class _Attention(torch.autograd.Function):
    """A call's output (B, H, seq_q, dim_v) from a, b, w, v and the variant's learned tensors (whatever its
    normaliser learns), chunk by chunk. The backward pass recomputes each chunk's r and logits, and differentiates
    the normaliser and the values on those logits through autograd; like activation checkpointing, it reads the
    variant's learned tensors as they are then, and hands their gradients to those the forward pass was given."""

    @staticmethod
    @torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)
    @torch.amp.custom_fwd(device_type="cpu", cast_inputs=torch.float32)
    def forward(ctx, call: Call, a, b, w, v, *learned):
        left, right, exponentiated = _pair_factors(a, b)
        out, workspace = v.new_empty(*a.shape[:3], v.shape[3]), _workspace(call, left)
        for part, rows, queries, keys in _chunks(call):
            logits, _ = _scores(left[:, :, rows, queries], right[:, :, rows, keys], w, exponentiated, workspace)
            out[rows, :, queries] = torch.matmul(normalised(part, logits), v[rows, :, keys])
        ctx.save_for_backward(left, right, w, v)
        ctx.call, ctx.exponentiated, ctx.shapes = call, exponentiated, (a.shape, b.shape)
        return out

    @staticmethod
    @once_differentiable
    @torch.amp.custom_bwd(device_type="cuda")
    @torch.amp.custom_bwd(device_type="cpu")
    def backward(ctx, grad_out):
        left, right, w, v = ctx.saved_tensors
        grad_a, grad_b = w.new_empty(ctx.shapes[0]), w.new_zeros(ctx.shapes[1])
        grad_w, grad_v = torch.zeros_like(w), torch.zeros_like(v)
        learned = list(ctx.call.parameters())
        tracked = {index: tensor for index, tensor in enumerate(learned)
                   if ctx.needs_input_grad[5 + index] and tensor.requires_grad}
        grad_learned: dict[int, torch.Tensor] = {}  # of those the normaliser reads
        workspace = _workspace(ctx.call, left)
        for part, rows, queries, keys in _chunks(ctx.call):
            logits, pairs = _scores(left[:, :, rows, queries], right[:, :, rows, keys], w, ctx.exponentiated,
                                    workspace)
            with torch.enable_grad():
                logits, values = logits.requires_grad_(), v[rows, :, keys].detach().requires_grad_()
                out = torch.matmul(normalised(part, logits), values)
                grads = torch.autograd.grad(out, [logits, values, *tracked.values()], grad_out[rows, :, queries],
                                            allow_unused=True)
            grad_v[rows, :, keys] += grads[1]
            for index, grad in zip(tracked, grads[2:], strict=True):
                if grad is not None:
                    grad_learned[index] = grad + grad_learned[index] if index in grad_learned else grad
            chunk_a, chunk_b, chunk_w = _score_gradients(pairs, w, grads[0])
            grad_a[rows, :, queries] = chunk_a
            grad_b[rows, :, keys] += chunk_b
            grad_w += chunk_w
        return (None, grad_a, grad_b, grad_w, grad_v, *(grad_learned.get(index) for index in range(len(learned))))


def run(call: Call) -> torch.Tensor:
    if call.additive_scorer is None:
        raise ValueError(f"Kernel 'additive' runs variants that score a pair as w . tanh(q_i + k_j) (additive "
                         f"attention); {call.name!r} does not.")
    return _Attention.apply(call, call.q, call.k, call.additive_scorer, call.v, *call.parameters())
