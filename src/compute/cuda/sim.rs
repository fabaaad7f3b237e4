//! The CUDA simulator backend: the real `kernels/*.cu` files, compiled as C++ with the shim in
//! `kernels/shim/` (see its header), run on CPU threads — one OS thread per CUDA thread, a barrier for
//! `__syncthreads`, an exchange buffer for warp shuffles. It proves the kernels on machines without a
//! GPU and lets students step the exact code a GPU would run. It is slow, so it refuses large launches.

use half::f16;
use ndarray::Array3;

use super::launch::{self, LaunchDims};
use crate::compute::{
    AttnInput, Backend, BackendError, BackendKind, CopyBlocksInput, FlashInput, PagedAppendInput, PagedDecodeInput,
    StaticAppendInput,
};
use crate::math::AttnCore;

type G = u32;

unsafe extern "C" {
    fn kvs_sim_attention_scores_f32(
        gx: G,
        gy: G,
        gz: G,
        bx: G,
        by: G,
        bz: G,
        q: *const f32,
        k: *const f32,
        scores: *mut f32,
        n_heads: i32,
        n_kv_heads: i32,
        seq: i32,
        head_dim: i32,
        scale: f32,
        mask_kind: i32,
        window: i32,
        sinks: i32,
    );
    fn kvs_sim_softmax_rows_f32(
        gx: G,
        gy: G,
        gz: G,
        bx: G,
        by: G,
        bz: G,
        inp: *const f32,
        out: *mut f32,
        rows: i32,
        cols: i32,
    );
    fn kvs_sim_attention_pv_f32(
        gx: G,
        gy: G,
        gz: G,
        bx: G,
        by: G,
        bz: G,
        probs: *const f32,
        v: *const f32,
        out: *mut f32,
        n_heads: i32,
        n_kv_heads: i32,
        seq: i32,
        head_dim: i32,
    );
    fn kvs_sim_attention_fused_f32(
        gx: G,
        gy: G,
        gz: G,
        bx: G,
        by: G,
        bz: G,
        q: *const f32,
        k: *const f32,
        v: *const f32,
        out: *mut f32,
        n_heads: i32,
        n_kv_heads: i32,
        seq: i32,
        head_dim: i32,
        scale: f32,
        mask_kind: i32,
        window: i32,
        sinks: i32,
    );
    fn kvs_sim_flash_attention_f32(
        gx: G,
        gy: G,
        gz: G,
        bx: G,
        by: G,
        bz: G,
        q: *const f32,
        k: *const f32,
        v: *const f32,
        out: *mut f32,
        n_heads: i32,
        n_kv_heads: i32,
        seq: i32,
        head_dim: i32,
        scale: f32,
        mask_kind: i32,
        window: i32,
        sinks: i32,
        block_q: i32,
        block_k: i32,
    );
    fn kvs_sim_static_cache_append_f16(
        gx: G,
        gy: G,
        gz: G,
        bx: G,
        by: G,
        bz: G,
        k_cache: *mut u16,
        v_cache: *mut u16,
        k_new: *const f32,
        v_new: *const f32,
        layer: i32,
        pos: i32,
        batch: i32,
        n_kv_heads: i32,
        max_seq_len: i32,
        head_dim: i32,
    );
    fn kvs_sim_copy_blocks_f16(
        gx: G,
        gy: G,
        gz: G,
        bx: G,
        by: G,
        bz: G,
        k_pool: *mut u16,
        v_pool: *mut u16,
        block_mapping: *const i32,
        num_pairs: i32,
        numel_per_block: i32,
    );
    fn kvs_sim_paged_append_f16(
        gx: G,
        gy: G,
        gz: G,
        bx: G,
        by: G,
        bz: G,
        k_pool: *mut u16,
        v_pool: *mut u16,
        k: *const f32,
        v: *const f32,
        slot_mapping: *const i32,
        num_tokens: i32,
        n_kv_heads: i32,
        block_size: i32,
        head_dim: i32,
    );
    fn kvs_sim_paged_attention_decode_f16(
        gx: G,
        gy: G,
        gz: G,
        bx: G,
        by: G,
        bz: G,
        tmp_out: *mut f32,
        tmp_max: *mut f32,
        tmp_sum: *mut f32,
        q: *const f32,
        k_pool: *const u16,
        v_pool: *const u16,
        block_tables: *const i32,
        context_lens: *const i32,
        max_blocks_per_seq: i32,
        num_partitions: i32,
        n_heads: i32,
        n_kv_heads: i32,
        block_size: i32,
        head_dim: i32,
        scale: f32,
    );
    fn kvs_sim_paged_attention_reduce_f32(
        gx: G,
        gy: G,
        gz: G,
        bx: G,
        by: G,
        bz: G,
        out: *mut f32,
        tmp_out: *const f32,
        tmp_max: *const f32,
        tmp_sum: *const f32,
        context_lens: *const i32,
        num_partitions: i32,
        n_heads: i32,
        head_dim: i32,
    );
    fn kvs_sim_read_stream_u32(
        gx: G,
        gy: G,
        gz: G,
        bx: G,
        by: G,
        bz: G,
        data: *const u32,
        n_words: i64,
        partial: *mut u32,
    );
}

