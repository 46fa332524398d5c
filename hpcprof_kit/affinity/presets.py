"""Binding plans by name: the presets of each system (the ``[bindings.NAME]`` tables of its
record, ``hpcprof_kit/systems/<system>.toml``), the generator that derives a good plan from the
node, and any list a user writes.

>>> from hpcprof_kit.affinity import plan_for
>>> plan_for("aurora", 12).cpu_bind
'--cpu-bind list:4-7:8-11:12-15:16-19:20-23:24-27:56-59:60-63:64-67:68-71:72-75:76-79'
>>> [f.kind for f in plan_for("aurora", 12, "outdated-core0").findings]
['reserved', 'reserved']
>>> plan_for("aurora", 12, "auto").findings
()
"""

from __future__ import annotations

import copy
from typing import Any

from hpcprof_kit.affinity.checks import Finding, check_ranks
from hpcprof_kit.affinity.cpulist import ParsedBind, format_cpus, parse_cpu_bind
from hpcprof_kit.affinity.plan import BindingPlan, RankBinding
from hpcprof_kit.affinity.topology import NodeTopology, node_topology
from hpcprof_kit.errors import BindingError
from hpcprof_kit.systems import System, load_system

GENERATED = ("auto", "generated")
# Backends whose communication library runs progress threads that want cores of their own.
_CCL_BACKENDS = ("xccl", "ccl")


def load_presets(system: str | System) -> dict[str, dict[str, Any]]:
    """The presets of a system: the ``[bindings.NAME]`` tables of its record (empty when it
    has none), wherever the record lives (the kit's or ``$HPCPROF_SYSTEMS_DIR``)."""
    record = load_system(system) if isinstance(system, str) else system
    return copy.deepcopy(record.extra.get("bindings", {}))


def preset_table(system: str | System) -> list[dict[str, Any]]:
    """One row per preset: name, documented ranks per node, title, known problems, origin.

    >>> [row["name"] for row in preset_table("polaris")]
    ['numa-correct', 'common-mistake', 'alcf-helper', 'none', 'auto']
    """
    rows = []
    for name, p in load_presets(system).items():
        counts = [lst["ranks"] for lst in p.get("lists", [])] or list(p.get("ranks", []))
        rows.append(
            {
                "name": name,
                "ranks_per_node": counts,
                "title": p.get("title", ""),
                "known_problems": list(p.get("known_problems", [])),
                "origin": p.get("origin", ""),
            }
        )
    rows.append(
        {
            "name": "auto",
            "ranks_per_node": [],
            "title": "generated from the node: free cores near each rank's device, whole cores",
            "known_problems": [],
            "origin": "hpcprof_kit.affinity.generate_plan",
        }
    )
    return rows


def plan_for(
    system: str | System,
    ranks_per_node: int | None = None,
    preset: str | None = None,
    *,
    dataloader_workers: int = 0,
) -> BindingPlan:
    """The binding plan for ``ranks_per_node`` ranks on one node of ``system``.

    ``preset``: None (the system's ``default_binding``), a preset name (``bind presets``),
    ``"auto"`` (generated from the node), or a binding string (``list:4-7:8-11``,
    ``user:1,0``, ``depth:8``, ``map_cpu:1,0``...). ``ranks_per_node`` may be left out when
    the binding lists its ranks. Findings are computed here and travel with the plan.

    >>> plan_for("local", 2, "user:1,0").launcher_args("hydra")
    ['-bind-to', 'user:1,0']
    """
    record = load_system(system) if isinstance(system, str) else system
    node = node_topology(record)
    name = preset or record.default_binding
    _check_ranks_value(ranks_per_node)
    presets = load_presets(record)
    if name in GENERATED:
        if ranks_per_node is None:
            raise BindingError(
                f"preset {name!r}: the generator needs --ranks-per-node (how many ranks to place)"
            )
        return generate_plan(record, node, ranks_per_node, dataloader_workers=dataloader_workers)
    if name in presets:
        p = presets[name]
        parsed, ranks, ccl, env = _pick_list(record.name, name, p, ranks_per_node)
        return _build(record, node, name, parsed, ranks, p.get("device", "local_rank"), ccl, env,
                      dataloader_workers, p.get("title", ""))  # fmt: skip
    try:
        parsed = parse_cpu_bind(name)
    except BindingError as exc:
        known = ", ".join([*presets, "auto"])
        raise BindingError(
            f"preset {name!r} is neither a preset of {record.name} (known: {known}) nor a "
            f"binding list ({exc})"
        ) from None
    ranks = _ranks_of(parsed, ranks_per_node, name)
    return _build(record, node, "custom", parsed, ranks, "local_rank", (), {},
                  dataloader_workers, "a binding written by hand")  # fmt: skip


