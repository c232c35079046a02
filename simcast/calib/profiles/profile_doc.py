"""A device profile as a round-trip YAML document: its values with their provenance notes kept as data.

``simcast calibrate`` rewrites a profile through this module (ruamel.yaml in round-trip mode, which keeps
comments, key order and quoting): :func:`load_doc` parses the text, :func:`set_value` sets one value and its
note (the end-of-line comment that says where the value came from), :func:`note` reads a note back and
:func:`dump_doc` gives the text. Loading and dumping a shipped profile unchanged gives back the same bytes
(``tests/calib/test_profile_doc.py``).

Only the profile writer imports this module: the run path reads profiles with the safe loader of
:mod:`simcast.inputs.files`, and never loads ruamel.
"""

from __future__ import annotations

import dataclasses
import io
import re
from collections.abc import Iterable
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import CommentMark, YAMLError
from ruamel.yaml.scalarstring import DoubleQuotedScalarString
from ruamel.yaml.tokens import CommentToken

from simcast.core.errors import SimcastInputError, require
from simcast.inputs.files import loads_yaml

Key = str | int
DocPath = tuple[Key, ...]
NOTE_COLUMN = 37
"""Column of a value's note: ``key: value`` padded to 36 characters, then `` # `` (one space when longer)."""
COLLECTIVES_COLUMN = 35
"""Column of the note of a link's ``collectives:`` key."""
AFTER = -1
"""A note's column two spaces after its value (list items, one-line mappings), as the writer always put them."""

_PLAIN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_YAML_WORDS = {"yes", "no", "on", "off", "true", "false", "null", "y", "n"}


class Num(float):
    """A float written as given text (``8.0422e-1``): the written form of every number a fit produces."""

    text: str

    def __new__(cls, value: float, text: str) -> Num:
        obj = super().__new__(cls, value)
        obj.text = text
        return obj


def num(v: float) -> Num:
    """``v`` with 5 significant digits and an explicit exponent sign (YAML 1.1 and 1.2 both read it as a float)."""
    return Num(v, f"{v:.4e}".replace("e-0", "e-").replace("e+0", "e+") if v else "0.0")


_YAML: list[YAML] = []


def _yaml() -> YAML:
    """The one configured round-trip YAML instance (made on first use: building one costs ~1 ms)."""
    if not _YAML:
        _YAML.append(_make_yaml())
    return _YAML[0]


def _make_yaml() -> YAML:
    y = YAML(typ="rt")
    y.preserve_quotes = True
    y.width = 1 << 20  # never fold a line: notes and flow mappings stay on their own line
    y.indent(mapping=2, sequence=4, offset=2)
    y.representer.add_representer(Num, lambda r, d: r.represent_scalar("tag:yaml.org,2002:float", d.text))
    return y


# ------------------------------------------------------------------ text <-> document
def load_doc(text: str, field: str) -> CommentedMap:
    """The round-trip document of a profile's YAML ``text``.

    The text passes the checks every YAML input passes first (:func:`simcast.inputs.files.loads_yaml`: syntax,
    aliases, depth, a key given twice), so bad input is the same one line naming ``field``; a document that is
    not a mapping is refused too.
    """
    loads_yaml(text, field)
    try:
        doc = _yaml().load(text)
    except YAMLError as e:  # what the safe loader let through (ruamel is stricter on a few constructs)
        first = next((ln.strip() for ln in str(e).splitlines() if ln.strip()), type(e).__name__)
        raise SimcastInputError(field, "YAML", f"cannot be read as a device profile ({first})") from None
    require(isinstance(doc, CommentedMap), field, type(doc).__name__, "must be a YAML mapping (a device profile)")
    return doc


def dump_doc(doc: Any) -> str:
    """The YAML text of ``doc`` (a profile, or any node)."""
    out = io.StringIO()
    _yaml().dump(doc, out)
    return out.getvalue()


def text_of(node: Any) -> str:
    """How ``node`` is written in its profile (``989.4e+12``, ``"NVLink4 ..."``, ``{kind: all_reduce, ...}``)."""
    return dump_doc(CommentedSeq([node])).strip()[2:]  # the one item of `  - <node>`


# ------------------------------------------------------------------ values written by a fit
def plain(v: str) -> str:
    """An identifier (dtype, kind, algorithm) stays plain, as the hand-written profiles have them; other text
    is double-quoted."""
    return v if _PLAIN.match(v) and v.lower() not in _YAML_WORDS else DoubleQuotedScalarString(v)


