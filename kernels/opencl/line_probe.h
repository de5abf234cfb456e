// line_probe: does this OpenCL compiler number lines as #line says? NVIDIA's does not (it
// numbers the lines it was given: seen on an H200, driver 580.159.04), so the two lines a
// stamped build puts before a user's kernel file (the clock's hooks, then #line 1) would
// move every line its errors name. The OpenCL backend builds this text once, only after
// such a build failed, and reads which line the error below is said to be on: 1000 where
// #line is honoured. Not a header to include, and not a kernel: it fails on purpose.
#line 1000
#error xbackend line probe
