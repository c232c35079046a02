"""The one way simcast reads a YAML, JSON or CSV file (edge module).

Before any parser sees a byte, :func:`read_text` checks that the path is a
regular file, bounds its size and decodes it as strict UTF-8. Then each format
is checked for what its parser cannot survive:

* YAML: the event stream is walked (the parser is a loop, not a recursion) and
  nesting deeper than :data:`MAX_DEPTH`, more than :data:`MAX_NODES` nodes, or
  any alias (``*name``: an alias bomb expands a few hundred bytes into 10**9
  nodes) is refused before the safe loader builds anything;
* JSON: nesting depth is counted on the text (vectorised) before ``json.loads``
  recurses; ``NaN``/``Infinity`` and numbers that overflow a float are refused;
* CSV: an empty file and a header without rows are refused; numeric columns are
  checked cell by cell by :func:`numeric_column`, naming the column and line.

Every number in a YAML or JSON document must be finite (:func:`check_finite`).
Every problem is one :class:`~simcast.core.errors.SimcastInputError` naming the
file or field.
"""

from __future__ import annotations

import io
import json
import math
import os
import re
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from simcast.core.errors import SimcastInputError, bounded_repr, require
from simcast.inputs.limits import MAX_CSV_ROWS

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

MIB = 2**20
MAX_TEXT_BYTES = 16 * MIB
"""Configs, device profiles, service YAMLs and trace-cache entries (the largest shipped file is ~10 KiB)."""
MAX_CSV_BYTES = 128 * MIB
"""Measured CSVs and request traces (the largest Vidur profiling file is ~0.7 MiB); rows: MAX_CSV_ROWS."""
MAX_DEPTH = 64
"""Nesting levels of a YAML or JSON document (simcast's own schemas use 4)."""
MAX_NODES = 1_000_000
"""Scalars, lists and mappings in one YAML document."""


def package_data_dir(name: str) -> Path:
    """The folder ``simcast/data/<name>`` of the shipped data (model configs, device profiles, workloads),
    found with ``importlib.resources`` so an installed wheel reads its own copy. simcast installs as files
    (a wheel unpacked into site-packages, or an editable source tree), never as a zip, so it is a real path."""
    from importlib import resources

    return Path(str(resources.files("simcast").joinpath("data").joinpath(name)))


def read_text(path: str | Path, field: str, max_bytes: int = MAX_TEXT_BYTES) -> str:
    """The text of a regular file: at most ``max_bytes`` bytes of strict UTF-8 (a BOM is dropped)."""
    return decode_utf8(read_bytes(path, field, max_bytes), field, str(path))


def path_stat(path: str | Path, field: str) -> os.stat_result | None:
    """``os.stat`` of ``path``, None when nothing is there; any other failure (a name over 255 bytes, a
    NUL byte, a folder that cannot be searched, a loop) is one error line naming ``field``.

    Every "is there a file / folder at this path" question of simcast goes through here (or
    :func:`is_file` / :func:`is_dir`): ``Path.is_file`` raises on a name too long or an unsearchable
    folder instead of answering.
    """
    try:
        return os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except ValueError:  # an embedded NUL byte
        raise SimcastInputError(field, str(path), "is not a valid path (it holds a NUL byte)") from None
    except OSError as e:
        raise SimcastInputError(field, str(path), f"cannot be read ({e.strerror or e})") from None


def is_file(path: str | Path, field: str) -> bool:
    """Whether ``path`` is a regular file (:func:`path_stat`: an unusable path is an error naming ``field``)."""
    st = path_stat(path, field)
    return st is not None and stat.S_ISREG(st.st_mode)


def is_dir(path: str | Path, field: str) -> bool:
    """Whether ``path`` is a folder (:func:`path_stat`: an unusable path is an error naming ``field``)."""
    st = path_stat(path, field)
    return st is not None and stat.S_ISDIR(st.st_mode)


def read_bytes(path: str | Path, field: str, max_bytes: int = MAX_TEXT_BYTES) -> bytes:
    """The bytes of a regular file of at most ``max_bytes`` bytes (for a checksum of exactly what was read;
    decode them with :func:`decode_utf8`)."""
    p = Path(path)
    st = path_stat(p, field)
    if st is None:
        raise SimcastInputError(field, str(path), "cannot be read (No such file or directory)")
    require(not stat.S_ISDIR(st.st_mode), field, str(path), "is a directory, not a file")
    require(stat.S_ISREG(st.st_mode), field, str(path), "is not a regular file")
    require(
        st.st_size <= max_bytes,
        field,
        str(path),
        f"is {st.st_size} bytes; files over {max_bytes // MIB} MiB are refused",
    )
    try:
        with open(p, "rb") as f:
            data = f.read(max_bytes + 1)  # the size may change between stat and read
    except OSError as e:
        raise SimcastInputError(field, str(path), f"cannot be read ({e.strerror or e})") from None
    require(len(data) <= max_bytes, field, str(path), f"is over {max_bytes // MIB} MiB; refused")
    return data


