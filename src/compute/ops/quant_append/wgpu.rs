//! The quantising append on the wgpu backend: the WGSL `quant_append_u8`, one invocation per (token,
//! KV head) row, four codes per u32 word.

use super::{QuantAppendInput, launch};
use crate::cache::dtype::quant::Quant;
use crate::compute::wgpu::{Dispatch, WgpuBackend, u};
use crate::compute::{BackendError, Valid};

/// `quant_kv.wgsl`'s uniforms (both entry points).
#[repr(C)]
#[derive(Clone, Copy, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct QuantParams {
    pub(crate) n_rows: u32,
    pub(crate) n_heads: u32,
    pub(crate) kv_heads: u32,
    pub(crate) head_dim: u32,
    pub(crate) block_size: u32,
    pub(crate) max_blocks: u32,
    pub(crate) fmt: u32,
    pub(crate) scale_mode: u32,
    pub(crate) v_at: u32,
    pub(crate) vs_at: u32,
    pub(crate) probs_at: u32,
    pub(crate) scale: f32,
    pub(crate) groups_x: u32,
    pub(crate) pad: [u32; 3],
}

const _: () = assert!(std::mem::size_of::<QuantParams>() == 64);

/// Bytes as u32 words, four codes per word (byte i in bits 8·(i % 4)), padded to a whole word.
pub(crate) fn words(bytes: &[u8]) -> Vec<u32> {
    bytes
        .chunks(4)
        .map(|c| {
            c.iter()
                .enumerate()
                .fold(0u32, |w, (i, &b)| w | (u32::from(b) << (8 * i)))
        })
        .collect()
}

/// The bytes of `words` back into `out`.
pub(crate) fn unwords(words: &[u32], out: &mut [u8]) {
    for (i, o) in out.iter_mut().enumerate() {
        *o = (words[i / 4] >> (8 * (i % 4))) as u8;
    }
}

pub(crate) fn run(b: &WgpuBackend, inp: Valid<QuantAppendInput>) -> Result<(), BackendError> {
    let quant = inp.quant();
    let inp = inp.into_inner().0;
    let s = inp.shape;
    let rows = inp.slot_mapping.len() * s.kv_heads;
    let l = launch::wgsl(inp.slot_mapping.len(), s.kv_heads);
    let (kp, vp) = (inp.k_pool, inp.v_pool);
    let params = b.uniform(&QuantParams {
        n_rows: u(rows)?,
        kv_heads: u(s.kv_heads)?,
        head_dim: u(s.head_dim)?,
        block_size: u(s.block_size)?,
        fmt: quant.kernel_code() as u32,
        scale_mode: Quant::scale_mode(s.dtype.format().scales) as u32,
        v_at: u(inp.k.len())?,
        vs_at: u(kp.scales.len())?,
        groups_x: l.grid[0],
        ..QuantParams::default()
    });
    let src = b.storage(&[inp.k, inp.v].concat());
    let slots = b.storage(inp.slot_mapping);
    let (kw, vw) = (words(kp.bytes), words(vp.bytes));
    let (kd, vd) = (b.storage(&kw), b.storage(&vw));
    let n_scales = kp.scales.len() + vp.scales.len();
    let scales = b.storage(&[&*kp.scales, &*vp.scales].concat());
    let got = b.run(
        &[Dispatch {
            dims: l,
            bindings: vec![(0, &params), (1, &src), (2, &slots), (4, &kd), (5, &vd), (6, &scales)],
        }],
        &[(&kd, kw.len()), (&vd, vw.len()), (&scales, n_scales)],
    )?;
    unwords(&got[0], kp.bytes);
    unwords(&got[1], vp.bytes);
    let sc = crate::compute::wgpu::f32s(got[2].clone());
    let (ks, vs) = sc.split_at(kp.scales.len().min(sc.len()));
    kp.scales.copy_from_slice(&ks[..kp.scales.len()]);
    vp.scales.copy_from_slice(&vs[..vp.scales.len()]);
    Ok(())
}
