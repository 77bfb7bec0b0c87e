"""ablate.data: MNIST rows read from IDX files written here, the copy task, and real MNIST where present.

No test touches the network: the mirror probe is forced off for the whole module. Files are
written only under tmp_path.
"""

from __future__ import annotations

import hashlib
import struct
from pathlib import Path

import pytest
import pytorch_lightning as pl
import torch
from torch import nn
from torch.utils.data import DistributedSampler, RandomSampler, SequentialSampler

import ablate.data.files as files_mod
import ablate.data.mnist as mnist_mod
import ablate.data.synthetic as synthetic_mod
from ablate import cli
from ablate.config import ConfigError, DataConfig
from ablate.data import (
    IGNORE,
    CopyTask,
    DataError,
    MnistRows,
    build_datamodule,
    data_dir,
    keep_batch,
    row_permutation,
    split_seed,
)
from ablate.registry import spec as task_spec
from tests.conftest import needs_mnist

N_TRAIN, N_TEST = 100, 20  # sizes of the fake MNIST


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    """The download mirror is never reachable from a test, so nothing can be downloaded."""
    calls = []

    def offline() -> bool:
        calls.append(1)
        return False

    monkeypatch.setattr(files_mod, "network_available", offline)
    return calls


def write_idx(path: Path, data: torch.Tensor, magic: int | None = None) -> None:
    """IDX file: big-endian magic (2051 for 3-d uint8 images, 2049 for 1-d uint8 labels), dims, bytes."""
    magic = magic or {3: 2051, 1: 2049}[data.dim()]
    header = struct.pack(">I", magic) + b"".join(struct.pack(">I", d) for d in data.shape)
    path.write_bytes(header + data.to(torch.uint8).numpy().tobytes())


@pytest.fixture
def fake_mnist(tmp_path) -> dict:
    """tmp_path/MNIST/raw/ with the four standard files: 100 training and 20 test images of noise."""
    g = torch.Generator().manual_seed(123)
    raw = tmp_path / "MNIST" / "raw"
    raw.mkdir(parents=True)
    out = {"root": tmp_path, "raw": raw}
    for prefix, n, offset in (("train", N_TRAIN, 0), ("t10k", N_TEST, 3)):
        images = torch.randint(0, 256, (n, 28, 28), generator=g, dtype=torch.uint8)
        labels = (torch.arange(n) + offset) % 10
        write_idx(raw / f"{prefix}-images-idx3-ubyte", images)
        write_idx(raw / f"{prefix}-labels-idx1-ubyte", labels)
        out[prefix] = (images, labels)
    return out


def normalise(images: torch.Tensor) -> torch.Tensor:
    return (images.double() / 255 - 0.1307) / 0.3081


def mnist(root, **kw) -> MnistRows:
    dm = MnistRows(DataConfig(task="mnist", val_size=kw.pop("val_size", 20), **kw), root=root)
    dm.setup("fit")
    return dm


