"""Binding ranks to cores and devices: the node, plans as values, their checks, their picture,
and what the ranks really got.

>>> from hpcprof_kit.affinity import plan_for
>>> plan = plan_for("polaris", 4, "common-mistake")
>>> plan.launcher_args("pals")
['--cpu-bind', 'list:0-1:8-9:16-17:24-25']
>>> sorted({f.kind for f in plan.findings})
['numa']
"""

from hpcprof_kit.affinity.checks import SEVERITY, Finding, check_ranks
from hpcprof_kit.affinity.cpulist import ParsedBind, format_cpus, parse_cpu_bind, parse_cpus
from hpcprof_kit.affinity.picture import draw_plan
from hpcprof_kit.affinity.plan import BindingPlan, RankBinding
from hpcprof_kit.affinity.presets import generate_plan, load_presets, plan_for, preset_table
from hpcprof_kit.affinity.report import compare, parse_report
from hpcprof_kit.affinity.topology import NodeTopology, node_topology, read_local

__all__ = [
    "SEVERITY", "BindingPlan", "Finding", "NodeTopology", "ParsedBind", "RankBinding",
    "check_ranks", "compare", "draw_plan", "format_cpus", "generate_plan", "load_presets", "node_topology",
    "parse_cpu_bind", "parse_cpus", "parse_report", "plan_for", "preset_table", "read_local",
]  # fmt: skip
