//! The f16 KV dtype: IEEE half precision, two bytes a value, no scales; every write rounds to nearest
//! (ties to even), as `__float2half` does. Its read paths: `half`'s conversion here (and F16C in
//! `simd::decode`'s own f16 path), `kv_load8`/`kv_unpack8` in `kernels/kv/f16.cuh`, and `k_at`/`v_at` in
//! `kernels/kv/f16_read_*.wgsl`.

use half::f16;
use half::slice::HalfFloatSliceExt;

use super::format::{KernelReads, KvFormat, ScaleLayout, WgslReads};

/// The f16 format.
pub static FORMAT: KvFormat = KvFormat {
    name: "f16",
    bits: 16,
    scales: ScaleLayout::None,
    scale_init: 0.0,
    quant: None,
    write,
    read,
    kernels: Some(KernelReads {
        cuda: ("kernels/kv/f16.cuh", include_str!("../../../kernels/kv/f16.cuh")),
        wgsl: WgslReads {
            read_packed: (
                "kernels/kv/f16_read_packed.wgsl",
                include_str!("../../../kernels/kv/f16_read_packed.wgsl"),
            ),
            read_native: (
                "kernels/kv/f16_read_native.wgsl",
                include_str!("../../../kernels/kv/f16_read_native.wgsl"),
            ),
            write_packed: (
                "kernels/kv/f16_write_packed.wgsl",
                include_str!("../../../kernels/kv/f16_write_packed.wgsl"),
            ),
            write_native: (
                "kernels/kv/f16_write_native.wgsl",
                include_str!("../../../kernels/kv/f16_write_native.wgsl"),
            ),
        },
    }),
};

/// The row's values as f16 (pools are 8-byte aligned and rows start at even bytes, so the cast holds).
fn halves(b: &[u8]) -> &[f16] {
    bytemuck::cast_slice(b)
}

fn write(src: &[f32], dst: &mut [u8], _scales: &mut [f32]) {
    bytemuck::cast_slice_mut::<u8, f16>(dst).convert_from_f32_slice(src);
}

fn read(src: &[u8], _scales: &[f32], dst: &mut [f32]) {
    halves(src).convert_to_f32_slice(dst);
}