/// The most simulated CUDA threads one call may launch (about a second of CPU time).
pub const MAX_SIM_THREADS: u64 = 1 << 20;

/// The CUDA-on-CPU simulator backend.
#[derive(Debug, Default, Clone, Copy)]
pub struct SimBackend;

fn i(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

fn budget(launches: &[LaunchDims]) -> Result<(), BackendError> {
    let n: u64 = launches.iter().map(LaunchDims::threads).sum();
    if n > MAX_SIM_THREADS {
        return Err(BackendError::InvalidInput(format!(
            "{n} simulated GPU threads is too many for the CPU simulator (limit {MAX_SIM_THREADS}); use a smaller shape or the cpu backend"
        )));
    }
    Ok(())
}

fn bits(x: &[f16]) -> &[u16] {
    bytemuck::cast_slice(x)
}

fn bits_mut(x: &mut [f16]) -> &mut [u16] {
    bytemuck::cast_slice_mut(x)
}

macro_rules! dims {
    ($l:expr) => {{
        let l = $l;
        (l.grid[0], l.grid[1], l.grid[2], l.block[0], l.block[1], l.block[2])
    }};
}

impl Backend for SimBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::CudaSim
    }

    fn device(&self) -> String {
        "kernels/*.cu on CPU threads (C++ shim)".to_string()
    }

    fn run_attention(&self, inp: &AttnInput) -> Result<AttnCore<f32>, BackendError> {
        let (h, kvh, t, hd) = inp.dims();
        let (ls, lm, lp) = (
            launch::attention_scores(h, t),
            launch::softmax_rows(h * t),
            launch::attention_pv(h, t, hd),
        );
        budget(&[ls, lm, lp])?;
        let (mk, w, s) = inp.mask.code();
        let scale = 1.0 / (hd as f32).sqrt();
        let mut scores = vec![0f32; h * t * t];
        let mut probs = vec![0f32; h * t * t];
        let mut out = vec![0f32; h * t * hd];
        let (q, k, v) = (
            inp.q.as_slice().unwrap_or_default(),
            inp.k.as_slice().unwrap_or_default(),
            inp.v.as_slice().unwrap_or_default(),
        );
        let (a, b, c, d, e, f) = dims!(ls);
        // SAFETY: q is [h,t,hd], k is [kvh,t,hd] (validated by the Backend wrapper) and scores holds h·t·t
        // values, the extents the kernel indexes for these sizes; the call returns when the kernel is done.
        unsafe {
            kvs_sim_attention_scores_f32(
                a,
                b,
                c,
                d,
                e,
                f,
                q.as_ptr(),
                k.as_ptr(),
                scores.as_mut_ptr(),
                i(h),
                i(kvh),
                i(t),
                i(hd),
                scale,
                mk,
                w,
                s,
            )
        };
        let (a, b, c, d, e, f) = dims!(lm);
        // SAFETY: both buffers hold rows·cols = h·t·t values.
        unsafe { kvs_sim_softmax_rows_f32(a, b, c, d, e, f, scores.as_ptr(), probs.as_mut_ptr(), i(h * t), i(t)) };
        let (a, b, c, d, e, f) = dims!(lp);
        // SAFETY: probs is [h,t,t], v is [kvh,t,hd], out holds h·t·hd values.
        unsafe {
            kvs_sim_attention_pv_f32(
                a,
                b,
                c,
                d,
                e,
                f,
                probs.as_ptr(),
                v.as_ptr(),
                out.as_mut_ptr(),
                i(h),
                i(kvh),
                i(t),
                i(hd),
            )
        };
        Ok(AttnCore {
            scores: Array3::from_shape_vec((h, t, t), scores).map_err(|e| BackendError::Device(e.to_string()))?,
            probs: Array3::from_shape_vec((h, t, t), probs).map_err(|e| BackendError::Device(e.to_string()))?,
            out: Array3::from_shape_vec((h, t, hd), out).map_err(|e| BackendError::Device(e.to_string()))?,
        })
    }

    fn run_attention_fused(&self, inp: &AttnInput) -> Result<Array3<f32>, BackendError> {
        let (h, kvh, t, hd) = inp.dims();
        let l = launch::attention_fused(h, t);
        budget(&[l])?;
        let (mk, w, s) = inp.mask.code();
        let mut out = vec![0f32; h * t * hd];
        let (q, k, v) = (
            inp.q.as_slice().unwrap_or_default(),
            inp.k.as_slice().unwrap_or_default(),
            inp.v.as_slice().unwrap_or_default(),
        );
        let (a, b, c, d, e, f) = dims!(l);
        // SAFETY: q is [h,t,hd], k and v are [kvh,t,hd] (validated), out holds h·t·hd values.
        unsafe {
            kvs_sim_attention_fused_f32(
                a,
                b,
                c,
                d,
                e,
                f,
                q.as_ptr(),
                k.as_ptr(),
                v.as_ptr(),
                out.as_mut_ptr(),
                i(h),
                i(kvh),
                i(t),
                i(hd),
                1.0 / (hd as f32).sqrt(),
                mk,
                w,
                s,
            )
        };
        Array3::from_shape_vec((h, t, hd), out).map_err(|e| BackendError::Device(e.to_string()))
    }

    fn run_flash_attention(&self, inp: &FlashInput) -> Result<Array3<f32>, BackendError> {
        let a = &inp.attn;
        let (h, kvh, t, hd) = a.dims();
        let l = launch::flash_attention(h, t, inp.block_q);
        budget(&[l])?;
        let (mk, w, s) = a.mask.code();
        let mut out = vec![0f32; h * t * hd];
        let (q, k, v) = (
            a.q.as_slice().unwrap_or_default(),
            a.k.as_slice().unwrap_or_default(),
            a.v.as_slice().unwrap_or_default(),
        );
        let (gx, gy, gz, bx, by, bz) = dims!(l);
        // SAFETY: q is [h,t,hd], k and v are [kvh,t,hd] (validated), out holds h·t·hd values; the tiles
        // fit the kernel's static shared memory (validated against FA_SMEM and FA_MAX_BR).
        unsafe {
            kvs_sim_flash_attention_f32(
                gx,
                gy,
                gz,
                bx,
                by,
                bz,
                q.as_ptr(),
                k.as_ptr(),
                v.as_ptr(),
                out.as_mut_ptr(),
                i(h),
                i(kvh),
                i(t),
                i(hd),
                1.0 / (hd as f32).sqrt(),
                mk,
                w,
                s,
                i(inp.block_q),
                i(inp.block_k),
            )
        };
        Array3::from_shape_vec((h, t, hd), out).map_err(|e| BackendError::Device(e.to_string()))
    }

    fn run_static_cache_append(&self, inp: StaticAppendInput) -> Result<(), BackendError> {
        let StaticAppendInput {
            shape: s,
            k_cache,
            v_cache,
            layer,
            pos,
            k_new,
            v_new,
        } = inp;
        let l = launch::static_cache_append(s.batch, s.kv_heads);
        budget(&[l])?;
        let (a, b, c, d, e, f) = dims!(l);
        // SAFETY: the caches hold s.numel() values and k_new/v_new batch·kv_heads·head_dim, with layer and
        // pos in range (validated); the kernel writes only row (layer, ·, ·, pos).
        unsafe {
            kvs_sim_static_cache_append_f16(
                a,
                b,
                c,
                d,
                e,
                f,
                bits_mut(k_cache).as_mut_ptr(),
                bits_mut(v_cache).as_mut_ptr(),
                k_new.as_ptr(),
                v_new.as_ptr(),
                i(layer),
                i(pos),
                i(s.batch),
                i(s.kv_heads),
                i(s.max_seq_len),
                i(s.head_dim),
            )
        };
        Ok(())
    }

    fn run_copy_blocks(&self, inp: CopyBlocksInput) -> Result<(), BackendError> {
        let s = inp.shape;
        let pairs = inp.pairs();
        let l = launch::copy_blocks(pairs);
        budget(&[l])?;
        let (a, b, c, d, e, f) = dims!(l);
        // SAFETY: pools hold s.numel() values; every block id in the mapping is inside the pool and the
        // pairs are independent (validated), so each pair copies kv_heads·block_size·head_dim values
        // within the pools.
        unsafe {
            kvs_sim_copy_blocks_f16(
                a,
                b,
                c,
                d,
                e,
                f,
                bits_mut(inp.k_pool).as_mut_ptr(),
                bits_mut(inp.v_pool).as_mut_ptr(),
                inp.block_mapping.as_ptr(),
                i(pairs),
                i(s.kv_heads * s.block_size * s.head_dim),
            )
        };
        Ok(())
    }

    fn run_paged_append(&self, inp: PagedAppendInput) -> Result<(), BackendError> {
        let PagedAppendInput {
            shape: s,
            k_pool,
            v_pool,
            slot_mapping,
            k,
            v,
        } = inp;
        if slot_mapping.is_empty() {
            return Ok(());
        }
        let l = launch::paged_append(slot_mapping.len());
        budget(&[l])?;
        let (a, b, c, d, e, f) = dims!(l);
        // SAFETY: pools hold s.numel() values, every non-negative slot is inside the pool (validated),
        // k/v hold tokens·kv_heads·head_dim values.
        unsafe {
            kvs_sim_paged_append_f16(
                a,
                b,
                c,
                d,
                e,
                f,
                bits_mut(k_pool).as_mut_ptr(),
                bits_mut(v_pool).as_mut_ptr(),
                k.as_ptr(),
                v.as_ptr(),
                slot_mapping.as_ptr(),
                i(slot_mapping.len()),
                i(s.kv_heads),
                i(s.block_size),
                i(s.head_dim),
            )
        };
        Ok(())
    }

    fn run_paged_decode(&self, inp: &PagedDecodeInput) -> Result<Vec<f32>, BackendError> {
        let s = inp.shape;
        let (r, h, hd) = (inp.requests(), inp.n_heads, s.head_dim);
        let max_ctx = inp.context_lens.iter().copied().max().unwrap_or(0).max(0) as usize;
        let p = launch::num_partitions(max_ctx);
        let (ld, lr) = (launch::paged_decode(s.kv_heads, r, p), launch::paged_reduce(h, r));
        budget(&[ld, lr])?;
        let mut tmp_out = vec![0f32; r * h * p * hd];
        let mut tmp_max = vec![0f32; r * h * p];
        let mut tmp_sum = vec![0f32; r * h * p];
        let mut out = vec![0f32; r * h * hd];
        let (a, b, c, d, e, f) = dims!(ld);
        // SAFETY: sizes validated by the Backend wrapper: q is [r,h,hd], pools [num_blocks,kvh,bs,hd],
        // block_tables [r,max_blocks] with every block a table entry for a live token inside the pool;
        // the temporaries are [r,h,p,hd] and [r,h,p].
        unsafe {
            kvs_sim_paged_attention_decode_f16(
                a,
                b,
                c,
                d,
                e,
                f,
                tmp_out.as_mut_ptr(),
                tmp_max.as_mut_ptr(),
                tmp_sum.as_mut_ptr(),
                inp.q.as_ptr(),
                bits(inp.k_pool).as_ptr(),
                bits(inp.v_pool).as_ptr(),
                inp.block_tables.as_ptr(),
                inp.context_lens.as_ptr(),
                i(inp.max_blocks),
                i(p),
                i(h),
                i(s.kv_heads),
                i(s.block_size),
                i(hd),
                1.0 / (hd as f32).sqrt(),
            )
        };
        let (a, b, c, d, e, f) = dims!(lr);
        // SAFETY: out is [r,h,hd]; the temporaries were sized above for the same r, h, p, hd.
        unsafe {
            kvs_sim_paged_attention_reduce_f32(
                a,
                b,
                c,
                d,
                e,
                f,
                out.as_mut_ptr(),
                tmp_out.as_ptr(),
                tmp_max.as_ptr(),
                tmp_sum.as_ptr(),
                inp.context_lens.as_ptr(),
                i(p),
                i(h),
                i(hd),
            )
        };
        Ok(out)
    }
}

