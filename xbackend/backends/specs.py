"""A third-party backend's import path for the records it fills in (``DeviceInfo``,
``VariantSpec``, ``VariantTable``, ``Measurement``, ...): they live in
``xbackend.launches.specs``, below the backends, since a product is planned from them
without a backend (issue 55); plugins keep importing them from here."""

from xbackend.launches.specs import *  # noqa: F403
