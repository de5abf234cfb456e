"""Backends: one module each, imported only when first asked for (see ``registry.BUILTIN``)."""
