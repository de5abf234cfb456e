// probe: the smallest kernel there is. The OpenCL backend builds it once with the options
// of XBACKEND_OPENCL_OPTIONS, so that options the driver refuses are an error that names
// the variable, before any real kernel is built with them. OpenCL only: CUDA takes no
// such options from the environment.
__kernel
void xbackend_probe(__global int* out)
{
    out[0] = 1;
}
