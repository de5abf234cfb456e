"""Running a plan: its sizes (``sizes``), the configurations it asks for (``configs``) and
their audit (``fairness``), one point measured and verified (``measure``; a user's kernels
in a process of their own: ``isolation``), the sweep with its resume and lock
(``runner``), its progress and predicted time (``progress``, ``cost``, ``earlier``), the
largest product each line runs (``limits``) and the machine it ran on (``environment``)."""
