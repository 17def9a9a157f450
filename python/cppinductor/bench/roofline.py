"""--roofline: each workload's step explained under cppinductor with
run=True (cppinductor/roofline.py), its roofline table printed and every
placed kernel charted against the machine's roofs."""

from __future__ import annotations

import dataclasses
from typing import Dict, List

from .. import roofline
from ..report import ExplainReport, explain
from .runner import BenchConfig
from .workloads import sizes_for


def explain_workloads(config: BenchConfig, repeat: int = 10) -> Dict[str, ExplainReport]:
    """{workload name: its explain report with kernels placed}, in table order."""
    import torch

    if config.threads:
        torch.set_num_threads(config.threads)
    sizes = dataclasses.replace(sizes_for(config.device, config.size), model_batch=config.batch)
    options = {"cpu_isa": config.cpu_isa} if config.cpu_isa else None
    reports = {}
    for workload in config.workloads:
        case = workload.build(sizes, config.device, config.dtype)
        step = case.make_step(lambda fn: fn)  # explain compiles the whole step
        reports[workload.name] = explain(step, mode=config.mode, options=options, run=True, repeat=repeat)()
    return reports


def format_reports(reports: Dict[str, ExplainReport]) -> str:
    lines: List[str] = []
    for name, report in reports.items():
        lines.append(f"{name}: {report.graph_count} graph(s), {report.graph_break_count} break(s)")
        lines.extend(roofline.format_table(report.graphs, report.roofs))
        lines.append("")
    return "\n".join(lines)


def write_roofline(config: BenchConfig, path: str) -> str:
    """Explains the workloads, charts them into `path` and returns the tables."""
    reports = explain_workloads(config)
    roofline.plot(reports, path, title=f"cppinductor kernels on the roofline ({config.device}, "
                                       f"{', '.join(reports)})")
    return format_reports(reports)
