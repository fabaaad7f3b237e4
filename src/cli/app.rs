//! `kvscope` with no subcommand: the app in a window (or, without a display, how to render instead).

use std::path::PathBuf;

use anyhow::Result;
use kvscope::ui::AppConfig;

fn has_display() -> bool {
    if cfg!(target_os = "linux") {
        std::env::var_os("DISPLAY").is_some() || std::env::var_os("WAYLAND_DISPLAY").is_some()
    } else {
        true
    }
}

pub fn run(lessons: Option<PathBuf>, fresh: bool) -> Result<bool> {
    if !has_display() {
        eprintln!("kvscope: no display found (neither DISPLAY nor WAYLAND_DISPLAY is set), so the window cannot open.");
        eprintln!("Render lesson steps to PNG files instead, for example:");
        eprintln!("  kvscope render --lesson attention-matrix --step 1 --out step1.png");
        eprintln!("  kvscope render --lesson all --out out/steps");
        return Ok(false);
    }
    let config = AppConfig {
        lessons_dir: lessons,
        sync: false,
        fresh,
        export_dir: None,
    };
    let options = eframe::NativeOptions {
        viewport: eframe::egui::ViewportBuilder::default()
            .with_title("kvscope")
            .with_inner_size([1440.0, 900.0])
            .with_min_inner_size([960.0, 600.0]),
        renderer: eframe::Renderer::Wgpu,
        ..Default::default()
    };
    eframe::run_native(
        "kvscope",
        options,
        Box::new(move |cc| Ok(Box::new(kvscope::ui::create(cc, &config)))),
    )
    .map_err(|e| {
        anyhow::anyhow!(
            "{e}\nThe window could not open. `kvscope render --lesson all --out DIR` draws every lesson step without one."
        )
    })?;
    Ok(true)
}
