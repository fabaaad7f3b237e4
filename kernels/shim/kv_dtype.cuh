// kernels/shim/kv_dtype.cuh -- the KV dtype the CPU shim compiles the kernels for: f16 (the host
// puts the pool's dtype header in place of "kv_dtype.cuh" when NVRTC compiles them).
#include "../kv/f16.cuh"
