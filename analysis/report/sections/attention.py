"""The report's attention pictures: heat maps of trained models' attention weights, the layouts of the local
and sparse variants the runs used, and, for variants whose layout depends on the input (Reformer's hash buckets,
Sinkhorn's learned sorting), the layout each trained model really used on an example.

The weights are those of each variant's reference formula (`return_weights=True`): the softmax of its logits,
another normaliser's weights, the kernelised family's normalised phi(q).phi(k), or the low-rank family's product
of factors, which may be negative (then drawn on a diverging scale centred at 0).

Sparsemax and the entmax normalisers give keys a query may see a weight of exactly 0.0, which a colour scale
from 0 would draw as it draws a weight of 1e-6. Where a picture has such exact zeros, they are drawn in a colour
of their own (ZERO_COLOUR, over the scale's) and each panel's title gives their share of the pairs its queries
may see; zeros at keys the layout or causality hides stay on the scale, as in every other picture, so a softmax
map (whose weights are never exactly 0 where a key is seen, unless the exponential underflows) is unchanged."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
import torch
from matplotlib.colors import LinearSegmentedColormap, ListedColormap
from matplotlib.patches import Patch

import variants
from analysis.report import figures
from analysis.report.context import Context
from analysis.report.render import Block, Figure, Text
from analysis.report.sections import shared
from analysis.report.sections.registry import section
from analysis.runs import trained_parts
from experiments import tasks
from experiments.run.attention_stats import softmax_of_logits
from experiments.run.model import Transformer
from experiments.run.records import RecordError

MAX_ATTENTION_RUNS = 6  # checkpoints loaded for attention pictures: one per task and variant, at most this many
MAX_FULL_ATTENTION = 96  # longer sequences show only the scored query rows
MAX_ATTENTION_LENGTH = 4096  # the weights are materialised (batch 1, heads, T, T) per layer
MAX_SCORED_ROWS = 16
MAX_LAYOUTS = 8
MAX_LAYOUT_DRAWN = 128  # positions of a layout drawn (the top-left corner of longer ones)
ZERO_COLOUR, ZERO_COLOUR_NAME = "#f28e2b", "orange"  # exact zeros: apart from Blues and from RdBu_r's white centre


def _checkpointed_runs(context: Context) -> pd.DataFrame:
    """The completed attention runs with a checkpoint, the lowest seed of each (task, variant, setting);
    baselines have no attention to draw."""
    completed = context.completed
    candidates = completed[~completed["variant"].map(variants.is_baseline).astype(bool)]
    candidates = candidates.sort_values(["task", "label", "seed", "run_id"])
    candidates = candidates[candidates["has_checkpoint"].astype(bool)]
    return candidates.drop_duplicates(["task", "label"])


def _farthest_example(task: tasks.Task) -> tuple[tasks.Batch, torch.Tensor, int]:
    """The test set, each example's farthest dependency, and the example whose dependency lies farthest back."""
    test_set = task.test_set("cpu")
    scored = test_set.targets != tasks.IGNORE
    farthest = torch.where(scored, test_set.distance, -1).max(dim=1).values
    return test_set, farthest, int(farthest.argmax())


def _trained_model(run: pd.Series) -> tuple[tasks.Task, Transformer]:
    """The run's task and its model with the checkpoint's weights, in eval mode (`analysis.runs.trained_parts`)."""
    parts = trained_parts(run)
    if parts.task.towers > 1:
        raise RecordError("a pair of documents, encoded as two sequences: pictures are drawn for one sequence")
    if parts.task.seq_len > MAX_ATTENTION_LENGTH:
        raise RecordError(f"sequences of {parts.task.seq_len} tokens: the dense weights of every head would not fit; "
                          f"pictures are drawn up to {MAX_ATTENTION_LENGTH} tokens")
    return parts.task, parts.model


def _weights_drawn(model: Transformer) -> str:
    """What the heat maps show, for the caption: softmax weights, or the variant's own."""
    attention = model.blocks[0].attn
    if softmax_of_logits(attention):
        return "softmax weights"
    return (f"weights of {attention.name}'s reference formula (normaliser {attention.normaliser}"
            f"{'; approximation: ' + attention.approximation if attention.approximation else ''})")


def _colour_scale(weights: list[torch.Tensor]) -> dict[str, Any]:
    """Blues from 0 for non-negative weights; a diverging scale centred at 0 where some are negative."""
    lowest = min(float(layer.min()) for layer in weights)
    if lowest >= 0:
        return {"cmap": "Blues", "vmin": 0.0}
    largest = max(float(layer.abs().max()) for layer in weights)
    return {"cmap": "RdBu_r", "vmin": -largest, "vmax": largest}


