// =======================================================================================
// kernels/bandwidth.cu -- the read-only roof: how fast can this device just read bytes?
// =======================================================================================
//
// Decode attention only READS its K/V (it writes a few floats per query). So the fair
// limit for it is not a copy (which reads N bytes AND writes N bytes) but a plain read
// of the same N bytes. This kernel is that read: every thread sums 16-byte words in a
// grid-stride loop (consecutive threads read consecutive words: coalesced), the block
// reduces its sums in shared memory, and thread 0 writes one partial sum per block. The
// sums only keep the compiler from dropping the loads; kvscope checks them against the
// host on the CPU shim (a wrong index would show there) and times the kernel with CUDA
// events next to the decode kernel, on the same stream, in the same run.
//
// read_stream_u32
//   data      [n_words] uint4 (16 bytes each)
//   partial   [gridDim.x] u32, wrapping sums of every 32-bit lane read by the block
//   launch: grid (min(ceil(n_words / 256), 4096), 1, 1); block (256, 1, 1)
// =======================================================================================

#define BW_THREADS 256

extern "C" __global__ void read_stream_u32(const uint4* __restrict__ data, long long n_words,
                                           unsigned int* __restrict__ partial) {
    __shared__ unsigned int s_sum[BW_THREADS];
    const int tid = (int)threadIdx.x;
    unsigned int acc = 0u;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + tid; i < n_words; i += stride) {
        const uint4 w = data[i];
        acc += w.x + w.y + w.z + w.w;
    }
    s_sum[tid] = acc;
    __syncthreads();
    // Tree reduction; blockDim.x is BW_THREADS, a power of two. Every thread reaches every
    // barrier (the loop bounds are the same for the whole block).
    for (int half = BW_THREADS / 2; half > 0; half >>= 1) {
        if (tid < half) s_sum[tid] += s_sum[tid + half];
        __syncthreads();
    }
    if (tid == 0) partial[blockIdx.x] = s_sum[0];
}
