"""xbackend's version: one place, which the package, the machine record and the tune
cache read."""

VERSION = "0.1.0"
