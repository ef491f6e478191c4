"""The registry's public surface, and the one-sentence errors a user's typo gets."""

import dataclasses
import subprocess
import sys

import pytest
import torch

import variants


def test_the_issue_variants_are_registered():
    issue_variants = {"dense", "unscaled", "temperature", "additive", "relative", "qknorm", "softcap", "ssmax"}
    assert issue_variants <= set(variants.list_variants())
    assert variants.list_variants("t*") == ["temperature"]


def test_every_variant_has_frozen_documented_options_and_a_docstring():
    for name in variants.list_variants():
        cls = variants.variant_class(name)
        assert cls.__doc__ and sys.modules[cls.__module__].__doc__, name
        assert cls.Options.__dataclass_params__.frozen, name
        for field in dataclasses.fields(cls.Options):
            assert field.metadata["help"], (name, field.name)


def test_unknown_variant_names_the_closest_match_and_the_list():
    with pytest.raises(ValueError) as error:
        variants.create("temprature", num_heads=2, head_dim=4)
    message = str(error.value)
    assert "'temprature'" in message and "did you mean 'temperature'" in message
    assert all(name in message for name in variants.list_variants())


@pytest.mark.parametrize(
    "name, options, expected",
    [
        ("temperature", {"temprature": 2.0}, ["'temprature'", "did you mean 'temperature'", "learnable"]),
        ("temperature", {"temperature": 0.0}, ["'temperature'", "0.0", "> 0"]),
        ("temperature", {"temperature": -1}, ["'temperature'", "-1", "> 0"]),
        ("temperature", {"temperature": "hot"}, ["'temperature'", "'hot'", "a number"]),
        ("temperature", {"learnable": 1}, ["'learnable'", "True or False"]),
        ("relative", {"kind": "xpos"}, ["'kind'", "'xpos'", "'alibi'", "'rope'"]),
        ("relative", {"kind": "alibi", "num_buckets": 8}, ["'num_buckets'", "'alibi'", "'t5'"]),
        ("relative", {"kind": "t5", "num_buckets": 32, "max_distance": 10}, ["'max_distance'", "10", "16"]),
        ("additive", {"hidden_dim": 0}, ["'hidden_dim'", "0", ">= 1"]),
        ("additive", {"hidden_dim": 2.5}, ["'hidden_dim'", "2.5", "integer"]),
        ("dense", {"window": 3}, ["'window'", "no option", "normaliser"]),
        ("dense", {"normaliser": "entmax"}, ["'normaliser'", "'entmax'", "'entmax15'", "'entmax_adaptive'"]),
        ("sparse", {"pattern": "strided", "normaliser": "sum"}, ["'normaliser'", "'sum'", "'softmax'", "'sigmoid'"]),
        ("linear", {"normaliser": "sigmoid"}, ["'normaliser'", "no option", "feature_map"]),
        ("qknorm", {"norm": "batch"}, ["'norm'", "'batch'", "'layer'", "'rms'"]),
        ("softcap", {"cap": 0}, ["'cap'", "0", "> 0"]),
        ("softcap", {"cap": "hot"}, ["'cap'", "'hot'", "a number"]),
        ("ssmax", {"length_scale": -1}, ["'length_scale'", "-1", "> 0"]),
    ],
)
def test_bad_options_get_one_sentence_naming_option_value_and_accepted(name, options, expected):
    with pytest.raises(variants.OptionError) as error:
        variants.create(name, num_heads=2, head_dim=4, **options)
    message = str(error.value)
    assert message.count("\n") == 0
    for fragment in expected:
        assert fragment in message, (fragment, message)


@pytest.mark.parametrize("sizes", [{"num_heads": 0, "head_dim": 4}, {"num_heads": 2, "head_dim": -1},
                                   {"num_heads": 2.0, "head_dim": 4}])
def test_impossible_sizes_are_rejected(sizes):
    with pytest.raises(ValueError, match="accepted: an integer >= 1"):
        variants.create("dense", **sizes)


def test_rope_needs_an_even_head_dim():
    with pytest.raises(ValueError, match="head_dim=7 is odd"):
        variants.create("relative", num_heads=2, head_dim=7, kind="rope")


def test_kernels_are_checked_by_name_and_capability():
    with pytest.raises(ValueError, match="Unknown kernel 'fast'.*'sdpa'"):
        variants.create("dense", num_heads=2, head_dim=4, kernel="fast")
    with pytest.raises(ValueError, match="Kernel 'sdpa' cannot run variant 'additive_h4'.*'additive', 'chunked'"):
        variants.create("additive", num_heads=2, head_dim=4, kernel="sdpa")
    with pytest.raises(ValueError, match="cannot run variant 'relative_shaw_d16'"):
        variants.create("relative", num_heads=2, head_dim=4, kernel="sdpa", kind="shaw")
    for name, described in (("softcap", "softcap_c50"), ("ssmax", "ssmax_s0.43")):  # not scale * q.k + bias
        with pytest.raises(ValueError, match=f"Kernel 'sdpa' cannot run variant '{described}'.*'flex', 'chunked'"):
            variants.create(name, num_heads=2, head_dim=4, kernel="sdpa")
    with pytest.raises(ValueError, match="Kernel 'additive' cannot run variant 'synthesizer_dense'"):  # gives no w
        variants.create("synthesizer", num_heads=2, head_dim=4, kernel="additive", max_len=8)


