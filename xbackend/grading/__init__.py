"""Grading: a submission's kernels, or a class's, checked as a teacher would.

``submissions`` finds the submissions of the folders ``xbackend check`` is given;
``classroom`` checks each in a process of its own (``cli/check_submission.py`` is that
process), which appends ``records`` as it goes; ``checking`` runs one kernel at every
shape against the reference, after ``oclgrind`` (and ``compilers``: nvcc where no CUDA
device is here); ``gradebook`` makes the rows of a class, and ``pages`` the pages a
teacher reads and hands back.
"""
