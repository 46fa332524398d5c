"""A sweep's values reach each variant as the user typed them: the text of ``--vary``, or
the Python value's own text; never judged by its truth (``1`` once became ``--epochs`` with
no value, ``0`` dropped ``--seed``). Converted only where a declared type says so: a JobSpec
int or bool field, or a switch of the example's own parser. The property tests read each
variant's arguments back from its rendered script; the local tests run real Hydra ranks and
read what the programs got."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from hpcprof_kit.cli import main
from hpcprof_kit.errors import SpecError
from hpcprof_kit.jobs import JobSpec
from hpcprof_kit.jobs.sweep import Sweep, parse_vary

# A value the CLI can carry: any text without the comma that separates values.
CLI_WORD = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters=",\x00"), min_size=1
)
# The words a truth test once swallowed, numbers of every sign and shape.
TRICKY = ["0", "1", "-1", "true", "false", "on", "off", "no", "yes", "None", "0.0", "-0", "1e-3"]
PY_VALUE = st.one_of(
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")),
    st.sampled_from([0, 1, -1, 0.0, 1.0, "", " ", "0", "False"]),
)


def base() -> JobSpec:
    return JobSpec(system="local", example="train", ranks_per_node=1, binding="none")


def launched_args(spec: JobSpec) -> list[str]:
    """The words the rendered script hands the program, read back as bash would split them."""
    script = spec.render()
    module = "hpcprof_kit.apps.train"
    return shlex.split(script[script.rindex(module) + len(module) :])


def expect(flag_values: dict[str, str]) -> list[str]:
    return [w for flag, text in flag_values.items() for w in (flag, text)]


# Each example renders scripts: a loaded machine takes longer than hypothesis's 200 ms.
@settings(deadline=None)
@given(seeds=st.lists(st.sampled_from(TRICKY) | CLI_WORD, min_size=1, max_size=4),
       epochs=st.lists(CLI_WORD, min_size=1, max_size=3))  # fmt: skip
@example(seeds=["0", "1", "2"], epochs=["1", "2", "3"])
@example(seeds=["-1", "on"], epochs=["false", "0.5"])
def test_cli_values_reach_every_variant_exactly_as_typed(seeds, epochs):
    grid = parse_vary(["--seed=" + ",".join(seeds), "--epochs=" + ",".join(epochs)], base())
    assert grid == {"--seed": seeds, "--epochs": epochs}
    # through sweep.json and back, as --resume reads it
    sweep = Sweep(base(), json.loads(json.dumps(grid)))
    combos = [(s, e) for s in seeds for e in epochs]
    assert len(sweep.variants) == len(combos)
    for variant, (seed, epoch) in zip(sweep.variants, combos, strict=True):
        assert variant.spec.args == ("--seed", seed, "--epochs", epoch)
        assert variant.label == f"--seed={seed} --epochs={epoch}"
    first, last = sweep.variants[0], sweep.variants[-1]
    for variant in {first.index: first, last.index: last}.values():
        assert launched_args(variant.spec) == list(variant.spec.args)


@settings(deadline=None)
@given(values=st.lists(PY_VALUE, min_size=1, max_size=4))
@example(values=[0, 1, -1])
@example(values=["", "0", 0.0])
def test_python_values_reach_every_variant_as_their_text(values):
    sweep = base().sweep(**{"--lr": values})
    assert [v.spec.args for v in sweep.variants] == [("--lr", str(x)) for x in values]
    again = Sweep(base(), json.loads(json.dumps(sweep.grid)))  # sweep.json and back
    assert [v.spec.args for v in again.variants] == [("--lr", str(x)) for x in values]
    assert launched_args(sweep.variants[0].spec) == ["--lr", str(values[0])]


def test_only_declared_types_convert():
    grid = parse_vary(
        ["nodes=1", "profile=on,off", "--compile=1,0", "--seed=0,1", "--alcf-sizes"], base()
    )
    assert grid == {"nodes": [1], "profile": [True, False], "--compile": [True, False],
                    "--seed": ["0", "1"], "--alcf-sizes": [False, True]}  # fmt: skip
    sweep = Sweep(base(), {"--compile": grid["--compile"], "--seed": grid["--seed"]})
    assert [v.spec.args for v in sweep.variants] == [
        ("--compile", "--seed", "0"), ("--compile", "--seed", "1"), ("--seed", "0"), ("--seed", "1")
    ]  # fmt: skip
    # A program of your own: the kit cannot read its flags, so every value stays text.
    own = JobSpec(system="local", command=("python3", "mine.py"))
    assert parse_vary(["--compile=1,0"], own) == {"--compile": ["1", "0"]}


@pytest.mark.parametrize(
    ("items", "words"),
    [
        (["--seed=0,,1"], ["'--seed=0,,1'", "value 2 of '--seed' is empty", "between commas"]),
        (["--seed=1,"], ["value 2 of '--seed' is empty"]),
        (["--compile=fast"], ["--compile is a switch", "'fast' is neither", "on, yes, 1"]),
        (["profile=maybe"], ["field 'profile' takes on or off", "'maybe'"]),
        (["nodes=one"], ["field 'nodes' takes whole numbers", "'one'"]),
    ],
)
def test_values_a_type_cannot_take_are_refused(items, words):
    with pytest.raises(SpecError) as err:
        parse_vary(items, base())
    for word in words:
        assert word in str(err.value)


ARGV_APP = """\
import json, os, sys
rank = os.environ["PMI_RANK"]
folder = os.path.join(os.environ["HPCPROF_RUN_DIR"], "timings")
with open(os.path.join(folder, "argv-" + rank + ".json"), "w") as fh:
    json.dump(sys.argv[1:], fh)
