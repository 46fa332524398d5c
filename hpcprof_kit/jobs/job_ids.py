"""A job id in any form the schedulers print, matched against the runs' manifests.

PBS prints ``2.server`` (``qstat`` may show ``2`` or a longer server name), ``15[].server`` for
an array and ``15[3].server`` for one of its subjobs; Slurm ``1234`` and ``1234_5`` for an
array task. A run matches when its own id is the same job (``2`` is ``2.server``), or when
the id names its whole array (``15[]``; Slurm's bare ``1234``) or the one job that runs its
sweep's variants in turn. An id that matches several runs is for the caller to list, never to
pick from.

>>> same_job("2", "2.pbshost"), same_job("2.pbshost", "2.pbshost.example.org")
(True, True)
>>> same_job("15[3]", "15[3].pbshost"), same_job("15[3]", "15[].pbshost"), same_job("2", "21")
(True, False, False)
>>> run_has_id("15[]", {"job_id": "15[3].pbshost", "array_job_id": "15[].pbshost"})
True
>>> run_has_id("1234", {"backend": "slurm", "job_id": "1234_5", "array_job_id": "1234"})
True
>>> run_has_id("15", {"backend": "pbs", "job_id": "15[3].pbshost", "array_job_id": "15[].pbshost"})
False
"""

from __future__ import annotations

__all__ = ["run_has_id", "same_job"]


def same_job(given: str, known: str) -> bool:
    """Whether ``given`` names the job ``known``: the same sequence number (with its array
    index) and, where both carry one, the same server (one name may be the other's short
    form, as ``pbshost`` of ``pbshost.example.org``)."""
    given, known = given.strip(), known.strip()
    if not given or not known:
        return False
    seq, _, server = given.partition(".")
    own_seq, _, own_server = known.partition(".")
    if seq != own_seq:
        return False
    if not server or not own_server or server == own_server:
        return True
    short, long_ = sorted((server, own_server), key=len)
    return long_.startswith(short + ".")


def run_has_id(given: str, manifest: dict) -> bool:
    """Whether a run's manifest answers to the id ``given``: its own job id, or its array's
    (PBS ``N[]``, Slurm's bare array id; a PBS array's plain ``N`` is no job, as for qstat)."""
    own = str(manifest.get("job_id") or "")
    if same_job(given, own):
        return True
    parent = str(manifest.get("array_job_id") or "")
    whole_pbs_array = given.partition(".")[0].endswith("[]")
    slurm_array = manifest.get("backend") == "slurm" and "_" not in given
    return bool(parent) and (whole_pbs_array or slurm_array) and same_job(given, parent)
