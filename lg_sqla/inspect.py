"""The former name of :mod:`lg_sqla.inspection`, kept so that existing imports work.

``import lg_sqla.inspect`` and ``from lg_sqla.inspect import Inspector`` give the very
objects of ``lg_sqla.inspection``; new code imports ``lg_sqla.inspection`` (this name
shadows the standard library's ``inspect`` module when ``lg_sqla/`` is on ``sys.path``).
"""

from lg_sqla.inspection import *  # noqa: F403  (the public names, listed once: __all__)
from lg_sqla.inspection import __all__ as __all__
