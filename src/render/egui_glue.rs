//! The renderers inside egui: `egui_wgpu` paint callbacks and small widgets around them.
//!
//! How it works (as egui's `custom3d_wgpu` demo): [`install`] puts one [`Renderers`] value into the
//! egui-wgpu renderer's `callback_resources` at start-up. Each frame a widget adds a paint callback
//! that carries only its view id, an `Arc` of its data and a few parameters. `prepare` uploads data
//! whose generation changed and writes the uniforms; `paint` only binds and draws.

use std::sync::Arc;

use eframe::egui;
use eframe::egui_wgpu::{self, CallbackResources, CallbackTrait, ScreenDescriptor};
use glam::Vec2;

use super::blocks::{BlockGridData, BlockGridLayout, BlockGridRenderer};
use super::colormap::Colormap;
use super::heatmap::{HeatmapData, HeatmapRenderer, HeatmapStyle, HeatmapView};
use super::strip::{StripData, StripRenderer};
use super::{PxRect, wgpu};

/// Every renderer, as stored in `callback_resources`.
pub struct Renderers {
    /// Heatmaps.
    pub heatmap: HeatmapRenderer,
    /// Block grids.
    pub blocks: BlockGridRenderer,
    /// Memory strips.
    pub strip: StripRenderer,
}

impl Renderers {
    /// Build every pipeline for `format`.
    pub fn new(device: &wgpu::Device, queue: &wgpu::Queue, format: wgpu::TextureFormat) -> Self {
        Self {
            heatmap: HeatmapRenderer::new(device, queue, format),
            blocks: BlockGridRenderer::new(device, queue, format),
            strip: StripRenderer::new(device, format),
        }
    }
}

/// Install the renderers into an egui-wgpu render state (call once, from the app's creation).
pub fn install(rs: &egui_wgpu::RenderState) {
    let r = Renderers::new(&rs.device, &rs.queue, rs.target_format);
    rs.renderer.write().callback_resources.insert(r);
}

fn px_rect(rect: egui::Rect, ppp: f32) -> PxRect {
    [
        rect.min.x * ppp,
        rect.min.y * ppp,
        rect.width() * ppp,
        rect.height() * ppp,
    ]
}

struct HeatmapCallback {
    id: u64,
    data: Arc<HeatmapData>,
    rect: egui::Rect,
    view: HeatmapView,
    style: HeatmapStyle,
    colorbar: bool,
}

impl CallbackTrait for HeatmapCallback {
    fn prepare(
        &self,
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        sd: &ScreenDescriptor,
        encoder: &mut wgpu::CommandEncoder,
        res: &mut CallbackResources,
    ) -> Vec<wgpu::CommandBuffer> {
        if let Some(r) = res.get_mut::<Renderers>() {
            r.heatmap.upload(device, queue, encoder, self.id, &self.data);
            let ppp = sd.pixels_per_point;
            let view = HeatmapView {
                origin: self.view.origin,
                cells_per_px: self.view.cells_per_px / ppp,
            };
            r.heatmap.set_params(
                queue,
                self.id,
                px_rect(self.rect, ppp),
                &view,
                &self.style,
                self.colorbar,
            );
        }
        Vec::new()
    }

    fn paint(&self, _info: egui::PaintCallbackInfo, pass: &mut wgpu::RenderPass<'static>, res: &CallbackResources) {
        if let Some(r) = res.get::<Renderers>() {
            r.heatmap.paint(pass, self.id);
        }
    }
}

/// What a heatmap widget reports back.
pub struct HeatmapResponse {
    /// The widget's response (hover, clicks).
    pub response: egui::Response,
    /// The (row, column) under the pointer, if any.
    pub hovered: Option<(usize, usize)>,
}