@pytest.mark.parametrize("name, options, kernel, accepted", [
    ("dense", {"normaliser": "sigmoid"}, "sdpa", "'auto', 'chunked', 'reference'"),
    ("dense", {"normaliser": "entmax15"}, "flex", "'auto', 'chunked', 'reference'"),
    ("local", {"normaliser": "sparsemax"}, "xformers", "'auto', 'blocked', 'reference'"),
    ("sparse", {"normaliser": "entmax_adaptive"}, "flex", "'auto', 'blocked', 'reference'"),
])
def test_a_kernel_that_computes_softmax_only_is_refused_naming_the_normaliser_and_the_kernels_that_would_do(
        name, options, kernel, accepted):
    with pytest.raises(ValueError) as error:
        variants.create(name, num_heads=2, head_dim=4, kernel=kernel, **options)
    message = str(error.value)
    assert message.count("\n") == 0 and message.endswith(f"it runs on: {accepted}.")
    assert f"Kernel {kernel!r} cannot run variant" in message
    assert f"with normaliser {options['normaliser']!r} (it computes softmax only)" in message


def test_inputs_that_do_not_fit_the_module_are_named():
    attn = variants.create("dense", num_heads=2, head_dim=4)
    good = torch.randn(1, 2, 5, 4)
    with pytest.raises(ValueError, match=r"q has 3 heads .*num_heads=2"):
        attn(torch.randn(1, 3, 5, 4), good, good)
    with pytest.raises(ValueError, match=r"k has head_dim 6 .*head_dim=4"):
        attn(good, torch.randn(1, 2, 5, 6), good)
    with pytest.raises(ValueError, match=r"q has shape \(2, 5, 4\)"):
        attn(torch.randn(2, 5, 4), good, good)
    with pytest.raises(ValueError, match=r"k has 5 keys but v has 4"):
        attn(good, good, torch.randn(1, 2, 4, 4))
    with pytest.raises(ValueError, match=r"key_padding_mask .*\(batch, seq_k\) = \(1, 5\)"):
        attn(good, good, good, key_padding_mask=torch.ones(1, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"key_padding_mask has dtype torch.float32"):
        attn(good, good, good, key_padding_mask=torch.ones(1, 5))


def test_registering_a_name_twice_raises():
    with pytest.raises(ValueError, match="'dense' is already registered"):
        @variants.register("dense")
        class Again(variants.Attention):
            @dataclasses.dataclass(frozen=True)
            class Options:
                pass


@pytest.mark.parametrize(
    "name, options, expected",
    [
        ("dense", {}, "dense"),
        ("temperature", {"temperature": 0.5}, "temperature_t0.5"),
        ("temperature", {"temperature": 2, "learnable": True}, "temperature_t2_learned"),
        ("relative", {"kind": "t5"}, "relative_t5_b32_d128"),
        ("relative", {"kind": "shaw"}, "relative_shaw_d16"),
        ("relative", {"kind": "rope"}, "relative_rope"),
        ("additive", {}, "additive_h4"),
        ("qknorm", {}, "qknorm_layer"),
        ("qknorm", {"norm": "rms"}, "qknorm_rms"),
        ("softcap", {}, "softcap_c50"),
        ("softcap", {"cap": 2}, "softcap_c2"),
        ("ssmax", {}, "ssmax_s0.43"),
        ("ssmax", {"length_scale": 1.5, "fixed": True}, "ssmax_s1.5_fixed"),
        ("dense", {"normaliser": "softmax"}, "dense"),
        ("dense", {"normaliser": "entmax15"}, "dense_nentmax15"),
        ("temperature", {"temperature": 0.5, "normaliser": "sigmoid"}, "temperature_t0.5_nsigmoid"),
        ("local", {"window": 8, "normaliser": "sparsemax"}, "local_w8_nsparsemax"),
        ("sparse", {"pattern": "strided", "normaliser": "entmax_adaptive"}, "sparse_strided_s16_nentmax_adaptive"),
    ],
)
def test_describe_gives_self_describing_names(name, options, expected):
    assert variants.create(name, num_heads=2, head_dim=4, **options).describe() == expected


def test_resolved_options_are_saved_on_the_module():
    attn = variants.create("relative", num_heads=2, head_dim=4, kind="t5")
    assert dataclasses.asdict(attn.options) == {"kind": "t5", "max_distance": 128, "num_buckets": 32,
                                                "rope_base": None, "normaliser": "softmax"}


def test_make_list_prints_every_variant_with_its_options():
    result = subprocess.run([sys.executable, "-m", "attnlab", "list"], capture_output=True, text=True,
                            check=True)
    for name in variants.list_variants():
        assert f"\n{name}: " in "\n" + result.stdout
    assert "temperature=1.0" in result.stdout and "kind='alibi'" in result.stdout


def test_cli_reports_a_typo_in_one_line_without_a_traceback():
    result = subprocess.run([sys.executable, "-m", "attnlab", "speed", "--variants", "dens"],
                            capture_output=True, text=True)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "did you mean 'dense'" in result.stderr and result.stderr.count("\n") == 1
