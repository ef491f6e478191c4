"""The tasks that read LRA's files: each task's examples against an independent reading of small files written in
the published formats (both archive layouts), the splits, the lengths, the cache, and the refusals."""

import os
import re

import lra_fixtures as fx
import numpy as np
import pytest
import torch

from experiments import tasks
from experiments.tasks.lra_files import grey

LISTOPS_VOCABULARY = [*map(str, range(10)), "[MIN", "[MAX", "[MED", "[SM", "X"]  # LRA renames `]` to X


def create(name, root, **options):
    return tasks.create_task(name, profile="quick", data_dir=str(root), **{"test_size": 0, **options})


def rows(task, split):
    return task.examples(split, np.arange(len(task.splits[split])))


def layout(values, width, pad, query):
    """One tower as the docs state it: left padding, the first `width` values, the query."""
    kept = list(values)[:width]
    return [pad] * (width - len(kept)) + kept + [query]


@pytest.mark.parametrize("layout_name", ["single", "double"])
@pytest.mark.parametrize("seq_len", [2001, 12])
def test_listops_reads_lra_tokens_and_values_from_either_archive_layout(tmp_path, layout_name, seq_len):
    written = fx.write_listops(tmp_path, layout_name)
    task = create("lra_listops", tmp_path, seq_len=seq_len)
    assert task.vocabulary == tasks.create_task("listops").vocabulary  # the generated task's tokens
    for split, examples in written.items():
        batch = rows(task, split)
        for index, (source, value) in enumerate(examples):
            words = source.replace("]", "X").replace("(", "").replace(")", "").split()  # LRA's pipeline
            ids = [LISTOPS_VOCABULARY.index(word) for word in words]
            assert batch.inputs[index].tolist() == layout(ids, seq_len - 1, 15, 16), (split, index)
            assert batch.targets[index, -1] == value and (batch.targets[index, :-1] == tasks.IGNORE).all()
            assert batch.distance[index, -1] == batch.metadata["length"][index] == min(len(ids), seq_len - 1)
    assert task.text(batch, 0).endswith(f"-> {written['test'][0][1]}")


def test_text_reads_review_bytes_holds_out_a_tenth_of_train_and_tests_on_the_test_folder(tmp_path):
    written = fx.write_imdb(tmp_path)
    task = create("lra_text", tmp_path, seq_len=41)
    expected = {"train": [], "validation": [], "test": []}
    for split in ("train", "test"):
        for name, review, label in sorted(written[split], key=lambda item: (item[2], item[0])):  # neg first, by name
            into = "validation" if split == "train" and fx.in_validation(name) else split
            expected[into].append((review.strip(), label))
    assert all(expected.values())
    for split, examples in expected.items():
        batch = rows(task, split)
        assert len(batch.inputs) == len(examples)
        for index, (review, label) in enumerate(examples):
            assert batch.inputs[index].tolist() == layout([byte + 2 for byte in review], 40, 258, 259)
            assert batch.targets[index, -1] == label
            assert batch.metadata["length"][index] == min(40, len(review))
    assert task.decode([0, 1, 2 + ord("a"), 258, 259]) == ["negative", "positive", "a", "<pad>", "<query>"]


@pytest.mark.parametrize("layout_name", ["single", "double"])
def test_retrieval_puts_each_paper_in_its_own_tower_cut_to_its_width(tmp_path, layout_name):
    written = fx.write_aan(tmp_path, layout_name)
    task = create("lra_retrieval", tmp_path, seq_len=2 * 51)
    assert task.towers == 2
    for split, examples in written.items():
        batch = rows(task, split)
        for index, (label, first, second) in enumerate(examples):
            towers = [layout([byte + 2 for byte in text], 50, 258, 259) for text in (first, second)]
            assert batch.inputs[index].tolist() == towers[0] + towers[1]
            assert batch.targets[index, -1] == label
            assert batch.distance[index, -1] == max(min(50, len(first)), min(50, len(second)))
            assert (batch.metadata["length"][index], batch.metadata["length2"][index]) == (
                min(50, len(first)), min(50, len(second)))