def _exact_zeros(model: Transformer, weights: list[torch.Tensor], rows: list[int]) -> tuple[list, list]:
    """Per layer, bool numpy arrays (heads, rows, keys): the keys each query shown may see under the layer's
    layout and the model's causality (`Attention.allowed`), and among them those of weight exactly 0.0, the
    normaliser's doing rather than the mask's."""
    heads, length = weights[0].shape[1], weights[0].shape[-1]
    positions = torch.arange(length)
    seen, zeros = [], []
    for block, layer_weights in zip(model.blocks, weights, strict=True):
        allowed = block.attn.allowed(positions, positions, model.config.causal, None)  # (1, heads or 1, T, T)
        layer_seen = torch.ones(length, length, dtype=torch.bool) if allowed is None else allowed[0]
        layer_seen = layer_seen.expand(heads, length, length)[:, rows]
        seen.append(layer_seen.numpy())
        zeros.append((layer_seen & (layer_weights[0, :, rows] == 0.0)).numpy())
    return seen, zeros


def _share(part: int, whole: int) -> str:
    return f"{100 * part / whole:.3g}%" if whole else "–"


def _attention_picture(run: pd.Series, index: int) -> Figure:
    """The trained model's attention weights on the eval example with the farthest dependency, one heat map
    per layer and head, exact zeros at seen keys marked (module docstring); raises ValueError (RecordError,
    OptionError) or RuntimeError for unusable records."""
    task, model = _trained_model(run)
    test_set, farthest, example = _farthest_example(task)
    scored = test_set.targets != tasks.IGNORE
    inputs = test_set.inputs[example : example + 1]
    with torch.no_grad():
        _, weights = model(inputs, return_weights=True)  # per layer (1, H, T, T)
    tokens = task.decode(inputs[0])
    length = len(tokens)
    rows = list(range(length)) if length <= MAX_FULL_ATTENTION else scored[example].nonzero().flatten().tolist()
    rows = rows[-MAX_SCORED_ROWS:] if length > MAX_FULL_ATTENTION else rows
    names = [f"{position} {token}" for position, token in enumerate(tokens)]
    depth, heads = len(weights), weights[0].shape[1]
    seen, zeros = _exact_zeros(model, weights, rows)  # per layer (heads, rows, keys)
    marked = any(layer_zeros.any() for layer_zeros in zeros)
    full = length <= MAX_FULL_ATTENTION
    panel = (4.2, 4.0) if full else (6.4, 1.0 + 0.22 * len(rows))
    fig, axes = figures.figure(depth, heads, width=panel[0] * heads, height=panel[1] * depth + (1.0 if marked else 0.6))
    step = max(1, math.ceil(length / 32))
    scale = _colour_scale(weights)
    data = []
    for layer, layer_weights in enumerate(weights):
        for head in range(heads):
            matrix, head_zeros = layer_weights[0, head, rows].numpy(), zeros[layer][head]  # (rows, keys)
            ax = axes[layer, head]
            ax.set_facecolor(ZERO_COLOUR)  # shows through where the exact zeros are masked out of the scale
            figures.heatmap(ax, matrix, [names[row] for row in rows], names, every=step, **scale, square=full,
                            mask=head_zeros if marked else None, cbar_kws={"shrink": 0.6, "label": "weight"})
            ax.grid(False)  # the style's grid would otherwise cross the cells left to the face colour
            zero_share = f" ({_share(head_zeros.sum(), seen[layer][head].sum())} exact zeros)" if marked else ""
            ax.set_title(f"layer {layer}, head {head}{zero_share}", fontsize=10)
            ax.set_xlabel("key (position token)")
            ax.set_ylabel("query (position token)")
            ax.tick_params(labelsize=8 if length / step <= 16 else 6)
            data += [{"layer": layer, "head": head, "query": row, "query_token": tokens[row], "key": key,
                      "key_token": tokens[key], "weight": round(float(matrix[position, key]), 5),
                      "seen": bool(seen[layer][head][position, key]), "exact_zero": bool(head_zeros[position, key])}
                     for position, row in enumerate(rows) for key in range(length)]
    figures.suptitle(fig, f"{run['label']} on {run['task']} (seed {run['seed']}): attention on eval example "
                          f"{example}, answer {task.label_text(test_set, example)}, farthest dependency "
                          f"{int(farthest[example])}")
    shown = "every query row" if full else f"the scored query rows (sequence of {length} tokens)"
    caption = (f"{run['label']} on {run['task']}, run {run['run_id']}: attention weights of the trained model for "
               f"eval example {example} (the one whose dependency lies farthest back), per layer and head: "
               f"{_weights_drawn(model)}; {shown}, keys as columns")
    if marked:
        fig.legend(handles=[Patch(facecolor=ZERO_COLOUR, label="exact zero (weight 0.0 at a key the query sees)")],
                   loc="outside lower center", frameon=False)
        caption += (f"; exact zeros (weight 0.0 exactly where the query may see the key) in {ZERO_COLOUR_NAME}: "
                    f"{_share(sum(part.sum() for part in zeros), sum(part.sum() for part in seen))} of the seen "
                    "(query, key) pairs shown, per head in the panel titles")
    return Figure(f"attention-{index:02d}-{shared.slug(run['task'])}-{shared.slug(run['variant_name'])}", caption, fig,
                  pd.DataFrame(data))


