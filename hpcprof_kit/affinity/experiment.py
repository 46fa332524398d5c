"""The binding experiment: the same training job under several plans, through the jobs layer,
then what each rank got and how fast it stepped, side by side.

The experiment is one sweep of the jobs layer over the spec's ``binding`` field
(:func:`experiment_spec`, then ``spec.sweep(binding=plans)``): each variant runs the affinity
report and then the training app under one launcher binding, so the report describes exactly
the processes that were timed. Locally the variants run one after another: two jobs sharing
the cores at once would spoil both measurements. A plan whose job fails does not stop the
others: it is named with its state and last lines, its run directory is kept, and
:meth:`Experiment.rerun` runs only the failed plans again, in new run directories.

With ``profile=True`` (the default) each job also records a torch.profiler trace per rank of
its last steps (the guide's "profile the application with various bindings"), and
:meth:`Experiment.profiles` compares them; the median step of ``side_by_side`` then leaves the
profiled steps out.

>>> spec = experiment_spec("local", 2, steps_per_epoch=6)
>>> [v.label for v in spec.sweep(binding=["core", "none"]).variants]
['binding=core', 'binding=none']
>>> sweep = spec.sweep(binding=["core", "none", "reversed"]).run()  # doctest: +SKIP
>>> exp = Experiment.from_sweep(sweep)                              # doctest: +SKIP
>>> exp = run_experiment("local", 2, ["core", "none", "reversed"])  # doctest: +SKIP
>>> exp.side_by_side()                                             # doctest: +SKIP
>>> exp.profiles()                                                 # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hpcprof_kit.affinity.plan import BindingPlan
from hpcprof_kit.affinity.presets import plan_for
from hpcprof_kit.affinity.report import compare, parse_report
from hpcprof_kit.errors import BindingError

# Report first, then train: both under the binding the launcher applied to this rank.
_COMMAND = (
    "sh",
    "-c",
    'python3 -m hpcprof_kit.apps.affinity_report && exec python3 -m hpcprof_kit.apps.train "$@"',
    "sh",
)
TRAIN_WARMUP = 1  # the train app's --warmup default: step 0 is never timed
# What a failed plan's message ends with: the way back.
_RERUN = (
    "exp.rerun() runs only the failed plan(s) again, in new run directories "
    "(the failed run directories are kept)"
)
# The guide's schedule(wait=1, warmup=1, active=2, repeat=1), placed on the last steps.
PROFILE_SCHEDULE = {"wait": 1, "warmup": 1, "active": 2, "repeat": 1}


def profile_args(total_steps: int) -> tuple[list[str], int]:
    """The train app's profiler flags that record the last two of ``total_steps`` steps, and
    the first step the profiler is open for (it is not open before: no cost there).

    >>> flags, first = profile_args(6)
    >>> " ".join(flags), first
    ('--profile --prof-skip-first 2 --prof-wait 1 --prof-warmup 1 --prof-active 2 --prof-repeat 1', 3)
    """
    cycle = PROFILE_SCHEDULE["wait"] + PROFILE_SCHEDULE["warmup"] + PROFILE_SCHEDULE["active"]
    if total_steps < cycle:
        raise BindingError(
            f"profiling a plan needs at least {cycle} steps (wait 1, warmup 1, active 2); the "
            f"experiment runs {total_steps}: raise steps_per_epoch, or pass profile=False"
        )
    skip = total_steps - cycle
    flags = ["--profile", "--prof-skip-first", str(skip)]
    for key, value in PROFILE_SCHEDULE.items():
        flags += [f"--prof-{key}", str(value)]
    return flags, skip + PROFILE_SCHEDULE["wait"]


@dataclass
class Experiment:
    """The jobs of one experiment, by plan name, with their plans (and the sweep that ran them)."""

    plans: dict[str, BindingPlan]
    jobs: dict[str, object] = field(default_factory=dict)
    profiled_from: int | None = None  # first step each job ran under the profiler (None: never)
    failed: dict[str, str] = field(default_factory=dict)  # plan -> what its job ended as
    sweep: object | None = field(default=None, repr=False)  # the sweep over ``binding``
    timeout_s: float | None = None  # how long to wait for a scheduler's jobs

    @classmethod
    def from_sweep(cls, sweep, timeout_s: float | None = None) -> Experiment:
        """The experiment of a sweep of :func:`experiment_spec` over ``binding``: its plans,
        its jobs and which of them failed (a sweep that has not run yet is run first)."""
        base = sweep.base
        if "binding" not in sweep.grid:
            raise BindingError(
                f"the sweep varies {list(sweep.grid)}, not the binding; sweep the experiment's "
                "spec over its plans: experiment_spec(...).sweep(binding=plans)"
            )
        names = [v.values["binding"] for v in sweep.variants]
        exp = cls({name: plan_for(base.system, base.ranks_per_node, name) for name in names},
                  profiled_from=profiled_from(base.args), sweep=sweep, timeout_s=timeout_s)  # fmt: skip
        exp.check_plans()
        exp.run(names, again=sweep.path is None)
        return exp

    def check_plans(self) -> None:
        """BindingError for a plan the experiment cannot launch (a per-rank device mask)."""
        for name, plan in self.plans.items():
            if plan.needs_wrapper:
                raise BindingError(
                    f"plan {name!r} masks a different device per rank; the experiment launches "
                    "without a per-rank wrapper: pick a set_device(local_rank) plan"
                )

    def _job(self, name: str):
        """The completed job of plan ``name``; a failed plan is named with the way back."""
        if name in self.failed:
            raise BindingError(f"{self.failed[name]}\n{_RERUN}")
        return self.jobs[name]

    def run(self, names, again: bool = True) -> None:
        """Run the sweep's variants still to run (locally one after another; ``again=False``:
        run none, read what ran), then name each plan's job and the failed ones in ``failed``."""
        from hpcprof_kit.jobs import FINAL_STATES
        from hpcprof_kit.jobs.handle import Job

        if self.sweep is None:
            raise BindingError(
                "this experiment has no sweep to run: start it with run_experiment(...) or "
                "Experiment.from_sweep(experiment_spec(...).sweep(binding=plans))"
            )
        sweep = self.sweep
        if again:
            sweep.run(wait=False)  # locally each variant runs to its end, in turn
        states = sweep.wait(self.timeout_s)
        for entry in sweep.record()["variants"]:
            name = entry["values"]["binding"]
            if name not in names:
                continue
            self.failed.pop(name, None)
            if not entry.get("run_dir"):  # refused at submission: its note says why
                self.failed[name] = (f"the job of plan {name!r} was not submitted: "
                                     f"{entry.get('note', entry.get('state'))}")  # fmt: skip
                continue
            job = self.jobs[name] = Job.from_run_dir(sweep.path / entry["run_dir"])
            state = states.get(entry["index"], job.state)
            if state not in FINAL_STATES:  # still there: the next plan would share its cores
                raise BindingError(
                    f"the job of plan {name!r} is still {state} after the experiment's timeout_s; "
                    f"wait for it (exp.jobs[{name!r}].wait()) or cancel it, then raise timeout_s"
                )
            if state != "COMPLETED":
                self.failed[name] = (
                    f"the job of plan {name!r} ended {state} (exit {job.exit_code}), run "
                    f"directory {job.run_dir}; its last lines:\n{job.tail(10, 'stderr')}"
                )
        if self.failed and len(self.failed) == len(self.plans):
            raise BindingError("\n".join(self.failed.values()))
        for name in names:
            if name in self.failed:
                print(f"{self.failed[name]}\n{_RERUN}")

    def rerun(self) -> list[str]:
        """Run the failed plans again (new run directories); the plans that re-ran."""
        if self.sweep is None:
            raise BindingError(
                "this experiment was not started by run_experiment: nothing to rerun"
            )
        again = list(self.failed)
        self.run(again)
        return again

    def report(self, name: str):
        """What the ranks of plan ``name`` got (the parsed affinity report)."""
        job = self._job(name)
        return parse_report((job.run_dir / "stdout").read_text())

    def comparison(self, name: str):
        """Plan ``name`` against what its ranks got, one verdict per rank."""
        return compare(self.plans[name], self.report(name))

    def step_times(self, name: str):
        """Median training step per rank (ms) of plan ``name``'s job, leaving the profiled steps
        out (all steps count when every timed step was profiled: a run of 4 steps or fewer)."""
        steps = self._quiet_steps(name)
        return steps.groupby("rank")["seconds"].median().mul(1e3).rename("median_step_ms")

    def step_samples(self, name: str) -> list[float]:
        """Each timed step of plan ``name``'s job (ms), as long as its slowest rank took (DDP
        makes the others wait), profiled steps left out as in :meth:`step_times`: the samples
        that :func:`hpcprof_kit.comparison.compare_variants` compares across plans."""
        steps = self._quiet_steps(name)
        return (steps.groupby("iteration")["seconds"].max() * 1e3).tolist()

    def _quiet_steps(self, name: str):
        """The timed steps of plan ``name``'s job, one row per rank and step, without the
        profiled ones (all of them when every timed step was profiled)."""
        from hpcprof_kit.timing import load_timings

        t = load_timings(self._job(name).run_dir)
        steps = t[t["op"] == "step"]
        if self.profiled_from is not None:  # iteration i is step TRAIN_WARMUP + i
            quiet = steps[steps["iteration"] + TRAIN_WARMUP < self.profiled_from]
            steps = quiet if len(quiet) else steps
        return steps

    def profiles(self, n: int = 5):
        """Each plan's profiled steps: step time and its top ``n`` ops, one row per plan
        (:func:`hpcprof_kit.affinity.profiles.compare_profiles`)."""
        from hpcprof_kit.affinity.profiles import compare_profiles

        if self.profiled_from is None:
            raise BindingError("this experiment ran without profile=True: no traces to compare")
        return compare_profiles({name: self._job(name).run_dir for name in self.jobs}, n)

    def side_by_side(self):
        """One row per plan and rank: planned and got CPUs, verdict, median step (ms)."""
        import pandas as pd

        frames = []
        for name in self.plans:
            table = self.comparison(name).merge(
                self.step_times(name).reset_index(), on="rank", how="left"
            )
            frames.append(table.assign(plan=name))
        cols = ["plan", "rank", "planned", "got", "verdict", "median_step_ms"]
        return pd.concat(frames, ignore_index=True)[cols].round({"median_step_ms": 2})