def decode_utf8(data: bytes, field: str, what: str) -> str:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise SimcastInputError(
            field, what, f"is not UTF-8 text (byte {e.start}, line {line}: {bounded_repr(data[e.start : e.start + 4])})"
        ) from None
    return text.removeprefix("\ufeff")


def check_finite(doc: Any, field: str) -> None:
    """Every float in ``doc`` (nested lists/dicts) is finite; walks iteratively (no recursion)."""
    stack: list[tuple[Any, str]] = [(doc, "")]
    while stack:
        node, where = stack.pop()
        if isinstance(node, float):
            require(math.isfinite(node), _join(field, where), node, "must be a finite number")
        elif isinstance(node, dict):
            stack.extend((v, f"{where}.{k}" if where else str(k)) for k, v in node.items())
        elif isinstance(node, list):
            stack.extend((v, f"{where}[{i}]") for i, v in enumerate(node))


def _join(field: str, where: str) -> str:
    return f"{field}: {where}" if where else field


# ------------------------------------------------------------------ YAML
_BaseLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _SafeLoader(_BaseLoader):  # type: ignore[misc, valid-type]
    """The safe loader, refusing a key given twice in one mapping (PyYAML keeps the last one silently)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode):
                key = self.construct_object(key_node)
                line = key_node.start_mark.line + 1
                if isinstance(key, (str, int, float, bool)) and key in seen:
                    raise yaml.constructor.ConstructorError(
                        None,
                        None,
                        f"duplicate key {bounded_repr(key)} (first at line {seen[key]}); each key may appear once",
                        key_node.start_mark,
                    )
                if isinstance(key, (str, int, float, bool)):
                    seen[key] = line
        return super().construct_mapping(node, deep=deep)


def check_yaml_shape(text: str, field: str) -> None:
    """Refuse aliases, nesting deeper than MAX_DEPTH and more than MAX_NODES nodes, from the event stream."""
    depth = nodes = 0
    try:
        for ev in yaml.parse(text, Loader=_SafeLoader):
            if isinstance(ev, yaml.AliasEvent):
                line = ev.start_mark.line + 1 if ev.start_mark else "?"
                raise SimcastInputError(
                    field, f"*{ev.anchor}", f"YAML aliases are not supported (line {line}); write the value out"
                )
            if isinstance(ev, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                depth += 1
                if depth > MAX_DEPTH:
                    line = ev.start_mark.line + 1 if ev.start_mark else "?"
                    raise SimcastInputError(field, "YAML", f"nests deeper than {MAX_DEPTH} levels (line {line})")
            elif isinstance(ev, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                depth -= 1
            if isinstance(ev, yaml.NodeEvent):
                nodes += 1
                require(nodes <= MAX_NODES, field, "YAML", f"has more than {MAX_NODES} values")
    except yaml.YAMLError as e:
        raise _yaml_error(e, field) from None


def _yaml_error(e: yaml.YAMLError, field: str) -> SimcastInputError:
    mark = getattr(e, "problem_mark", None)
    line = mark.line + 1 if mark else "?"
    return SimcastInputError(field, "YAML", f"is malformed at line {line}: {getattr(e, 'problem', None) or e}")


def loads_yaml(text: str, field: str) -> Any:
    """A YAML document from ``text``: shape-checked, then safe-loaded, then every float finite."""
    check_yaml_shape(text, field)
    try:
        doc = yaml.load(text, Loader=_SafeLoader)
    except yaml.YAMLError as e:
        raise _yaml_error(e, field) from None
    except (ValueError, TypeError, OverflowError) as e:  # e.g. a date out of range
        raise SimcastInputError(field, "YAML", f"holds a value that cannot be read ({e})") from None
    check_finite(doc, field)
    return doc


def load_yaml(path: str | Path, field: str) -> Any:
    """A YAML file through :func:`read_text` and :func:`loads_yaml`."""
    return loads_yaml(read_text(path, field), f"{field} {Path(path).name}")


# ------------------------------------------------------------------ JSON
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?', re.DOTALL)
"""A JSON string, its closing quote optional: the match always succeeds at the first quote and never
backtracks (an unterminated run of ``\\"`` cost O(n^2) with ``"(?:[^"\\]|\\.)*"``: 20 s for 120 KB)."""


def json_depth(text: str) -> int:
    """Maximum nesting of ``[``/``{`` in JSON ``text`` outside strings (linear time, no recursion)."""
    import numpy as np

    bare = _JSON_STRING.sub('""', text)  # drop string contents: brackets there do not nest
    b = np.frombuffer(bare.encode("utf-8", "replace"), dtype=np.uint8)
    step = np.zeros(b.shape, dtype=np.int64)
    step[(b == ord("[")) | (b == ord("{"))] = 1
    step[(b == ord("]")) | (b == ord("}"))] = -1
    return max(0, int(np.cumsum(step).max())) if b.size else 0


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a finite number")


def _finite_float(s: str) -> float:
    x = float(s)
    if not math.isfinite(x):
        raise ValueError(f"{s[:40]} does not fit in a float")
    return x


def unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json.loads``'s ``object_pairs_hook`` that refuses a key given twice (json keeps the last silently)."""
    d: dict[str, Any] = {}
    for k, v in pairs:
        if k in d:
            raise ValueError(f"duplicate key {bounded_repr(k)}")
        d[k] = v
    return d


def loads_json(text: str, field: str) -> Any:
    """A JSON document from ``text``: depth-checked, finite numbers, no duplicate keys."""
    depth = json_depth(text)
    require(depth <= MAX_DEPTH, field, "JSON", f"nests {depth} levels; at most {MAX_DEPTH} are read")
    try:
        return json.loads(text, parse_constant=_no_constant, parse_float=_finite_float, object_pairs_hook=unique_pairs)
    except json.JSONDecodeError as e:
        raise SimcastInputError(field, "JSON", f"is not valid JSON (line {e.lineno}: {e.msg})") from None
    except (ValueError, RecursionError) as e:  # finiteness, duplicates, ints over 4300 digits
        raise SimcastInputError(field, "JSON", f"is not valid: {e}") from None


def load_json(path: str | Path, field: str) -> Any:
    """A JSON file through :func:`read_text` and :func:`loads_json`."""
    return loads_json(read_text(path, field), field)


# ------------------------------------------------------------------ CSV
def load_csv(path: str | Path, field: str, max_bytes: int = MAX_CSV_BYTES) -> pd.DataFrame:
    """A CSV file as text columns (``dtype=str``; empty cells are NaN), with at least one data row.

    Values stay strings: :func:`numeric_column` converts a column and names the first bad cell.
    """
    return loads_csv(read_text(path, field, max_bytes), field, path)


def loads_csv(text: str, field: str, path: str | Path) -> pd.DataFrame:
    """:func:`load_csv` on text already read from ``path`` (named in errors)."""
    import pandas as pd

    name = f"{field} {Path(path).name}"
    require(bool(text.strip()), name, str(path), "is empty; expected a header line and data rows")
    try:
        df = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False, na_values=[""])
    except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError) as e:
        raise SimcastInputError(name, str(path), f"is not a valid CSV ({str(e).strip()})") from None
    require(len(df) > 0, name, str(path), f"has a header ({', '.join(map(str, df.columns[:20]))}) but no data rows")
    require(len(df) <= MAX_CSV_ROWS, name, str(path), f"has {len(df)} rows; at most {MAX_CSV_ROWS} are read")
    return df


def numeric_column(
    df: pd.DataFrame,
    col: str,
    field: str,
    *,
    required: bool = False,
    lo: float | None = None,
    hi: float | None = None,
    lo_open: bool = False,
    integer: bool = False,
    where: pd.Series | None = None,
    lines: Sequence[int] | None = None,
) -> pd.Series:
    """Column ``col`` of a :func:`load_csv` frame as numbers (int64 when every cell is a whole number,
    as ``pandas.read_csv`` infers); empty cells NaN.

    Checked only on the rows of the boolean mask ``where`` (all rows by default): a cell must parse as
    a finite number in ``[lo, hi]`` (``(lo, hi]`` when ``lo_open``), a whole number when ``integer``;
    with ``required`` an empty cell is an error too. The first bad cell raises, naming ``col`` and its
    CSV line (the header is line 1; ``lines`` gives each row's line when the rows came from elsewhere,
    e.g. a JSON-lines file). Vectorised: a million rows cost well under a second.
    """
    import numpy as np
    import pandas as pd

    if col not in df:
        require(not required or (where is not None and not where.any()), f"{field}: column {col}", None, "is required")
        return pd.Series(np.nan, index=df.index, dtype=float)
    text = df[col].astype(str).str.strip().where(df[col].notna(), "")
    empty = text.eq("")
    vals = pd.to_numeric(text.where(~empty, None), errors="coerce")
    x = vals.astype(float).to_numpy()
    with np.errstate(invalid="ignore"):
        bad = (~empty.to_numpy() & ~np.isfinite(x)) | (empty.to_numpy() & required)
        if integer:
            bad |= np.isfinite(x) & (np.floor(x) != x)
        if lo is not None:
            bad |= np.isfinite(x) & ((x <= lo) if lo_open else (x < lo))
        if hi is not None:
            bad |= np.isfinite(x) & (x > hi)
    if where is not None:
        bad &= where.to_numpy(dtype=bool)
    if bad.any():
        i = int(np.argmax(bad))
        cell, v = df[col].iloc[i], float(x[i])
        at = f"{field}: column {col}, line {lines[i] if lines is not None else i + 2}"
        require(not empty.iloc[i], at, None, "is required")
        try:
            float(str(cell).strip())
        except ValueError:
            raise SimcastInputError(at, cell, "must be a number") from None
        require(math.isfinite(v), at, cell, "must be a finite number")
        require(not integer or v.is_integer(), at, cell, "must be a whole number")
        rng = (f"({lo:g}, " if lo_open else f"[{lo:g}, ") if lo is not None else "(-inf, "
        raise SimcastInputError(
            at, cell, f"must be in {rng}{hi:g}]" if hi is not None else f"must be {'>' if lo_open else '>='} {lo:g}"
        )
    return vals
