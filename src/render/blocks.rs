//! Block-grid renderer (`shaders/blocks.wgsl`): the physical KV block pool.
//!
//! How it works: per block, a texel holds (owner request, filled slots). Block `b` is drawn at grid
//! cell `(b % cols, b / cols)` and split into `block_size` slots; filled slots take the owner's
//! colour, allocated-but-empty slots a faded one, free blocks are dark. The block and slot being
//! written are highlighted. Block ids are labelled by the caller (egui text, or [`super::text`] in
//! PNGs) at [`BlockGridLayout::block_rect`].

use std::collections::HashMap;

use super::colormap::PALETTE;
use super::{
    PxRect, UNIFORM, frag_entry, fullscreen_pipeline, rgba, rgba_texture, tex_binding, uniform_bind_group, wgpu,
};

pub use crate::figure::{BlockGridData, MAX_BLOCKS};

/// Slot columns inside a block: a divisor of `block_size` near its square root when there is one
/// (8 → 4×2, 16 → 4×4, 32 → 8×4), so that no block shows a dead slot.
pub fn slot_cols(block_size: usize) -> usize {
    let bs = block_size.max(1);
    let root = (bs as f64).sqrt().ceil() as usize;
    (root..=2 * root).find(|c| bs.is_multiple_of(*c)).unwrap_or(root).max(1)
}

/// Where blocks land in a rectangle.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BlockGridLayout {
    /// Blocks per grid row.
    pub cols: usize,
    /// Cell width and height in pixels (gap included).
    pub cell: (f32, f32),
    /// Gap between blocks in pixels.
    pub gap: f32,
    /// Slot columns inside a block.
    pub slot_cols: usize,
}

impl BlockGridLayout {
    /// Lay `n` blocks of `block_size` slots out in a `w × h` rectangle, cells close to square.
    pub fn new(n: usize, block_size: usize, w: f32, h: f32) -> Self {
        let n = n.max(1);
        let mut cols = ((n as f32 * w / h.max(1.0)).sqrt().ceil() as usize).clamp(1, n);
        while cols < n && (n.div_ceil(cols) as f32) * (w / cols as f32) > h * 1.02 {
            cols += 1;
        }
        let rows = n.div_ceil(cols);
        let cw = w / cols as f32;
        let ch = (h / rows as f32).min(cw.max(h / rows as f32 * 0.5));
        let gap = (cw.min(ch) * 0.08).clamp(0.0, 4.0).floor();
        Self {
            cols,
            cell: (cw, ch),
            gap,
            slot_cols: slot_cols(block_size),
        }
    }

    /// Block `b`'s drawn rectangle (x, y, w, h) relative to the grid's top-left, gap excluded.
    pub fn block_rect(&self, b: usize) -> [f32; 4] {
        let (x, y) = ((b % self.cols) as f32, (b / self.cols) as f32);
        [
            x * self.cell.0,
            y * self.cell.1,
            self.cell.0 - self.gap,
            self.cell.1 - self.gap,
        ]
    }
}

/// Free blocks.
pub const FREE_COLOR: [u8; 4] = crate::style::FREE;
/// Background and gaps.
pub const BG_COLOR: [u8; 4] = crate::style::CANVAS;
/// The block and slot being written (outline of the block, fill of the slot).
pub const HL_COLOR: [u8; 4] = crate::style::WRITTEN;

#[repr(C)]
#[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct Params {
    rect: [f32; 4],
    grid: [u32; 4],
    cell: [f32; 4],
    highlight: [i32; 4],
    free_color: [f32; 4],
    bg_color: [f32; 4],
    hl_color: [f32; 4],
}
const _: () = assert!(std::mem::size_of::<Params>() == 112);

struct Instance {
    data: BlockGridData,
    uniform: wgpu::Buffer,
    bind_group: wgpu::BindGroup,
    texture: wgpu::Texture,
}

/// The block-grid renderer.
pub struct BlockGridRenderer {
    pipeline: wgpu::RenderPipeline,
    layout: wgpu::BindGroupLayout,
    palette: wgpu::TextureView,
    instances: HashMap<u64, Instance>,
}

