"""Reading a YAML file the way every surgelab loader needs it: the data, the node tree (for
file:line errors), and one-line errors for unreadable, malformed or explosive files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

__all__ = ["read_yaml", "expanded_size", "MAX_NODES", "MAX_BYTES"]

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
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        line = mark.line + 1 if mark is not None else 1
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise error([f"{path}:{line}: invalid YAML: {problem}"]) from None
    except RecursionError:  # nesting deeper than the parser's stack
        raise error([f"{path}:1: invalid YAML: nested too deeply"]) from None
    return data, root