def files_under(root: Path) -> dict[str, bytes]:
    return {
        str(p): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


# --------------------------------------------------------------------------------------------- MNIST


def test_reads_idx_files_through_torchvision_and_normalises(fake_mnist, monkeypatch):
    import torchvision.datasets

    made = []
    real = torchvision.datasets.MNIST

    def spy(root, train=True, download=False, **kw):
        made.append((Path(root), train, download))
        return real(root, train=train, download=download, **kw)

    monkeypatch.setattr(torchvision.datasets, "MNIST", spy)
    before = files_under(fake_mnist["root"])
    dm = mnist(fake_mnist["root"])
    assert sorted(made) == [(fake_mnist["root"], False, False), (fake_mnist["root"], True, False)]
    assert files_under(fake_mnist["root"]) == before  # nothing written under the data folder

    assert dm.images.dtype == torch.float32 and dm.images.shape == (N_TRAIN + N_TEST, 28, 28)
    train_images, train_labels = fake_mnist["train"]
    test_images, test_labels = fake_mnist["t10k"]
    torch.testing.assert_close(
        dm.images.double(), normalise(torch.cat((train_images, test_images))), rtol=0, atol=1e-6
    )
    assert (len(dm.train_set), len(dm.val_set), len(dm.test_set)) == (80, 20, 20)

    x, y = dm.test_set.tensors()  # the official test set, in file order
    torch.testing.assert_close(x.double(), normalise(test_images), rtol=0, atol=1e-6)
    assert torch.equal(y, test_labels.long())

    x, y = next(iter(dm.train_dataloader()))
    assert x.dtype == torch.float32 and x.shape == (64, 28, 28)
    assert y.dtype == torch.int64 and y.shape == (64,)
    # every training example is one of the training images, with its own label
    flat = normalise(train_images).flatten(1).float()
    match = torch.cdist(x.flatten(1), flat).argmin(dim=1)
    assert torch.allclose(x.flatten(1), flat[match], atol=1e-5)
    assert torch.equal(y, train_labels[match].long())


def test_normalised_value_of_known_pixels(fake_mnist):
    dm = mnist(fake_mnist["root"])
    raw = fake_mnist["train"][0]
    black, white = (raw == 0).nonzero()[0], (raw == 255).nonzero()[0]
    assert dm.images[tuple(black)].item() == pytest.approx(-0.1307 / 0.3081, abs=1e-6)  # -0.42421
    assert dm.images[tuple(white)].item() == pytest.approx(
        (1 - 0.1307) / 0.3081, abs=1e-6
    )  # 2.82149


def test_split_is_deterministic_disjoint_and_seeded(fake_mnist):
    a, b, c = (mnist(fake_mnist["root"], seed=s) for s in (0, 0, 1))
    assert torch.equal(a.train_set.index, b.train_set.index) and torch.equal(
        a.val_set.index, b.val_set.index
    )
    assert not torch.equal(a.val_set.index, c.val_set.index)
    for dm in (a, c):
        both = torch.cat((dm.train_set.index, dm.val_set.index))
        assert sorted(both.tolist()) == list(
            range(N_TRAIN)
        )  # a partition of the 100 training images
        assert dm.test_set.index.tolist() == list(
            range(N_TRAIN, N_TRAIN + N_TEST)
        )  # test never split
    assert len(mnist(fake_mnist["root"], val_size=35).val_set) == 35


def test_mnist_chance_level_is_the_most_frequent_label_of_each_evaluation_set(fake_mnist):
    """ref/<split>/chance, counted by hand from the labels the split indices select (test labels
    are (i + 3) % 10 of 20 images: each digit twice, chance 0.1; a test subset of 13 holds 3..9, 0..5:
    digits 3, 4, 5 twice -> 2 / 13)."""
    from collections import Counter

    labels = torch.cat((fake_mnist["train"][1], fake_mnist["t10k"][1]))
    dm = mnist(fake_mnist["root"], val_size=30, seed=2)
    val = Counter(labels[dm.val_set.index].tolist())
    assert dm.reference_levels() == {"ref/val/chance": max(val.values()) / 30, "ref/test/chance": 0.1}
    sub = mnist(fake_mnist["root"], test_subset=13)
    assert sub.reference_levels()["ref/test/chance"] == 2 / 13


def test_train_subset_keeps_the_first_n_of_the_training_split(fake_mnist):
    full = mnist(fake_mnist["root"], seed=3)
    sub = mnist(fake_mnist["root"], seed=3, train_subset=17)
    assert len(sub.train_set) == 17
    assert torch.equal(sub.train_set.index, full.train_set.index[:17])
    assert torch.equal(sub.val_set.index, full.val_set.index)  # validation unchanged
    assert len(sub.test_set) == N_TEST
    with pytest.raises(ConfigError, match="data.train_subset=81"):
        mnist(fake_mnist["root"], train_subset=81)
    with pytest.raises(ConfigError, match="data.val_size=100"):
        mnist(fake_mnist["root"], val_size=100)


def test_row_permutation_is_fixed_seeded_and_not_identity():
    p = row_permutation(0)
    assert p.dtype == torch.int64 and p.shape == (28,)
    assert sorted(p.tolist()) == list(range(28))
    assert torch.equal(p, row_permutation(0))
    assert not torch.equal(row_permutation(0), row_permutation(1))
    assert all(not torch.equal(row_permutation(s), torch.arange(28)) for s in range(200))
    # pinned: a torch release that changed randperm would change the "fixed" permutation, and this says so
    pinned = [
        4,
        10,
        3,
        13,
        23,
        7,
        21,
        17,
        25,
        2,
        27,
        6,
        16,
        22,
        12,
        15,
        14,
        1,
        9,
        18,
        26,
        0,
        5,
        19,
        24,
        11,
        8,
        20,
    ]
    assert p.tolist() == pinned


@pytest.mark.parametrize("permute", ["none", "train", "test", "both"])
def test_permutation_applies_where_configured(fake_mnist, permute):
    dm = mnist(fake_mnist["root"], permute=permute, permute_seed=5)
    assert torch.equal(dm.permutation, row_permutation(5))
    plain = normalise(torch.cat((fake_mnist["train"][0], fake_mnist["t10k"][0]))).float()
    for split, name in ((dm.train_set, "train"), (dm.val_set, "train"), (dm.test_set, "test")):
        x, _ = split.tensors()
        rows = plain[split.index]  # (N, 28, 28), unpermuted
        expect = rows[:, dm.permutation] if permute in (name, "both") else rows
        torch.testing.assert_close(x, expect, rtol=0, atol=1e-6)
        # the permuted step t is the original pixel row permutation[t]
        if permute in (name, "both"):
            t = 0
            assert torch.allclose(x[:, t], rows[:, dm.permutation[t]], atol=1e-6)
            assert not torch.allclose(x[:, t], rows[:, t], atol=1e-6)


def test_missing_data_is_one_line_naming_the_directory(tmp_path, monkeypatch, no_network):
    monkeypatch.setenv("ABLATE_DATA_DIR", str(tmp_path))
    dm = build_datamodule(DataConfig(task="mnist"))
    with pytest.raises(DataError) as err:
        dm.prepare_data()
    message = str(err.value)
    assert "\n" not in message
    assert str(tmp_path / "MNIST" / "raw") in message
    # a generic suggestion, not a path from this project's CI layout
    assert message.endswith(
        "; set ABLATE_DATA_DIR to the folder that holds MNIST/raw/ (e.g. ABLATE_DATA_DIR=~/datasets)"
    )
    assert "shared" not in message
    assert no_network  # the mirror probe was asked, and said no
    with pytest.raises(DataError):
        dm.setup("fit")  # setup alone (no Trainer) checks too
    assert list(tmp_path.iterdir()) == []  # nothing created

    # an injected probe wins over the module's
    asked = []
    explicit = MnistRows(
        DataConfig(), root=tmp_path / "elsewhere", has_network=lambda: asked.append(1) or False
    )
    with pytest.raises(DataError, match="elsewhere"):
        explicit.prepare_data()
    assert asked == [1]


def test_partial_data_counts_as_missing(fake_mnist):
    (fake_mnist["raw"] / "t10k-labels-idx1-ubyte").unlink()
    with pytest.raises(DataError, match=str(fake_mnist["raw"])):
        mnist(fake_mnist["root"])


def test_data_dir_follows_env(monkeypatch, tmp_path):
    monkeypatch.setenv("ABLATE_DATA_DIR", str(tmp_path))
    assert data_dir() == tmp_path
    monkeypatch.delenv("ABLATE_DATA_DIR")
    assert data_dir() == Path("data")


def test_build_datamodule_reports_the_model_it_needs(fake_mnist, monkeypatch):
    monkeypatch.setenv("ABLATE_DATA_DIR", str(fake_mnist["root"]))
    dm = build_datamodule(DataConfig(task="mnist", permute_seed=2))
    assert isinstance(dm, MnistRows) and isinstance(dm, pl.LightningDataModule)
    assert (dm.kind, dm.in_features, dm.n_classes, dm.seq_len) == ("classify", 28, 10, 28)
    assert torch.equal(dm.permutation, row_permutation(2))
    assert dm.root == fake_mnist["root"]

    cfg = DataConfig(task="copy", vocab=7, length=5, test_length=9)
    dm = build_datamodule(cfg)
    assert isinstance(dm, CopyTask)
    assert (dm.kind, dm.n_tokens, dm.n_out, dm.seq_len) == ("tokens", 9, 7, 19)
    assert dm.seq_len == cfg.seq_len()
    assert build_datamodule(DataConfig(task="copy", length=6, test_length=3)).seq_len == 13

    with pytest.raises(ConfigError, match="expected one of mnist, copy"):
        build_datamodule(DataConfig(task="cifar"))


def test_batches_are_pinned_for_a_model_on_cuda_only():
    from ablate.data.common import pins

    assert pins(torch.device("cuda")) and pins(torch.device("cuda", 1))
    assert not any(pins(d) for d in (torch.device("cpu"), torch.device("mps"), torch.device("meta"), None))
    dm = build_datamodule(DataConfig(task="copy", length=5, n_train=64, n_val=32, n_test=32))
    dm.setup("fit")
    dm.setup("test")
    unattached = [dm.train_dataloader(), dm.val_dataloader(), dm.test_dataloader()]
    dm.trainer = pl.Trainer(accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                            enable_progress_bar=False, enable_model_summary=False)
    on_cpu = [dm.train_dataloader(), dm.val_dataloader(), dm.test_dataloader()]
    assert [dl.pin_memory for dl in unattached + on_cpu] == [False] * 6


def test_loaders_shuffle_from_the_global_rng_only(fake_mnist):
    dm = mnist(fake_mnist["root"], batch_size=16)
    train = dm.train_dataloader()
    assert isinstance(train.sampler, RandomSampler) and train.sampler.generator is None
    assert train.generator is None and train.num_workers == 0 and train.batch_size == 16
    assert train.collate_fn is keep_batch
    for dl in (dm.val_dataloader(), dm.test_dataloader()):
        assert (
            isinstance(dl.sampler, SequentialSampler)
            and dl.num_workers == 0
            and dl.batch_size == 16
        )

    def epoch_labels(seed: int) -> list[torch.Tensor]:
        torch.manual_seed(seed)
        return [y for _, y in dm.train_dataloader()]

    a, b, c = epoch_labels(0), epoch_labels(0), epoch_labels(1)
    assert [len(y) for y in a] == [16, 16, 16, 16, 16]
    assert all(torch.equal(u, v) for u, v in zip(a, b))
    assert not all(torch.equal(u, v) for u, v in zip(a, c))

    xs, ys = zip(*dm.val_dataloader())  # unshuffled: the split in order
    x, y = dm.val_set.tensors()
    assert torch.equal(torch.cat(xs), x) and torch.equal(torch.cat(ys), y)


@pytest.mark.parametrize("split", ["train", "val"])
def test_lightning_ddp_sampler_replacement(fake_mnist, split):
    """What Lightning's data connector does to each loader under DDP (2 ranks): a DistributedSampler
    (shuffling iff the loader shuffled) and the loader rebuilt around it, collate_fn and all."""
    from pytorch_lightning.trainer.connectors.data_connector import _get_distributed_sampler
    from pytorch_lightning.utilities.data import _is_dataloader_shuffled, _update_dataloader

    dm = mnist(fake_mnist["root"], batch_size=8)
    original = dm.train_dataloader() if split == "train" else dm.val_dataloader()
    shuffle = _is_dataloader_shuffled(original)
    assert shuffle == (split == "train")
    per_rank = len(original.dataset) // 2  # 40 or 10
    seen = []
    for rank in (0, 1):
        sampler = _get_distributed_sampler(
            original, shuffle, overfit_batches=0, num_replicas=2, rank=rank
        )
        assert isinstance(sampler, DistributedSampler) and sampler.shuffle == shuffle
        rebuilt = _update_dataloader(original, sampler, mode=None)
        assert (
            rebuilt.collate_fn is keep_batch
            and rebuilt.batch_size == 8
            and rebuilt.sampler is sampler
        )
        batches = list(rebuilt)
        assert [len(y) for _, y in batches] == [8] * (per_rank // 8) + (
            [per_rank % 8] if per_rank % 8 else []
        )
        x, y = torch.cat([b[0] for b in batches]), torch.cat([b[1] for b in batches])
        assert x.shape == (per_rank, 28, 28) and x.dtype == torch.float32
        indices = list(sampler)
        expect = original.dataset.__getitems__(indices)
        assert torch.equal(x, expect[0]) and torch.equal(y, expect[1])
        seen += indices
    assert sorted(seen) == list(range(len(original.dataset)))  # each example once, across the ranks


def test_trains_with_lightning(fake_mnist, tmp_path):
    class Linear(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = nn.Linear(28 * 28, 10)
            self.shapes = []

        def training_step(self, batch, _):
            x, y = batch
            self.shapes.append((tuple(x.shape), tuple(y.shape)))
            return nn.functional.cross_entropy(self.net(x.flatten(1)), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    model = Linear()
    dm = MnistRows(DataConfig(val_size=20, batch_size=32), root=fake_mnist["root"])
    trainer = pl.Trainer(
        max_epochs=1,
        limit_val_batches=0,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=tmp_path,
        accelerator="cpu",
        devices=1,
    )
    trainer.fit(model, datamodule=dm)
    assert model.shapes == [((32, 28, 28), (32,))] * 2 + [((16, 28, 28), (16,))]


# ------------------------------------------------------------------------------- broken MNIST files


def _truncate(raw: Path, images: torch.Tensor, labels: torch.Tensor) -> str:
    path = raw / "train-images-idx3-ubyte"
    path.write_bytes(path.read_bytes()[:-100])  # a download cut short
    return "is 78316 bytes long, but its header declares 100 images (78416 bytes): truncated"


def _trailing(raw, images, labels):
    path = raw / "t10k-labels-idx1-ubyte"
    path.write_bytes(path.read_bytes() + b"\0\0\0")
    return "is 31 bytes long, but its header declares 20 labels (28 bytes): 3 bytes too long"


def _empty(raw, images, labels):
    (raw / "t10k-images-idx3-ubyte").write_bytes(b"")
    return "is 0 bytes long, shorter than its 16-byte IDX header"


def _wrong_magic(raw, images, labels):
    write_idx(raw / "train-images-idx3-ubyte", images, magic=2049)  # a labels magic on images
    return "has magic number 2049, expected 2051 (IDX images: 3-d unsigned bytes)"


def _gzipped(raw, images, labels):
    (raw / "train-labels-idx1-ubyte").write_bytes(
        b"\x1f\x8b\x08\x00" + bytes(100)
    )  # .gz, not gunzipped
    return "has magic number 529205248, expected 2049 (IDX labels: 1-d unsigned bytes)"


def _rows_27(raw, images, labels):
    write_idx(raw / "train-images-idx3-ubyte", images[:, :27])  # (100, 27, 28)
    return "holds 27x28 images, expected 28x28"


def _count_mismatch(raw, images, labels):
    write_idx(raw / "train-labels-idx1-ubyte", labels[:99])
    return "disagree: 100 images but 99 labels"


def _label_10(raw, images, labels):
    bad = labels.clone()
    bad[[7, 50]] = torch.tensor([10, 255])
    write_idx(raw / "train-labels-idx1-ubyte", bad)
    return "holds label 10 at item 7 (and 1 more), expected 0..9"


def _no_images(raw, images, labels):
    write_idx(raw / "t10k-images-idx3-ubyte", images[:0])
    write_idx(raw / "t10k-labels-idx1-ubyte", labels[:0])
    return "holds no images"


BROKEN = {  # how a file is broken -> (the file the message names, the problem it states)
    "truncated": (_truncate, "train-images-idx3-ubyte"),
    "trailing": (_trailing, "t10k-labels-idx1-ubyte"),
    "empty": (_empty, "t10k-images-idx3-ubyte"),
    "wrong_magic": (_wrong_magic, "train-images-idx3-ubyte"),
    "gzipped": (_gzipped, "train-labels-idx1-ubyte"),
    "rows_27": (_rows_27, "train-images-idx3-ubyte"),
    "count_mismatch": (_count_mismatch, "train-labels-idx1-ubyte"),
    "label_10": (_label_10, "train-labels-idx1-ubyte"),
    "no_images": (_no_images, "t10k-images-idx3-ubyte"),
}
FIX = "delete it and let torchvision download it again, or point ABLATE_DATA_DIR at a good copy"
FIX_BOTH = (
    "delete them and let torchvision download them again, or point ABLATE_DATA_DIR at a good copy"
)


@pytest.mark.parametrize("how", BROKEN)
def test_broken_mnist_file_is_one_line_naming_it(fake_mnist, how):
    breaks, name = BROKEN[how]
    problem = breaks(fake_mnist["raw"], *fake_mnist["train"])
    with pytest.raises(DataError) as err:
        mnist(fake_mnist["root"])
    raw = fake_mnist["raw"]
    if how == "count_mismatch":  # both files named
        subject, fix = f"MNIST files {raw / 'train-images-idx3-ubyte'} and {raw / name}", FIX_BOTH
    else:
        subject, fix = f"MNIST file {raw / name}", FIX
    assert (
        str(err.value) == f"{subject} {problem}; {fix}"
    )  # one line: the file, the problem, the fix


def test_unreadable_mnist_file_is_one_line(fake_mnist, monkeypatch):
    """Root reads every file, so the OS's refusal is injected at Path.open."""
    path = fake_mnist["raw"] / "t10k-labels-idx1-ubyte"
    real_open = Path.open

    def refuse(self, *args, **kw):
        if self == path:
            raise PermissionError(13, "Permission denied", str(self))
        return real_open(self, *args, **kw)

    monkeypatch.setattr(Path, "open", refuse)
    with pytest.raises(DataError) as err:
        mnist(fake_mnist["root"])
    assert str(err.value) == (
        f"MNIST file {path} cannot be read (Permission denied); make it readable, "
        "or point ABLATE_DATA_DIR at a good copy"
    )


@pytest.mark.parametrize("how", ["truncated", "rows_27", "label_10"])
def test_broken_mnist_exits_2_through_the_cli_and_writes_nothing(
    fake_mnist, tmp_path, monkeypatch, capsys, how
):
    BROKEN[how][0](fake_mnist["raw"], *fake_mnist["train"])
    before = files_under(fake_mnist["root"])
    runs = tmp_path / "runs_elsewhere"
    monkeypatch.setenv("ABLATE_DATA_DIR", str(fake_mnist["root"]))
    monkeypatch.setenv("ABLATE_RUNS_DIR", str(runs))
    args = [
        "budget=smoke",
        "data.train_subset=64",
        "data.val_size=20",
        "data.test_subset=20",
        "tracking=none",
    ]
    assert cli.main(["train", *args]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert err.count("\n") == 0 and err.startswith(
        f"ablate: MNIST file {fake_mnist['raw'] / BROKEN[how][1]}"
    )
    assert err.endswith(FIX) and captured.out == ""
    assert not runs.exists()  # nothing written for the run
    assert files_under(fake_mnist["root"]) == before  # and the data left as it was


def test_good_mnist_files_pass_the_check(fake_mnist):
    mnist_mod.check_mnist(fake_mnist["root"])  # no error: labels 0..9, 100 + 20 images of 28x28
    labels = fake_mnist["train"][1].clone()
    labels[0] = 9  # the largest label allowed
    write_idx(fake_mnist["raw"] / "train-labels-idx1-ubyte", labels)
    assert mnist(fake_mnist["root"]).train_set.y.max().item() == 9


def test_test_subset_larger_than_the_test_set_is_a_config_error(fake_mnist):
    assert len(mnist(fake_mnist["root"], test_subset=N_TEST).test_set) == N_TEST
    with pytest.raises(
        ConfigError, match=f"data.test_subset=21 is not allowed; the test set holds {N_TEST} images"
    ):
        mnist(fake_mnist["root"], test_subset=N_TEST + 1)


# ----------------------------------------------------------------------------------------- copy task


def copy_task(**kw) -> CopyTask:
    dm = CopyTask(
        DataConfig(
            task="copy",
            **{"vocab": 5, "length": 4, "n_train": 300, "n_val": 50, "n_test": 60, **kw},
        )
    )
    dm.setup("fit")
    return dm


@pytest.mark.parametrize("reverse", [False, True])
def test_copy_layout(reverse):
    dm = copy_task(reverse=reverse)
    for split, n in ((dm.train_set, 300), (dm.val_set, 50), (dm.test_set, 60)):
        x, y = split.tensors()
        assert x.dtype == y.dtype == torch.int64 and x.shape == y.shape == (n, 9)
        tokens = x[:, :4]
        assert tokens.min() >= 0 and tokens.max() < 5
        assert (x[:, 4] == 5).all() and (x[:, 5:] == 6).all()  # SEP = vocab, BLANK = vocab + 1
        assert (y[:, :5] == IGNORE).all()
        assert torch.equal(y[:, 5:], tokens.flip(1) if reverse else tokens)
    x, y = next(iter(dm.train_dataloader()))
    assert x.shape == y.shape == (64, 9) and x.dtype == y.dtype == torch.int64
    # reversing changes targets only: the inputs are the same draw
    other = copy_task(reverse=not reverse)
    assert torch.equal(other.train_set.x, dm.train_set.x)
    assert torch.equal(other.train_set.y[:, 5:], dm.train_set.y[:, 5:].flip(1))


def test_copy_tokens_are_uniform():
    x, _ = copy_task(vocab=10, length=8, n_train=5000).train_set.tensors()
    counts = torch.bincount(x[:, :8].flatten(), minlength=10)
    assert counts.sum() == 40000
    assert ((counts - 4000).abs() < 250).all()  # ~4 sigma for a binomial(40000, 0.1)


def test_copy_test_length():
    dm = copy_task(length=4, test_length=7)
    assert dm.seq_len == 15
    assert dm.train_set.x.shape == (300, 9) and dm.val_set.x.shape == (50, 9)
    x, y = dm.test_set.tensors()
    assert x.shape == (60, 15)
    assert (x[:, 7] == 5).all() and (x[:, 8:] == 6).all() and torch.equal(y[:, 8:], x[:, :7])
    same = copy_task(length=4)  # train and validation do not depend on test_length
    assert torch.equal(same.train_set.x, dm.train_set.x) and torch.equal(
        same.val_set.x, dm.val_set.x
    )


def test_copy_sets_depend_on_data_seed_only():
    a, b, c = copy_task(seed=0), copy_task(seed=0, batch_size=7), copy_task(seed=1)
    for name in ("train_set", "val_set", "test_set"):
        assert torch.equal(getattr(a, name).x, getattr(b, name).x)
        assert torch.equal(getattr(a, name).y, getattr(b, name).y)
        assert not torch.equal(getattr(a, name).x, getattr(c, name).x)
    # the three splits are separate draws
    assert not torch.equal(a.train_set.x[:50], a.val_set.x)
    assert not torch.equal(a.val_set.x, a.test_set.x[:50])
    # the documented derivation of each split's generator seed
    digest = hashlib.sha256(b"ablate.copy/0/train").digest()
    assert split_seed(0, "train") == int.from_bytes(digest[:8], "big") >> 1
    g = torch.Generator().manual_seed(split_seed(0, "val"))
    assert torch.equal(a.val_set.x[:, :4], torch.randint(0, 5, (50, 4), generator=g))


def test_copy_train_subset():
    full, sub = copy_task(), copy_task(train_subset=40)
    assert len(sub.train_set) == 40 and torch.equal(sub.train_set.x, full.train_set.x[:40])
    assert torch.equal(sub.val_set.x, full.val_set.x)
    with pytest.raises(ConfigError, match="data.train_subset=301"):
        copy_task(train_subset=301)


@pytest.mark.parametrize(
    "vocab, message",
    [
        (
            1,
            "data.vocab=1 is not allowed for data.task=copy; expected an integer >= 2 (with one token "
            "every target is the same and there is nothing to copy)",
        ),
        (
            2**62 + 1,
            f"data.vocab={2**62 + 1} is not allowed; expected at most 2**62 (token ids are int64)",
        ),
        (2**63, f"data.vocab={2**63} is not allowed; expected at most 2**62 (token ids are int64)"),
    ],
    ids=["1", "2**62+1", "2**63"],
)
def test_copy_vocab_that_cannot_be_built_is_a_config_error(vocab, message):
    with pytest.raises(ConfigError) as err:
        CopyTask(DataConfig(task="copy", vocab=vocab, n_train=10, n_val=10, n_test=10))
    assert str(err.value) == message


def test_copy_smallest_and_largest_vocab_build():
    x, _ = copy_task(vocab=2).train_set.tensors()  # the smallest vocabulary that copies anything
    assert set(x[:, :4].unique().tolist()) == {0, 1}
    x, _ = copy_task(vocab=2**62, n_train=3, n_val=1, n_test=1).train_set.tensors()
    assert (
        x[:, 4].tolist() == [2**62] * 3 and x[:, 5:].eq(2**62 + 1).all()
    )  # SEP and BLANK fit int64
    assert 0 <= x[:, :4].min() and x[:, :4].max() < 2**62


def test_copy_sets_bigger_than_memory_are_refused(monkeypatch):
    cfg = DataConfig(task="copy", n_train=100, n_val=10, n_test=20, length=4, test_length=6)
    assert task_spec("copy").data_bytes(cfg) == 24 * ((100 + 10) * 9 + 20 * 13)  # 30,000 bytes
    monkeypatch.setattr(
        synthetic_mod, "memory_bytes", lambda: 2 * 30_000
    )  # exactly MEMORY_SHARE: allowed
    CopyTask(cfg).setup("fit")
    monkeypatch.setattr(synthetic_mod, "memory_bytes", lambda: 2 * 30_000 - 2)
    with pytest.raises(DataError) as err:
        CopyTask(cfg)
    assert str(err.value) == (
        "the copy task's sets need about 2.79e-05 GiB (100 + 10 sequences of 9 tokens, 20 of 13), more "
        "than 50% of this machine's 5.59e-05 GiB; lower data.n_train, data.n_val, data.n_test, "
        "data.length or data.test_length"
    )
    monkeypatch.setattr(synthetic_mod, "memory_bytes", lambda: None)  # the OS does not say: no bound
    CopyTask(cfg)


@pytest.mark.parametrize("problem", ["vocab", "memory"])
def test_copy_task_that_cannot_be_built_exits_2_through_the_cli(
    tmp_path, monkeypatch, capsys, problem
):
    """The data module's own checks, behind whatever ablate.config bounds: one line, nothing written.
    For "memory" the machine is made small (n_train = 1e9 is refused earlier, by ablate.config)."""
    runs = tmp_path / "runs"
    monkeypatch.setenv("ABLATE_RUNS_DIR", str(runs))
    args = [
        "data.task=copy",
        "data.n_train=512",
        "data.n_val=64",
        "data.n_test=64",
        "tracking=none",
    ]
    if problem == "vocab":
        args.append("data.vocab=1")
        expect = "ablate: data.vocab=1 is not allowed for data.task=copy; expected an integer >= 2"
    else:
        monkeypatch.setattr(
            synthetic_mod, "memory_bytes", lambda: 2**18
        )  # 256 KiB; the sets need 255 KiB
        expect = (
            "ablate: the copy task's sets need about 0.000243 GiB (512 + 64 sequences of 17 tokens"
        )
    assert cli.main(["train", *args]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert err.count("\n") == 0 and err.startswith(expect) and captured.out == ""
    assert not runs.exists()


# ------------------------------------------------------------------------------------------ real data


@needs_mnist
def test_real_mnist():
    dm = build_datamodule(DataConfig(task="mnist"))
    dm.prepare_data()
    dm.setup("fit")
    assert (len(dm.train_set), len(dm.val_set), len(dm.test_set)) == (55000, 5000, 10000)
    assert dm.images.shape == (70000, 28, 28) and dm.images.dtype == torch.float32
    train = dm.images[:60000]  # normalised training pixels
    assert train.min().item() == pytest.approx(-0.1307 / 0.3081, abs=1e-5)  # pixel 0
    assert train.max().item() == pytest.approx((1 - 0.1307) / 0.3081, abs=1e-5)  # pixel 255
    assert ((train * 0.3081 + 0.1307) * 255).mean().item() == pytest.approx(
        33.318, abs=1e-3
    )  # 0.1307*255
    assert train.mean().item() == pytest.approx(0, abs=1e-3)
    assert train.std().item() == pytest.approx(1, abs=1e-3)
    for split in (dm.train_set, dm.val_set, dm.test_set):
        assert torch.unique(split.y[split.index]).tolist() == list(range(10))
    x, y = next(iter(dm.train_dataloader()))
    assert x.shape == (64, 28, 28) and y.shape == (64,) and y.dtype == torch.int64