def profiled_from(args) -> int | None:
    """The first step the profiler is open for, read from the train app's flags of
    :func:`profile_args` (None: the job does not profile).

    >>> profiled_from(profile_args(6)[0]), profiled_from(["--epochs", "1"])
    (3, None)
    """
    args = list(args)
    if "--profile" not in args or "--prof-skip-first" not in args:
        return None
    return int(args[args.index("--prof-skip-first") + 1]) + PROFILE_SCHEDULE["wait"]


def experiment_spec(
    system: str = "local",
    ranks_per_node: int = 2,
    *,
    epochs: int = 1,
    steps_per_epoch: int = 6,
    profile: bool = True,
    **spec_fields,
):
    """The experiment's job: the affinity report, then the train app, on every rank
    (``epochs`` x ``steps_per_epoch`` steps, the last ones profiled with ``profile``), the
    binding left to the sweep: ``experiment_spec(...).sweep(binding=plans)``.
    ``spec_fields`` go to :class:`hpcprof_kit.jobs.JobSpec` (account, queue, walltime...).

    >>> spec = experiment_spec("local", 2, steps_per_epoch=4, profile=False)
    >>> spec.name, spec.args
    ('bind', ('--epochs', '1', '--steps-per-epoch', '4'))
    """
    from hpcprof_kit.jobs import JobSpec

    train_args = ["--epochs", str(epochs), "--steps-per-epoch", str(steps_per_epoch)]
    if profile:
        train_args += profile_args(epochs * steps_per_epoch)[0]
    return JobSpec.for_workshop(system=system, example="train", command=_COMMAND,
                                args=tuple(train_args), ranks_per_node=ranks_per_node,
                                name="bind", **spec_fields)  # fmt: skip


