// The device clock, read inside the kernels: each group's first worker stamps the
// GPU's %globaltimer (nanoseconds, the clock NVIDIA's OpenCL reads too) as its group
// starts and as it ends. Across a launch, the earliest entry and the latest exit give
// the launch's span on the device: its kernel time with no launch cost in it.
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
// The OpenCL twin, kernels/opencl/stamp.h, defines the same hooks.

#ifdef STAMP
__device__ __forceinline__ unsigned long long stamp_now()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
__device__ __forceinline__ unsigned int stamp_now_lo()
{
    unsigned int t;
    asm volatile("mov.u32 %0, %%globaltimer_lo;" : "=r"(t));
    return t;
}
#define STAMP_FIRST (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0)
#define STAMP_PARAMETER , unsigned long long* __restrict__ stamps, const int stamp_slot
#define STAMP_ENTER const unsigned int stamp_entry = stamp_now_lo()
#define STAMP_EXIT                                                               \
    if (STAMP_FIRST) {                                                           \
        const unsigned long long stamp_exit = stamp_now();                       \
        const unsigned int stamp_took = (unsigned int)stamp_exit - stamp_entry;  \
        atomicMin(&stamps[2 * stamp_slot], stamp_exit - stamp_took);             \
        atomicMax(&stamps[2 * stamp_slot + 1], stamp_exit);                      \
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