def test_image_is_lra_grey_levels_of_the_cifar_pickles_with_a_ninety_ten_train_split(tmp_path):
    written = fx.write_cifar(tmp_path)
    task = create("lra_image", tmp_path)
    train = [(data, labels) for name, (data, labels) in written.items() if name != "test_batch"]
    data = np.concatenate([part for part, _ in train])
    labels = sum((part for _, part in train), [])
    planes = data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1).reshape(-1, 1024, 3).astype(np.float64)
    expected = np.floor(planes @ np.array([0.2989, 0.5870, 0.1140]) / 255 * 255.5)  # (n, 1024), float64
    got = torch.cat([rows(task, "train").inputs, rows(task, "validation").inputs])[:, :-1] - 10
    assert len(rows(task, "train").inputs) == 45 and len(rows(task, "validation").inputs) == 5
    assert np.abs(got.numpy() - expected).max() <= 1 and (got.numpy() == expected).mean() > 0.99
    assert torch.cat([rows(task, "train").targets, rows(task, "validation").targets])[:, -1].tolist() == labels
    assert rows(task, "test").targets[:, -1].tolist() == written["test_batch"][1]
    assert (rows(task, "test").inputs[:, -1] == task.vocab_size - 1).all() and task.vocab_size == 10 + 256 + 1
    pure = np.array([[255] * 1024 + [0] * 2048, [0] * 1024 + [255] * 1024 + [0] * 1024, [0] * 2048 + [255] * 1024,
                     [255] * 3072, [128] * 3072], dtype=np.uint8)
    assert grey(pure)[:, 0].tolist() == [76, 149, 29, 255, 128]  # tf.image.rgb_to_grayscale's values


@pytest.mark.parametrize("layout_name", ["single", "double"])
def test_pathfinder_reads_png_grey_levels_and_metadata_labels_skips_empty_images_and_splits_by_path(
        tmp_path, layout_name):
    written = fx.write_pathfinder(tmp_path, layout_name)
    task = create("lra_pathfinder", tmp_path)
    assert task.seq_len == 1025 and task.vocabulary[:2] == ["different", "same"]
    for split in ("train", "validation", "test"):
        expected = [(pixels, label) for name, (pixels, label) in written.items()
                    if pixels is not None and fx.split_of(name) == split]
        batch = rows(task, split)
        assert len(expected) == len(batch.inputs) >= 1
        for index, (pixels, label) in enumerate(expected):
            assert batch.inputs[index, :-1].tolist() == (pixels.reshape(-1).astype(int) + 2).tolist()
            assert batch.targets[index, -1] == label
    assert sum(len(data) for data in task.splits.values()) == len(written) - 1  # the empty PNG is skipped
    assert task.report_buckets() == [(1024, 1024)]


def test_path_x_reads_the_128_pixel_folder(tmp_path):
    fx.write_pathfinder(tmp_path, size=128, count=20)
    task = create("lra_pathx", tmp_path)
    assert task.seq_len == 128 * 128 + 1 and task.options.image_size == 128
    with pytest.raises(tasks.MissingData, match=r"pathfinder32/curv_contour_length_14/metadata"):
        create("lra_pathfinder", tmp_path)


def test_training_batches_are_train_examples_drawn_by_the_runs_generator(tmp_path):
    fx.write_listops(tmp_path)
    task = create("lra_listops", tmp_path, seq_len=40)
    first, again = (task.batch(16, tasks.train_generator(3), "cpu") for _ in range(2))
    other = task.batch(16, tasks.train_generator(4), "cpu")
    assert torch.equal(first.inputs, again.inputs) and not torch.equal(first.inputs, other.inputs)
    train = {tuple(row) for row in rows(task, "train").inputs.tolist()}
    assert all(tuple(row) in train for row in first.inputs.tolist())
    generator = tasks.train_generator(3)
    first_half = task.batch(8, generator, "cpu")  # a generator's state carries on: a resumed run continues it
    assert not torch.equal(first_half.inputs, task.batch(8, generator, "cpu").inputs)


def test_test_size_takes_a_fixed_subset_of_the_test_and_validation_splits(tmp_path):
    fx.write_listops(tmp_path, counts=(10, 20, 30))
    whole = create("lra_listops", tmp_path, seq_len=40)
    subset = create("lra_listops", tmp_path, seq_len=40, test_size=7)
    assert (whole.test_size, whole.validation_size) == (30, 20)
    assert (subset.test_size, subset.validation_size) == (7, 7)
    test_rows = {tuple(row) for row in whole.test_set("cpu").inputs.tolist()}
    assert all(tuple(row) in test_rows for row in subset.test_set("cpu").inputs.tolist())
    assert torch.equal(subset.test_set("cpu").inputs, create("lra_listops", tmp_path, seq_len=40,
                                                             test_size=7).test_set("cpu").inputs)
    validation_rows = {tuple(row) for row in whole.validation_set("cpu").inputs.tolist()}
    assert all(tuple(row) in validation_rows for row in subset.validation_set("cpu").inputs.tolist())
    labels = whole.test_set("cpu").targets[:, -1]
    assert whole.chance_accuracy == torch.bincount(labels).max().item() / 30
    assert create("lra_listops", tmp_path, seq_len=40, test_size=99).test_size == 30


