//! Offscreen PNGs of every renderer on real data (`kvscope render-views`), and the frame-time
//! benchmark (`kvscope bench render`).

use std::path::Path;
use web_time::Instant;

use super::blocks::{self, BlockGridData, BlockGridRenderer};
use super::colormap::Colormap;
use super::heatmap::{self, HeatmapData, HeatmapRenderer, HeatmapStyle, HeatmapView, Highlight};
use super::offscreen::{self, FORMAT, Image};
use super::strip::{self, StripData, StripRenderer};
use super::{Gpu, text, wgpu};
use crate::cache::{PagedKvCache, PagedShape, StaticKvCache, StaticShape};
use crate::math::{AttnShape, AttnWeights, Mask, forward};

/// One attention head's scores and probabilities for a causal layer of `t` tokens.
pub fn attention_maps(t: usize, seed: u64) -> (HeatmapData, HeatmapData) {
    let f = forward(
        &AttnWeights::random(
            AttnShape {
                seq: t,
                d_model: 16,
                n_heads: 1,
                n_kv_heads: 1,
            },
            seed,
        ),
        Mask::Causal,
    );
    let scores = HeatmapData::new(t, t, f.core.scores.iter().copied().collect(), 1).expect("square");
    let probs = HeatmapData::new(t, t, f.core.probs.iter().copied().collect(), 2).expect("square");
    (scores, probs)
}