impl SimBackend {
    /// Run `read_stream_u32` (kernels/bandwidth.cu, the read-only roof the CUDA backend times) over
    /// `data`, padded with zeros to whole 16-byte words; returns the per-block partial sums.
    pub fn read_stream_partials(&self, data: &[u32]) -> Result<Vec<u32>, BackendError> {
        let mut words = data.to_vec();
        words.resize(data.len().div_ceil(4) * 4, 0);
        let n_words = words.len() / 4;
        let l = launch::read_stream(n_words);
        budget(&[l])?;
        let mut partial = vec![0u32; l.grid[0] as usize];
        let (a, b, c, d, e, f) = dims!(l);
        // SAFETY: `words` holds n_words 16-byte words (a multiple of 4 u32s); `partial` holds one u32
        // per block of the grid; the kernel reads only words[0..n_words] and writes partial[blockIdx.x].
        unsafe { kvs_sim_read_stream_u32(a, b, c, d, e, f, words.as_ptr(), n_words as i64, partial.as_mut_ptr()) };
        Ok(partial)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The read-only stream kernel reads every word exactly once: its partial sums add up to the
    /// host's sum, for lengths that are not multiples of the block or of the grid.
    #[test]
    fn read_stream_kernel_reads_every_word_once() {
        for n in [1usize, 3, 4, 1023, 1024, 1025, 70_001] {
            let data: Vec<u32> = (0..n as u32).map(|i| i.wrapping_mul(2_654_435_761)).collect();
            let want = data.iter().fold(0u32, |a, &x| a.wrapping_add(x));
            let got = SimBackend.read_stream_partials(&data).unwrap();
            assert_eq!(got.iter().fold(0u32, |a, &x| a.wrapping_add(x)), want, "n = {n}");
        }
    }
}
