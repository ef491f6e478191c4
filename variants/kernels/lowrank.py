"""The lowrank kernel: weights given as a product of factors, applied to the values right to left.

A variant of the low-rank family gives its weights as matrices F_1 ... F_r whose product is seq_q x seq_k
(Linformer: softmax(q (E k)^T) times F; Nystromformer: three softmaxes and a pseudo-inverse). The reference
kernel multiplies them out; this one computes F_1 (F_2 (... (F_r v))), so no factor pair is ever formed:
O(n r d) time and memory for rank (or landmark count) r.
"""

from __future__ import annotations

import torch

from variants.kernels.call import Call


def run(call: Call) -> torch.Tensor:
    if call.factors is None:
        raise ValueError(f"Kernel 'lowrank' runs variants that give their weights as factors; {call.name!r} does not.")
    out = call.v
    for factor in reversed(call.factors(call.q, call.k, call.key_padding_mask)):
        out = torch.matmul(factor, out)
    return out
