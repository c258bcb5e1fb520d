"""Safe readers of calibrate's input files: UTF-8 text and YAML that refuses what PyYAML lets through.

``read_text(path, what)``: the file's text, decoded as UTF-8 (a leading byte-order mark is dropped); a file
that is not UTF-8 is refused naming the file, the line and the byte offset of the first bad byte.

``load_yaml(text, source)``: one YAML document, parsed by PyYAML's pure-Python safe loader with three guards
PyYAML lacks (each refused naming ``source`` and the line):

- a key given twice in one map (PyYAML silently keeps the last one): both lines are named;
- nesting deeper than ``MAX_DEPTH`` levels (PyYAML recurses and dies with RecursionError);
- aliases that refer to themselves or expand to more than ``MAX_NODES`` nodes (a billion-laughs bomb).

``texts=True`` reads every scalar as its text (PyYAML's BaseLoader: how an overlay's values travel as
``--set`` texts). Both return the data and the composed node (for line numbers). Errors are ``error``
(default ConfigError; the calibrate readers pass CalibrationError), one line each.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from kernbench._core import ConfigError

__all__ = ["MAX_DEPTH", "MAX_NODES", "read_text", "load_yaml"]

#: Deepest nesting of maps and lists accepted (the C++ config loader's limit too).
MAX_DEPTH = 100
#: Most nodes a document may have once its aliases are expanded.
MAX_NODES = 1_000_000


def read_text(path: str | Path, what: str = "", error: type[Exception] = ConfigError) -> str:
    """The UTF-8 text of ``path`` (a BOM dropped); ``error`` naming the file for an unreadable or non-UTF-8 one.
    ``what`` prefixes the message of a file that cannot be read (``--data``)."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise error(f"{(what + ' ') if what else ''}{p}: cannot read: {e.strerror or e}") from None
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        col = e.start - (raw.rfind(b"\n", 0, e.start) + 1) + 1
        raise error(f"{p}:{line}: not UTF-8 text: byte 0x{raw[e.start]:02x} at offset {e.start} (line {line}, "
                    f"column {col}); save the file as UTF-8") from None


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split())


class _Guard:
    """Composer hooks: a depth count on the way down, duplicate keys checked per map."""

    source = "<text>"
    error: type[Exception] = ConfigError
    _depth = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node:
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                mark = self.peek_event().start_mark  # type: ignore[attr-defined]
                raise self.error(f"{self.source}:{mark.line + 1}: nested deeper than {MAX_DEPTH} levels")
            return super().compose_node(parent, index)  # type: ignore[misc]
        finally:
            self._depth -= 1

    def compose_mapping_node(self, anchor: Any) -> Node:
        node = super().compose_mapping_node(anchor)  # type: ignore[misc]
        seen: dict[tuple[str, str], int] = {}
        for key, _ in node.value:
            if not isinstance(key, ScalarNode):
                continue
            k = (key.tag, key.value)
            line = key.start_mark.line + 1
            if k in seen:
                raise self.error(f"{self.source}:{line}: key {key.value!r} given twice (lines {seen[k]} and "
                                 f"{line}); give it once")
            seen[k] = line
        return node


class _SafeLoader(_Guard, yaml.SafeLoader):
    pass


class _TextLoader(_Guard, yaml.BaseLoader):
    pass


def _check_graph(root: Node, source: str, error: type[Exception]) -> None:
    """Refuse a node graph with a cycle (a recursive alias), deeper than MAX_DEPTH once aliases are followed,
    or of more than MAX_NODES nodes expanded. Iterative: no recursion on hostile input."""
    count = 0
    on_path: set[int] = set()
    stack: list[tuple[Node, int, bool]] = [(root, 1, False)]
    while stack:
        node, depth, leaving = stack.pop()
        if leaving:
            on_path.discard(id(node))
            continue
        count += 1
        line = node.start_mark.line + 1
        if count > MAX_NODES:
            raise error(f"{source}: more than {MAX_NODES} nodes once aliases are expanded")
        if depth > MAX_DEPTH:
            raise error(f"{source}:{line}: nested deeper than {MAX_DEPTH} levels once aliases are expanded")
        if isinstance(node, ScalarNode):
            continue
        if id(node) in on_path:
            raise error(f"{source}:{line}: a recursive alias (a node that contains itself)")
        on_path.add(id(node))
        stack.append((node, depth, True))
        if isinstance(node, SequenceNode):
            children = list(node.value)
        elif isinstance(node, MappingNode):
            children = [n for kv in node.value for n in kv]
        else:
            children = []
        for child in reversed(children):
            stack.append((child, depth + 1, False))


def load_yaml(text: str, source: str | Path, *, texts: bool = False,
              error: type[Exception] = ConfigError) -> tuple[Any, Node | None]:
    """(data, node) of the one YAML document in ``text``; (None, None) for an empty one. ``error`` names
    ``source`` and the line for invalid YAML, a duplicate key, deep nesting or a hostile alias."""
    cls = _TextLoader if texts else _SafeLoader
    try:
        loader = cls(text)  # PyYAML's reader checks every character here, before any parsing
    except yaml.reader.ReaderError as e:  # a NUL (a UTF-16 file), a control character
        line = text.count("\n", 0, e.position) + 1
        raise error(f"{source}:{line}: not valid YAML: character U+{e.character:04X} at character {e.position} is "
                    "not allowed in YAML (a UTF-16 file? save it as UTF-8)") from None
    loader.name = str(source)
    loader.source = str(source)
    loader.error = error
    try:
        node = loader.get_single_node()
        if node is None:
            return None, None
        _check_graph(node, str(source), error)
        data = loader.construct_document(node)
    except error:
        raise
    except yaml.YAMLError as e:
        raise error(f"{source}: not valid YAML: {_one_line(e)}") from None
    except (ValueError, OverflowError) as e:  # a constructor's own error: an integer of 5000 digits, a bad date
        raise error(f"{source}: a value cannot be read: {_one_line(e)[:200]}") from None
    except RecursionError:  # a guard above should have stopped it first
        raise error(f"{source}: nested too deeply to read") from None
    finally:
        loader.dispose()
    return data, node
