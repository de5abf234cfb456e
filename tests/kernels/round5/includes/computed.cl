// An include of a macro (tests/test_families_round5.py): refused, its file unknown.
#define H "pipe.h"
#include H