impl BlockGridRenderer {
    /// Build the pipeline for render targets of `format`.
    pub fn new(device: &wgpu::Device, queue: &wgpu::Queue, format: wgpu::TextureFormat) -> Self {
        let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("blocks"),
            entries: &[
                frag_entry(0, UNIFORM),
                frag_entry(1, tex_binding(wgpu::TextureSampleType::Sint)),
                frag_entry(2, tex_binding(wgpu::TextureSampleType::Float { filterable: false })),
            ],
        });
        let pal: Vec<u8> = PALETTE.iter().flatten().copied().collect();
        Self {
            pipeline: fullscreen_pipeline(device, "blocks.wgsl", &layout, format),
            layout,
            palette: rgba_texture(device, queue, "palette", PALETTE.len() as u32, 1, &pal),
            instances: HashMap::new(),
        }
    }

    /// Upload `data` for view `id` when it changed.
    pub fn upload(&mut self, device: &wgpu::Device, queue: &wgpu::Queue, id: u64, data: &BlockGridData) {
        let n = data.owners.len().clamp(1, MAX_BLOCKS);
        if let Some(i) = self.instances.get(&id)
            && i.data == *data
        {
            return;
        }
        let texels: Vec<i32> = (0..n)
            .flat_map(|b| {
                [
                    data.owners.get(b).copied().unwrap_or(-1),
                    data.filled.get(b).copied().unwrap_or(0),
                ]
            })
            .collect();
        let size = wgpu::Extent3d {
            width: n as u32,
            height: 1,
            depth_or_array_layers: 1,
        };
        let reuse = self
            .instances
            .get(&id)
            .filter(|i| i.texture.width() == n as u32)
            .map(|i| i.texture.clone());
        let texture = reuse.unwrap_or_else(|| {
            device.create_texture(&wgpu::TextureDescriptor {
                label: Some("block table"),
                size,
                mip_level_count: 1,
                sample_count: 1,
                dimension: wgpu::TextureDimension::D2,
                format: wgpu::TextureFormat::Rg32Sint,
                usage: wgpu::TextureUsages::TEXTURE_BINDING | wgpu::TextureUsages::COPY_DST,
                view_formats: &[],
            })
        });
        queue.write_texture(
            texture.as_image_copy(),
            bytemuck::cast_slice(&texels),
            wgpu::TexelCopyBufferLayout {
                offset: 0,
                bytes_per_row: Some(n as u32 * 8),
                rows_per_image: None,
            },
            size,
        );
        let view = texture.create_view(&Default::default());
        let (uniform, bind_group) = uniform_bind_group(
            device,
            &self.layout,
            "blocks",
            std::mem::size_of::<Params>(),
            &[&view, &self.palette],
        );
        self.instances.insert(
            id,
            Instance {
                data: data.clone(),
                uniform,
                bind_group,
                texture,
            },
        );
    }

    /// Write the per-frame uniforms of view `id` drawn into `rect`; returns the layout used.
    pub fn set_params(&self, queue: &wgpu::Queue, id: u64, rect: PxRect, bg: [u8; 4]) -> Option<BlockGridLayout> {
        let inst = self.instances.get(&id)?;
        let d = &inst.data;
        let n = d.owners.len().clamp(1, MAX_BLOCKS);
        let lay = BlockGridLayout::new(n, d.block_size.max(1), rect[2], rect[3]);
        let (wb, ws) = d.written.map_or((-1, -1), |(b, s)| (b as i32, s as i32));
        let p = Params {
            rect,
            grid: [
                n as u32,
                d.block_size.max(1) as u32,
                lay.cols as u32,
                lay.slot_cols as u32,
            ],
            cell: [lay.cell.0, lay.cell.1, lay.gap, 0.0],
            highlight: [wb, ws, PALETTE.len() as i32, 0],
            free_color: rgba(FREE_COLOR),
            bg_color: rgba(bg),
            hl_color: rgba(HL_COLOR),
        };
        queue.write_buffer(&inst.uniform, 0, bytemuck::bytes_of(&p));
        Some(lay)
    }

    /// Draw view `id` into the pass's current viewport.
    pub fn paint(&self, pass: &mut wgpu::RenderPass<'_>, id: u64) {
        if let Some(inst) = self.instances.get(&id) {
            pass.set_pipeline(&self.pipeline);
            pass.set_bind_group(0, &inst.bind_group, &[]);
            pass.draw(0..3, 0..1);
        }
    }
}
