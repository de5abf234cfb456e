// A spaced-out include split after its hash (tests/test_families_round5.py): followed.
  # \
  include "pipe.h"
