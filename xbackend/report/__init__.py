"""The report: one self-contained HTML page and its Markdown twin, from results files.

``page`` writes it (``write_report``); ``document`` (blocks, rendered as HTML and
Markdown), ``findings`` (the opening sentences), ``points`` (experiments, names, cells),
``figures`` (files, names, styles), ``sections`` (one per experiment), ``side_by_side``
(machines side by side), ``equality`` (code equality, machines) and the sections of the
roofline, the launch overhead, the counters and the sizes build it. Nothing is imported
here, so that a module that needs only ``document`` (the gradebook's pages) does not
load the figures and matplotlib with it.
"""