def _layout_figure(context: Context, entries: list[dict[str, Any]]) -> Figure:
    columns = min(4, len(entries))
    rows = math.ceil(len(entries) / columns)
    fig, axes = figures.figure(rows, columns, width=max(6.4, 3.8 * columns), height=4.2 * rows)
    data = []
    for ax in axes.flat[len(entries):]:
        ax.set_axis_off()
    for ax, entry in zip(axes.flat, entries, strict=False):
        attention = entry["modules"][0]  # layer 0 as it ran
        drawn = min(entry["seq_len"], MAX_LAYOUT_DRAWN)
        allowed = attention.layout(entry["seq_len"], entry["seq_len"], causal=entry["causal"])[:drawn, :drawn]
        step = max(1, math.ceil(drawn / 16))
        positions = [str(position) for position in range(drawn)]
        figures.heatmap(ax, allowed.int().numpy(), positions, positions, every=step, vmin=0, vmax=1, cbar=False,
                        cmap=ListedColormap(["white", context.colour(entry["variant_name"])]), square=True,
                        linewidths=0.2 if drawn <= 32 else 0, linecolor="#eee")
        corner = "" if drawn == entry["seq_len"] else f", first {drawn} of {entry['seq_len']}"
        ax.set_title(f"{entry['variant_name']} ({'causal' if entry['causal'] else 'bidirectional'}, layer 0, "
                     f"head 0, seed {entry['seed']}{corner})", fontsize=10)
        ax.set_xlabel("key position")
        ax.set_ylabel("query position")
        ax.tick_params(labelsize=8)
        pairs = allowed.nonzero().tolist()
        data += [{"variant_name": entry["variant_name"], "seq_len": entry["seq_len"], "causal": entry["causal"],
                  "query": query, "key": key} for query, key in pairs]
    figures.suptitle(fig, "Layouts: the (query, key) pairs each local and sparse variant attends")
    return Figure("layouts", "Layouts of the local and sparse variants as the models used them (the first layer's "
                             "first head, drawn from the run's seed): a coloured cell is a (query, key) pair "
                             "attended", fig, pd.DataFrame(data))


def _reason(error: Exception) -> str:
    """An error's first line, for the table of runs whose pictures could not be drawn."""
    return str(error).splitlines()[0] if str(error) else type(error).__name__


def _example_layouts(model: Transformer, inputs: torch.Tensor) -> list[list[torch.Tensor]]:
    """Per layer and head, `example_layout` (seq, seq) on `inputs` (1, seq) through the trained model: each
    block's q and k as it computed them, after the variant's `prepare`."""
    drawn = []
    with torch.no_grad():
        x = model.embedded(inputs)  # (1, T, dim)
        for block in model.blocks:
            q, k = block.attn.prepare(*block.heads_qkv(x)[:2])  # (1, H, T, head_dim) each
            drawn.append([block.attn.example_layout(q[0], k[0], causal=model.config.causal, head=head)
                          for head in range(block.attn.num_heads)])
            x, _ = block(x, model.config.causal)
    return drawn


