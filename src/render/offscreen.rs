//! Offscreen rendering: the same renderers draw into a texture, which is read back and written as
//! PNG (`kvscope render`, the app's "export PNG", and the pixel tests).

use std::path::Path;

use super::{Gpu, PxRect, wgpu};

/// The offscreen target format (what egui_kittest uses too).
pub const FORMAT: wgpu::TextureFormat = wgpu::TextureFormat::Rgba8Unorm;

/// An RGBA8 image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// Row-major RGBA bytes.
    pub rgba: Vec<u8>,
}

impl Image {
    /// The pixel at (x, y).
    pub fn pixel(&self, x: u32, y: u32) -> [u8; 4] {
        let i = ((y * self.width + x) * 4) as usize;
        [self.rgba[i], self.rgba[i + 1], self.rgba[i + 2], self.rgba[i + 3]]
    }

    /// Set the pixel at (x, y) (ignored outside the image).
    pub fn set(&mut self, x: i64, y: i64, c: [u8; 4]) {
        if x >= 0 && y >= 0 && (x as u32) < self.width && (y as u32) < self.height {
            let i = ((y as u32 * self.width + x as u32) * 4) as usize;
            self.rgba[i..i + 4].copy_from_slice(&c);
        }
    }

    /// Write as PNG.
    pub fn write_png(&self, path: &Path) -> Result<(), String> {
        let f = std::fs::File::create(path).map_err(|e| format!("cannot create {}: {e}", path.display()))?;
        let mut enc = png::Encoder::new(std::io::BufWriter::new(f), self.width, self.height);
        enc.set_color(png::ColorType::Rgba);
        enc.set_depth(png::BitDepth::Eight);
        let mut w = enc.write_header().map_err(|e| e.to_string())?;
        w.write_image_data(&self.rgba).map_err(|e| e.to_string())
    }
}

/// Something that draws into the current viewport of a render pass.
pub type Paint<'a> = dyn Fn(&mut wgpu::RenderPass<'_>) + 'a;

/// A command encoder for [`render`]: renderers record their uploads (mip chains) into it first.
pub fn encoder(gpu: &Gpu) -> wgpu::CommandEncoder {
    gpu.device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
        label: Some("offscreen"),
    })
}

/// Render a frame: after whatever `encoder` already holds (uploads, mip chains), one render pass
/// cleared to `clear` draws each `(rect, paint)` item with the viewport set to its rectangle — exactly
/// what egui does before a paint callback. Returns the read-back image.
pub fn render(
    gpu: &Gpu,
    width: u32,
    height: u32,
    clear: [u8; 4],
    mut encoder: wgpu::CommandEncoder,
    items: &[(PxRect, &Paint<'_>)],
) -> Result<Image, String> {
    let target = target(gpu, width, height);
    let view = target.create_view(&Default::default());
    {
        let c = clear.map(|x| x as f64 / 255.0);
        let mut pass = encoder.begin_render_pass(&wgpu::RenderPassDescriptor {
            label: Some("offscreen"),
            color_attachments: &[Some(wgpu::RenderPassColorAttachment {
                view: &view,
                depth_slice: None,
                resolve_target: None,
                ops: wgpu::Operations {
                    load: wgpu::LoadOp::Clear(wgpu::Color {
                        r: c[0],
                        g: c[1],
                        b: c[2],
                        a: c[3],
                    }),
                    store: wgpu::StoreOp::Store,
                },
            })],
            ..Default::default()
        });
        for (rect, paint) in items {
            let [x, y, w, h] = *rect;
            let (x0, y0) = (x.clamp(0.0, width as f32), y.clamp(0.0, height as f32));
            let (x1, y1) = ((x + w).clamp(0.0, width as f32), (y + h).clamp(0.0, height as f32));
            if x1 - x0 < 1.0 || y1 - y0 < 1.0 {
                continue;
            }
            pass.set_viewport(x, y, w, h, 0.0, 1.0);
            pass.set_scissor_rect(x0 as u32, y0 as u32, (x1 - x0) as u32, (y1 - y0) as u32);
            paint(&mut pass);
        }
    }
    gpu.queue.submit([encoder.finish()]);
    read_texture(gpu, &target, width, height)
}

/// A `width × height` render target in [`FORMAT`] that [`read_texture`] can read back.
pub fn target(gpu: &Gpu, width: u32, height: u32) -> wgpu::Texture {
    gpu.device.create_texture(&wgpu::TextureDescriptor {
        label: Some("offscreen"),
        size: wgpu::Extent3d {
            width,
            height,
            depth_or_array_layers: 1,
        },
        mip_level_count: 1,
        sample_count: 1,
        dimension: wgpu::TextureDimension::D2,
        format: FORMAT,
        usage: wgpu::TextureUsages::RENDER_ATTACHMENT | wgpu::TextureUsages::COPY_SRC,
        view_formats: &[],
    })
}

/// Read back an RGBA8 texture (with `COPY_SRC` usage) after everything submitted so far.
pub fn read_texture(gpu: &Gpu, target: &wgpu::Texture, width: u32, height: u32) -> Result<Image, String> {
    let (device, queue) = (&gpu.device, &gpu.queue);
    let size = wgpu::Extent3d {
        width,
        height,
        depth_or_array_layers: 1,
    };
    let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
        label: Some("readback"),
    });
    let bpr = (width * 4).div_ceil(wgpu::COPY_BYTES_PER_ROW_ALIGNMENT) * wgpu::COPY_BYTES_PER_ROW_ALIGNMENT;
    let buf = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("readback"),
        size: (bpr * height) as u64,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    encoder.copy_texture_to_buffer(
        target.as_image_copy(),
        wgpu::TexelCopyBufferInfo {
            buffer: &buf,
            layout: wgpu::TexelCopyBufferLayout {
                offset: 0,
                bytes_per_row: Some(bpr),
                rows_per_image: None,
            },
        },
        size,
    );
    let idx = queue.submit([encoder.finish()]);
    let (tx, rx) = std::sync::mpsc::channel();
    buf.slice(..).map_async(wgpu::MapMode::Read, move |r| drop(tx.send(r)));
    device
        .poll(wgpu::PollType::Wait {
            submission_index: Some(idx),
            timeout: Some(std::time::Duration::from_secs(60)),
        })
        .map_err(|e| format!("GPU wait failed: {e}"))?;
    rx.recv()
        .map_err(|e| e.to_string())?
        .map_err(|e| format!("readback failed: {e}"))?;
    let mut rgba = Vec::with_capacity((width * height * 4) as usize);
    {
        let data = buf
            .slice(..)
            .get_mapped_range()
            .map_err(|e| format!("readback failed: {e}"))?;
        for row in data.chunks_exact(bpr as usize).take(height as usize) {
            rgba.extend_from_slice(&row[..(width * 4) as usize]);
        }
    }
    buf.unmap();
    Ok(Image { width, height, rgba })
}
