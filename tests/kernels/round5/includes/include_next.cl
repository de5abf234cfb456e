// An #include_next (tests/test_families_round5.py): followed.
#include_next "pipe.h"
