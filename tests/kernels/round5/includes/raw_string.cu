static const char* raw_text = R"x(
#if 0
)x"; // a raw string (tests/test_families_round5.py): refused by name
#include "pipe.h"
