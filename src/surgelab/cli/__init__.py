"""The ``surgelab`` command line: builds typed objects from flags and hands them to the library.

Each command group lives in its own module and registers itself on ``app``; nothing in the
library imports from here.
"""

from __future__ import annotations

import typer

app = typer.Typer(
    name="surgelab",
    help="Load-test AI inference services honestly and plan their capacity.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        from surgelab import __version__

        typer.echo(f"surgelab {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", "-V", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Load-test AI inference services honestly and plan their capacity."""


# Command modules register themselves on import; one line each.
from surgelab.cli import commands_demo  # noqa: E402,F401,I001
from surgelab.cli import commands_memory  # noqa: E402,F401,I001
from surgelab.cli import commands_plan  # noqa: E402,F401,I001
from surgelab.cli import commands_providers  # noqa: E402,F401,I001
from surgelab.cli import commands_proxy  # noqa: E402,F401,I001
from surgelab.cli import commands_report  # noqa: E402,F401,I001
from surgelab.cli import commands_run  # noqa: E402,F401,I001
from surgelab.cli import commands_serve  # noqa: E402,F401,I001
from surgelab.cli import commands_sweep  # noqa: E402,F401,I001
from surgelab.cli import commands_simulate  # noqa: E402,F401,I001
from surgelab.cli import commands_telemetry  # noqa: E402,F401,I001
from surgelab.cli import commands_twin  # noqa: E402,F401,I001


def main() -> None:
    """The ``surgelab`` script: an OSError no command handled is still one line naming the file, never a traceback."""
    try:
        app()
    except BrokenPipeError:  # the output was piped into something that stopped reading (``| head``)
        raise SystemExit(1) from None
    except OSError as exc:
        from surgelab.cli.common import fail
        from surgelab.files import os_error_line

        raise SystemExit(fail(os_error_line(exc), 1).exit_code) from None