/// A zoomable, pannable heatmap of `data` filling `size` points. `view` keeps the zoom and pan
/// between frames (in cells per point); `None` fits the whole matrix. Drag to pan, scroll or pinch
/// to zoom, double-click to fit again.
pub fn heatmap(
    ui: &mut egui::Ui,
    id: u64,
    data: &Arc<HeatmapData>,
    view: &mut Option<HeatmapView>,
    style: &HeatmapStyle,
    size: egui::Vec2,
) -> HeatmapResponse {
    let (rect, response) = ui.allocate_exact_size(size, egui::Sense::click_and_drag());
    let v = view.get_or_insert_with(|| HeatmapView::fit(data.rows, data.cols, rect.width(), rect.height()));
    if response.double_clicked() {
        *v = HeatmapView::fit(data.rows, data.cols, rect.width(), rect.height());
    }
    if response.dragged() {
        let d = response.drag_delta();
        v.pan(Vec2::new(d.x, d.y));
    }
    let mut hovered = None;
    if let Some(p) = response.hover_pos() {
        let local = Vec2::new(p.x - rect.min.x, p.y - rect.min.y);
        let (scroll, zoom) = ui.input(|i| (i.smooth_scroll_delta.y, i.zoom_delta()));
        let factor = zoom * (scroll * 0.004).exp();
        if (factor - 1.0).abs() > 1e-4 {
            v.zoom_at(local, factor);
        }
        let c = v.cell_at(local);
        if c.x >= 0.0 && c.y >= 0.0 && (c.x as usize) < data.cols && (c.y as usize) < data.rows {
            hovered = Some((c.y as usize, c.x as usize));
        }
    }
    let cb = HeatmapCallback {
        id,
        data: data.clone(),
        rect,
        view: *v,
        style: *style,
        colorbar: false,
    };
    ui.painter().add(egui_wgpu::Callback::new_paint_callback(rect, cb));
    HeatmapResponse { response, hovered }
}

/// Format a tick value compactly.
pub fn tick_label(v: f32) -> String {
    if v == 0.0 {
        "0".into()
    } else if v.abs() >= 100.0 || v.abs() < 0.01 {
        format!("{v:.1e}")
    } else {
        format!("{v:.2}")
    }
}

/// A vertical colorbar for `range` and `colormap` with five ticks (three or two on a short bar; labels
/// `font_size` points), drawn by the heatmap shader.
pub fn colorbar(
    ui: &mut egui::Ui,
    id: u64,
    range: (f32, f32),
    colormap: Colormap,
    size: egui::Vec2,
    font_size: f32,
) -> egui::Response {
    let (rect, response) = ui.allocate_exact_size(size, egui::Sense::hover());
    let bar = egui::Rect::from_min_size(rect.min, egui::vec2((size.x * 0.35).min(18.0), size.y));
    let data = Arc::new(HeatmapData {
        rows: 1,
        cols: 1,
        values: vec![0.0],
        generation: 0,
    });
    let style = HeatmapStyle {
        colormap,
        range: Some(range),
        grid: false,
        highlight: Default::default(),
    };
    let view = HeatmapView::fit(1, 1, 1.0, 1.0);
    ui.painter().add(egui_wgpu::Callback::new_paint_callback(
        bar,
        HeatmapCallback {
            id,
            data,
            rect: bar,
            view,
            style,
            colorbar: true,
        },
    ));
    // Five ticks where they fit, else three, else the two ends: the end labels sit half a line inside
    // the bar, so neighbours need 1.7 lines between their ticks to stay 0.1 of a line apart.
    let steps = [4usize, 2]
        .into_iter()
        .find(|&n| bar.height() / n as f32 >= 1.7 * font_size)
        .unwrap_or(1);
    for k in 0..=steps {
        let t = k as f32 / steps as f32;
        let y = bar.max.y - t * bar.height();
        let v = range.0 + t * (range.1 - range.0);
        // The end labels sit inside the bar's height (the top one level with its top edge, the bottom one
        // with its bottom edge), never above it, where the heatmap's title runs.
        // (A bar under 2.2 lines keeps them centred on its ends: inside, they would meet.)
        let inside = bar.height() >= 2.2 * font_size;
        let align = if k == 0 && inside {
            egui::Align2::LEFT_BOTTOM
        } else if k == steps && inside {
            egui::Align2::LEFT_TOP
        } else {
            egui::Align2::LEFT_CENTER
        };
        ui.painter().text(
            egui::pos2(bar.max.x + 4.0, y),
            align,
            tick_label(v),
            egui::FontId::proportional(font_size),
            ui.visuals().text_color(),
        );
    }
    response
}

struct BlocksCallback {
    id: u64,
    data: BlockGridData,
    rect: egui::Rect,
    bg: [u8; 4],
}

