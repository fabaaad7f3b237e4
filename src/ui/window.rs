//! The app inside eframe: the frame loop (with Ctrl+S, the start-up measurement and the smoke walk
//! that `scripts/test.sh` runs under Xvfb), persistence, and creating the app with kvscope's renderers
//! installed into eframe's wgpu render state.

use eframe::egui;

use super::{AppConfig, KvscopeApp, STORAGE_KEY, Saved, fonts};

impl eframe::App for KvscopeApp {
    fn ui(&mut self, ui: &mut egui::Ui, _frame: &mut eframe::Frame) {
        self.show(ui);
        // In the browser the frame is captured by eframe instead (`ui::web`): no offscreen renderer there.
        #[cfg(not(target_arch = "wasm32"))]
        if self.pending_png {
            self.pending_png = false;
            let size = ui.ctx().content_rect().size() * ui.ctx().pixels_per_point();
            let size = [size.x.round().max(64.0) as u32, size.y.round().max(64.0) as u32];
            let dir = self.export_dir.clone();
            self.status = Some(match self.export_png(size, &dir) {
                Ok(p) => format!("saved {}", p.display()),
                Err(e) => format!("PNG export failed: {e}"),
            });
        }
        // KVSCOPE_SMOKE=1: walk every step of every lesson in the real window (one step per frame once
        // its result is there), then exit; scripts/test.sh runs this under Xvfb.
        if std::env::var_os("KVSCOPE_SMOKE").is_some() {
            ui.ctx().request_repaint();
            if self.output().is_some() && !self.computing() {
                self.smoke_steps += 1;
                let (l, s) = self.position();
                let last_lesson = l + 1 == self.lessons.len();
                let last_step = self.lesson().is_none_or(|x| s + 1 == x.file.steps.len());
                if last_lesson && last_step {
                    eprintln!("kvscope: smoke walk drew {} steps in the window", self.smoke_steps);
                    std::process::exit(0);
                }
                self.next_step();
            }
        }
        if let Some(t0) = STARTUP.get()
            && self.frames == 1
        {
            let ms = t0.elapsed().as_secs_f64() * 1e3;
            eprintln!("kvscope: first frame after {ms:.1} ms");
            if std::env::var_os("KVSCOPE_EXIT_AFTER_FIRST_FRAME").is_some() {
                std::process::exit(0);
            }
        }
    }

    fn save(&mut self, storage: &mut dyn eframe::Storage) {
        if let Ok(s) = serde_json::to_string(&self.saved()) {
            storage.set_string(STORAGE_KEY, s);
        }
    }
}

/// When the process started (set first thing in `main`), for the start-up measurement.
pub static STARTUP: std::sync::OnceLock<web_time::Instant> = std::sync::OnceLock::new();

/// Read the stored state from eframe's storage.
pub fn load_saved(storage: Option<&dyn eframe::Storage>) -> Option<Saved> {
    storage
        .and_then(|s| s.get_string(STORAGE_KEY))
        .and_then(|s| serde_json::from_str(&s).ok())
}

/// Create the app inside eframe: install the renderers into the wgpu render state.
pub fn create(cc: &eframe::CreationContext<'_>, config: &AppConfig) -> KvscopeApp {
    if let Some(rs) = &cc.wgpu_render_state {
        crate::render::egui_glue::install(rs);
    }
    fonts::install(&cc.egui_ctx);
    crate::style::install(&cc.egui_ctx);
    let ctx = cc.egui_ctx.clone();
    KvscopeApp::new(
        config,
        load_saved(cc.storage),
        Some(Box::new(move || ctx.request_repaint())),
    )
}
