"""The compiler's two kinds of message about a model: an error (bad input: one line, exit 2) and a warning;
and :class:`BuildError` (``rtlgen build`` asked for what cannot be built), here so that the CLI can catch it
without loading :mod:`rtlgen.backend.build` at start-up."""

__all__ = ["BuildError", "CompileError", "CompileWarning"]


class CompileError(ValueError):
    """A model the compiler cannot turn into hardware; the message names the node and what is legal."""


class CompileWarning(UserWarning):
    """Something the user should know that does not stop the compile (an ignored folding entry...);
    the CLI prints it as one ``warning:`` line."""


class BuildError(ValueError):
    """The design cannot be built as asked (unknown shell, over the device budget...)."""