def run_experiment(
    system: str = "local",
    ranks_per_node: int = 2,
    plans: list[str] | tuple[str, ...] = ("core", "none", "reversed"),
    *,
    epochs: int = 1,
    steps_per_epoch: int = 6,
    timeout_s: float = 300.0,
    progress: bool = False,
    profile: bool = True,
    **spec_fields,
) -> Experiment:
    """The shortcut: one sweep of :func:`experiment_spec` over the ``plans``, run (locally one
    plan after another) and read as an :class:`Experiment`.

    A failed job does not stop the others; it is named (``exp.failed``) and ``exp.rerun()``
    runs only it again. Only when every plan failed is it an error. ``timeout_s``: how long to
    wait for a scheduler's jobs (a local variant runs to its end before the next starts);
    ``progress`` is kept for callers of the one-job-per-plan experiment and shows nothing.

    ``profile``: also record a torch.profiler trace per rank of the last steps of each job
    (:func:`profile_args`). ``spec_fields`` go to :class:`hpcprof_kit.jobs.JobSpec` (account,
    queue, walltime...), so the same call runs on Aurora or Polaris with their plans.
    """
    del progress  # the sweep's variants run without a progress bar
    Experiment({name: plan_for(system, ranks_per_node, name) for name in plans}).check_plans()
    spec = experiment_spec(system, ranks_per_node, epochs=epochs,
                           steps_per_epoch=steps_per_epoch, profile=profile, **spec_fields)  # fmt: skip
    return Experiment.from_sweep(spec.sweep(binding=list(plans)), timeout_s=timeout_s)