impl CallbackTrait for BlocksCallback {
    fn prepare(
        &self,
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        sd: &ScreenDescriptor,
        _encoder: &mut wgpu::CommandEncoder,
        res: &mut CallbackResources,
    ) -> Vec<wgpu::CommandBuffer> {
        if let Some(r) = res.get_mut::<Renderers>() {
            r.blocks.upload(device, queue, self.id, &self.data);
            r.blocks
                .set_params(queue, self.id, px_rect(self.rect, sd.pixels_per_point), self.bg);
        }
        Vec::new()
    }

    fn paint(&self, _info: egui::PaintCallbackInfo, pass: &mut wgpu::RenderPass<'static>, res: &CallbackResources) {
        if let Some(r) = res.get::<Renderers>() {
            r.blocks.paint(pass, self.id);
        }
    }
}

/// The block pool as a grid filling `size` points, with block ids where they fit at a size within
/// `font` (min, max points; presentation mode raises the minimum). Returns the response and the block
/// under the pointer.
pub fn block_grid(
    ui: &mut egui::Ui,
    id: u64,
    data: &BlockGridData,
    size: egui::Vec2,
    font: (f32, f32),
) -> (egui::Response, Option<usize>) {
    let (rect, response) = ui.allocate_exact_size(size, egui::Sense::hover());
    ui.painter().add(egui_wgpu::Callback::new_paint_callback(
        rect,
        BlocksCallback {
            id,
            data: data.clone(),
            rect,
            bg: crate::style::canvas(ui.visuals().dark_mode),
        },
    ));
    let ppp = ui.ctx().pixels_per_point();
    let n = data.owners.len().max(1);
    let lay = BlockGridLayout::new(n, data.block_size.max(1), rect.width() * ppp, rect.height() * ppp);
    let mut hovered = None;
    for b in 0..data.owners.len() {
        let [x, y, w, h] = lay.block_rect(b).map(|v| v / ppp);
        let r = egui::Rect::from_min_size(rect.min + egui::vec2(x, y), egui::vec2(w, h));
        let font_size = (h * 0.3).clamp(font.0, font.1);
        let digits = b.to_string().len() as f32;
        if w >= 18.0 && h >= 12.0 && w >= (digits * 0.6 + 0.8) * font_size && h >= font_size * 1.2 {
            // Black or white, whichever reads on the block's border (written) or fill.
            let written = data.written.is_some_and(|(wb, _)| wb == b);
            let owner = data.owners.get(b).copied().unwrap_or(-1);
            let ink = crate::style::ink_on(if written {
                crate::style::WRITTEN
            } else {
                crate::style::owner_fill(owner)
            });
            ui.painter().text(
                r.left_top() + egui::vec2(2.0, 1.0),
                egui::Align2::LEFT_TOP,
                b.to_string(),
                egui::FontId::monospace(font_size),
                ink,
            );
        }
        if response.hover_pos().is_some_and(|p| r.contains(p)) {
            hovered = Some(b);
        }
    }
    (response, hovered)
}

struct StripCallback {
    id: u64,
    data: StripData,
    rect: egui::Rect,
}

impl CallbackTrait for StripCallback {
    fn prepare(
        &self,
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        sd: &ScreenDescriptor,
        _encoder: &mut wgpu::CommandEncoder,
        res: &mut CallbackResources,
    ) -> Vec<wgpu::CommandBuffer> {
        if let Some(r) = res.get_mut::<Renderers>() {
            r.strip.prepare(
                device,
                queue,
                self.id,
                &self.data,
                px_rect(self.rect, sd.pixels_per_point),
            );
        }
        Vec::new()
    }

    fn paint(&self, _info: egui::PaintCallbackInfo, pass: &mut wgpu::RenderPass<'static>, res: &CallbackResources) {
        if let Some(r) = res.get::<Renderers>() {
            r.strip.paint(pass, self.id);
        }
    }
}

/// The static cache as a memory strip filling `size` points.
pub fn memory_strip(ui: &mut egui::Ui, id: u64, data: &StripData, size: egui::Vec2) -> egui::Response {
    let (rect, response) = ui.allocate_exact_size(size, egui::Sense::hover());
    ui.painter().add(egui_wgpu::Callback::new_paint_callback(
        rect,
        StripCallback {
            id,
            data: data.clone(),
            rect,
        },
    ));
    response
}
