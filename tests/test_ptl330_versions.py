"""PTL330 flags the global NumPy state only for targets before PyTorch 1.9,
where DataLoader workers did not reseed NumPy."""
from __future__ import annotations

from packaging.version import Version

from conftest import settings_for
from ptlint.engine.lint import lint_text

SOURCE = '''
import numpy as np
from torch.utils.data import DataLoader, Dataset


class Crops(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        return np.random.randint(0, 10)


loader = DataLoader(Crops(), num_workers=4)
'''


def _lines(version: str) -> list[int]:
    settings = settings_for("PTL330", torch_version=Version(version))
    return [f.span.start.line for f in lint_text(SOURCE, "x.py", settings).findings]


def test_global_numpy_flagged_before_1_9():
    assert _lines("1.8.1") == [11]


def test_global_numpy_silent_from_1_9():
    assert _lines("1.9.0") == []
    assert _lines("2.5") == []


def test_worker_init_fn_silences_it():
    settings = settings_for("PTL330", torch_version=Version("1.8"))
    source = SOURCE.replace("num_workers=4)", "num_workers=4, worker_init_fn=seed)")
    assert lint_text(source, "x.py", settings).findings == []
