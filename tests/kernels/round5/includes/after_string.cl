__constant char opener[] = "/*"; // a string opens no comment (tests/test_families_round5.py)
#include "pipe.h"
// */
