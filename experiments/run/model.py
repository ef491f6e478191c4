"""A small pre-norm Transformer whose attention is any registered variant (or a baseline's token mixer).

Token embedding (+ learned, sinusoidal or no positions) -> `depth` blocks of
[LayerNorm -> multi-head attention (the variant) -> residual, LayerNorm -> MLP -> residual] -> LayerNorm
-> a linear head over the task's classes at every position. The multi-head projections are the same
for every variant, so two runs differ only in how attention turns q, k and v into an output. A baseline
(`variants.baselines`) replaces [qkv -> attention -> out] with its token mixer (dim -> dim); the norms, the
residuals and the MLP stay as they are.

Two towers (a task with `towers = 2`, LRA's retrieval): each half of the sequence is a document of its own. Both
halves go through the same embedding and blocks as separate sequences, so attention never crosses from one to the
other; each is read at its last position (its query), u and v, and an MLP over [u, v, u * v, u - v] (LRA's dual
encoder head: dim * mlp_ratio, ReLU, half that, ReLU, classes) gives the pair's logits at the sequence's last
position; the other positions' logits are 0 (they are never scored).

A bottleneck (a task with `bottleneck = True`, MAD's compression, after its AutoEncoder): the blocks read the
sequence, and every position's logits come from the state at the last position alone plus that position's fixed
sinusoidal encoding, through a decoder of two GELU layers of width dim (LayerNorm before each) and the head.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

import variants
from experiments.run.config import ModelConfig
from experiments.tasks import IGNORE


class Block(nn.Module):
    def __init__(self, config: ModelConfig, variant: str, variant_options: Any, kernel: str, layer_index: int,
                 seed: int, max_len: int) -> None:
        super().__init__()
        self.attn_norm = nn.LayerNorm(config.dim)
        self.mixer = None
        if variants.is_baseline(variant):  # a token mixer (dim -> dim) in place of qkv -> attention -> out
            self.mixer = variants.create_baseline(variant, dim=config.dim, causal=config.causal, layer=layer_index,
                                                  kernel=kernel, options=variant_options)
        else:
            self.heads = config.heads
            width = config.heads * config.attention_head_dim  # of q, k and v over all heads
            self.qkv = nn.Linear(config.dim, 3 * width)
            self.attn = variants.create(variant, num_heads=config.heads, head_dim=config.attention_head_dim,
                                        kernel=kernel, layer_index=layer_index, run_seed=seed,
                                        max_len=max_len, options=variant_options)
            self.out = nn.Linear(width, config.dim)
        self.mlp_norm = nn.LayerNorm(config.dim)
        self.mlp = nn.Sequential(
            nn.Linear(config.dim, config.mlp_ratio * config.dim),
            nn.GELU(),
            nn.Linear(config.mlp_ratio * config.dim, config.dim),
        )

    def heads_qkv(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The block's input (B, T, dim) -> q, k, v, each (B, H, T, head_dim), before the variant's `prepare`."""
        return rearrange(self.qkv(self.attn_norm(x)), "b t (three h d) -> three b h t d", three=3, h=self.heads)

    def forward(self, x: torch.Tensor, causal: bool, return_weights: bool = False):
        if self.mixer is not None:  # built causal or not with the model; no weights to return
            x = x + self.mixer(self.attn_norm(x))
            return x + self.mlp(self.mlp_norm(x)), None
        q, k, v = self.heads_qkv(x)
        attended = self.attn(q, k, v, causal=causal, return_weights=return_weights)  # (B, H, T, d)
        weights = None
        if return_weights:
            attended, weights = attended
        x = x + self.out(rearrange(attended, "b h t d -> b t (h d)"))
        x = x + self.mlp(self.mlp_norm(x))
        return x, weights


