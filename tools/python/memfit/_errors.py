"""memfit's errors as Python exceptions, with the command line's messages."""


class Error(Exception):
    """Any memfit failure. `message` is what the command line prints,
    without its "memfit: error: " prefix; `exit_status` is its exit code."""

    def __init__(self, message, exit_status=1):
        super().__init__(message)
        self.message = message
        self.exit_status = exit_status


class UserError(Error, ValueError):
    """Something the caller can fix: an argument, a model file, a budget."""


class Infeasible(UserError):
    """No plan exists under the settings asked for (a budget below what
    the model needs, a flag that cannot apply to this model)."""


class InternalError(Error, RuntimeError):
    """memfit broke one of its own guarantees: a bug to report, with the
    arguments of the call."""
