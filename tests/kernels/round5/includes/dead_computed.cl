// An include of a macro under #if 0 (tests/test_families_round5.py): never opened, kept.
#if 0
#define H "pipe.h"
#include H
#endif