def exact_bytes(v: float) -> Num:
    """A message-size bound written exactly when it is a whole number of bytes (``4194304.0``).

    A regime's ``max_bytes`` is the size of the last measured row it covers (usually a power of two);
    five significant digits (``4.1943e+6``) would put a message of exactly that size past the bound, in
    the next regime.
    """
    return Num(v, f"{float(v):.1f}") if float(v).is_integer() else num(float(v))


def _value(v: Any, name: str = "") -> Any:
    if name == "max_bytes" and type(v) in (int, float):
        return exact_bytes(v)
    if type(v) is float:  # not a Num or ScalarFloat: those keep the text they have
        return num(v)
    if type(v) is str:
        return plain(v)
    return v


def flow(obj: Any, skip_defaults: Iterable[str] = ()) -> CommentedMap:
    """``{field: value, ...}`` of a dataclass on one line (fields equal to their default in ``skip_defaults``
    left out)."""
    skip = set(skip_defaults)
    out = CommentedMap(
        (f.name, _value(getattr(obj, f.name), f.name))
        for f in dataclasses.fields(obj)
        if not (f.name in skip and getattr(obj, f.name) == f.default)
    )
    out.fa.set_flow_style()
    return out


def json_flow(obj: Any) -> Any:
    """``obj`` written on one line as JSON writes it (double-quoted keys and strings), for ``calibration:``."""
    if isinstance(obj, dict):
        out = CommentedMap((DoubleQuotedScalarString(str(k)), json_flow(v)) for k, v in obj.items())
        out.fa.set_flow_style()
        return out
    if isinstance(obj, (list, tuple)):
        seq = CommentedSeq(json_flow(v) for v in obj)
        seq.fa.set_flow_style()
        return seq
    if obj is None or isinstance(obj, (bool, int, float)):
        return obj
    return DoubleQuotedScalarString(str(obj))


# ------------------------------------------------------------------ notes: the end-of-line comments
def split_path(path: str | DocPath) -> DocPath:
    return tuple(path.split(".")) if isinstance(path, str) else path


def get(doc: CommentedMap, path: str | DocPath, default: Any = None) -> Any:
    """The node at ``path`` (dotted keys, or a tuple of keys and list indices); ``default`` when missing."""
    node: Any = doc
    for k in split_path(path):
        if isinstance(node, dict) and k in node:
            node = node[k]
        elif isinstance(node, list) and isinstance(k, int) and 0 <= k < len(node):
            node = node[k]
        else:
            return default
    return node


def _slot(parent: Any, key: Key) -> list:
    """The comment slots of ``parent[key]``: a mapping's end-of-line comment is slot 2, a list item's slot 0."""
    return parent.ca.items.setdefault(key, [None, None, None, None] if isinstance(parent, dict) else [None, None])


def _token(parent: Any, key: Key) -> CommentToken | None:
    slots = parent.ca.items.get(key)
    return (slots[2] if isinstance(parent, dict) else slots[0]) if slots else None


def _column(token: CommentToken | None) -> int:
    return token.start_mark.column if token is not None else NOTE_COLUMN


def _split(token: CommentToken | None) -> tuple[str, str]:
    """(note, tail) of a comment token: its first line's comment, and the blank or comment lines after it."""
    if token is None:
        return "", ""
    head, _, tail = token.value.partition("\n")
    return head.strip().lstrip("#").strip(), tail


def _put(parent: Any, key: Key, note: str, tail: str, column: int) -> None:
    """Write ``note`` (may be empty) and ``tail`` as the comment of ``parent[key]``."""
    value = (f"# {note}" if note else "") + "\n" + tail
    slots = _slot(parent, key)
    i = 2 if isinstance(parent, dict) else 0
    if value == "\n":
        slots[i] = None
    else:
        slots[i] = CommentToken(value, CommentMark(column), None)
    child = parent[key]
    if isinstance(child, (CommentedMap, CommentedSeq)) and not child.fa.flow_style():
        pre = child.ca.comment[1] if child.ca.comment else None  # a block's header comment: the same token
        child.ca.comment = [slots[i], pre] if slots[i] is not None or pre is not None else None


def note(doc: CommentedMap, path: str | DocPath) -> str:
    """The note (end-of-line comment, without ``#``) of the value at ``path``; empty when it has none."""
    p = split_path(path)
    parent = get(doc, p[:-1])
    return _split(_token(parent, p[-1]))[0] if parent is not None else ""


def _last(node: Any) -> tuple[Any, Key] | None:
    """Where the comment after ``node``'s last line lives (its last scalar or one-line item), if anywhere."""
    if not isinstance(node, (CommentedMap, CommentedSeq)) or not node or node.fa.flow_style():
        return None
    key: Key = next(reversed(node)) if isinstance(node, dict) else len(node) - 1
    return _last(node[key]) or (node, key)