"""


def test_cli_sweep_hands_each_rank_the_values_as_typed(isolated_runs, tmp_path, capsys,
                                                       mpiexec):  # fmt: skip
    app = tmp_path / "argv_app.py"
    app.write_text(ARGV_APP)
    argv = ["sweep", "--system", "local", "--binding", "none", "--json",
            "--vary=--epochs=1,2", "--vary=--seed=0,1", "--", sys.executable, str(app)]  # fmt: skip
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["states"] == {"0": "COMPLETED", "1": "COMPLETED", "2": "COMPLETED",
                             "3": "COMPLETED"}  # fmt: skip
    folder = Path(out["sweep_dir"])
    assert folder.parent == isolated_runs.resolve()
    record = json.loads((folder / "sweep.json").read_text())
    assert record["grid"] == {"--epochs": ["1", "2"], "--seed": ["0", "1"]}
    got = {}
    for entry in record["variants"]:
        run = folder / entry["run_dir"]
        got[entry["label"]] = [
            json.loads((run / "timings" / f"argv-{r}.json").read_text()) for r in (0, 1)
        ]
    assert got == {
        "--epochs=1 --seed=0": [["--epochs", "1", "--seed", "0"]] * 2,
        "--epochs=1 --seed=1": [["--epochs", "1", "--seed", "1"]] * 2,
        "--epochs=2 --seed=0": [["--epochs", "2", "--seed", "0"]] * 2,
        "--epochs=2 --seed=1": [["--epochs", "2", "--seed", "1"]] * 2,
    }


def test_train_sweep_of_epochs_one_and_two_runs_both(isolated_runs, capsys, mpiexec):
    # The case that failed: --epochs=1 reached train as a bare --epochs and variant 0 FAILED.
    argv = ["sweep", "--system", "local", "--example", "train", "--binding", "none", "--json",
            "--vary=--epochs=1,2", "--", "--steps-per-epoch", "1", "--warmup", "0"]  # fmt: skip
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["states"] == {"0": "COMPLETED", "1": "COMPLETED"}
    folder = Path(out["sweep_dir"])
    record = json.loads((folder / "sweep.json").read_text())
    assert record["grid"] == {"--epochs": ["1", "2"]}
    for entry, epochs in zip(record["variants"], (1, 2), strict=True):
        run = folder / entry["run_dir"]
        ranks = [json.loads((run / "timings" / f"train-{r}-of-2.json").read_text())
                 for r in (0, 1)]  # fmt: skip
        assert [t["params"]["epochs"] for t in ranks] == [epochs, epochs]
        assert [t["params"]["steps"] for t in ranks] == [epochs, epochs]
        assert f"epoch {epochs}/{epochs}:" in (run / "stdout").read_text()
