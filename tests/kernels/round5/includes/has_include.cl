// A file asked for by __has_include (tests/test_families_round5.py): followed.
#if __has_include("pipe.h")
#endif