def _example_layout_figure(context: Context, run: pd.Series, index: int) -> Figure:
    """The pairs a Reformer or Sinkhorn model attended on the eval example with the farthest dependency, per layer
    and head (the first MAX_LAYOUT_DRAWN positions); raises as `_trained_model` does."""
    task, model = _trained_model(run)
    test_set, farthest, example = _farthest_example(task)
    drawn = _example_layouts(model, test_set.inputs[example : example + 1])
    shown = min(task.seq_len, MAX_LAYOUT_DRAWN)
    depth, heads = len(drawn), len(drawn[0])
    fig, axes = figures.figure(depth, heads, width=3.8 * heads, height=4.0 * depth)
    cmap = LinearSegmentedColormap.from_list("attended", ["white", context.colour(run["variant_name"])])
    positions, step = [str(position) for position in range(shown)], max(1, math.ceil(shown / 16))
    data = []
    for layer, per_head in enumerate(drawn):
        for head, matrix in enumerate(per_head):
            share = matrix[:shown, :shown].numpy()
            ax = axes[layer, head]
            figures.heatmap(ax, share, positions, positions, every=step, vmin=0, vmax=1, cmap=cmap, square=True,
                            cbar=head == heads - 1, cbar_kws={"shrink": 0.6, "label": "attended"})
            ax.set_title(f"layer {layer}, head {head}", fontsize=10)
            ax.set_xlabel("key position")
            ax.set_ylabel("query position")
            ax.tick_params(labelsize=8)
            data += [{"layer": layer, "head": head, "query": int(query), "key": int(key),
                      "attended": round(float(share[query, key]), 5)}
                     for query, key in zip(*share.nonzero(), strict=True)]
    corner = "" if shown == task.seq_len else f", first {shown} of {task.seq_len} positions"
    figures.suptitle(fig, f"{run['label']} on {run['task']} (seed {run['seed']}): the pairs attended on eval example "
                          f"{example}, farthest dependency {int(farthest[example])}{corner}")
    caption = (f"{run['label']} on {run['task']}, run {run['run_id']}: which keys each query attended on eval example "
               f"{example} (the one whose dependency lies farthest back), per layer and head, computed by the trained "
               "model from that example's own queries and keys, since this variant's layout depends on its input: 1 "
               "(full colour) for a pair attended outright, a fraction for a key reached through a soft mixture (the "
               "share of that key in Sinkhorn's sorted block), white for a pair not attended")
    return Figure(f"example-layout-{index:02d}-{shared.slug(run['task'])}-{shared.slug(run['variant_name'])}",
                  caption, fig, pd.DataFrame(data))


def _example_layout_blocks(context: Context, problems: list[dict[str, str]]) -> list[Block]:
    """A figure per run of a variant whose layout depends on its input, at most MAX_LAYOUTS."""
    runs = _checkpointed_runs(context)
    if runs.empty:
        return []
    registered = set(variants.list_variants())  # a run of a variant since removed is drawn nowhere
    runs = runs[[name in registered and variants.variant_class(name).layout_depends_on_input
                 for name in runs["variant"]]]
    blocks: list[Block] = []
    for index, (_, run) in enumerate(runs.head(MAX_LAYOUTS).iterrows()):
        try:
            blocks.append(_example_layout_figure(context, run, index))
        except (ValueError, RuntimeError, KeyError) as error:
            problems.append({"run": run["run_id"], "reason": f"layout on an example not drawn ({_reason(error)})"})
    return blocks


@section("attention", "Attention pictures")
def attention(context: Context) -> list[Block]:
    blocks: list[Block] = [Text(
        f"Heat maps of trained models' attention (rows: queries, columns: keys, labelled 'position token'), for "
        f"the lowest seed of each task and variant, at most {MAX_ATTENTION_RUNS} checkpoints."
    )]
    chosen = _checkpointed_runs(context).head(MAX_ATTENTION_RUNS)
    problems = []
    for index, (_, run) in enumerate(chosen.iterrows()):
        try:
            blocks.append(_attention_picture(run, index))
        except (ValueError, RuntimeError, KeyError) as error:
            problems.append({"run": run["run_id"], "reason": f"attention not drawn ({_reason(error)})"})
    if chosen.empty:
        blocks.append(Text("No completed run with a checkpoint to draw attention from."))
    layouts = []
    for entry in shared.layout_variants(context.ordinary):
        if entry["modules"][0].block_layout is not None:
            layouts.append(entry)
    if layouts:
        blocks.append(_layout_figure(context, layouts[:MAX_LAYOUTS]))
    else:
        blocks.append(Text("No local or sparse variant among the runs: no layout to draw."))
    blocks += _example_layout_blocks(context, problems)
    blocks += shared.problems_table("attention-problems", "Runs whose pictures could not be drawn", problems)
    return blocks
