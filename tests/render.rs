//! The wgpu renderers, headless: WGSL validation, pixel-exact checks on Vulkan (lavapipe) and GL
//! (llvmpipe), max pooling of a single hot cell, upload-once, and egui_kittest snapshots with the
//! paint callbacks inside an egui UI.
//!
//! `scripts/test.sh` sets `KVSCOPE_REQUIRE_BACKENDS=vulkan,gl`; then a missing software adapter
//! fails these tests instead of skipping them.

use std::sync::Arc;

use kvscope::render::blocks::{self, BlockGridData, BlockGridRenderer};
use kvscope::render::colormap::{Colormap, lut_color, lut_index, owner_color};
use kvscope::render::heatmap::{self, HeatmapData, HeatmapRenderer, HeatmapStyle, HeatmapView, Highlight};
use kvscope::render::offscreen::{self, FORMAT, Image};
use kvscope::render::strip::{self, StripData, StripRenderer};
use kvscope::render::{Gpu, SHADERS, wgpu};

fn required(name: &str) -> bool {
    std::env::var("KVSCOPE_REQUIRE_BACKENDS")
        .map(|v| v.split(',').any(|b| b.trim() == name))
        .unwrap_or(false)
}

/// Devices for each software backend that is present (failing if a required one is missing).
fn gpus() -> Vec<(&'static str, Gpu)> {
    let mut out = Vec::new();
    for (name, b) in [("vulkan", wgpu::Backends::VULKAN), ("gl", wgpu::Backends::GL)] {
        match Gpu::with_backends(b) {
            Ok(g) => out.push((name, g)),
            Err(e) if required(name) => panic!("KVSCOPE_REQUIRE_BACKENDS names {name} but: {e}"),
            Err(e) => eprintln!("SKIPPED backend {name}: {e}"),
        }
    }
    out
}

#[test]
fn every_wgsl_file_validates() {
    let mut failures = Vec::new();
    let mut seen = 0;
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("shaders");
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "wgsl") {
            seen += 1;
            let src = std::fs::read_to_string(&path).unwrap();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            match wgpu::naga::front::wgsl::parse_str(&src) {
                Err(e) => failures.push(format!("{name}: {}", e.emit_to_string(&src))),
                Ok(module) => {
                    let mut v = wgpu::naga::valid::Validator::new(
                        wgpu::naga::valid::ValidationFlags::all(),
                        wgpu::naga::valid::Capabilities::default(),
                    );
                    if let Err(e) = v.validate(&module) {
                        failures.push(format!("{name}: {}", e.emit_to_string(&src)));
                    }
                }
            }
            assert!(
                SHADERS.iter().any(|(n, _)| *n == name),
                "{name} is not embedded in render::SHADERS"
            );
        }
    }
    assert!(seen >= 4);
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