fn heatmap_png(
    gpu: &Gpu,
    data: &HeatmapData,
    style: &HeatmapStyle,
    view: Option<HeatmapView>,
    w: u32,
    h: u32,
) -> Result<Image, String> {
    let mut r = HeatmapRenderer::new(&gpu.device, &gpu.queue, FORMAT);
    let bar_w = 24.0;
    let label_w = 64.0;
    let map = [8.0, 8.0, w as f32 - bar_w - label_w - 24.0, h as f32 - 16.0];
    let bar = [map[0] + map[2] + 12.0, 8.0, bar_w, h as f32 - 16.0];
    let view = view.unwrap_or_else(|| HeatmapView::fit(data.rows, data.cols, map[2], map[3]));
    let dummy = HeatmapData {
        rows: 1,
        cols: 1,
        values: vec![0.0],
        generation: 0,
    };
    let mut enc = offscreen::encoder(gpu);
    r.upload(&gpu.device, &gpu.queue, &mut enc, 1, data);
    r.upload(&gpu.device, &gpu.queue, &mut enc, 2, &dummy);
    let range = r.range(1, style).unwrap_or((0.0, 1.0));
    r.set_params(&gpu.queue, 1, map, &view, style, false);
    r.set_params(
        &gpu.queue,
        2,
        bar,
        &view,
        &HeatmapStyle {
            range: Some(range),
            ..*style
        },
        true,
    );
    let mut img = offscreen::render(
        gpu,
        w,
        h,
        heatmap::BG_COLOR,
        enc,
        &[
            (map, &|p: &mut wgpu::RenderPass<'_>| r.paint(p, 1)),
            (bar, &|p: &mut wgpu::RenderPass<'_>| r.paint(p, 2)),
        ],
    )?;
    for k in 0..=4 {
        let t = k as f32 / 4.0;
        let y = bar[1] + (1.0 - t) * bar[3];
        let label = format!("{:.2}", range.0 + t * (range.1 - range.0));
        text::draw(
            &mut img,
            (bar[0] + bar_w + 4.0) as i64,
            (y - 5.0).clamp(0.0, h as f32 - 10.0) as i64,
            &label,
            2,
            crate::style::LABEL,
        );
    }
    Ok(img)
}

/// A paged cache after a few requests arrived, decoded and one finished: scattered blocks.
pub fn demo_paged_cache() -> PagedKvCache {
    let mut c = PagedKvCache::new(PagedShape {
        num_blocks: 24,
        block_size: 8,
        kv_heads: 1,
        head_dim: 1,
        dtype: crate::cache::KvDtype::F16,
    });
    for (req, n) in [(0u32, 13usize), (1, 20), (2, 6)] {
        c.append_slots(req, n).expect("fits");
    }
    c.free_request(1).expect("known");
    c.append_slots(3, 17).expect("fits");
    for _ in 0..5 {
        for req in [0u32, 2, 3] {
            c.append_slots(req, 1).expect("fits");
        }
    }
    c
}

/// Write PNGs of every renderer into `dir`; returns their paths.
pub fn write_views(dir: &Path) -> Result<Vec<std::path::PathBuf>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let gpu = Gpu::headless()?;
    let mut out = Vec::new();
    let mut save = |name: &str, img: Image| -> Result<(), String> {
        let p = dir.join(name);
        img.write_png(&p)?;
        out.push(p);
        Ok(())
    };
    let (scores, probs) = attention_maps(24, 7);
    let seq = HeatmapStyle {
        colormap: Colormap::Sequential,
        range: None,
        grid: true,
        highlight: Highlight::Row(17),
    };
    save(
        "heatmap_probs_T24.png",
        heatmap_png(&gpu, &probs, &seq, None, 640, 520)?,
    )?;
    let div = HeatmapStyle {
        colormap: Colormap::Diverging,
        range: None,
        grid: true,
        highlight: Highlight::Cell(17, 5),
    };
    save(
        "heatmap_scores_T24.png",
        heatmap_png(&gpu, &scores, &div, None, 640, 520)?,
    )?;
    let (_, big) = attention_maps(4096, 7);
    save(
        "heatmap_probs_T4096_zoomed_out.png",
        heatmap_png(
            &gpu,
            &big,
            &HeatmapStyle {
                grid: false,
                highlight: Highlight::None,
                ..seq
            },
            None,
            640,
            520,
        )?,
    )?;
    let mut zoom = HeatmapView::fit(4096, 4096, 552.0, 504.0);
    zoom.zoom_at(zoom.px_of(glam::Vec2::ZERO), 96.0); // the first ~50 tokens, where the weight is
    save(
        "heatmap_probs_T4096_zoomed_in.png",
        heatmap_png(
            &gpu,
            &big,
            &HeatmapStyle {
                grid: true,
                highlight: Highlight::None,
                ..seq
            },
            Some(zoom),
            640,
            520,
        )?,
    )?;

    let cache = demo_paged_cache();
    let data = BlockGridData::from_cache(
        &cache,
        Some((
            cache.table(3).and_then(|t| t.last()).copied().unwrap_or(0) as usize,
            (cache.len(3) - 1) % 8,
        )),
    );
    let mut br = BlockGridRenderer::new(&gpu.device, &gpu.queue, FORMAT);
    let rect = [8.0, 8.0, 624.0, 404.0];
    br.upload(&gpu.device, &gpu.queue, 1, &data);
    let lay = br.set_params(&gpu.queue, 1, rect, blocks::BG_COLOR);
    let mut img = offscreen::render(
        &gpu,
        640,
        420,
        blocks::BG_COLOR,
        offscreen::encoder(&gpu),
        &[(rect, &|p: &mut wgpu::RenderPass<'_>| br.paint(p, 1))],
    )?;
    if let Some(lay) = lay {
        for b in 0..data.owners.len() {
            let [x, y, _, _] = lay.block_rect(b);
            text::draw(
                &mut img,
                (rect[0] + x + 3.0) as i64,
                (rect[1] + y + 3.0) as i64,
                &b.to_string(),
                2,
                crate::style::LABEL,
            );
        }
    }
    save("blocks_pool.png", img)?;

    let mut sc = StaticKvCache::new(StaticShape {
        layers: 4,
        batch: 1,
        kv_heads: 4,
        max_seq_len: 48,
        head_dim: 2,
    });
    let row = vec![0.5f32; 4 * 2];
    for pos in 0..12 {
        for layer in 0..4 {
            if pos == 11 && layer > 1 {
                break;
            }
            sc.append(layer, pos, &row, &row).map_err(|e| e.to_string())?;
        }
    }
    let sd = StripData {
        layers: 4,
        heads: 4,
        max_seq_len: 48,
        lens: (0..4).map(|l| sc.len(l)).collect(),
        write: Some((1, 11)),
        read: Some((1, 11)),
    };
    let mut sr = StripRenderer::new(&gpu.device, FORMAT);
    let rect = [8.0, 8.0, 624.0, 244.0];
    sr.prepare(&gpu.device, &gpu.queue, 1, &sd, rect);
    save(
        "memory_strip.png",
        offscreen::render(
            &gpu,
            640,
            260,
            strip::BG_COLOR,
            offscreen::encoder(&gpu),
            &[(rect, &|p: &mut wgpu::RenderPass<'_>| sr.paint(p, 1))],
        )?,
    )?;
    Ok(out)
}

/// Frame-time figures of the heatmap at one size.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RenderBench {
    /// Matrix side T.
    pub t: usize,
    /// The adapter.
    pub adapter: String,
    /// Upload plus max-pool chain, once, in ms.
    pub upload_ms: f64,
    /// Mean frame time (render 1280×800 + wait for the GPU) over pans and zooms, in ms.
    pub frame_ms: f64,
    /// Slowest frame, in ms.
    pub worst_ms: f64,
    /// Frames timed.
    pub frames: usize,
}

/// Time heatmap frames at 1280×800 for a `t × t` attention map: full zoom-out, zoomed in and panned.
pub fn bench_heatmap(gpu: &Gpu, t: usize, frames: usize) -> Result<RenderBench, String> {
    let (_, probs) = attention_maps(t, 1);
    let (w, h) = (1280u32, 800u32);
    let target = gpu.device.create_texture(&wgpu::TextureDescriptor {
        label: Some("bench target"),
        size: wgpu::Extent3d {
            width: w,
            height: h,
            depth_or_array_layers: 1,
        },
        mip_level_count: 1,
        sample_count: 1,
        dimension: wgpu::TextureDimension::D2,
        format: FORMAT,
        usage: wgpu::TextureUsages::RENDER_ATTACHMENT,
        view_formats: &[],
    });
    let view_t = target.create_view(&Default::default());
    let mut r = HeatmapRenderer::new(&gpu.device, &gpu.queue, FORMAT);
    let wait = |idx| {
        gpu.device
            .poll(wgpu::PollType::Wait {
                submission_index: Some(idx),
                timeout: Some(std::time::Duration::from_secs(120)),
            })
            .map_err(|e| e.to_string())
    };
    let start = Instant::now();
    let mut enc = gpu.device.create_command_encoder(&Default::default());
    r.upload(&gpu.device, &gpu.queue, &mut enc, 1, &probs);
    wait(gpu.queue.submit([enc.finish()]))?;
    let upload_ms = start.elapsed().as_secs_f64() * 1e3;
    let style = HeatmapStyle {
        colormap: Colormap::Sequential,
        range: None,
        grid: true,
        highlight: Highlight::Row(t / 2),
    };
    let fit = HeatmapView::fit(t, t, w as f32, h as f32);
    let mut times = Vec::new();
    for f in 0..frames + 2 {
        // cycle: fit, zoomed ×8 and panning, zoomed ×64 and panning
        let mut v = fit;
        match f % 3 {
            0 => {}
            1 => {
                v.zoom_at(glam::Vec2::new(640.0, 400.0), 8.0);
                v.pan(glam::Vec2::new(f as f32 * 7.0, f as f32 * 3.0));
            }
            _ => {
                v.zoom_at(glam::Vec2::new(200.0, 700.0), 64.0);
                v.pan(glam::Vec2::new(-(f as f32) * 5.0, 0.0));
            }
        }
        let s = Instant::now();
        r.set_params(&gpu.queue, 1, [0.0, 0.0, w as f32, h as f32], &v, &style, false);
        let mut enc = gpu.device.create_command_encoder(&Default::default());
        {
            let mut pass = enc.begin_render_pass(&wgpu::RenderPassDescriptor {
                label: Some("bench"),
                color_attachments: &[Some(wgpu::RenderPassColorAttachment {
                    view: &view_t,
                    depth_slice: None,
                    resolve_target: None,
                    ops: wgpu::Operations {
                        load: wgpu::LoadOp::Clear(wgpu::Color::BLACK),
                        store: wgpu::StoreOp::Store,
                    },
                })],
                ..Default::default()
            });
            r.paint(&mut pass, 1);
        }
        wait(gpu.queue.submit([enc.finish()]))?;
        if f >= 2 {
            times.push(s.elapsed().as_secs_f64() * 1e3);
        }
    }
    let frame_ms = times.iter().sum::<f64>() / times.len() as f64;
    let worst_ms = times.iter().copied().fold(0.0, f64::max);
    Ok(RenderBench {
        t,
        adapter: format!("{} ({:?})", gpu.info.name, gpu.info.backend),
        upload_ms,
        frame_ms,
        worst_ms,
        frames: times.len(),
    })
}