def _take_tail(node: Any) -> str:
    """Remove and return the blank and comment lines after ``node``'s last line."""
    at = _last(node)
    if at is None:
        return ""
    parent, key = at
    head, tail = _split(_token(parent, key))
    _put(parent, key, head, "", _column(_token(parent, key)))
    return tail


def _give_tail(node: Any, tail: str) -> None:
    at = _last(node)
    if not tail or at is None:
        return
    parent, key = at
    token = _token(parent, key)
    head, old = _split(token)
    _put(parent, key, head, old + tail, _column(token))


def _has(parent: Any, key: Key) -> bool:
    if isinstance(parent, dict):
        return key in parent
    return isinstance(key, int) and key < len(parent)


def set_value(doc: CommentedMap, path: str | DocPath, value: Any, note: str, column: int | None = None) -> None:
    """Set the value at ``path`` and its note (the one place a value's provenance is written).

    A key missing from its mapping is added at the mapping's end (the lines that followed the mapping stay after
    it); an index one past a list's end appends. Floats are written with :func:`num`, identifiers plain; the note
    goes at ``column`` (default :data:`NOTE_COLUMN`, a list item's :data:`AFTER`). Lines of comment that
    followed the old value stay where they were. ``note=""`` leaves the value without a note.
    """
    p = split_path(path)
    parent: Any = get(doc, p[:-1])
    key = p[-1]
    require(isinstance(parent, (dict, list)), ".".join(map(str, p[:-1])), None, "missing from the profile")
    value = _value(value)
    if _has(parent, key):
        tail = _split(_token(parent, key))[1]
        old = parent[key]
        parent[key] = value
        if not _last(value):
            tail = _take_tail(old) + tail
        else:
            _give_tail(value, _take_tail(old))
    else:
        tail = _take_tail(parent)
        if isinstance(parent, dict):
            parent[key] = value
        else:
            parent.append(value)
            key = len(parent) - 1
        if _last(value):
            _give_tail(value, tail)
            tail = ""
    if column is None:
        column = NOTE_COLUMN if isinstance(parent, dict) else AFTER
    if column == AFTER:  # the line is `<indent>key: value` or `<indent>- value`; two spaces after it
        lead = f"{key}: " if isinstance(parent, dict) else "- "
        column = 2 * (len(p) - 1) + len(lead) + len(text_of(value)) + 2
    _put(parent, key, note, tail, column)


def delete(doc: CommentedMap, path: str | DocPath) -> None:
    """Remove the key at ``path``; the blank and comment lines after it move to the value before it."""
    p = split_path(path)
    parent: Any = get(doc, p[:-1])
    if not isinstance(parent, CommentedMap) or p[-1] not in parent:
        return
    keys = list(parent)
    at = keys.index(p[-1])
    child = parent[p[-1]]
    # what follows a block is after its last line; a one-line value's own comment token holds what follows it
    tail = _take_tail(child) if _last(child) else _split(_token(parent, p[-1]))[1]
    parent.ca.items.pop(p[-1], None)
    del parent[p[-1]]
    if at > 0:  # after the value before it
        last = _last(parent[keys[at - 1]])
        holder, k = last if last is not None else (parent, keys[at - 1])
    elif len(p) > 1:  # after the header of the mapping it was first in
        holder, k = get(doc, p[:-2]), p[-2]
    else:
        return
    token = _token(holder, k)
    head, old = _split(token)
    _put(holder, k, head, old + tail, _column(token))


def insert(doc: CommentedMap, at: int, key: str, value: Any, note: str = "", column: int = NOTE_COLUMN) -> None:
    """Insert ``key`` at position ``at`` of the top-level mapping (the lines before it stay before it; at the
    end, :func:`set_value`)."""
    if at >= len(doc):
        set_value(doc, key, value, note, column)
        return
    doc.insert(at, key, value)
    set_value(doc, key, value, note, column)


def drop_remarks(node: Any) -> None:
    """Remove every comment line of ``node`` (full-line remarks, the notes of keys that open a block) but its
    values' own notes; blank lines stay."""
    if not isinstance(node, (CommentedMap, CommentedSeq)):
        return
    if node.ca.comment:
        node.ca.comment = [node.ca.comment[0], None] if node.ca.comment[0] is not None else None
    keys = list(node) if isinstance(node, dict) else range(len(node))
    for k in keys:
        child = node[k]
        block = isinstance(child, (CommentedMap, CommentedSeq)) and not child.fa.flow_style()
        token = _token(node, k)
        head, tail = _split(token)
        blank = "".join(ln for ln in tail.splitlines(keepends=True) if not ln.strip())
        _put(node, k, "" if block else head, blank, _column(token))
        drop_remarks(child)
