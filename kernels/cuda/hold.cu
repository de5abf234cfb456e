// hold: keeps the GPU's stream busy until the host lets go, so that the work queued
// behind it starts back to back (the method of NVIDIA's nvbench). The CUDA backend
// queues hold, then a start event, the kernels and an end event, and only then
// sets word[0], host memory mapped into the device: the events then time the
// kernels alone, not the host's launching of them. On an idle GPU, events around a
// launch also time the host's work between the two records: for cuBLAS at
// 1000×3001 · 3001×1000 on an H100, 0.24 ms instead of the product's 0.15 ms.
//
// After `cycles` clock ticks (some milliseconds; the host needs microseconds) it
// gives up and sets word[1], so that the host can tell, and so that tools which
// run each launch to completion before the next (compute-sanitizer, Nsight
// Compute) are only slowed, not stuck.
//
// There is no OpenCL twin: OpenCL's profiling counters time each command itself.

extern "C" __global__ void hold(volatile int* word, const long long cycles)
{
    const long long start = clock64();
    while (word[0] == 0) {
        if (clock64() - start > cycles) {
            word[1] = 1;
            return;
        }
    }
}
