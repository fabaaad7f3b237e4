//! Heatmap renderer (`shaders/heatmap.wgsl`, `shaders/maxpool.wgsl`).
//!
//! How it works: a matrix is uploaded once (per generation) as order-preserving u32 keys ([`key`]) into
//! an R32Uint texture (renderable on GL too, unlike R32Float), and a MAX-pooled
//! mip chain is built with one small render pass per level. Each frame writes only a 160-byte uniform
//! block: the target rectangle, the view (which cell sits at the top-left and how many cells one
//! pixel covers), the value range, grid/highlight flags and colours. The fragment shader picks the mip
//! level whose texels cover the pixel's footprint and takes the max of the texels it overlaps, so a
//! single hot cell survives any zoom-out. Masked entries are −∞ and drawn hatched.

use std::collections::HashMap;

use glam::Vec2;

use super::colormap::{Colormap, lut_rgba};
use super::{
    PxRect, UNIFORM, frag_entry, fullscreen_pipeline, rgba, rgba_texture, tex_binding, uniform_bind_group, wgpu,
};

pub use crate::figure::{HeatmapData, MAX_SIDE};

/// What to highlight.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Highlight {
    /// Nothing.
    #[default]
    None,
    /// One row (a query).
    Row(usize),
    /// One column (a key).
    Col(usize),
    /// One cell.
    Cell(usize, usize),
}

/// How a heatmap is drawn.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HeatmapStyle {
    /// The colormap.
    pub colormap: Colormap,
    /// Fixed value range, or `None` for the data's finite min..max.
    pub range: Option<(f32, f32)>,
    /// Grid lines when cells are at least 6 px.
    pub grid: bool,
    /// Highlighted row/column/cell.
    pub highlight: Highlight,
}

impl Default for HeatmapStyle {
    fn default() -> Self {
        Self {
            colormap: Colormap::Sequential,
            range: None,
            grid: true,
            highlight: Highlight::None,
        }
    }
}

/// Colours of the non-data parts.
pub const MASK_COLOR: [u8; 4] = crate::style::MASKED;
/// Grid lines and colorbar ticks.
pub const GRID_COLOR: [u8; 4] = crate::style::GRID;
/// Outside the matrix.
pub const BG_COLOR: [u8; 4] = crate::style::CANVAS;
/// Highlight outlines (the grammar's "current").
pub const HL_COLOR: [u8; 4] = crate::style::CURRENT;

/// Which part of the matrix a view shows: the cell at the top-left pixel and cells per pixel.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HeatmapView {
    /// Cell coordinate (column, row) at the top-left of the rectangle.
    pub origin: Vec2,
    /// Cells per pixel along x and y.
    pub cells_per_px: Vec2,
}

impl HeatmapView {
    /// The whole matrix in a `w × h` pixel rectangle, square cells, centred.
    pub fn fit(rows: usize, cols: usize, w: f32, h: f32) -> Self {
        let s = (cols as f32 / w.max(1.0)).max(rows as f32 / h.max(1.0));
        let origin = Vec2::new(cols as f32 - w * s, rows as f32 - h * s) * 0.5;
        Self {
            origin,
            cells_per_px: Vec2::splat(s),
        }
    }

    /// The whole matrix filling `w` × `h` pixels, its cells stretched to do so (not square).
    pub fn fill(rows: usize, cols: usize, w: f32, h: f32) -> Self {
        Self {
            origin: Vec2::ZERO,
            cells_per_px: Vec2::new(cols as f32 / w.max(1.0), rows as f32 / h.max(1.0)),
        }
    }

    /// The cell coordinate under pixel `p` (relative to the rectangle's top-left).
    pub fn cell_at(&self, p: Vec2) -> Vec2 {
        self.origin + p * self.cells_per_px
    }

    /// The pixel (relative to the rectangle's top-left) where cell coordinate `c` is drawn.
    pub fn px_of(&self, c: Vec2) -> Vec2 {
        (c - self.origin) / self.cells_per_px
    }

    /// Zoom by `factor` (> 1 zooms in) keeping the cell under pixel `p` fixed.
    pub fn zoom_at(&mut self, p: Vec2, factor: f32) {
        let anchor = self.cell_at(p);
        self.cells_per_px = (self.cells_per_px / factor.max(1e-6)).clamp(Vec2::splat(1.0 / 256.0), Vec2::splat(1024.0));
        self.origin = anchor - p * self.cells_per_px;
    }

    /// Pan by a drag of `delta` pixels.
    pub fn pan(&mut self, delta: Vec2) {
        self.origin -= delta * self.cells_per_px;
    }
}

