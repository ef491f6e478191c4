"""Tables as files, CSV or Parquet: the report's `tables/` (`attnlab report --format parquet`) and `load_runs`'s
frame in a notebook.

    >>> analysis.write_table(analysis.load_runs("runs"), "runs.parquet")   # the format from the suffix
    >>> runs = analysis.read_table("runs.parquet")                         # equal to the frame written

Parquet keeps each column's dtype (pandas' own metadata in the file): numbers, booleans, text, nullable and
all-None columns, as they were. An object column whose cells are containers (lists, tuples, dicts: load_runs'
`accuracy_by_distance`, `tags`, list-valued options as tuples) or of more than one kind (an option that is a number
in one run and a word in another) has no Parquet type that gives it back as it was: it is written as JSON text, a
document per cell (None stays a null), and the file's metadata names it (`JSON_COLUMNS`: column -> how arrays come
back, "tuple" where a cell was a tuple, else "list"). `read_table` decodes them, so a frame round-trips equal; read
with plain pandas, they are the JSON text. The frame's `attrs` go with it (pandas' own key, which `pd.read_parquet`
reads too). As in the CSV, the index is not written.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

FORMATS = {"csv": "CSV", "parquet": "Parquet"}  # suffix -> the name a report's links show
JSON_COLUMNS = b"attnlab.json_columns"
SCALAR_KINDS = (bool, int, float, str)  # bool before int: True is an int too


def _plain(value: Any) -> Any:
    """A numpy scalar inside a cell as the Python number JSON writes."""
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"a cell holds {type(value).__name__}, which JSON cannot write")


def _json_kind(column: pd.Series) -> str | None:
    """"tuple" or "list" for an object column Parquet cannot give back as it was (see the docstring), else None."""
    if column.dtype != object:
        return None
    cells = [cell for cell in column if not _missing(cell)]
    if any(isinstance(cell, tuple) for cell in cells):
        return "tuple"
    if any(isinstance(cell, list | dict) for cell in cells):
        return "list"
    kinds = {next((kind for kind in SCALAR_KINDS if isinstance(cell, kind)), type(cell)) for cell in cells}
    return "list" if len(kinds) > 1 or not kinds <= set(SCALAR_KINDS) else None


def _missing(cell: Any) -> bool:
    return pd.api.types.is_scalar(cell) and bool(pd.isna(cell))


def _as_tuples(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_as_tuples(item) for item in value)
    if isinstance(value, dict):
        return {key: _as_tuples(item) for key, item in value.items()}
    return value


def write_table(frame: pd.DataFrame, path: str | Path) -> Path:
    """Write `frame` without its index as CSV or Parquet, by `path`'s suffix (.csv, .parquet)."""
    path = Path(path)
    suffix = path.suffix.removeprefix(".")
    if suffix not in FORMATS:
        raise ValueError(f"Table file {str(path)!r} has no table format's suffix; accepted: "
                         f"{', '.join('.' + name for name in FORMATS)}.")
    if suffix == "csv":
        frame.to_csv(path, index=False)
        return path
    kinds = {str(name): kind for name, column in frame.items() if (kind := _json_kind(column)) is not None}
    encoded = frame.copy()
    for name in kinds:
        encoded[name] = pd.Series([None if _missing(cell) else json.dumps(cell, default=_plain)
                                   for cell in frame[name]], index=frame.index, dtype=object)
    table = pa.Table.from_pandas(encoded, preserve_index=False)
    metadata = {**(table.schema.metadata or {}), JSON_COLUMNS: json.dumps(kinds).encode()}
    if frame.attrs:
        metadata[b"PANDAS_ATTRS"] = json.dumps(frame.attrs, default=_plain).encode()
    pq.write_table(table.replace_schema_metadata(metadata), path)
    return path


def read_table(path: str | Path) -> pd.DataFrame:
    """A table `write_table` wrote, as it was: object columns as objects (pandas reads text as `str`), JSON columns
    decoded, attrs restored; a CSV as pandas reads it."""
    path = Path(path)
    if path.suffix != ".parquet":
        return pd.read_csv(path)
    table = pq.read_table(path)
    metadata = table.schema.metadata or {}
    frame = table.to_pandas()
    kinds = json.loads(metadata.get(JSON_COLUMNS, b"{}"))
    described = json.loads(metadata.get(b"pandas", b"{}")).get("columns", [])
    for position, (field, column) in enumerate(zip(table.schema.names, described, strict=True)):
        kind = kinds.get(field)
        if kind is None and column["numpy_type"] != "object":
            continue
        cells = [None if _missing(cell) else cell for cell in frame.iloc[:, position]]
        if kind is not None:
            cells = [None if cell is None else json.loads(cell) for cell in cells]
        if kind == "tuple":
            cells = [_as_tuples(cell) for cell in cells]
        frame.isetitem(position, pd.Series(cells, index=frame.index, dtype=object))
    if b"PANDAS_ATTRS" in metadata:
        frame.attrs = json.loads(metadata[b"PANDAS_ATTRS"])
    return frame
