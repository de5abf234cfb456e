// The device clock, read inside the kernels: each group's first worker stamps the
// GPU's %globaltimer (nanoseconds, the clock CUDA reads too) as its group starts and
// as it ends. Across a launch, the earliest entry and the latest exit give the
// launch's span on the device: its kernel time with no launch cost in it.
//
// Only NVIDIA's OpenCL has this clock: its compiler takes the inline PTX that reads
// it. Other devices are timed by their profiling events, and never built with STAMP.
//
// Built with -DSTAMP, every kernel takes two more parameters, `stamps` (two 64-bit
// words a slot: the slot's earliest entry, then its latest exit) and `stamp_slot`
// (which slot this launch writes); the host sets each slot to (max, 0) before the
// launches and reads the spans after them. Built without it, the hooks are nothing:
// the code compiled is the code of the file without them (tests/test_stamps.py).
//
// Each worker reads the clock's low 32 bits as it starts, into one register: nothing
// touches memory before the kernel's own work. (The full 64-bit read there cost NVIDIA
// OpenCL's naive kernel 37% at 4096³ on an H100, the low word 0.5-6%: see
// docs/measurement.md.) At the kernel's end the first worker of each group reads the
// whole clock, rebuilds its entry from the low word (exact for groups shorter than
// 2^32 ns, 4.3 s), and writes entry and exit to the slot with 64-bit atomics (earliest
// entry, latest exit). Every kernel's first worker runs to the end: the kernels return
// early only for workers outside the output, and a group's first worker is inside it.
// The other workers of the last group may end a little after it (the exit is one
// worker's).
//
// The CUDA twin, kernels/cuda/stamp.h, defines the same hooks.

#ifdef STAMP
#pragma OPENCL EXTENSION cl_khr_int64_extended_atomics : enable
static inline ulong stamp_now(void)
{
    ulong t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
static inline uint stamp_now_lo(void)
{
    uint t;
    asm volatile("mov.u32 %0, %%globaltimer_lo;" : "=r"(t));
    return t;
}
#define STAMP_FIRST (get_local_id(0) == 0 && get_local_id(1) == 0 && get_local_id(2) == 0)
#define STAMP_PARAMETER , __global ulong* restrict stamps, const int stamp_slot
#define STAMP_ENTER const uint stamp_entry = stamp_now_lo()
#define STAMP_EXIT                                                   \
    if (STAMP_FIRST) {                                               \
        const ulong stamp_exit = stamp_now();                        \
        const uint stamp_took = (uint)stamp_exit - stamp_entry;      \
        atom_min(&stamps[2 * stamp_slot], stamp_exit - stamp_took);  \
        atom_max(&stamps[2 * stamp_slot + 1], stamp_exit);           \
    }
// A return inside a kernel written without the hooks (a user's: xbackend puts them in,
// see xbackend/families/sources.py) exits through this.
#define STAMP_RETURN do { STAMP_EXIT; return; } while (0)
#else
#define STAMP_PARAMETER
#define STAMP_ENTER
#define STAMP_EXIT
#define STAMP_RETURN return
#endif