def _check_ranks_value(ranks_per_node: int | None) -> None:
    if ranks_per_node is not None and (not isinstance(ranks_per_node, int) or ranks_per_node < 1):
        raise BindingError(
            f"ranks_per_node {ranks_per_node!r} must be a whole number of at least 1"
        )


def _ranks_of(parsed: ParsedBind, ranks_per_node: int | None, text: str) -> int:
    if parsed.style == "list":
        if ranks_per_node is not None and ranks_per_node != len(parsed.cpus):
            raise BindingError(
                f"cpu-bind {text!r} lists {len(parsed.cpus)} ranks but ranks_per_node is "
                f"{ranks_per_node}; give one entry per rank"
            )
        return len(parsed.cpus)
    if ranks_per_node is None:
        raise BindingError(
            f"cpu-bind {text!r} is a rule, not a list: pass ranks_per_node (--ranks-per-node)"
        )
    return ranks_per_node


def _pick_list(system: str, name: str, p: dict[str, Any], ranks_per_node: int | None):
    """The preset's list for this rank count: exact, else a prefix of its longest list."""
    lists = sorted(p.get("lists", []), key=lambda lst: -lst["ranks"])
    if not lists:
        parsed = parse_cpu_bind(p["cpu_bind"])
        default = (p.get("ranks") or [None])[0]
        return parsed, _ranks_of(parsed, ranks_per_node or default, name), (), {}
    want = ranks_per_node or lists[0]["ranks"]
    exact = [lst for lst in lists if lst["ranks"] == want]
    chosen = exact[0] if exact else lists[0]
    if want > chosen["ranks"]:
        counts = ", ".join(str(lst["ranks"]) for lst in lists)
        raise BindingError(
            f"preset {name!r} of {system} has lists for {counts} ranks per node; "
            f"{want} is more than its limit of {lists[0]['ranks']}: use preset 'auto' or "
            "write a list of your own"
        )
    parsed = parse_cpu_bind(chosen["cpu_bind"])
    # Order matters (worker i serves rank i), so the CCL list is split, not sorted.
    workers = tuple(int(c) for c in chosen.get("ccl_workers", "").split(",") if c.strip())
    # A shorter run takes the first entries: the documented 2- and 1-rank lists are prefixes.
    env = dict(chosen.get("env", {})) if exact else {}
    return ParsedBind("list", parsed.cpus[:want], text=parsed.text), want, workers[:want], env


def _rule_cpus(node: NodeTopology, parsed: ParsedBind, ranks: int) -> tuple[tuple[int, ...], ...]:
    """Expand a rule (none, core, reversed, depth) into per-rank CPUs on this node."""
    cores = node.cores
    if parsed.style == "none":
        return tuple(node.cpu_ids for _ in range(ranks))
    if parsed.style == "core":
        return tuple(cores[i % len(cores)] for i in range(ranks))
    if parsed.style == "reversed":
        if ranks > len(cores):
            raise BindingError(
                f"preset 'reversed': {ranks} ranks is more than the node's limit of "
                f"{len(cores)} cores; use fewer ranks or 'core'"
            )
        return tuple(cores[len(cores) - 1 - i] for i in range(ranks))
    return _depth_cpus(node, parsed.depth or 1, ranks)


def _depth_cpus(node: NodeTopology, depth: int, ranks: int) -> tuple[tuple[int, ...], ...]:
    """PALS ``--cpu-bind depth``: walk the logical CPUs in order, skipping reserved ones, and
    give each rank the next ``depth`` of them (so Aurora's rank 0 starts at CPU 1).

    ALCF's own output (docs.alcf.anl.gov/aurora/running-jobs-aurora, Example 4) shows
    ``--depth=8`` with 12 ranks placing rank 0 on 1-8 and rank 6 on 49-51,53-57.

    >>> from hpcprof_kit.affinity.topology import node_topology
    >>> [format_cpus(c) for c in _depth_cpus(node_topology("aurora"), 8, 7)[5:]]
    ['41-48', '49-51,53-57']
    """
    usable = [c for c in node.cpu_ids if c not in node.reserved]
    if ranks * depth > len(usable):
        skipped = len(node.cpu_ids) - len(usable)
        of = f"{len(usable)} CPUs" + (
            f" ({len(node.cpu_ids)} less {skipped} reserved)" if skipped else ""
        )
        raise BindingError(
            f"depth {depth} x {ranks} ranks needs {ranks * depth} CPUs, beyond the node's limit "
            f"of {of}; lower --depth or the ranks per node"
        )
    return tuple(tuple(usable[i * depth : (i + 1) * depth]) for i in range(ranks))


