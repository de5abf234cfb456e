"""What records say once measured: two runs compared (``diff``, its CPU rules ``diff_cpu``,
the A/A ``floors``, ``diff_machines``), several machines side by side, energy per product
(``joules``), speedups, the per-size ``tables`` and the roofs. It reads results files:
never a device, the command line or a figure."""
