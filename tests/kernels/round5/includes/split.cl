// An include whose name a backslash-newline splits (tests/test_families_round5.py): followed.
#include "pi\
pe.h"
