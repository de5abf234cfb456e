// An #import (tests/test_families_round5.py): followed.
#import "pipe.h"
