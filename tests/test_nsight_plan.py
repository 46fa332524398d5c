"""nsys -> ncu: the ncu job for a kernel of an nsys run, rendered through the job API."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from hpcprof_kit.cli import main
from hpcprof_kit.errors import KitWarning, SpecError
from hpcprof_kit.jobs import JobSpec
from hpcprof_kit.nsight.plan import SET_BY_WALLTIME, choose_set, kernel_filter, ncu_plan
from hpcprof_kit.tracers import unfiltered_ncu_warning, warn_unfiltered_ncu

FIXTURES = Path(__file__).parent / "fixtures" / "nsight"
KERN_2022 = FIXTURES / "documented_gpukernsum_2022.csv"
KERN_2024 = FIXTURES / "documented_cuda_gpu_kern_sum_2024.csv"
GEMM = "ampere_bf16_s16816gemm_bf16_128x256_ldg8_f2f_stages_64x3_tn"
FILL = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
    "at::detail::Array<char *, 1>>(int, at::native::FillFunctor<float>, at::detail::Array<char *, 1>)"
)
POLARIS = JobSpec(system="polaris", nodes=2, ranks_per_node=4, account="MYPROJ", tracer="nsys")


@pytest.mark.parametrize(
    ("walltime", "count", "expected"),
    [("00:10:00", 1, "basic"), ("00:19:59", 1, "basic"), ("00:20:00", 1, "detailed"),
     ("00:59:59", 1, "detailed"), ("01:00:00", 1, "full"), ("02:00:00", 3, "detailed")],
)  # fmt: skip
def test_set_follows_walltime_per_launch(walltime, count, expected):
    assert choose_set(walltime, count) == expected
    assert [name for _limit, name in SET_BY_WALLTIME] == ["basic", "detailed", "full"]


@pytest.mark.parametrize(
    ("name", "expected"),
    [(GEMM, GEMM), (FILL, "vectorized_elementwise_kernel"),
     ("ncclDevKernel_AllGather_RING_LL(ncclDevComm *, unsigned long, ncclWork *)",
      "ncclDevKernel_AllGather_RING_LL"), ("regex:gemm.*tn", "regex:gemm.*tn")],
)  # fmt: skip
def test_kernel_filter_is_what_ncu_k_matches(name, expected):
    assert kernel_filter(name) == expected


@pytest.mark.parametrize("stats", [KERN_2022, KERN_2024])
def test_plan_for_heaviest_kernel_renders_the_ncu_job(stats):
    plan = ncu_plan(stats, spec=POLARIS.with_(walltime="00:30:00"))
    assert plan.kernel == GEMM and plan.calls == 300  # 2022.4's two launch shapes merged
    assert plan.ncu_args() == ["--set", "detailed", "-k", GEMM, "--launch-skip", "20",
                               "--launch-count", "1"]  # fmt: skip
    script = plan.script()
    for line in (f"export NCU_KERNEL={GEMM}", "export NCU_SET=detailed",
                 "export NCU_LAUNCH_SKIP=20", "export NCU_LAUNCH_COUNT=1",
                 'if [[ -n "${NCU_LAUNCH_SKIP:-}" ]]; then ncu_args+=(--launch-skip "$NCU_LAUNCH_SKIP"); fi',
                 "#PBS -l walltime=00:30:00"):  # fmt: skip
        assert line in script.splitlines()
    assert plan.spec.tracer == "ncu" and "traces rank 0;" in script


def test_plan_for_a_named_kernel_on_another_rank():
    plan = ncu_plan(KERN_2024, kernel="vectorized_elementwise_kernel", rank=5, spec=POLARIS)
    assert plan.kernel == FILL and plan.filter == "vectorized_elementwise_kernel"
    assert (plan.launch_skip, plan.ncu_set) == (20, "basic")  # 400 launches; 10 min walltime
    assert (plan.spec.profrank, plan.spec.rankcutoff) == (1, 6)
    assert "# This job (8 ranks, 4 per node) traces ranks 1, 5." in plan.script()


def test_kernel_not_in_stats_names_the_ones_that_are():
    with pytest.raises(SpecError) as err:
        ncu_plan(KERN_2024, kernel="ampere_sgemm_128x128_tn", spec=POLARIS)
    message = str(err.value)
    assert message.startswith("kernel 'ampere_sgemm_128x128_tn' is not in the nsys summary")
    assert f"its heaviest kernels are: {GEMM}; ncclDevKernel_AllGather_RING_LL(" in message


def test_few_launches_skip_less_and_a_big_set_warns():
    import pandas as pd

    kernels = pd.DataFrame({"name": ["k"], "calls": [3], "total_ns": [10]})
    with pytest.warns(
        KitWarning, match="--set full on 2 launch\\(es\\) may outlive walltime 00:10:00"
    ):
        plan = ncu_plan(kernels, spec=POLARIS, ncu_set="full", launch_count=2)
    assert plan.launch_skip == 0


def test_plan_needs_the_job_it_profiles():
    with pytest.raises(SpecError, match="the ncu job needs the job it profiles"):
        ncu_plan(KERN_2024)


def test_unfiltered_ncu_job_warns_filtered_does_not():
    bare = POLARIS.with_(tracer="ncu")
    with pytest.warns(KitWarning, match="ncu job with no kernel filter: NCU_KERNEL is unset"):
        assert warn_unfiltered_ncu(bare)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert warn_unfiltered_ncu(ncu_plan(KERN_2024, spec=POLARIS).spec) is None
        assert unfiltered_ncu_warning("nsys", {}) is None


def test_cli_prints_kernels_then_the_script(tmp_path, capsys):
    (tmp_path / "spec.json").write_text(POLARIS.to_json())
    rc = main(["ncu-plan", str(tmp_path), "--stats", str(KERN_2024), "--kernel", GEMM,
               "--walltime", "01:00:00"])  # fmt: skip
    out = capsys.readouterr().out.splitlines()
    assert rc == 0
    assert out[0].startswith(f"# ncu on rank 0: kernel '{GEMM}' (300 launches in the nsys run)")
    assert out[0].endswith(
        "--set full -k " + GEMM + " --launch-skip 20 --launch-count 1 within walltime 01:00:00"
    )
    assert out[2] == f"#      140.000 ms      300x  {GEMM}"
    assert out[5] == "#!/bin/bash -l"


def test_cli_unknown_kernel_is_one_line(tmp_path, capsys):
    (tmp_path / "spec.json").write_text(POLARIS.to_json())
    rc = main(["ncu-plan", str(tmp_path), "--stats", str(KERN_2024), "--kernel", "nope"])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith(
        "hpcprof-kit ncu-plan: kernel 'nope' is not in the nsys summary"
    )