# -- the cache ---------------------------------------------------------------------------------------------------

def test_a_second_load_maps_the_cache_without_encoding_and_a_touched_file_encodes_again(tmp_path, monkeypatch):
    written = fx.write_listops(tmp_path)
    first = create("lra_listops", tmp_path, seq_len=40)
    cls = tasks.task_class("lra_listops")
    encode = cls.encode
    calls = []
    monkeypatch.setattr(cls, "encode", lambda self, root: calls.append(root) or pytest.fail("encoded again"))
    second = create("lra_listops", tmp_path, seq_len=64)  # another length: the same encoding
    assert isinstance(second.splits["train"].tokens, np.memmap)
    assert torch.equal(rows(first, "test").targets[:, -1], rows(second, "test").targets[:, -1])
    assert torch.equal(rows(first, "test").inputs, rows(second, "test").inputs[:, -40:])
    monkeypatch.setattr(cls, "encode", lambda self, root: calls.append(root) or encode(self, root))
    source = tmp_path / "lra_release" / "listops-1000" / "basic_test.tsv"
    os.utime(source, ns=(source.stat().st_atime_ns, source.stat().st_mtime_ns + 10**9))  # touched, unchanged
    create("lra_listops", tmp_path, seq_len=40)
    assert len(calls) == 1
    assert written["test"][0][1] != 0
    source.write_bytes(source.read_bytes().replace(f"\t{written['test'][0][1]}\r\n".encode(), b"\t0\r\n", 1))
    changed = create("lra_listops", tmp_path, seq_len=40)
    assert len(calls) == 2 and rows(changed, "test").targets[0, -1] == 0
    caches = sorted(path.name for path in (tmp_path / ".attnlab-cache").iterdir())
    assert len(caches) == 1 and caches[0].startswith("listops.")  # earlier keys removed, no temporary left


def test_the_cache_goes_where_cache_dir_says(tmp_path):
    fx.write_listops(tmp_path / "data")
    create("lra_listops", tmp_path / "data", cache_dir=str(tmp_path / "cache"))
    assert not (tmp_path / "data" / ".attnlab-cache").exists()
    assert [path.name.split(".")[0] for path in (tmp_path / "cache").iterdir()] == ["listops"]


# -- refusals ----------------------------------------------------------------------------------------------------

def test_without_a_data_folder_the_task_names_the_option_the_variable_and_the_source(monkeypatch, tmp_path):
    monkeypatch.delenv("ATTNLAB_DATA", raising=False)
    with pytest.raises(tasks.MissingData, match=r"task\.data_dir nor ATTNLAB_DATA.*lra_release\.gz") as error:
        tasks.create_task("lra_listops")
    assert "\n" not in str(error.value)
    fx.write_listops(tmp_path)
    monkeypatch.setenv("ATTNLAB_DATA", str(tmp_path))
    task = tasks.create_task("lra_listops", test_size=0)
    assert task.options.data_dir == str(tmp_path) and task.test_size == 8  # the folder is recorded in the config


@pytest.mark.parametrize("name, looked_for, source", [
    ("lra_listops", "lra_release/listops-1000/basic_train.tsv", "lra_release.gz"),
    ("lra_retrieval", "lra_release/tsv_data/new_aan_pairs.train.tsv", "lra_release.gz"),
    ("lra_text", "aclImdb/train/neg", "aclImdb_v1.tar.gz"),
    ("lra_image", "cifar-10-batches-py/data_batch_1", "cifar-10-python.tar.gz"),
    ("lra_pathfinder", "lra_release/pathfinder32/curv_contour_length_14/metadata", "lra_release.gz"),
])
def test_missing_data_is_one_sentence_naming_the_folder_the_file_and_where_it_comes_from(
        tmp_path, name, looked_for, source):
    with pytest.raises(tasks.MissingData) as error:
        create(name, tmp_path)
    message = str(error.value)
    assert str(tmp_path / looked_for) in message and source in message and "\n" not in message


def _corrupt_listops(root, old, new):
    path = root / "lra_release" / "listops-1000" / "basic_train.tsv"
    path.write_bytes(path.read_bytes().replace(old, new, 1))


def _corrupt_file(root, relative, transform):
    path = root / relative
    path.write_bytes(transform(path.read_bytes()))


def _line_of(root, relative, number, transform):
    def change(data):
        lines = data.split(b"\n")
        lines[number - 1] = transform(lines[number - 1])
        return b"\n".join(lines)
    _corrupt_file(root, relative, change)


