//! Memory-strip renderer (`shaders/strip.wgsl`): the static KV cache `[layers × heads × max_seq_len]`.
//!
//! How it works: everything fits in one uniform block (per-layer lengths for up to 64 layers), so
//! there is no data texture. Rows are (layer, head) pairs, columns positions; used, reserved,
//! just-written and read-by-this-step slots get distinct colours.

use std::collections::HashMap;

use super::{PxRect, UNIFORM, frag_entry, fullscreen_pipeline, rgba, uniform_bind_group, wgpu};

/// The static cache as the renderer sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StripData {
    /// Layers (at most [`MAX_LAYERS`]).
    pub layers: usize,
    /// KV heads per layer.
    pub heads: usize,
    /// Reserved positions.
    pub max_seq_len: usize,
    /// Filled length of each layer.
    pub lens: Vec<usize>,
    /// The (layer, pos) being written.
    pub write: Option<(usize, usize)>,
    /// The layer whose attention reads, and the last position it reads (`0..=end`).
    pub read: Option<(usize, usize)>,
}

/// Most layers a strip shows.
pub const MAX_LAYERS: usize = 64;

/// Slots holding tokens.
pub const USED_COLOR: [u8; 4] = crate::style::REQUESTS[0];
/// Reserved, never written.
pub const RESERVED_COLOR: [u8; 4] = crate::style::RESERVED;
/// The slot this step writes.
pub const WRITE_COLOR: [u8; 4] = crate::style::WRITTEN;
/// The slots this step's attention reads.
pub const READ_COLOR: [u8; 4] = crate::style::READ;
/// Background and gaps.
pub const BG_COLOR: [u8; 4] = crate::style::CANVAS;

#[repr(C)]
#[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct Params {
    rect: [f32; 4],
    dims: [u32; 4],
    write: [i32; 4],
    geom: [f32; 4],
    used_color: [f32; 4],
    reserved_color: [f32; 4],
    write_color: [f32; 4],
    read_color: [f32; 4],
    bg_color: [f32; 4],
    lens: [[u32; 4]; 16],
}
const _: () = assert!(std::mem::size_of::<Params>() == 144 + 256);

/// Row height and layer gap for `data` in a rectangle `h` pixels tall.
pub fn geometry(data: &StripData, w: f32, h: f32) -> (f32, f32, f32) {
    let layers = data.layers.clamp(1, MAX_LAYERS) as f32;
    let rows = layers * data.heads.max(1) as f32;
    let gap = if layers > 1.0 {
        (h / rows * 0.5).clamp(1.0, 6.0).floor()
    } else {
        0.0
    };
    let row_h = ((h - gap * (layers - 1.0)) / rows).max(0.5);
    (row_h, gap, w / data.max_seq_len.max(1) as f32)
}

/// The memory-strip renderer.
pub struct StripRenderer {
    pipeline: wgpu::RenderPipeline,
    layout: wgpu::BindGroupLayout,
    instances: HashMap<u64, (wgpu::Buffer, wgpu::BindGroup)>,
}

impl StripRenderer {
    /// Build the pipeline for render targets of `format`.
    pub fn new(device: &wgpu::Device, format: wgpu::TextureFormat) -> Self {
        let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("strip"),
            entries: &[frag_entry(0, UNIFORM)],
        });
        Self {
            pipeline: fullscreen_pipeline(device, "strip.wgsl", &layout, format),
            layout,
            instances: HashMap::new(),
        }
    }

    /// Write view `id`'s uniforms for `data` drawn into `rect`.
    pub fn prepare(&mut self, device: &wgpu::Device, queue: &wgpu::Queue, id: u64, data: &StripData, rect: PxRect) {
        let (buf, _) = self
            .instances
            .entry(id)
            .or_insert_with(|| uniform_bind_group(device, &self.layout, "strip", std::mem::size_of::<Params>(), &[]));
        let (row_h, gap, slot_w) = geometry(data, rect[2], rect[3]);
        let mut lens = [[0u32; 4]; 16];
        for (l, &len) in data.lens.iter().take(MAX_LAYERS).enumerate() {
            lens[l / 4][l % 4] = len.min(data.max_seq_len) as u32;
        }
        let (wl, wp) = data.write.map_or((-1, -1), |(l, p)| (l as i32, p as i32));
        let (rl, rp) = data.read.map_or((-1, -1), |(l, p)| (l as i32, p as i32));
        let p = Params {
            rect,
            dims: [
                data.layers.clamp(1, MAX_LAYERS) as u32,
                data.heads.max(1) as u32,
                data.max_seq_len.max(1) as u32,
                0,
            ],
            write: [wl, wp, rl, rp],
            geom: [row_h, gap, slot_w, 0.0],
            used_color: rgba(USED_COLOR),
            reserved_color: rgba(RESERVED_COLOR),
            write_color: rgba(WRITE_COLOR),
            read_color: rgba(READ_COLOR),
            bg_color: rgba(BG_COLOR),
            lens,
        };
        queue.write_buffer(buf, 0, bytemuck::bytes_of(&p));
    }

    /// Draw view `id` into the pass's current viewport.
    pub fn paint(&self, pass: &mut wgpu::RenderPass<'_>, id: u64) {
        if let Some((_, bg)) = self.instances.get(&id) {
            pass.set_pipeline(&self.pipeline);
            pass.set_bind_group(0, bg, &[]);
            pass.draw(0..3, 0..1);
        }
    }
}
