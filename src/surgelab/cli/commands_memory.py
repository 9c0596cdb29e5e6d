"""``surgelab memory``: how many sequences fit in GPU memory, at each precision."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.table import Table

from surgelab.cli import app
from surgelab.cli.common import fail


def _model(name: str, params: float | None, layers: int | None, kv_heads: int | None, head_dim: int | None):
    from surgelab.engine import Architecture, ArchitectureError, find_model

    shape = (params, layers, kv_heads, head_dim)
    try:
        if any(v is not None for v in shape):
            if any(v is None for v in shape):
                raise fail("a custom model needs all of --params, --layers, --kv-heads and --head-dim")
            return Architecture.dense(name, params, layers, kv_heads, head_dim)  # type: ignore[arg-type]
        return find_model(name)
    except ArchitectureError as exc:
        raise fail(f"--model: {exc}; or give --params/--layers/--kv-heads/--head-dim") from None


@app.command("memory")
def memory(
    model: str = typer.Option(
        "llama3-8b", "--model",
        help="A catalogued model (Hugging Face id or alias, e.g. Qwen/Qwen2.5-7B-Instruct, mixtral-8x7b), a config.json "
        "(file or folder), or a name for --params…",
    ),
    gpu: str = typer.Option("h100", "--gpu", help="A GPU: h100, h200, a100, l40s, b200, mi300x, a10."),
    gpus: int = typer.Option(1, "--gpus", min=1, help="GPUs the model is split over (tensor parallel)."),
    context: int = typer.Option(4096, "--context", min=1, help="Tokens a sequence holds: prompt plus output."),
    weights: str | None = typer.Option(
        None, "--weights", help="One precision for the weights (fp16, fp8, int8, int4); default: compare several."
    ),
    kv: str | None = typer.Option(None, "--kv", help="The KV cache's precision (default: the weights')."),
    gpu_memory: float | None = typer.Option(None, "--gpu-memory", help="GB per GPU, to override the data sheet."),
    utilization: float = typer.Option(
        0.9,
        "--utilization",
        min=0.05,
        max=1.0,
        help="Share of GPU memory the engine may use (vLLM's gpu_memory_utilization).",
    ),
    params: float | None = typer.Option(None, "--params", help="Custom model: parameter count, e.g. 8e9."),
    layers: int | None = typer.Option(None, "--layers", help="Custom model: transformer layers."),
    kv_heads: int | None = typer.Option(
        None, "--kv-heads", help="Custom model: KV heads (after grouped-query attention)."
    ),
    head_dim: int | None = typer.Option(None, "--head-dim", help="Custom model: dimension of one head."),
    mem_per_request: float | None = typer.Option(
        None, "--mem-per-request", help="GB one request holds: also print seed 002's gpu_mem ÷ mem_per_req."
    ),
) -> None:
    """Sequences that fit beside the weights, and the decode speed when full — FP16 against FP8 and INT4."""
    from dataclasses import replace

    from surgelab.engine.accuracy import nearest_error
    from surgelab.engine.hardware import GB, GPUS, Deployment
    from surgelab.plan.memory import WHAT_IF, naive_concurrency, what_if

    if gpu not in GPUS:
        raise fail(f"unknown GPU {gpu!r}: use one of {', '.join(GPUS)}")
    card = GPUS[gpu] if gpu_memory is None else replace(GPUS[gpu], memory_bytes=gpu_memory * GB)
    spec = _model(model, params, layers, kv_heads, head_dim)
    pairs = WHAT_IF if weights is None else ((weights, kv or weights),)
    try:
        fits = what_if(spec, card, gpus, context, pairs, gpu_memory_utilization=utilization)
    except ValueError as exc:
        raise fail(str(exc)) from None

    console = Console()
    title = f"{spec.name} on {gpus} × {card.name} ({card.memory_bytes / GB:.1f} GB), {context:,}-token sequences"
    table = Table(title=title, padding=(0, 1), box=None, header_style="bold")
    for header in ("weights", "KV", "weights GB", "KV KiB/tok", "KV tokens", "sequences", "step ms", "tok/s full"):
        table.add_column(header, justify="right")
    for f in fits:
        table.add_row(
            f.weights, f.kv, f"{f.weight_bytes / GB:.1f}", f"{f.kv_bytes_per_token / 1024:g}", f"{f.kv_tokens:,}",
            f"{f.sequences:,}" if f.fits else "[red]0[/]",
            f"{f.decode_step_s * 1e3:.1f}" if f.decode_step_s else "—",
            f"{f.decode_tokens_per_s:,.0f}" if f.decode_tokens_per_s else "—",
        )  # fmt: skip
    console.print(table)
    for f in fits:
        if not f.fits:
            why = (
                "the weights alone do not fit"
                if f.kv_tokens == 0
                else f"{f.kv_tokens:,} KV tokens hold less than one sequence"
            )
            console.print(f"[red]{f.weights} weights, {f.kv} KV: {why}[/]")
    reserve = Deployment(spec, card, tp=gpus).eff.reserve_bytes / GB
    console.print(
        f"usable = {gpus} × ({card.memory_bytes / GB:.1f} GB × {utilization:g} − {reserve:.2f} GB reserve) − weights; "
        "quantised weights keep the embeddings and head in 16 bits; sequences count whole KV blocks of 16 tokens. "
        "The engine's own limit (max_num_seqs) may be lower."
    )
    bar = nearest_error(card.name, spec.is_moe)
    console.print(f"step ms and tok/s are the engine model's: {bar.describe(('itl_generated', 'e2e_mean'))}", highlight=False)
    if mem_per_request is not None:
        naive = naive_concurrency(card.memory_bytes * gpus, mem_per_request * GB)
        console.print(
            f"seed 002's gpu_mem ÷ mem_per_req = {card.memory_bytes * gpus / GB:g} ÷ {mem_per_request:g} = [bold]{naive:,}[/] "
            "(it leaves out the weights, the engine's reserve and block rounding)"
        )
