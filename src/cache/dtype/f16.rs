//! The f16 KV dtype: IEEE half precision, two bytes a value, no scales; every write rounds to nearest
//! (ties to even), as `__float2half` does. Its read paths: `half`'s conversion here (and F16C in
//! `simd::decode`'s own f16 path); its kernel snippets are found by its name (`compute::kv_snippets`).

use half::f16;
use half::slice::HalfFloatSliceExt;

use super::format::{KvFormat, ScaleLayout};

/// The f16 format.
pub static FORMAT: KvFormat = KvFormat {
    name: "f16",
    bits: 16,
    scales: ScaleLayout::None,
    scale_init: 0.0,
    quant: None,
    write,
    read,
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