def sinusoidal(length: int, dim: int) -> torch.Tensor:
    """Vaswani et al.'s fixed position encoding, (length, dim)."""
    position = torch.arange(length, dtype=torch.float32)[:, None]
    frequency = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * (-math.log(10000.0) / dim))
    table = torch.zeros(length, dim)
    table[:, 0::2] = torch.sin(position * frequency)
    table[:, 1::2] = torch.cos(position * frequency[: dim // 2])
    return table


def pair_head(config: ModelConfig, num_classes: int) -> nn.Sequential:
    """LRA's head of a pair of pooled encodings [u, v, u * v, u - v] (4 * dim) -> classes."""
    width = config.mlp_ratio * config.dim
    return nn.Sequential(nn.Linear(4 * config.dim, width), nn.ReLU(), nn.Linear(width, width // 2), nn.ReLU(),
                         nn.Linear(width // 2, num_classes))


def bottleneck_decoder(dim: int) -> nn.Sequential:
    """MAD's AutoEncoder decoder (dim -> dim): two GELU layers, each after a LayerNorm, then one for the head."""
    return nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, dim), nn.GELU(), nn.LayerNorm(dim), nn.Linear(dim, dim),
                         nn.GELU(), nn.LayerNorm(dim))


class Transformer(nn.Module):
    def __init__(self, config: ModelConfig, *, vocab_size: int, num_classes: int, max_len: int,
                 variant: str, variant_options: Any, kernel: str = "auto", seed: int = 0, towers: int = 1,
                 bottleneck: bool = False) -> None:
        super().__init__()
        if towers not in (1, 2) or max_len % towers:
            raise ValueError(f"towers got {towers!r} for sequences of {max_len}; accepted: 1, or 2 with an even "
                             "length.")
        self.config = config
        self.towers = towers
        max_len //= towers  # the longest sequence a block sees
        self.embed = nn.Embedding(vocab_size, config.dim)
        if config.positions == "learned":
            self.positions = nn.Parameter(torch.randn(max_len, config.dim) * 0.02)
        elif config.positions == "sinusoidal":
            self.register_buffer("positions", sinusoidal(max_len, config.dim), persistent=False)
        else:
            self.positions = None
        self.blocks = nn.ModuleList(
            Block(config, variant, variant_options, kernel, layer_index, seed, max_len)
            for layer_index in range(config.depth)
        )
        self.norm = nn.LayerNorm(config.dim)
        self.decoder = bottleneck_decoder(config.dim) if bottleneck else None
        if bottleneck:
            self.register_buffer("decoder_positions", sinusoidal(max_len, config.dim), persistent=False)
        self.head = nn.Linear(config.dim, num_classes) if towers == 1 else pair_head(config, num_classes)

    @property
    def variant_module(self) -> nn.Module:
        """The first block's attention variant, or its token mixer when the variant is a baseline."""
        first = self.blocks[0]
        return first.attn if first.mixer is None else first.mixer

    @property
    def kernel(self) -> str:
        """The attention kernel every block runs on the device the model lives on (a baseline's: what runs it)."""
        return self.variant_module.kernel

    def embedded(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens (B, T) -> the first block's input (B, T, dim): token embeddings plus positions. With two towers
        (2B, T/2, dim): rows 0..B-1 the first halves, B..2B-1 the second, each a sequence of its own."""
        tokens = rearrange(tokens, "b (tower t) -> (tower b) t", tower=self.towers)
        x = self.embed(tokens)  # (towers * B, T / towers, dim)
        return x if self.positions is None else x + self.positions[: tokens.shape[1]]

    def forward(self, tokens: torch.Tensor, return_weights: bool = False):
        """tokens (B, T) -> logits (B, T, classes); with return_weights also [(B, H, T, T)] per layer (two
        towers: [(2B, H, T/2, T/2)], the towers' rows as in `embedded`)."""
        x = self.embedded(tokens)
        weights = []
        for block in self.blocks:
            x, layer_weights = block(x, self.config.causal, return_weights)
            weights.append(layer_weights)
        x = self.norm(x)
        if self.decoder is not None:  # every position rebuilt from the last one's state: (B, T, dim)
            x = self.decoder(x[:, -1:] + self.decoder_positions[: tokens.shape[1]])
        if self.towers == 1:
            logits = self.head(x)
        else:
            first, second = x[:, -1].chunk(2)  # (B, dim) each: every tower read at its query
            pair = self.head(torch.cat([first, second, first * second, first - second], -1))  # (B, classes)
            unscored = pair.new_zeros(pair.shape[0], tokens.shape[1] - 1, pair.shape[1])
            logits = torch.cat([unscored, pair[:, None]], 1)  # (B, T, classes)
        return (logits, weights) if return_weights else logits


def scored_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over the scored positions of (B, T, classes) logits and (B, T) targets.

    On CUDA through ignore_index, which needs no host sync (selecting the scored positions would wait
    for the device to count them); elsewhere on the selected positions, the numbers runs have always
    had there. The two give the same gradient bit for bit and may differ in the loss's last bit."""
    if logits.device.type == "cuda":
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=IGNORE)
    scored = targets != IGNORE
    return F.cross_entropy(logits[scored], targets[scored])
