"""JSON read under structural limits, whatever the document's size: how deep containers nest,
how many keys or items one container holds, how long one string is.

The size bound on a download says nothing about structure: 200 KB of `[` is 100,000 nested
arrays, and a parser that keeps a path per level (ijson's `items`, whose prefix strings grow
with the depth) or a walk that recurses (`repr`, pickle, `json.dumps`) turns it into gigabytes
or a RecursionError that fails the whole source. Here the document is read as ijson's flat
events (no prefix, C backend) and each item of a top-level array is built by a loop that counts
as it goes: an item that breaks a limit is abandoned at once (the rest of it is only counted
through, never built) and comes out as a `Refused`, which the pipeline keeps as that item's
dead letter (kind `too_deep` / `too_many` / `too_long`); the other items are read as usual.

A byte-order mark (UTF-8, UTF-16 LE/BE, UTF-32) is honoured: UTF-8's is skipped, the others'
text is recoded to UTF-8 while streaming (yajl reads UTF-8 only).
"""
from __future__ import annotations

import codecs
from dataclasses import dataclass
from typing import IO, Any, Iterator

import ijson

from basecrawler.errors import NotAList, OverLimit, TooDeep, TooLong, TooMany


@dataclass(frozen=True)
class JsonLimits:
    """Per item of a list document (or per whole document for `loads`). The defaults are far
    above any publisher's real records (hc's are two levels deep, a few dozen keys, texts of a
    few KB) and far below what exhausts memory or the interpreter's recursion."""

    depth: int = 64            # containers nested inside one item (the item itself is level 1)
    items: int = 100_000       # keys of one object, or items of one array
    string: int = 1_000_000    # characters of one string or key


DEFAULT_LIMITS = JsonLimits()


@dataclass
class Refused:
    """An item of a list document that broke a limit: nothing of it was kept but where it was."""

    error: OverLimit
    index: int                 # its position in the list, from 0

    def summary(self) -> dict:
        """What its dead letter keeps (the whole body is in the archive, by its sha256)."""
        return {"item_index": self.index, "refused": self.error.kind, "reason": str(self.error)}