fn render_heatmap(gpu: &Gpu, data: &HeatmapData, style: &HeatmapStyle, w: u32, h: u32) -> Image {
    let mut r = HeatmapRenderer::new(&gpu.device, &gpu.queue, FORMAT);
    let view = HeatmapView::fit(data.rows, data.cols, w as f32, h as f32);
    let rect = [0.0, 0.0, w as f32, h as f32];
    let mut enc = offscreen::encoder(gpu);
    r.upload(&gpu.device, &gpu.queue, &mut enc, 1, data);
    r.set_params(&gpu.queue, 1, rect, &view, style, false);
    offscreen::render(
        gpu,
        w,
        h,
        heatmap::BG_COLOR,
        enc,
        &[(rect, &|pass: &mut wgpu::RenderPass<'_>| r.paint(pass, 1))],
    )
    .unwrap()
}

#[test]
fn heatmap_cells_masks_and_highlights_have_the_right_colours() {
    // 4×4 values at LUT bin centres; (1, 2) is masked.
    let vals: Vec<f32> = (0..16)
        .map(|i| {
            if i == 6 {
                f32::NEG_INFINITY
            } else {
                (i as f32 * 16.0 + 8.0) / 256.0
            }
        })
        .collect();
    let data = HeatmapData::new(4, 4, vals.clone(), 1).unwrap();
    for (backend, gpu) in gpus() {
        for map in [Colormap::Sequential, Colormap::Diverging] {
            let style = HeatmapStyle {
                colormap: map,
                range: Some((0.0, 1.0)),
                grid: false,
                highlight: Highlight::None,
            };
            let img = render_heatmap(&gpu, &data, &style, 64, 64);
            for r in 0..4u32 {
                for c in 0..4u32 {
                    let px = img.pixel(c * 16 + 8, r * 16 + 8);
                    let v = vals[(r * 4 + c) as usize];
                    if v.is_finite() {
                        assert_eq!(
                            px,
                            lut_color(map, lut_index(v, 0.0, 1.0)),
                            "{backend} {map:?} cell ({r},{c})"
                        );
                    } else {
                        let m = heatmap::MASK_COLOR;
                        let dark = [
                            (m[0] as f32 * 0.8) as u8,
                            (m[1] as f32 * 0.8) as u8,
                            (m[2] as f32 * 0.8) as u8,
                        ];
                        assert!(
                            px[..3] == m[..3] || px[..3].iter().zip(dark).all(|(a, b)| a.abs_diff(b) <= 1),
                            "{backend}: masked cell drawn as {px:?}"
                        );
                    }
                }
            }
        }
        // A highlighted cell gets a frame; grid lines appear between 16-px cells.
        let style = HeatmapStyle {
            colormap: Colormap::Sequential,
            range: Some((0.0, 1.0)),
            grid: true,
            highlight: Highlight::Cell(2, 1),
        };
        let img = render_heatmap(&gpu, &data, &style, 64, 64);
        // The frame lies just outside the cell (3 px), above and left of it; the cell itself keeps its
        // colour, to its first pixel row (the visual grammar: a highlight never paints over data).
        let cell = lut_color(Colormap::Sequential, lut_index(vals[9], 0.0, 1.0));
        assert_eq!(
            img.pixel(16 + 8, 30),
            heatmap::HL_COLOR,
            "{backend}: frame above cell (2,1)"
        );
        assert_eq!(
            img.pixel(14, 32 + 8),
            heatmap::HL_COLOR,
            "{backend}: frame left of cell (2,1)"
        );
        assert_eq!(img.pixel(16 + 8, 33), cell, "{backend}: top pixel row of cell (2,1)");
        assert_eq!(img.pixel(16 + 8, 32 + 8), cell, "{backend}: inside of cell (2,1)");
        assert_eq!(
            img.pixel(17, 32 + 8),
            cell,
            "{backend}: left pixel column of cell (2,1)"
        );
        assert_eq!(
            img.pixel(48, 8),
            heatmap::GRID_COLOR,
            "{backend}: grid line between columns 2 and 3"
        );
        let style = HeatmapStyle {
            highlight: Highlight::Row(3),
            ..style
        };
        let img = render_heatmap(&gpu, &data, &style, 64, 64);
        assert_eq!(img.pixel(40, 46), heatmap::HL_COLOR, "{backend}: frame above row 3");
        assert_eq!(
            img.pixel(40, 56),
            lut_color(Colormap::Sequential, lut_index(vals[14], 0.0, 1.0)),
            "{backend}: row 3's cells keep their colours"
        );
    }
}

#[test]
fn a_single_hot_cell_survives_full_zoom_out() {
    let n = 4096;
    let mut vals = vec![0.0f32; n * n];
    vals[3210 * n + 1234] = 1.0;
    let data = HeatmapData::new(n, n, vals, 1).unwrap();
    let style = HeatmapStyle {
        colormap: Colormap::Sequential,
        range: Some((0.0, 1.0)),
        grid: false,
        highlight: Highlight::None,
    };
    for (backend, gpu) in gpus().into_iter().take(1) {
        let img = render_heatmap(&gpu, &data, &style, 200, 200);
        let hot = lut_color(Colormap::Sequential, 255);
        let hits: Vec<(u32, u32)> = (0..200)
            .flat_map(|y| (0..200).map(move |x| (x, y)))
            .filter(|&(x, y)| img.pixel(x, y) == hot)
            .collect();
        assert!(
            !hits.is_empty(),
            "{backend}: the hot cell vanished at 20 cells per pixel"
        );
        // …and it is where it belongs: cell 1234/4096·200 ≈ 60, 3210/4096·200 ≈ 156.
        assert!(
            hits.iter().all(|&(x, y)| x.abs_diff(60) <= 1 && y.abs_diff(156) <= 1),
            "{backend}: {hits:?}"
        );
    }
}

#[test]
fn unchanged_data_is_uploaded_once() {
    let Some((_, gpu)) = gpus().into_iter().next() else {
        return;
    };
    let mut r = HeatmapRenderer::new(&gpu.device, &gpu.queue, FORMAT);
    let a = HeatmapData::new(2, 3, vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0], 7).unwrap();
    let mut enc = gpu.device.create_command_encoder(&Default::default());
    for _ in 0..5 {
        r.upload(&gpu.device, &gpu.queue, &mut enc, 9, &a);
    }
    assert_eq!(r.uploads, 1);
    let b = HeatmapData { generation: 8, ..a };
    r.upload(&gpu.device, &gpu.queue, &mut enc, 9, &b);
    assert_eq!(r.uploads, 2);
    gpu.queue.submit([enc.finish()]);
}

#[test]
fn block_grid_shows_owners_fill_free_blocks_and_the_written_slot() {
    let data = BlockGridData {
        block_size: 4,
        owners: vec![-1, 0, 0, 1, -1, 2],
        filled: vec![0, 4, 2, 1, 0, 3],
        written: Some((2, 1)),
    };
    for (backend, gpu) in gpus() {
        let mut r = BlockGridRenderer::new(&gpu.device, &gpu.queue, FORMAT);
        let (w, h) = (360u32, 240u32);
        let rect = [0.0, 0.0, w as f32, h as f32];
        r.upload(&gpu.device, &gpu.queue, 3, &data);
        let lay = r.set_params(&gpu.queue, 3, rect, blocks::BG_COLOR);
        let img = offscreen::render(
            &gpu,
            w,
            h,
            blocks::BG_COLOR,
            offscreen::encoder(&gpu),
            &[(rect, &|pass: &mut wgpu::RenderPass<'_>| r.paint(pass, 3))],
        )
        .unwrap();
        let lay = lay.unwrap();
        // centre of slot s of block b (slots form a 2×2 sub-grid for block_size 4)
        let slot_center = |b: usize, s: usize| {
            let [x, y, bw, bh] = lay.block_rect(b);
            let (sc, sr) = ((s % lay.slot_cols) as f32, (s / lay.slot_cols) as f32);
            let srows = 4usize.div_ceil(lay.slot_cols) as f32;
            let (sw, sh) = (bw / lay.slot_cols as f32, bh / srows);
            ((x + (sc + 0.5) * sw) as u32, (y + (sr + 0.5) * sh) as u32)
        };
        let at = |b, s| {
            let (x, y) = slot_center(b, s);
            img.pixel(x, y)
        };
        assert_eq!(at(1, 3), owner_color(0), "{backend}: filled slot of request 0");
        assert_eq!(at(5, 2), owner_color(2), "{backend}: filled slot of request 2");
        assert_eq!(at(0, 0), blocks::FREE_COLOR, "{backend}: free block");
        assert_eq!(at(2, 1), blocks::HL_COLOR, "{backend}: the slot being written");
        let faded = at(2, 3);
        let (bg, oc) = (blocks::BG_COLOR, owner_color(0));
        for ch in 0..3 {
            let want = bg[ch] as f32 + (oc[ch] as f32 - bg[ch] as f32) * 0.3;
            assert!(
                (faded[ch] as f32 - want).abs() <= 1.5,
                "{backend}: allocated-but-empty slot {faded:?}"
            );
        }
        let [x, y, _, _] = lay.block_rect(2);
        assert_eq!(
            img.pixel(x as u32, y as u32 + 10),
            blocks::HL_COLOR,
            "{backend}: border of the block being written"
        );
    }
}

#[test]
fn memory_strip_shows_used_reserved_written_and_read_regions() {
    let data = StripData {
        layers: 2,
        heads: 2,
        max_seq_len: 8,
        lens: vec![3, 3],
        write: Some((1, 2)),
        read: Some((1, 2)),
    };
    for (backend, gpu) in gpus() {
        let mut r = StripRenderer::new(&gpu.device, FORMAT);
        let (w, h) = (320u32, 100u32);
        let rect = [0.0, 0.0, w as f32, h as f32];
        r.prepare(&gpu.device, &gpu.queue, 5, &data, rect);
        let img = offscreen::render(
            &gpu,
            w,
            h,
            strip::BG_COLOR,
            offscreen::encoder(&gpu),
            &[(rect, &|pass: &mut wgpu::RenderPass<'_>| r.paint(pass, 5))],
        )
        .unwrap();
        let (row_h, gap, slot_w) = strip::geometry(&data, w as f32, h as f32);
        let at = |layer: usize, head: usize, pos: usize| {
            let y = layer as f32 * (row_h * 2.0 + gap) + (head as f32 + 0.5) * row_h;
            img.pixel(((pos as f32 + 0.5) * slot_w) as u32, y as u32)
        };
        assert_eq!(at(0, 0, 1), strip::USED_COLOR, "{backend}");
        assert_eq!(at(0, 1, 5), strip::RESERVED_COLOR, "{backend}");
        assert_eq!(at(1, 1, 2), strip::WRITE_COLOR, "{backend}");
        assert_eq!(at(1, 0, 0), strip::READ_COLOR, "{backend}");
        assert_eq!(at(1, 0, 6), strip::RESERVED_COLOR, "{backend}");
    }
}

mod snapshots {
    use super::*;
    use eframe::egui;
    use egui_kittest::Harness;
    use kvscope::render::egui_glue;

    struct Demo {
        which: &'static str,
        data: Arc<HeatmapData>,
        view: Option<HeatmapView>,
    }

    impl eframe::App for Demo {
        fn ui(&mut self, ui: &mut egui::Ui, _frame: &mut eframe::Frame) {
            egui::CentralPanel::default().show(ui, |ui| {
                ui.heading(format!("kvscope renderer: {}", self.which));
                match self.which {
                    "heatmap" => {
                        ui.horizontal(|ui| {
                            let style = HeatmapStyle {
                                colormap: Colormap::Sequential,
                                range: None,
                                grid: true,
                                highlight: Highlight::Row(5),
                            };
                            egui_glue::heatmap(ui, 1, &self.data, &mut self.view, &style, egui::vec2(240.0, 240.0));
                            egui_glue::colorbar(
                                ui,
                                2,
                                self.data.finite_range(),
                                Colormap::Sequential,
                                egui::vec2(50.0, 240.0),
                                11.0,
                            );
                        });
                    }
                    "blocks" => {
                        let data = BlockGridData {
                            block_size: 16,
                            owners: vec![2, -1, 0, 0, 1, -1, 2, 1, -1, 0, -1, -1],
                            filled: vec![16, 0, 16, 5, 16, 0, 9, 3, 0, 0, 0, 0],
                            written: Some((3, 5)),
                        };
                        egui_glue::block_grid(ui, 3, &data, egui::vec2(360.0, 240.0), (8.0, 13.0));
                    }
                    _ => {
                        let data = StripData {
                            layers: 3,
                            heads: 4,
                            max_seq_len: 32,
                            lens: vec![10, 10, 9],
                            write: Some((2, 9)),
                            read: Some((2, 9)),
                        };
                        egui_glue::memory_strip(ui, 4, &data, egui::vec2(360.0, 200.0));
                    }
                }
            });
        }
    }

    fn causal_probs(t: usize) -> Arc<HeatmapData> {
        use kvscope::math::{AttnShape, AttnWeights, Mask, forward};
        let f = forward(
            &AttnWeights::random(
                AttnShape {
                    seq: t,
                    d_model: 8,
                    n_heads: 1,
                    n_kv_heads: 1,
                },
                3,
            ),
            Mask::Causal,
        );
        Arc::new(HeatmapData::new(t, t, f.core.probs.iter().copied().collect(), 1).unwrap())
    }

    fn snapshot(which: &'static str) {
        if gpus().is_empty() {
            return;
        }
        let data = causal_probs(12);
        let mut h = Harness::builder()
            .with_size(egui::vec2(420.0, 320.0))
            .wgpu()
            .build_eframe(|cc| {
                egui_glue::install(
                    cc.wgpu_render_state
                        .as_ref()
                        .expect("kittest gives a wgpu render state"),
                );
                Demo {
                    which,
                    data,
                    view: None,
                }
            });
        h.run();
        h.snapshot(format!("render_{which}"));
    }

    #[test]
    fn heatmap_zooms_and_pans_with_the_mouse() {
        if gpus().is_empty() {
            return;
        }
        let data = causal_probs(12);
        let mut h = Harness::builder()
            .with_size(egui::vec2(420.0, 320.0))
            .wgpu()
            .build_eframe(|cc| {
                egui_glue::install(cc.wgpu_render_state.as_ref().expect("wgpu"));
                Demo {
                    which: "heatmap",
                    data,
                    view: None,
                }
            });
        h.run();
        let fit = h.state().view.expect("the first frame fits the view");
        let p = egui::pos2(120.0, 150.0);
        h.hover_at(p);
        h.event(egui::Event::Zoom(2.0));
        h.run();
        let zoomed = h.state().view.unwrap();
        assert!(
            (zoomed.cells_per_px.x - fit.cells_per_px.x / 2.0).abs() < 1e-4,
            "{zoomed:?} vs {fit:?}"
        );
        h.drag_at(p);
        h.hover_at(p + egui::vec2(40.0, 0.0));
        h.drop_at(p + egui::vec2(40.0, 0.0));
        h.run();
        let panned = h.state().view.unwrap();
        assert!(
            panned.origin.x < zoomed.origin.x - 0.5,
            "dragging right shows columns further left: {panned:?} vs {zoomed:?}"
        );
    }

    #[test]
    fn heatmap_inside_egui() {
        snapshot("heatmap");
    }

    #[test]
    fn block_grid_inside_egui() {
        snapshot("blocks");
    }

    #[test]
    fn memory_strip_inside_egui() {
        snapshot("strip");
    }
}
