"""Presets and sets: rows a variant list names (`variants.presets`). A preset runs its variant with its options
fixed and is a row of its own, a set expands to its rows wherever a variant list is read, and a typo or a
contradiction is one sentence."""

import subprocess
import sys
from pathlib import Path

import pytest

import variants
from common.options import OptionError
from common.schema import from_flags
from experiments import benchmark
from experiments.benchmark.ledger import Ledger
from experiments.run import config as configs
from experiments.schemas.benchmark import BenchmarkOptions
from experiments.schemas.sweep import SweepOptions
from experiments.sweep import definition as sweeps
from variants import presets

ROOT = Path(__file__).resolve().parents[2]


def test_core_is_the_design_cards_seven_with_relative_as_alibi_and_as_rope():
    assert presets.expand("core") == ("dense", "unscaled", "temperature:learnable=true", "additive", "local",
                                      "sparse:pattern=bigbird", "relative:kind=alibi", "relative:kind=rope")
    assert len(presets.expand("lra")) == 11
    assert presets.expand("baselines") == tuple(variants.list_baselines())
    assert presets.expand("all") == (*variants.list_variants(), *variants.list_baselines())


@pytest.mark.parametrize("name", list(presets.SETS))
def test_every_row_of_every_set_resolves_to_a_run_config(name):
    for row in presets.expand(name):
        variant, options = presets.parse(row)
        config = configs.resolve(variant=row, task="passkey", profile="quick", seed=0, device="cpu")
        assert config.variant == variant
        for key, value in options.items():
            assert getattr(config.variant_options, key) == value, (row, key)


def test_a_preset_is_its_variant_with_the_options_fixed_and_a_set_expands_in_place():
    assert presets.expand("dense,saturation, relative:kind=t5:num_buckets=16") == (
        "dense", "qknorm", "softcap", "ssmax", "relative:kind=t5:num_buckets=16")
    assert presets.canonical("temperature:learnable=TRUE:temperature=2") == \
        "temperature:learnable=true:temperature=2.0"
    config = configs.resolve(variant="relative:kind=alibi", task="passkey", profile="quick", seed=0, device="cpu")
    assert configs.described_variant(config) == variants.describe("relative", {"kind": "alibi"})
    assert config.model.positions == "none"  # the variant's own defaults still apply


@pytest.mark.parametrize("text, fragments", [
    ("relativ", ["Unknown variant 'relativ'", "did you mean 'relative'", "core"]),
    ("relative:kind=foo", ["'kind'", "'foo'", "'alibi'"]),
    ("relative:knd=alibi", ["no option 'knd'", "did you mean 'kind'"]),
    ("relative:kind", ["'kind'", "name:option=value"]),
    ("relative:kind=t5:kind=t5", ["each option once"]),
    ("core:window=4", ["'core' is a set", "cannot take options"]),
    ("dense,core", ["'dense' is listed twice"]),
])
def test_a_bad_row_is_one_sentence_naming_it_and_what_is_accepted(text, fragments):
    with pytest.raises(OptionError) as caught:
        presets.expand(text)
    for fragment in fragments:
        assert fragment in str(caught.value), (fragment, str(caught.value))


def test_a_set_contradicting_a_preset_is_refused_and_an_agreeing_one_passes():
    overrides = configs.parse_sets(["variant.kind=t5"])
    with pytest.raises(OptionError, match=r"variant.kind=t5 contradicts preset 'relative:kind=alibi'"):
        configs.resolve(variant="relative:kind=alibi", task="passkey", profile="quick", seed=0, device="cpu",
                        overrides=overrides)
    agreeing = configs.parse_sets(["variant.kind=alibi"])
    assert configs.resolve(variant="relative:kind=alibi", task="passkey", profile="quick", seed=0, device="cpu",
                           overrides=agreeing).variant_options.kind == "alibi"


def test_a_benchmark_runs_core_by_default_and_each_preset_is_a_row_of_its_own(tmp_path):
    def plan(variant_names):
        options = from_flags(BenchmarkOptions, {"variant": variant_names, "task": "passkey", "seeds": 2,
                                                "lr_multiples": "0.3,1,3", "name": "rows", "heartbeat_seconds": 1,
                                                "extend_grid": "0"})
        return benchmark.build(options, device="cpu", runs_dir=tmp_path)

    assert plan(None).variants == presets.CORE
    bench = plan("relative:kind=alibi,relative:kind=rope")
    kinds = {}
    for cell in bench.cells:
        (job, *_) = [job for job in bench_jobs(bench) if job.variant == cell.variant]
        kinds[cell.variant] = bench.config(job).variant_options.kind
    assert kinds == {"relative:kind=alibi": "alibi", "relative:kind=rope": "rope"}


def bench_jobs(bench):
    return Ledger(bench, []).missing()


def sweep(variant, space=()):
    return sweeps.build(SweepOptions(variant=variant, task="passkey", space=tuple(space), trials=2, pruner="none",
                                     prune_after=0), device="cpu", runs_dir=Path("unused"))


def test_a_sweep_of_a_preset_keeps_its_options_fixed_and_a_set_is_refused():
    tuned = sweep("relative:kind=alibi")
    (kind,) = [param for param in tuned.space.params if param.name == "variant.kind"]
    assert tuned.variant == "relative" and kind.choices == ("alibi",)
    assert tuned.study_name == "relative-kind-alibi-passkey-quick-s0"
    with pytest.raises(OptionError, match="preset 'relative:kind=alibi' fixes"):
        sweep("relative:kind=alibi", ["variant.kind=t5"])
    with pytest.raises(OptionError, match="'core' is a set of variants, and a sweep tunes one"):
        sweep("core")


def test_attnlab_list_shows_the_sets_with_their_rows():
    listed = subprocess.run([sys.executable, "-m", "attnlab", "list"], capture_output=True, text=True,
                            cwd=ROOT, check=True).stdout
    assert "Sets (" in listed
    for name in presets.SETS:
        assert f"\n{name}: " in listed, name
    assert "relative:kind=alibi, relative:kind=rope" in listed
