// kernels/shim/race_check.cpp -- does the shim under ThreadSanitizer still see a missing barrier?
// Not part of the cargo build; scripts/sanitize.sh builds it with -fsanitize=thread and runs each case:
//   block-ok    each thread writes its shared slot, __syncthreads, reads its neighbour's: no report;
//   block-race  the same without the __syncthreads: TSan must report a data race;
//   warp-ok     a warp sum by __shfl_xor_sync, and neighbours' slots read after __syncwarp: no report;
//   warp-race   lanes read a neighbour's shared slot with no __syncwarp between: a race again;
//   grid-ok     block 1 reads what block 0 wrote in an earlier launch: no report.
// The CUDA threads run as fibers one after another, so a race never changes a result here; the
// test is that TSan reports it anyway (exit 66 under sanitize.sh's TSAN_OPTIONS).
#include <cstdio>
#include <cstring>

#include "cuda_shim.h"

namespace {

__global__ void neighbour(const float* in, float* out, int n, bool barrier) {
    __shared__ float s[64];
    const int t = threadIdx.x;
    s[t] = in[t] * 2.0f;
    if (barrier) __syncthreads();
    out[t] = s[(t + 1) % n];
}

__global__ void warp_neighbour(const float* in, float* out, bool barrier) {
    __shared__ float s[32];
    const int t = threadIdx.x;
    s[t] = in[t];
    if (barrier) __syncwarp();
    out[t] = s[(t + 31) % 32];
}

__global__ void warp_sum(const float* in, float* out) {
    float v = in[threadIdx.x];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    out[threadIdx.x] = v;
}

__global__ void write_block(float* buf) { buf[blockIdx.x * blockDim.x + threadIdx.x] = 1.0f + threadIdx.x; }

}  // namespace

int main(int argc, char** argv) {
    const char* what = argc > 1 ? argv[1] : "";
    float in[64], out[64], buf[128] = {};
    for (int i = 0; i < 64; ++i) in[i] = 0.5f * static_cast<float>(i);
    if (!std::strcmp(what, "block-ok") || !std::strcmp(what, "block-race")) {
        const bool barrier = !std::strcmp(what, "block-ok");
        kvs_shim::launch(dim3(1), dim3(64), [&] { neighbour(in, out, 64, barrier); });
    } else if (!std::strcmp(what, "warp-ok")) {
        kvs_shim::launch(dim3(1), dim3(32), [&] { warp_sum(in, out); });
        kvs_shim::launch(dim3(1), dim3(32), [&] { warp_neighbour(in, out, true); });
    } else if (!std::strcmp(what, "warp-race")) {
        kvs_shim::launch(dim3(1), dim3(32), [&] { warp_neighbour(in, out, false); });
    } else if (!std::strcmp(what, "grid-ok")) {
        kvs_shim::launch(dim3(2), dim3(64), [&] { write_block(buf); });
        kvs_shim::launch(dim3(1), dim3(32), [&] { warp_neighbour(buf + 64, out, true); });
    } else {
        std::fprintf(stderr, "usage: %s block-ok|block-race|warp-ok|warp-race|grid-ok\n", argv[0]);
        return 2;
    }
    std::printf("%s: out[0] = %g\n", what, static_cast<double>(out[0]));
    return 0;
}
