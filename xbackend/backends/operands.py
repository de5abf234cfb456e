"""A third-party backend's import path for the operand checks and the poison it writes
(``check_operands``, ``poison_value``, ...): they live in ``xbackend.launches.operands``,
below the backends (issue 55); plugins keep importing them from here."""

from xbackend.launches.operands import *  # noqa: F403
