"""A job request checked against what its site record says the scheduler takes, before
anything is submitted: a queue that takes no jobs now (``[queue_rules.Q] enabled = false``,
as ``site init`` writes it from ``qstat -Qf``), and file system names the server does not take
(``valid_filesystems``: empty where the server defines no ``filesystems`` resource). A real
OpenPBS 23.06 server refused both only at ``qsub``: "Queue is not enabled" (exit 173),
"Unknown resource Resource_List.filesystems" (exit 187).

>>> from hpcprof_kit.systems import load_system
>>> check_site_record(load_system("aurora"), "debug", "home:flare")  # no such rules: passes
"""

from __future__ import annotations

from hpcprof_kit.errors import SpecError
from hpcprof_kit.systems import System

__all__ = ["check_site_record"]


def check_site_record(sysrec: System, queue: str, filesystems: str | None) -> None:
    """SpecError naming the field, the value, the record's limit and the fix."""
    record = sysrec.source or f"{sysrec.name}.toml"
    rules = sysrec.extra.get("queue_rules", {})
    own = rules.get(queue, {}) if isinstance(rules, dict) else {}
    if isinstance(own, dict) and own.get("enabled") is False:
        takes = [name for name in sysrec.queues
                 if name and not (isinstance(rules.get(name), dict)
                                  and rules[name].get("enabled") is False)]  # fmt: skip
        other = f" ({', '.join(takes)})" if takes else ""
        raise SpecError(
            f"queue {queue!r}: {sysrec.name}'s record says it takes no jobs now (enabled = false "
            f"under [queue_rules.{queue}] in {record}, from the scheduler at site init), and qsub "
            f"would refuse it (Queue is not enabled); pick another queue{other}, or run site init "
            "again once the site has enabled it"
        )
    valid = sysrec.extra.get("valid_filesystems")
    if not filesystems or not isinstance(valid, list):
        return
    unknown = [name for name in filesystems.split(":") if name not in valid]
    if unknown:
        limit = (f"it takes {', '.join(map(repr, valid))}" if valid
                 else "its server defines no 'filesystems' resource")  # fmt: skip
        fix = ("name only those" if valid
               else "leave --filesystems (filesystems=) out")  # fmt: skip
        raise SpecError(
            f"filesystems {filesystems!r}: {unknown[0]!r} is not a file system of "
            f"{sysrec.name} (valid_filesystems in {record}: {limit}), and qsub would refuse it "
            f"(Unknown resource); {fix}"
        )
