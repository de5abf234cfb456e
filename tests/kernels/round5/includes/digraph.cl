// An include spelled with the digraph %: (tests/test_families_round5.py): followed.
%:include "pipe.h"
