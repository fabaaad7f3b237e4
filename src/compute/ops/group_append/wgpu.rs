//! The group append on the wgpu backend: the WGSL `group_store_f16` and `group_quant`, codes packed in
//! u32 words and the rings' f16 pairs encoded by hand.

use super::{GroupAppendInput, GroupCache, GroupShape, launch};
use crate::compute::ops::quant_append::wgpu::{unwords, words};
use crate::compute::wgpu::{Dispatch, WgpuBackend, f32s, u};
use crate::compute::{BackendError, Valid};

/// `group_kv.wgsl`'s uniforms (every entry point).
#[repr(C)]
#[derive(Clone, Copy, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct GroupParams {
    pub(crate) n_rows: u32,
    pub(crate) n_jobs: u32,
    pub(crate) kv_heads: u32,
    pub(crate) head_dim: u32,
    pub(crate) group: u32,
    pub(crate) cap: u32,
    pub(crate) bits: u32,
    pub(crate) sym: u32,
    pub(crate) v_per_token: u32,
    pub(crate) n_heads: u32,
    pub(crate) max_blocks: u32,
    pub(crate) scale: f32,
    pub(crate) v_at: u32,
    pub(crate) jobs_at: u32,
    pub(crate) lens_at: u32,
    pub(crate) kq_at: u32,
    pub(crate) vq_at: u32,
    pub(crate) rings_at: u32,
    pub(crate) vcodes_at: u32,
    pub(crate) kz_at: u32,
    pub(crate) vs_at: u32,
    pub(crate) vz_at: u32,
    pub(crate) vring_at: u32,
    pub(crate) probs_at: u32,
    pub(crate) groups_x: u32,
    pub(crate) pad: [u32; 3],
}

const _: () = assert!(std::mem::size_of::<GroupParams>() == 112);

/// f16 bits as u32 words, two per word (element 2i in the low half).
pub(crate) fn halves(h: &[u16]) -> Vec<u32> {
    h.chunks(2)
        .map(|c| u32::from(c[0]) | (u32::from(*c.get(1).unwrap_or(&0)) << 16))
        .collect()
}

/// The cache's buffers as the WGSL binds them: codes (K then V words), parameters (K's scales and
/// zeros, V's scales and zeros) and rings (K then V words), with the offsets in `p`.
pub(crate) fn buffers(s: &GroupShape, c: &GroupCache, p: &mut GroupParams) -> Result<[Vec<u32>; 3], BackendError> {
    let (kw, vw) = (words(&c.k_codes), words(&c.v_codes));
    p.vcodes_at = u(kw.len())?;
    p.kz_at = u(c.k_scale.len())?;
    p.vs_at = u(2 * c.k_scale.len())?;
    p.vz_at = u(2 * c.k_scale.len() + c.v_scale.len())?;
    let (kr, vr) = (halves(&c.k_ring), halves(&c.v_ring));
    p.vring_at = u(kr.len())?;
    p.kv_heads = u(s.kv_heads)?;
    p.head_dim = u(s.head_dim)?;
    p.group = u(s.fmt.group)?;
    p.cap = u(s.fmt.cap())?;
    p.bits = s.fmt.bits;
    p.sym = u32::from(s.fmt.symmetric);
    p.v_per_token = u32::from(s.fmt.v_per_token);
    let params: Vec<f32> = [&c.k_scale[..], &c.k_zero, &c.v_scale, &c.v_zero].concat();
    Ok([[kw, vw].concat(), bytemuck::cast_vec(params), [kr, vr].concat()])
}

pub(crate) fn run(b: &WgpuBackend, inp: Valid<GroupAppendInput>) -> Result<(), BackendError> {
    let (rows, jobs) = (inp.n_rows(), inp.n_jobs());
    let inp = inp.into_inner();
    let s = inp.shape;
    let c = inp.cache;
    let per_row = s.kv_heads * s.head_dim / 2;
    let (ls, lq) = (launch::wgsl_store(rows, per_row), launch::wgsl_quant(jobs, s.kv_heads));
    let mut p = GroupParams {
        n_rows: u(rows)?,
        n_jobs: u(jobs)?,
        v_at: u(inp.k.len())?,
        jobs_at: u(inp.rows.len())?,
        ..GroupParams::default()
    };
    let [cw, pw, rw] = buffers(&s, c, &mut p)?;
    let store_p = b.uniform(&GroupParams {
        groups_x: ls.grid[0],
        ..p
    });
    let quant_p = b.uniform(&GroupParams {
        groups_x: lq.grid[0],
        ..p
    });
    let src = b.storage(&[inp.k, inp.v].concat());
    let ints = b.storage(&[inp.rows, inp.jobs, &[0]].concat());
    let (codes, params, ring) = (b.storage(&cw), b.storage(&pw), b.storage(&rw));
    let mut dispatches = Vec::new();
    if rows > 0 {
        dispatches.push(Dispatch {
            dims: ls,
            bindings: vec![(0, &store_p), (1, &src), (2, &ints), (5, &ring)],
        });
    }
    if jobs > 0 {
        dispatches.push(Dispatch {
            dims: lq,
            bindings: vec![(0, &quant_p), (2, &ints), (3, &codes), (4, &params), (5, &ring)],
        });
    }
    let got = b.run(
        &dispatches,
        &[(&codes, cw.len()), (&params, pw.len()), (&ring, rw.len())],
    )?;
    let mut it = got.into_iter();
    let (gc, gp, gr) = (
        it.next().unwrap_or_default(),
        it.next().unwrap_or_default(),
        it.next().unwrap_or_default(),
    );
    let nk = c.k_codes.len() / 4;
    unwords(&gc[..nk.min(gc.len())], &mut c.k_codes);
    unwords(&gc[nk.min(gc.len())..], &mut c.v_codes);
    let pf = f32s(gp);
    let (a, bb, cc) = (
        c.k_scale.len(),
        c.k_scale.len() * 2,
        c.k_scale.len() * 2 + c.v_scale.len(),
    );
    c.k_scale.copy_from_slice(&pf[..a]);
    c.k_zero.copy_from_slice(&pf[a..bb]);
    c.v_scale.copy_from_slice(&pf[bb..cc]);
    let nz = c.v_zero.len();
    c.v_zero.copy_from_slice(&pf[cc..cc + nz]);
    let nr = c.k_ring.len().div_ceil(2);
    for (dst, w) in [(&mut c.k_ring, &gr[..nr]), (&mut c.v_ring, &gr[nr..])] {
        for (i, h) in dst.iter_mut().enumerate() {
            *h = (w[i / 2] >> (16 * (i % 2))) as u16;
        }
    }
    Ok(())
}
