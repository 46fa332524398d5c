"""The kit's own exception types. Every message says what was wrong, where, and what to do."""


class KitError(Exception):
    """Base of every error the kit raises on purpose."""


class SpecError(KitError, ValueError):
    """A job spec, system record or option has an invalid field (names the field, value, limit, fix)."""


class SystemError_(KitError, LookupError):
    """An unknown system name or a malformed system record."""


class SubmitError(KitError, RuntimeError):
    """A job could not be submitted, polled or cancelled."""


class TraceFormatError(KitError, ValueError):
    """A trace file cannot be read as any known format."""


class DistError(KitError, RuntimeError):
    """Ranks, world size, backend or rendezvous are inconsistent."""


class DeviceError(KitError, RuntimeError):
    """A device index or type that does not exist here."""


class PortError(KitError, ValueError):
    """A file that cannot be ported (not Python, does not parse)."""


class BindingError(KitError, ValueError):
    """A CPU binding list or plan that cannot be parsed or applied."""


class ScheduleError(KitError, ValueError):
    """A profiler schedule that is invalid or records nothing."""


class OnDemandError(KitError, RuntimeError):
    """An on-demand trace request that cannot be served."""


class NotebookValidationError(KitError, RuntimeError):
    """A notebook failed instructor validation."""


class KitWarning(UserWarning):
    """Something the kit accepted but the user should know about (e.g. a queue no record lists)."""
