"""--plot: speedup vs eager and compile time per workload, backends side by side."""

from __future__ import annotations

from typing import List, Optional, Sequence

from .row import Row

MISSING_MATPLOTLIB = "--plot needs matplotlib, which is not installed: pip install matplotlib"


def require_matplotlib() -> None:
    """Fail before the (long) run rather than after it."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise SystemExit(MISSING_MATPLOTLIB) from None


def _value(row: Optional[Row], name: str) -> float:
    value = getattr(row, name) if row is not None else None
    return float("nan") if value is None else value  # no bar rather than a zero bar


def write_plot(rows: Sequence[Row], path: str) -> None:
    require_matplotlib()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    workloads: List[str] = list(dict.fromkeys(r.workload for r in rows))
    backends = [b for b in dict.fromkeys(r.backend for r in rows) if b != "eager"]
    by_key = {(r.workload, r.backend): r for r in rows}
    width = 0.8 / max(len(backends), 1)
    fig, (ax_speed, ax_compile) = plt.subplots(2, 1, figsize=(max(8, 1.1 * len(workloads)), 8), sharex=True)
    for i, b in enumerate(backends):
        xs = [j + (i - (len(backends) - 1) / 2) * width for j in range(len(workloads))]
        rows_b = [by_key.get((w, b)) for w in workloads]
        ax_speed.bar(xs, [_value(r, 'speedup_vs_eager') for r in rows_b], width, label=b)
        ax_compile.bar(xs, [_value(r, 'compile_s_warm') for r in rows_b], width, label=b)
    first = rows[0] if rows else None
    title = f"{first.device}, {first.threads} threads, torch {first.torch_version}" if first else ""
    ax_speed.axhline(1.0, color="black", linewidth=0.8)
    ax_speed.set_ylabel("speedup vs eager")
    ax_speed.set_title(f"cppinductor bench ({title})")
    ax_speed.legend()
    ax_compile.set_ylabel("compile time, warm process (s)")
    ax_compile.set_yscale("log")
    ax_compile.set_xticks(range(len(workloads)))
    ax_compile.set_xticklabels(workloads, rotation=30, ha="right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