/// The mip level a view reads: the smallest whose texels (2^level cells) cover a pixel's footprint.
pub fn mip_level(view: &HeatmapView, levels: u32) -> u32 {
    let cover = view.cells_per_px.x.max(view.cells_per_px.y);
    if cover <= 1.0 {
        0
    } else {
        (cover.log2().ceil() as u32).min(levels.saturating_sub(1))
    }
}

fn auto_range((lo, hi): (f32, f32), map: Colormap) -> (f32, f32) {
    match map {
        Colormap::Sequential => (lo, hi),
        Colormap::Diverging => {
            let m = lo.abs().max(hi.abs()).max(1e-12);
            (-m, m)
        }
    }
}

#[repr(C)]
#[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct Params {
    rect: [f32; 4],
    view: [f32; 4],
    range: [f32; 4],
    dims: [u32; 4],
    flags: [u32; 4],
    highlight: [i32; 4],
    mask_color: [f32; 4],
    grid_color: [f32; 4],
    bg_color: [f32; 4],
    hl_color: [f32; 4],
}
const _: () = assert!(std::mem::size_of::<Params>() == 160);

struct Instance {
    generation: u64,
    rows: u32,
    cols: u32,
    levels: u32,
    range: (f32, f32),
    uniform: wgpu::Buffer,
    bind_group: wgpu::BindGroup,
    _texture: wgpu::Texture,
}

/// The heatmap renderer: pipelines, the colour LUT, and one GPU instance per view id.
pub struct HeatmapRenderer {
    pipeline: wgpu::RenderPipeline,
    layout: wgpu::BindGroupLayout,
    mip_pipeline: wgpu::RenderPipeline,
    mip_layout: wgpu::BindGroupLayout,
    lut: wgpu::TextureView,
    instances: HashMap<u64, Instance>,
    /// How many uploads happened (tests check that unchanged data is not re-uploaded).
    pub uploads: u64,
}

fn unfilterable() -> wgpu::BindingType {
    tex_binding(wgpu::TextureSampleType::Float { filterable: false })
}

fn uint_tex() -> wgpu::BindingType {
    tex_binding(wgpu::TextureSampleType::Uint)
}

/// Order-preserving key of a float: `key(a) < key(b)` exactly when `a < b` (−∞ lowest, NaN treated
/// as −∞). The GPU takes integer maxima of keys and decodes with `unkey` in heatmap.wgsl.
pub fn key(v: f32) -> u32 {
    let v = if v.is_nan() { f32::NEG_INFINITY } else { v };
    let b = v.to_bits();
    if b & 0x8000_0000 != 0 { !b } else { b | 0x8000_0000 }
}

