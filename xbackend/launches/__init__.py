"""A variant becomes a product: the records of a device and a variant (``specs``), the
operands' checks (``operands``), the kernel files' declarations (``kernels``), launches and
their arguments (``launch``, ``plans``), and the geometries that plan them (``geometry``,
``geometries``: ``element`` as the manifest writes it, ``block_tiles`` with ``warp``'s
defaults), with the tuner's ``choices``. No runtime here: the backends run what it plans."""