_BOMS = ((codecs.BOM_UTF32_LE, "utf-32-le"), (codecs.BOM_UTF32_BE, "utf-32-be"),
         (codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"))


class _Recoded:
    """A binary stream of another encoding read as UTF-8 bytes, chunk by chunk."""

    def __init__(self, handle: IO[bytes], encoding: str):
        self._handle = handle
        self._decoder = codecs.getincrementaldecoder(encoding)(errors="strict")
        self._pending = b""

    def read(self, size: int = -1) -> bytes:
        while not self._pending:
            chunk = self._handle.read(65536 if size is None or size < 0 else max(size, 4))
            text = self._decoder.decode(chunk, final=not chunk)
            if not chunk:
                out, self._pending = text.encode("utf-8", "surrogatepass"), b""
                return out
            self._pending = text.encode("utf-8", "surrogatepass")
        if size is None or size < 0:
            out, self._pending = self._pending, b""
        else:
            out, self._pending = self._pending[:size], self._pending[size:]
        return out


def without_bom(handle: IO[bytes]) -> IO[bytes]:
    """`handle` (at its start, seekable) as UTF-8 bytes with no byte-order mark."""
    head = handle.read(4)
    for bom, encoding in _BOMS:
        if head.startswith(bom):
            handle.seek(len(bom))
            return handle if encoding == "utf-8" else _Recoded(handle, encoding)
    handle.seek(0)
    return handle


def head_of(handle: IO[bytes], size: int = 512) -> bytes:
    """The first bytes of the document as UTF-8 (BOM honoured, leading white space dropped),
    for a "what is this" check before reading; `handle` is rewound to its start."""
    stream = without_bom(handle)
    head = stream.read(size)
    handle.seek(0)
    return head.lstrip(b" \t\r\n")


_SCALARS = frozenset(("string", "number", "boolean", "null"))


def iter_items(handle: IO[bytes], limits: JsonLimits = DEFAULT_LIMITS, *, use_float: bool = True) -> Iterator[Any]:
    """Each item of a top-level JSON array, as `json.load` would build it, or a `Refused` for
    an item over a limit. Raises NotAList for another top level and ijson.JSONError for
    malformed JSON (the items before it were yielded)."""
    events = ijson.basic_parse(without_bom(handle), use_float=use_float)
    for event, _ in events:
        if event != "start_array":
            raise NotAList(f"the document is a {event.replace('start_', '')}, not a JSON array")
        break
    else:
        raise NotAList("the document is empty")
    max_depth, max_items, max_string = limits.depth, limits.items, limits.string
    index = 0
    stack: list = []          # (container, key) of each open level above the current one
    current: Any = None       # the open container, None between items
    key = None
    for event, value in events:
        try:
            if event in _SCALARS:
                if event == "string" and len(value) > max_string:
                    raise TooLong(f"a text of {len(value):,} characters (limit {max_string:,})")
                if current is None:
                    index += 1
                    yield value
                elif current.__class__ is dict:
                    if len(current) >= max_items:
                        raise TooMany(f"an object with more than {max_items:,} keys")
                    current[key] = value
                else:
                    if len(current) >= max_items:
                        raise TooMany(f"an array with more than {max_items:,} items")
                    current.append(value)
            elif event == "map_key":
                if len(value) > max_string:
                    raise TooLong(f"a key of {len(value):,} characters (limit {max_string:,})")
                key = value
            elif event == "start_map" or event == "start_array":
                new: Any = {} if event == "start_map" else []
                full = current is not None and len(current) >= max_items
                if current is not None and not full:
                    if current.__class__ is dict:
                        current[key] = new
                    else:
                        current.append(new)
                stack.append((current, key))   # pushed first: every open level is on the stack
                current = new
                if full:
                    raise TooMany(f"a container with more than {max_items:,} entries")
                if len(stack) > max_depth:
                    raise TooDeep(f"containers nested deeper than {max_depth} levels")
            elif event == "end_map" or event == "end_array":
                if not stack:        # the end of the top-level array
                    return
                done = current
                current, key = stack.pop()
                if current is None:
                    index += 1
                    yield done
        except OverLimit as error:
            # Count through the rest of the item without building it, then go on.
            _skip_rest(events, len(stack))
            stack, current, key = [], None, None
            yield Refused(error, index)
            index += 1


def _skip_rest(events: Iterator, open_levels: int) -> None:
    """Consume the events of the item being read until its `open_levels` containers close."""
    depth = open_levels
    if depth == 0:   # a scalar item: nothing left open
        return
    for event, _ in events:
        if event == "start_map" or event == "start_array":
            depth += 1
        elif event == "end_map" or event == "end_array":
            depth -= 1
            if depth == 0:
                return


def checked_items(items: list, limits: JsonLimits = DEFAULT_LIMITS) -> Iterator[Any]:
    """The items of an already-parsed list (`json.loads`), each `check`ed: an item over a
    limit comes out as a `Refused`, its dead letter, like `iter_items`'."""
    for index, item in enumerate(items):
        try:
            yield check(item, limits)
        except OverLimit as error:
            yield Refused(error, index)


def check(value: Any, limits: JsonLimits = DEFAULT_LIMITS) -> Any:
    """`value` (already parsed, e.g. by `json.loads`) unchanged if it keeps within `limits`,
    else OverLimit. A walk with its own stack: no recursion, however deep the value. Texts
    within the limit and None are told where they are met, never pushed (a record's extra is
    mostly small objects of texts: the walk is then one loop per container)."""
    max_string, max_items, max_depth = limits.string, limits.items, limits.depth
    pending = [(value, 1)]
    push = pending.append
    while pending:
        item, depth = pending.pop()
        kind = item.__class__
        if kind is str:
            if len(item) > max_string:
                raise TooLong(f"a text of {len(item):,} characters (limit {max_string:,})")
            continue
        if not (kind is dict or kind is list or isinstance(item, (dict, list, tuple, set, frozenset))):
            continue
        if depth > max_depth:
            raise TooDeep(f"containers nested deeper than {max_depth} levels")
        if len(item) > max_items:
            raise TooMany(f"a container with more than {max_items:,} entries")
        depth += 1
        if kind is dict or isinstance(item, dict):
            for name, inner in item.items():
                if name.__class__ is str and len(name) > max_string:
                    raise TooLong(f"a key of {len(name):,} characters (limit {max_string:,})")
                if inner is not None and (inner.__class__ is not str or len(inner) > max_string):
                    push((inner, depth))
        else:
            for inner in item:
                if inner is not None and (inner.__class__ is not str or len(inner) > max_string):
                    push((inner, depth))
    return value


__all__ = ["JsonLimits", "DEFAULT_LIMITS", "Refused", "NotAList", "without_bom", "head_of", "iter_items", "checked_items",
           "check"]
