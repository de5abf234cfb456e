// A header whose pragma packs the structs after its include (tests/test_families_round5.py):
// refused, since xbackend follows #pragma pack in the kernel file alone.
#pragma pack(push, 4)
