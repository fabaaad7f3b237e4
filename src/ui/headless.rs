//! Drawing the app without a window: `kvscope render`, Ctrl+S and the tests.
//!
//! How it works: an egui [`egui::Context`] runs the app's frame on a [`RawInput`](egui::RawInput) of
//! the requested size; the egui-wgpu renderer — with kvscope's [`Renderers`] in its callback resources,
//! exactly as inside eframe — draws the tessellated frame into an offscreen texture, which is read back.

use std::iter::once;

use eframe::egui;
use eframe::egui_wgpu::{self, RendererOptions, ScreenDescriptor};

use crate::compute::profile::span;
use crate::render::egui_glue::Renderers;
use crate::render::offscreen::{FORMAT, Image, read_texture, target};
use crate::render::{Gpu, wgpu};

/// Frames `kvscope render` and the overflow test run before keeping the last: enough for layouts that
/// settle over frames (egui's grids size their columns from the frame before, and a table scaled to fit
/// its view needs a frame to measure and one more to lay out at its scale).
pub const SETTLE_FRAMES: usize = 6;

/// An offscreen egui renderer.
pub struct Headless {
    gpu: Gpu,
    renderer: egui_wgpu::Renderer,
    ctx: egui::Context,
    layout: Option<super::layout::Layout>,
}

impl Headless {
    /// Open a headless GPU (software adapters are fine) and build the renderers.
    pub fn new() -> Result<Self, String> {
        let gpu = Gpu::headless()?;
        let mut renderer = egui_wgpu::Renderer::new(&gpu.device, FORMAT, RendererOptions::PREDICTABLE);
        renderer
            .callback_resources
            .insert(Renderers::new(&gpu.device, &gpu.queue, FORMAT));
        let ctx = egui::Context::default();
        super::fonts::install(&ctx);
        crate::style::install(&ctx);
        Ok(Self {
            gpu,
            renderer,
            ctx,
            layout: None,
        })
    }

    /// The text runs of the last frame rendered, in physical pixels (`--layout-json`, the overflow check).
    pub fn layout(&self) -> Option<&super::layout::Layout> {
        self.layout.as_ref()
    }

    /// The adapter in words.
    pub fn adapter(&self) -> String {
        format!("{} ({:?})", self.gpu.info.name, self.gpu.info.backend)
    }

    /// Run `frames` frames of `ui_fn` at `size` pixels and `ppp` pixels per point; return the last.
    pub fn render(
        &mut self,
        size: [u32; 2],
        ppp: f32,
        frames: usize,
        mut ui_fn: impl FnMut(&mut egui::Ui),
    ) -> Result<Image, String> {
        let [w, h] = size;
        if w == 0 || h == 0 || w > 8192 || h > 8192 {
            return Err(format!("size {w}x{h} is outside 1..=8192"));
        }
        let mut last = None;
        for i in 0..frames.max(1) {
            let mut input = egui::RawInput {
                screen_rect: Some(egui::Rect::from_min_size(
                    egui::Pos2::ZERO,
                    egui::vec2(w as f32 / ppp, h as f32 / ppp),
                )),
                time: Some(i as f64 / 60.0),
                ..Default::default()
            };
            if let Some(vp) = input.viewports.get_mut(&egui::ViewportId::ROOT) {
                vp.native_pixels_per_point = Some(ppp);
            }
            let out = span("UI code", || self.ctx.run_ui(input, &mut ui_fn));
            span("egui textures", || {
                for (id, deltas) in &out.textures_delta.set {
                    for delta in deltas {
                        self.renderer
                            .update_texture(&self.gpu.device, &self.gpu.queue, *id, delta);
                    }
                }
            });
            if i + 1 == frames.max(1) {
                last = Some(self.paint(&out, [w, h], ppp));
                let scroll = super::layout::scroll_areas(&self.ctx);
                self.layout = span("layout record", || {
                    Some(super::layout::Layout {
                        width: w,
                        height: h,
                        pixels_per_point: ppp,
                        texts: super::layout::text_runs(&out.shapes, &scroll, ppp),
                        arrows: super::layout::arrows(&self.ctx, ppp),
                        charts: super::layout::charts(&self.ctx),
                        legends: super::layout::legends(&self.ctx),
                    })
                });
            }
            for id in &out.textures_delta.free {
                self.renderer.free_texture(id);
            }
        }
        last.unwrap_or_else(|| Err("no frame".into()))
    }

    fn paint(&mut self, out: &egui::FullOutput, [w, h]: [u32; 2], ppp: f32) -> Result<Image, String> {
        let (device, queue) = (&self.gpu.device, &self.gpu.queue);
        let screen = ScreenDescriptor {
            size_in_pixels: [w, h],
            pixels_per_point: ppp,
        };
        let prims = span("tessellate", || self.ctx.tessellate(out.shapes.clone(), ppp));
        let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("kvscope headless frame"),
        });
        let user = span("update buffers and callbacks", || {
            self.renderer
                .update_buffers(device, queue, &mut encoder, &prims, &screen)
        });
        let target = target(&self.gpu, w, h);
        let view = target.create_view(&Default::default());
        {
            let bg = self.ctx.global_style().visuals.panel_fill;
            let c = |x: u8| x as f64 / 255.0;
            let mut pass = encoder
                .begin_render_pass(&wgpu::RenderPassDescriptor {
                    label: Some("kvscope headless frame"),
                    color_attachments: &[Some(wgpu::RenderPassColorAttachment {
                        view: &view,
                        depth_slice: None,
                        resolve_target: None,
                        ops: wgpu::Operations {
                            load: wgpu::LoadOp::Clear(wgpu::Color {
                                r: c(bg.r()),
                                g: c(bg.g()),
                                b: c(bg.b()),
                                a: 1.0,
                            }),
                            store: wgpu::StoreOp::Store,
                        },
                    })],
                    ..Default::default()
                })
                .forget_lifetime();
            self.renderer.render(&mut pass, &prims, &screen);
        }
        let frame = span("submit", || {
            queue.submit(user.into_iter().chain(once(encoder.finish())))
        });
        // The frame's own GPU work, then the copy to the CPU (`kvscope bench app` tells them apart).
        span("GPU work", || {
            device.poll(wgpu::PollType::Wait {
                submission_index: Some(frame),
                timeout: Some(std::time::Duration::from_secs(60)),
            })
        })
        .map_err(|e| format!("GPU wait failed: {e}"))?;
        span("read back", || read_texture(&self.gpu, &target, w, h))
    }
}
