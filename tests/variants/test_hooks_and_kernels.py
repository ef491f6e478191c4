"""Which hook, which kernel: one table (`variants.base.HONOURED_BY`) from which each variant's kernels are
derived; a kernel left out would be wrong or refuse; the kernels import nothing of the variant classes;
`attnlab list` shows the kernels per option value; docs/variants.md's example variant runs on what it claims."""

import ast
import re
from pathlib import Path

import pytest
import torch
from cases import (
    HEAD_DIM,
    HEADS,
    NORMALISERS,
    assert_close_relative,
    build_pair,
    case_id,
    create_case,
    force_small_chunks,
    output_and_grads,
    random_inputs,
    skip_if_bidirectional,
    variant_cases,
)

import variants
from variants.base import HONOURED_BY, Attention
from variants.dense import Dense
from variants.kernels import KERNELS
from variants.registry import LISTED_LAYERS, VARIANTS

ROOT = Path(__file__).resolve().parents[2]
CPU = torch.device("cpu")


def test_the_table_names_every_hook_once_and_only_known_kernels():
    for hook, honoured in HONOURED_BY.items():
        assert hook == "block_layout" or callable(getattr(Attention, hook)), hook
        assert honoured <= set(KERNELS), hook
    assert [hook for hook, honoured in HONOURED_BY.items() if "reference" not in honoured] == ["logit_bias"]


def test_a_variant_overriding_a_hook_the_reference_does_not_read_is_refused_when_registered():
    class Biased(Dense):
        def logit_bias(self, q_pos, k_pos, causal):
            return None

    with pytest.raises(ValueError, match=r"^Variant 'biased_only' overrides logit_bias, which the reference kernel "
                                         r"does not read; accepted: override pair_bias"):
        VARIANTS.register("biased_only")(Biased)


def test_a_variant_whose_layout_depends_on_the_input_without_drawing_it_is_refused_when_registered():
    class Hashed(Dense):
        layout_depends_on_input = True

    with pytest.raises(ValueError, match=r"^Variant 'hashed_undrawn' says its layout depends on the input but does "
                                         r"not override example_layout"):
        VARIANTS.register("hashed_undrawn")(Hashed)


def test_a_variant_that_overrides_score_mod_runs_only_where_score_mod_is_read_without_a_kernel_list():
    class Capped(Dense):
        def score_mod(self, q, k, q_pos, causal):
            return lambda score, batch, head, q_idx, kv_idx: 2.0 * torch.tanh(score / 2.0)

    module = Capped(Dense.Options(), num_heads=2, head_dim=8, kernel="auto")
    assert module.kernels == ("flex", "chunked", "reference")
    assert module.kernel == "chunked"


def _refuses_or_is_wrong(module, kernel, q, k, v, causal, mask, expected):
    """True when `kernel` refuses the module (its availability, device or layouts; or an error when run),
    or runs it to an output that is not the reference's."""
    if KERNELS[kernel].refusal(module.head_dim, CPU) or not KERNELS[kernel].runs_layout(module.block_layout):
        return True
    try:
        with torch.no_grad():  # flex runs forward only on CPU
            out = KERNELS[kernel].run(module.kernel_call(q, k, v, causal, mask))
    except (ValueError, RuntimeError, IndexError):
        return True
    return out.shape != expected.shape or not torch.allclose(out, expected, rtol=1e-7, atol=1e-7)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("case", variant_cases(), ids=case_id)
def test_a_kernel_the_variant_does_not_list_would_be_wrong_or_refuses(case, causal, monkeypatch):
    force_small_chunks(monkeypatch)
    name, options = case
    skip_if_bidirectional(name, causal)
    module, reference = build_pair(name, options, "reference")
    q, k, v, mask = random_inputs(2, 37, 37, seed=8, padding=True)
    with torch.no_grad():
        expected = reference(q, k, v, causal=causal, key_padding_mask=mask)
    left_out = [kernel for kernel in KERNELS if kernel not in module.kernels]
    for kernel in left_out:
        assert _refuses_or_is_wrong(module, kernel, q, k, v, causal, mask, expected), kernel


def _listed_kernels(listing: str) -> dict[str, dict[str, str]]:
    """variant -> {"": kernels} when listed once, {"option=value": kernels} per value of each option that
    changes them (a line names the values that share its kernels: `option=a|b`), or {"layer_index=N": kernels}
    per class of block (at the first block of that class)."""
    listed, variant = {}, None
    for line in listing.splitlines():
        if not line.startswith(" "):
            variant = line.split(":")[0]
            listed[variant] = {}
        elif match := re.fullmatch(r" +kernels(?: \((\w+)=([\w|]+)\))?: (.*)", line):
            option, values, kernels = match.groups()
            for value in values.split("|") if values else [""]:
                listed[variant][f"{option}={value}" if option else ""] = kernels
    return listed


def _layer_of_class(name: str, cls: type) -> int:
    """The first block that a variant whose class differs per block builds as `cls`, with its default options."""
    registered = variants.variant_class(name)
    defaults = registered.Options()
    return next(layer for layer in range(LISTED_LAYERS) if registered.class_for(defaults, layer) is cls)