AAN = "lra_release/tsv_data/new_aan_pairs.eval.tsv"
PNG = "lra_release/pathfinder32/curv_contour_length_14/imgs/0/sample_5.png"
META = "lra_release/pathfinder32/curv_contour_length_14/metadata/0.npy"
REFUSALS = {
    "listops header": ("lra_listops", lambda root: _corrupt_listops(root, b"Source\tTarget", b"Source,Target"),
                       r"basic_train\.tsv, line 1: header 'Source,Target'"),
    "listops columns": ("lra_listops", lambda root: _line_of(root, "lra_release/listops-1000/basic_train.tsv", 3,
                                                             lambda line: line.replace(b"\t", b"\t\t")),
                        r"basic_train\.tsv, line 3: 3 tab-separated columns"),
    "listops target": ("lra_listops", lambda root: _line_of(root, "lra_release/listops-1000/basic_train.tsv", 4,
                                                            lambda line: line.split(b"\t")[0] + b"\t12\r"),
                       r"basic_train\.tsv, line 4: target '12'; accepted: a digit 0 to 9"),
    "listops token": ("lra_listops", lambda root: _line_of(root, "lra_release/listops-1000/basic_train.tsv", 2,
                                                           lambda line: line.replace(b"[", b"[FIRST [", 1)),
                      r"basic_train\.tsv, line 2: token '\[FIRST'"),
    "aan columns": ("lra_retrieval", lambda root: _line_of(root, AAN, 2, lambda line: line.rsplit(b"\t", 1)[0]),
                    r"new_aan_pairs\.eval\.tsv, line 2: 4 tab-separated columns; accepted: five"),
    "aan label": ("lra_retrieval", lambda root: _line_of(root, AAN, 5, lambda line: b"0.5" + line[line.index(b"\t"):]),
                  r"new_aan_pairs\.eval\.tsv, line 5: label '0\.5'; accepted: 0 or 1"),
    "cifar truncated": ("lra_image", lambda root: _corrupt_file(root, "cifar-10-batches-py/data_batch_3",
                                                                lambda data: data[: len(data) // 2]),
                        r"data_batch_3, byte stream: not a readable CIFAR-10 batch"),
    "cifar label": ("lra_image", lambda root: _corrupt_file(root, "cifar-10-batches-py/test_batch", lambda data: (
        fx.cifar_pickle(np.zeros((12, 3072), np.uint8), [0] * 5 + [11] + [0] * 6))),
                    r"test_batch, entry 'labels', item 5: 11; accepted: a class 0 to 9"),
    "png unreadable": ("lra_pathfinder", lambda root: _corrupt_file(root, PNG, lambda data: data[:40]),
                       r"sample_5\.png \(named by .*metadata/0\.npy, line 6\): not a readable PNG"),
    "png size": ("lra_pathfinder", lambda root: _corrupt_file(root, PNG, lambda data: fx.png_bytes(
        np.zeros((16, 16), np.uint8))), r"sample_5\.png \(named by .*line 6\): a L image of \(16, 16\)"),
    "metadata label": ("lra_pathfinder", lambda root: _line_of(root, META, 2, lambda line: line.replace(b" 14 ", b"")),
                       r"metadata/0\.npy, line 2: .*accepted: space-separated fields"),
    "metadata image": ("lra_pathfinder", lambda root: _line_of(root, META, 7, lambda line: line.replace(b"sample_",
                                                                                                        b"lost_")),
                       r"metadata/0\.npy, line 7: names .*lost_6\.png, which is not there"),
}


@pytest.mark.parametrize("case", REFUSALS)
def test_a_malformed_file_is_refused_in_one_sentence_naming_the_file_and_line(tmp_path, case):
    name, corrupt, message = REFUSALS[case]
    {"lra_listops": fx.write_listops, "lra_retrieval": fx.write_aan, "lra_image": fx.write_cifar,
     "lra_pathfinder": fx.write_pathfinder}[name](tmp_path)
    corrupt(tmp_path)
    with pytest.raises(tasks.DataError, match=message) as error:
        create(name, tmp_path)
    assert "\n" not in str(error.value) and not (tmp_path / ".attnlab-cache").exists()


def test_a_pickle_that_names_a_callable_is_refused_without_running_it(tmp_path):
    fx.write_cifar(tmp_path)
    marker = tmp_path / "ran"
    payload = b"cposix\nsystem\n(V" + f"touch {marker}".encode() + b"\ntR."
    (tmp_path / "cifar-10-batches-py" / "data_batch_2").write_bytes(payload)
    with pytest.raises(tasks.DataError, match=re.escape("names posix.system, which a CIFAR-10 batch does not hold")):
        create("lra_image", tmp_path)
    assert not marker.exists()
