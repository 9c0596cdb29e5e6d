"""Reading a YAML file the way every surgelab loader needs it: the data, the node tree (for
file:line errors), and one-line errors for unreadable, malformed or explosive files.

A key given twice in one mapping is an error (``DuplicateKeyError``, naming both lines): PyYAML
keeps the last one silently, so ``rate: 2`` … ``rate: 500`` would run at 500 req/s. A merge key
(``<<: *base``) overridden by the mapping's own keys is YAML's way of inheriting, not a duplicate.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

__all__ = ["read_yaml", "load_yaml", "DuplicateKeyError", "duplicate_keys", "expanded_size", "MAX_NODES", "MAX_BYTES"]

MAX_NODES = 1_000_000
MAX_BYTES = 1 << 20  # 400 times the largest example scenario; PyYAML needs seconds per MiB, a 60 MB file a minute


def expanded_size(root: yaml.Node | None) -> int:
    """How many values the document holds once every alias is expanded (shared nodes counted once each time)."""
    sizes: dict[int, int] = {}
    stack: list[tuple[yaml.Node, bool]] = [(root, False)] if root is not None else []
    while stack:  # iterative and memoised: cheap however deep or shared the graph
        node, children_done = stack.pop()
        if id(node) in sizes:
            continue
        if isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        elif isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        else:
            sizes[id(node)] = 1
            continue
        if children_done:
            sizes[id(node)] = min(1 + sum(sizes.get(id(c), 1) for c in children), MAX_NODES + 1)
        else:
            stack.append((node, True))
            stack.extend((c, False) for c in children if id(c) not in sizes)
    return sizes.get(id(root), 0) if root is not None else 0


class DuplicateKeyError(yaml.MarkedYAMLError):
    """A key given twice in one mapping; ``problem`` says which key and on which lines."""

    def __init__(self, key: str, first_line: int, mark: yaml.Mark) -> None:
        problem = f"{key} is given twice (lines {first_line} and {mark.line + 1}); keep one"
        super().__init__(problem=problem, problem_mark=mark)
        self.key, self.first_line = key, first_line


_MERGE = "tag:yaml.org,2002:merge"


def duplicate_keys(root: yaml.Node | None) -> list[DuplicateKeyError]:
    """Every key given twice in a mapping of the node tree, in document order. Keys are compared
    as read (YAML 1.1 reads ``on`` and ``true`` alike); each shared (aliased) node is checked once."""
    constructor = yaml.constructor.SafeConstructor()
    found: list[DuplicateKeyError] = []
    seen: set[int] = set()
    stack: list[tuple[yaml.Node, str]] = [(root, "")] if root is not None else []
    while stack:
        node, where = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        children: list[tuple[yaml.Node, str]] = []
        if isinstance(node, yaml.MappingNode):
            first: dict[Any, int] = {}
            for key_node, value_node in node.value:
                name = where
                if key_node.tag != _MERGE and isinstance(key_node, yaml.ScalarNode):
                    key = constructor.construct_object(key_node)
                    name = f"{where}.{key}" if where else str(key)
                    if key in first:  # a scalar key is read as a str, number, bool, date or None: hashable
                        found.append(DuplicateKeyError(name, first[key], key_node.start_mark))
                    else:
                        first[key] = key_node.start_mark.line + 1
                children.append((value_node, name))
        elif isinstance(node, yaml.SequenceNode):
            children = [(item, f"{where}[{k}]") for k, item in enumerate(node.value)]
        stack.extend(reversed(children))
    return found


def load_yaml(text: str) -> Any:
    """``yaml.safe_load`` of ``text``, but a duplicate key raises ``DuplicateKeyError`` (a ``yaml.YAMLError``)."""
    root = yaml.compose(text, Loader=yaml.SafeLoader)
    duplicates = duplicate_keys(root)
    if duplicates:
        raise duplicates[0]
    return _construct(root)


def _construct(root: yaml.Node | None) -> Any:
    if root is None:
        return None
    loader = yaml.SafeLoader("")
    try:
        return loader.construct_document(root)
    finally:
        loader.dispose()


def read_yaml(path: Path, what: str, error: type[Exception]) -> tuple[Any, yaml.Node | None]:
    """(data, root node) of ``path``; ``error([message])`` for anything that cannot be used."""
    try:
        with open(path, "rb") as file:  # never more than the cap: a huge file (or an endless pipe) is refused at once
            raw = file.read(MAX_BYTES + 1)
        if len(raw) > MAX_BYTES:
            raise error([f"{path}: {what} is larger than {MAX_BYTES >> 20} MiB; keep large data (prompts, traces) "
                         "in a dataset or trace file and refer to it"])  # fmt: skip
        text = raw.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise error([f"{path}: cannot read {what}: {getattr(exc, 'strerror', None) or exc}"]) from None
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        if expanded_size(root) > MAX_NODES:  # aliases of aliases ("billion laughs") would never finish validating
            raise error([f"{path}:1: {what} too large: its aliases expand to more than {MAX_NODES:,} values"])
        duplicates = duplicate_keys(root)
        if duplicates:
            raise error([f"{path}:{d.problem_mark.line + 1}: invalid YAML: {d.problem}" for d in duplicates])
        data = _construct(root)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        line = mark.line + 1 if mark is not None else 1
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise error([f"{path}:{line}: invalid YAML: {problem}"]) from None
    except RecursionError:  # nesting deeper than the parser's stack
        raise error([f"{path}:1: invalid YAML: nested too deeply"]) from None
    return data, root