def _devices(record: System, node: NodeTopology, mode: str, ranks: int) -> list[RankBinding]:
    """Device of each local rank: (node device id, index it selects, masked?)."""
    if not node.devices:
        return [RankBinding(i, ()) for i in range(ranks)]
    if mode == "gpu":
        slots = [
            min(d.id for d in node.devices if d.gpu == g)
            for g in sorted({d.gpu for d in node.devices})
        ]
        what = "GPUs"
    else:
        slots = [d.id for d in node.devices]
        what = "devices"
    if ranks > len(slots):
        raise BindingError(
            f"ranks_per_node {ranks} is more than the {len(slots)} {what} of a {record.name} "
            f"node (the limit); use at most {len(slots)} ranks per node"
        )
    if mode == "reversed":
        return [
            RankBinding(i, (), slots[len(slots) - 1 - i], len(slots) - 1 - i, True)
            for i in range(ranks)
        ]
    return [RankBinding(i, (), slots[i], i) for i in range(ranks)]


def _build(record, node, name, parsed, ranks, mode, ccl, env, workers, title) -> BindingPlan:
    cpus = parsed.cpus if parsed.style == "list" else _rule_cpus(node, parsed, ranks)
    last = max(node.cpu_ids)
    for i, rank_cpus in enumerate(cpus):
        if not rank_cpus:
            raise BindingError(
                f"binding {parsed.text or name!r}: rank {i} has no CPUs; give it at least one"
            )
        if max(rank_cpus) > last or min(rank_cpus) < 0:
            raise BindingError(
                f"binding {parsed.text or name!r}: rank {i}'s CPUs {format_cpus(rank_cpus)} reach beyond the "
                f"{node.name} node, whose last CPU is {last} (the limit); keep to 0-{last}"
            )
        for c in rank_cpus:
            node.cpu(c)  # a gap in the node's numbering is named here
    bindings = tuple(
        RankBinding(r.rank, tuple(cpus[r.rank]), r.device, r.index, r.masked)
        for r in _devices(record, node, mode, ranks)
    )
    if parsed.style == "none":
        findings = tuple(
            Finding(r.rank, "unbound", "info", f"rank {r.rank} is not bound: the OS may run it "
                    "on any CPU and move it mid-step; bind ranks to measure them steadily")
            for r in bindings
        )  # fmt: skip
    else:
        findings = tuple(check_ranks(node, bindings, ccl_workers=ccl, dataloader_workers=workers))
    return BindingPlan(
        system=record.name,
        ranks_per_node=ranks,
        preset=name,
        style=parsed.style,
        ranks=bindings,
        node=node,
        launcher=record.launcher,
        depth=parsed.depth,
        ccl_workers=tuple(ccl),
        mask_var=record.topology.device_mask_var,
        extra_env=env,
        findings=findings,
        title=title,
    )


def generate_plan(
    system: str | System,
    node: NodeTopology | None = None,
    ranks_per_node: int = 1,
    *,
    dataloader_workers: int = 0,
) -> BindingPlan:
    """Derive a good plan: each rank gets whole free cores (with their hyperthreads) in its
    device's NUMA domain, no core shared, reserved cores avoided, one CCL worker core per rank
    at the end of the domain when the backend is oneCCL.

    >>> generate_plan("polaris", ranks_per_node=4).launcher_args("pals")
    ['--cpu-bind', 'list:24-31,56-63:16-23,48-55:8-15,40-47:0-7,32-39']
    """
    record = load_system(system) if isinstance(system, str) else system
    node = node or node_topology(record)
    _check_ranks_value(ranks_per_node)
    bindings = _devices(record, node, "local_rank", ranks_per_node)
    free = [core for core in node.cores if not set(core) & node.reserved]
    # Ranks without a device (CPU nodes) spread over the whole node in core order.
    groups: dict[int | None, list[int]] = {}
    for b in bindings:
        key = None if b.device is None else next(d.numa for d in node.devices if d.id == b.device)
        groups.setdefault(key, []).append(b.rank)
    want_ccl = record.backend in _CCL_BACKENDS
    cpus: dict[int, tuple[int, ...]] = {}
    ccl: dict[int, int] = {}
    for numa, members in groups.items():
        pool = free if numa is None else [c for c in free if node.numa_of(c[0]) == numa]
        usable = pool[: len(pool) - len(members)] if want_ccl else pool
        per = len(usable) // len(members)
        if per < 1:
            raise BindingError(
                f"generate: {len(members)} ranks need at least {len(members) * (2 if want_ccl else 1)} "
                f"free cores in NUMA domain {numa}, beyond its limit of {len(pool)}; "
                "use fewer ranks per node"
            )
        for j, rank in enumerate(members):
            block = usable[j * per : (j + 1) * per]
            cpus[rank] = tuple(sorted(c for core in block for c in core))
            if want_ccl:
                ccl[rank] = pool[len(pool) - len(members) + j][0]
    parsed = ParsedBind("list", tuple(cpus[b.rank] for b in bindings), text="auto")
    workers = tuple(ccl[b.rank] for b in bindings) if want_ccl else ()
    return _build(record, node, "auto", parsed, ranks_per_node, "local_rank", workers, {},
                  dataloader_workers, "generated from the node")  # fmt: skip
