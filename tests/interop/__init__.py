"""The interoperability matrix: surgelab's load client against third-party HTTP stacks (docs/compatibility.md)."""