def test_list_shows_the_kernels_each_variant_runs_on_per_option_value_that_changes_them():
    listed = _listed_kernels(variants.describe_variants())
    assert listed["relative"]["kind=shaw"] == "flex, chunked, reference"  # no sdpa: its term depends on q
    assert listed["relative"]["kind=rope"] == "sdpa, flex, xformers, chunked, reference"
    # the same for every pattern; fused kernels for the softmax only, blocked for every normaliser
    assert listed["sparse"] == {"": "flex, blocked, sdpa, reference",
                                **{f"normaliser={name}": "blocked, reference" for name in NORMALISERS}}
    assert listed["relative"]["normaliser=sigmoid"] == "chunked, reference"
    assert listed["additive"] == {"": "additive, chunked, reference"}  # its normalisers all run where its score does
    assert listed["based"] == {"layer_index=0": "linear, reference",  # window_every 2: every other block a window
                               "layer_index=1": "flex, blocked, xformers, sdpa, reference"}
    for name, options in variant_cases():
        module = create_case(name, options, heads=2, head_dim=8)
        by_value = listed[name]
        # the line of the variant's own option value or block class (or its one line), then that of a normaliser
        # other than the softmax, which keeps the kernels that compute it
        own = [key for key in by_value if not key.startswith("normaliser=")]
        if own != [""]:
            (option,) = {key.split("=")[0] for key in own}
            value = (_layer_of_class(name, type(module)) if option == "layer_index"
                     else getattr(module.options, option))
            own = [f"{option}={value}"]
        kernels = by_value[own[0]].split(", ")
        normaliser = by_value.get(f"normaliser={module.normaliser}")
        if normaliser is not None:
            kernels = [kernel for kernel in kernels if kernel in normaliser.split(", ")]
        assert kernels == list(module.kernels), (name, options)


@pytest.mark.parametrize("path", sorted((ROOT / "variants" / "kernels").glob("*.py")), ids=lambda p: p.name)
def test_kernels_import_nothing_of_the_variant_classes(path):
    imported = set()
    for node in ast.walk(ast.parse(path.read_text())):  # module level and inside functions alike
        if isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.update(f"{node.module}.{alias.name}" for alias in node.names)
    ours = {name for name in imported if name.startswith("variants.")}
    allowed = ("variants.kernels.", "variants.layouts", "variants.normalisers")
    assert all(name.startswith(allowed) for name in ours), ours


def _documented_section(title: str) -> str:
    """The `## title` section of docs/variants.md (where the README sends whoever adds a variant)."""
    text = (ROOT / "docs" / "variants.md").read_text()
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def test_the_documented_table_of_hooks_and_kernels_is_the_one_in_the_code():
    section = _documented_section("Adding a variant")
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    header = next(line for line in section.splitlines() if line.startswith("| hook"))
    kernels = [cell.strip(" `") for cell in header.strip("|").split("|")[1:]]
    assert set(kernels) == set(KERNELS)
    table = {}
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        table[cells[0].strip("`")] = frozenset(kernel for kernel, cell in zip(kernels, cells[1:], strict=True)
                                               if cell)
    assert table == HONOURED_BY


@pytest.fixture
def documented_variant(monkeypatch):
    """docs/variants.md's example, exactly as written, registered under a test-only name and removed after."""
    code = re.search(r"```python\n(.*?)```", _documented_section("Adding a variant"), re.DOTALL).group(1)
    names = []

    def register(name):
        names.append(f"documented_example_{name}")
        return VARIANTS.register(names[-1])

    monkeypatch.setattr(variants, "register", register)  # what the example's `from variants import` finds
    exec(compile(code, "docs/variants.md", "exec"), {})
    yield names[0]
    for name in names:
        del VARIANTS.classes[name]


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_the_documented_example_variant_matches_the_reference_on_every_kernel_it_claims(documented_variant, causal,
                                                                                        monkeypatch):
    force_small_chunks(monkeypatch)
    claimed = variants.create(documented_variant, num_heads=HEADS, head_dim=HEAD_DIM).kernels
    assert len(claimed) >= 3 and "sdpa" in claimed and "flex" in claimed  # an example that reaches fused kernels
    q, k, v, mask = random_inputs(2, 37, 37, seed=6, padding=True)
    dense = variants.create("dense", num_heads=HEADS, head_dim=HEAD_DIM).double()
    for kernel in claimed:
        module, reference = build_pair(documented_variant, {}, kernel)
        expected = reference(q, k, v, causal=causal, key_padding_mask=mask)
        assert not torch.allclose(expected, dense(q, k, v, causal=causal, key_padding_mask=mask))  # it does something
        if not KERNELS[kernel].runs_on(CPU):
            if KERNELS[kernel].refusal(HEAD_DIM, CPU) is None:  # flex: forward only on CPU
                with torch.no_grad():
                    assert_close_relative(module(q, k, v, causal=causal, key_padding_mask=mask), expected, 1e-9)
            continue
        out, grads = output_and_grads(module, q, k, v, causal=causal, key_padding_mask=mask)
        ref_out, ref_grads = output_and_grads(reference, q, k, v, causal=causal, key_padding_mask=mask)
        assert_close_relative(out, ref_out, 1e-9, f"{kernel} output")
        for label, grad, ref_grad in zip("qkv", grads, ref_grads, strict=True):
            assert_close_relative(grad, ref_grad, 1e-9, f"{kernel} gradient of {label}")
