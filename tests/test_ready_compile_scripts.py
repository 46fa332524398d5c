"""The ATPESC hands-on's four scripts (DDP, DDP + profiler, compiled, compiled + profiler) are
ready in ``jobs/<system>/``: each compiled script is its eager twin with ``--compile`` added to the
app (and its own job name), and the local one runs for real under Hydra ``mpiexec``, both ranks'
traces holding torch.compile's regions."""

from __future__ import annotations

import pytest

from hpcprof_kit import traces
from hpcprof_kit.jobs import submit, wait_for
from hpcprof_kit.jobs.catalog import catalog, catalog_specs
from hpcprof_kit.systems import system_names
from hpcprof_kit.traces.view.names import COMPILED_REGION

TWINS = (("train", "train-compile"), ("train-profile", "train-compile-profile"))
APP = "python3 -m hpcprof_kit.apps.train"


@pytest.mark.parametrize("system", system_names())
@pytest.mark.parametrize(("eager", "compiled"), TWINS)
def test_each_compiled_script_is_its_eager_twin_with_compile_added(system, eager, compiled):
    scripts = catalog()
    before = scripts[f"{system}/{eager}.sh"].splitlines()
    after = scripts[f"{system}/{compiled}.sh"].splitlines()
    assert len(before) == len(after)
    changed = [(b, a) for b, a in zip(before, after, strict=True) if b != a]
    app = [(b, a) for b, a in changed if APP in b]
    assert len(app) == 1 and app[0][1] == app[0][0] + " --compile", changed
    for b, a in changed:
        if APP not in b:  # only the job's name, and the script's in its header, differ elsewhere
            twin = b.replace(f"hpcprof-{eager}", f"hpcprof-{compiled}")
            assert a == twin.replace(f"/{eager}.sh,", f"/{compiled}.sh,") != b, (b, a)


@pytest.mark.mpi
@pytest.mark.timeout(600)
def test_the_local_compiled_profile_script_traces_compiled_regions_on_both_ranks(isolated_runs):
    job = submit(catalog_specs()["local/train-compile-profile.sh"])
    assert wait_for(job, timeout=600, progress=False) == "COMPLETED", job.tail(40, "stderr")
    assert job.run_dir.joinpath("job.sh").read_text().count(f"{APP} --profile --compile") == 1
    stderr = job.run_dir.joinpath("stderr").read_text()  # rank 0 says what compile hides
    assert stderr.count("note: torch.compile is on: record_function ranges inside compiled") == 1
    paths = sorted(job.run_dir.joinpath("traces").glob("*-of-2.json"))
    assert [p.name for p in paths] == ["trace-0-of-2.json", "trace-1-of-2.json"]
    df = traces.load([str(p) for p in paths], cache=False, workers=1)
    regions = df[df["name"].astype(str).str.startswith(COMPILED_REGION)]
    assert sorted(regions["rank"].unique()) == [0, 1]