impl HeatmapRenderer {
    /// Build the pipelines for render targets of `format`.
    pub fn new(device: &wgpu::Device, queue: &wgpu::Queue, format: wgpu::TextureFormat) -> Self {
        let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("heatmap"),
            entries: &[
                frag_entry(0, UNIFORM),
                frag_entry(1, uint_tex()),
                frag_entry(2, unfilterable()),
            ],
        });
        let mip_layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("maxpool"),
            entries: &[frag_entry(0, uint_tex())],
        });
        Self {
            pipeline: fullscreen_pipeline(device, "heatmap.wgsl", &layout, format),
            mip_pipeline: fullscreen_pipeline(device, "maxpool.wgsl", &mip_layout, wgpu::TextureFormat::R32Uint),
            layout,
            mip_layout,
            lut: rgba_texture(device, queue, "colormap lut", 256, 2, &lut_rgba()),
            instances: HashMap::new(),
            uploads: 0,
        }
    }

    /// Make sure view `id` holds `data` on the GPU: uploads and rebuilds the max-pool chain only when
    /// the generation (or size) changed. Mip passes are recorded into `encoder`.
    pub fn upload(
        &mut self,
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        encoder: &mut wgpu::CommandEncoder,
        id: u64,
        data: &HeatmapData,
    ) {
        if let Some(i) = self.instances.get(&id)
            && i.generation == data.generation
            && i.rows as usize == data.rows
            && i.cols as usize == data.cols
        {
            return;
        }
        self.uploads += 1;
        let (w, h) = (data.cols as u32, data.rows as u32);
        let levels = 32 - w.max(h).leading_zeros();
        let texture = device.create_texture(&wgpu::TextureDescriptor {
            label: Some("heatmap values"),
            size: wgpu::Extent3d {
                width: w,
                height: h,
                depth_or_array_layers: 1,
            },
            mip_level_count: levels,
            sample_count: 1,
            dimension: wgpu::TextureDimension::D2,
            format: wgpu::TextureFormat::R32Uint,
            usage: wgpu::TextureUsages::TEXTURE_BINDING
                | wgpu::TextureUsages::RENDER_ATTACHMENT
                | wgpu::TextureUsages::COPY_DST,
            view_formats: &[],
        });
        let keys: Vec<u32> = data.values.iter().map(|&v| key(v)).collect();
        queue.write_texture(
            texture.as_image_copy(),
            bytemuck::cast_slice(&keys),
            wgpu::TexelCopyBufferLayout {
                offset: 0,
                bytes_per_row: Some(w * 4),
                rows_per_image: None,
            },
            wgpu::Extent3d {
                width: w,
                height: h,
                depth_or_array_layers: 1,
            },
        );
        let level_view = |l: u32| {
            texture.create_view(&wgpu::TextureViewDescriptor {
                base_mip_level: l,
                mip_level_count: Some(1),
                ..Default::default()
            })
        };
        for l in 1..levels {
            let src = level_view(l - 1);
            let dst = level_view(l);
            let bg = device.create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some("maxpool"),
                layout: &self.mip_layout,
                entries: &[wgpu::BindGroupEntry {
                    binding: 0,
                    resource: wgpu::BindingResource::TextureView(&src),
                }],
            });
            let mut pass = encoder.begin_render_pass(&wgpu::RenderPassDescriptor {
                label: Some("maxpool level"),
                color_attachments: &[Some(wgpu::RenderPassColorAttachment {
                    view: &dst,
                    depth_slice: None,
                    resolve_target: None,
                    ops: wgpu::Operations {
                        load: wgpu::LoadOp::Clear(wgpu::Color::BLACK),
                        store: wgpu::StoreOp::Store,
                    },
                })],
                ..Default::default()
            });
            pass.set_pipeline(&self.mip_pipeline);
            pass.set_bind_group(0, &bg, &[]);
            pass.draw(0..3, 0..1);
        }
        let all = texture.create_view(&Default::default());
        let (uniform, bind_group) = uniform_bind_group(
            device,
            &self.layout,
            "heatmap",
            std::mem::size_of::<Params>(),
            &[&all, &self.lut],
        );
        self.instances.insert(
            id,
            Instance {
                generation: data.generation,
                rows: h,
                cols: w,
                levels,
                range: data.finite_range(),
                uniform,
                bind_group,
                _texture: texture,
            },
        );
    }

    /// The value range view `id` is drawn with under `style`: the fixed range, else the data's finite
    /// range — made symmetric around 0 for the diverging map, so that white means zero.
    pub fn range(&self, id: u64, style: &HeatmapStyle) -> Option<(f32, f32)> {
        style
            .range
            .or_else(|| self.instances.get(&id).map(|i| auto_range(i.range, style.colormap)))
    }

    /// Write the per-frame uniforms of view `id`: drawn into `rect` (framebuffer pixels) with `view`.
    /// `colorbar` draws the colour legend of the same range instead of the matrix.
    pub fn set_params(
        &self,
        queue: &wgpu::Queue,
        id: u64,
        rect: PxRect,
        view: &HeatmapView,
        style: &HeatmapStyle,
        colorbar: bool,
    ) {
        let Some(inst) = self.instances.get(&id) else { return };
        let (lo, hi) = style.range.unwrap_or(auto_range(inst.range, style.colormap));
        let (hl_bits, hr, hc) = match style.highlight {
            Highlight::None => (0, -1, -1),
            Highlight::Row(r) => (1, r as i32, -1),
            Highlight::Col(c) => (2, -1, c as i32),
            Highlight::Cell(r, c) => (4, r as i32, c as i32),
        };
        let p = Params {
            rect,
            view: [view.origin.x, view.origin.y, view.cells_per_px.x, view.cells_per_px.y],
            range: [lo, hi, 1.0 / (hi - lo), 0.0],
            dims: [inst.cols, inst.rows, inst.levels, style.colormap.row()],
            flags: [
                style.grid as u32,
                hl_bits,
                colorbar as u32,
                mip_level(view, inst.levels),
            ],
            highlight: [hr, hc, 0, 0],
            mask_color: rgba(MASK_COLOR),
            grid_color: rgba(GRID_COLOR),
            bg_color: rgba(BG_COLOR),
            hl_color: rgba(HL_COLOR),
        };
        queue.write_buffer(&inst.uniform, 0, bytemuck::bytes_of(&p));
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

#[cfg(test)]
mod tests {
    use super::key;

    #[test]
    fn keys_preserve_order() {
        let xs = [
            f32::NEG_INFINITY,
            -1e30,
            -2.5,
            -1.0,
            -1e-30,
            -0.0,
            0.0,
            1e-30,
            0.25,
            1.0,
            7.5,
            1e30,
            f32::INFINITY,
        ];
        for w in xs.windows(2) {
            assert!(key(w[0]) <= key(w[1]), "{} {}", w[0], w[1]);
        }
        assert!(key(f32::NEG_INFINITY) > 0, "0 is reserved for 'no texel'");
        assert_eq!(key(f32::NAN), key(f32::NEG_INFINITY));
    }
}
