"""Exports of a search: the best kernel as a standalone KernelBench file, and HTML/PNG reports.

Input is plain data (`TreeSnapshot`), never the search's own types; PNG needs the `report` extra.
"""

from adaexplore_mcp.export.kernel_file import KernelFileError, KernelMeta, standalone_kernel_file
from adaexplore_mcp.export.report_html import report_html
from adaexplore_mcp.export.report_png import MissingReportDependency, report_png
from adaexplore_mcp.export.snapshot import SnapshotNode, TreeSnapshot

__all__ = [
    "KernelFileError",
    "KernelMeta",
    "MissingReportDependency",
    "SnapshotNode",
    "TreeSnapshot",
    "report_html",
    "report_png",
    "standalone_kernel_file",
]
