//! What the keyboard and the export buttons do: step navigation, presentation mode, Ctrl+S (the frame as
//! a PNG through the offscreen renderer) and Ctrl+E (the step's tensors as `.npy` + `manifest.json`).

use std::path::{Path, PathBuf};

use eframe::egui;

use super::{KvscopeApp, headless};

impl KvscopeApp {
    pub(super) fn keys(&mut self, ctx: &egui::Context) {
        use egui::{Key, Modifiers};
        let focused = ctx.memory(|m| m.focused().is_some());
        let (save, export) = ctx.input_mut(|i| {
            (
                i.consume_key(Modifiers::COMMAND, Key::S),
                i.consume_key(Modifiers::COMMAND, Key::E),
            )
        });
        let (reveal, class) = ctx.input(|i| {
            let plain = !i.modifiers.command && !i.modifiers.alt;
            (plain && i.key_pressed(Key::R), plain && i.key_pressed(Key::Q))
        });
        // The timeline of a step that has one: down or '.' one position on, up or ',' one back.
        let (later, earlier) = ctx.input(|i| {
            let plain = !i.modifiers.command && !i.modifiers.alt;
            (
                plain && (i.key_pressed(Key::ArrowDown) || i.key_pressed(Key::Period)),
                plain && (i.key_pressed(Key::ArrowUp) || i.key_pressed(Key::Comma)),
            )
        });
        let (next, prev, home, end, pres, esc) = ctx.input(|i| {
            let plain = !i.modifiers.command && !i.modifiers.alt;
            (
                plain && (i.key_pressed(Key::ArrowRight) || i.key_pressed(Key::Space)),
                plain && (i.key_pressed(Key::ArrowLeft) || i.key_pressed(Key::Backspace)),
                plain && i.key_pressed(Key::Home),
                plain && i.key_pressed(Key::End),
                plain && (i.key_pressed(Key::F5) || i.key_pressed(Key::F)),
                i.key_pressed(Key::Escape),
            )
        });
        if !focused {
            // Class mode: R reveals the veiled step, Q switches the mode.
            if reveal {
                self.reveal();
            }
            if class {
                self.set_class_mode(!self.class_mode());
            }
            if next {
                self.next_page_or_step();
            }
            if prev {
                self.prev_page_or_step();
            }
            if later {
                self.set_cursor(self.cursor() + 1);
            }
            if earlier {
                self.set_cursor(self.cursor().saturating_sub(1));
            }
            if home {
                self.goto(self.cur, 0);
            }
            if end {
                let n = self.lesson().map_or(0, |l| l.file.steps.len());
                self.goto(self.cur, n.saturating_sub(1));
            }
        }
        if pres {
            self.presentation = !self.presentation;
        }
        if esc {
            self.presentation = false;
        }
        if save {
            self.pending_png = true;
        }
        if export {
            self.export_npy();
        }
    }

    /// Save the current frame as a PNG through the offscreen renderer; returns the path.
    pub fn export_png(&mut self, size: [u32; 2], dir: &Path) -> Result<PathBuf, String> {
        if self.headless.is_none() {
            self.headless = Some(headless::Headless::new());
        }
        let mut h = match self.headless.take() {
            Some(Ok(h)) => h,
            Some(Err(e)) => {
                self.headless = Some(Err(e.clone()));
                return Err(e);
            }
            None => return Err("no renderer".into()),
        };
        let img = h.render(size, 1.0, 2, |ui| self.show(ui));
        self.headless = Some(Ok(h));
        let img = img?;
        std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let (lesson, step) = (
            self.lesson().map(|l| l.id().to_string()).unwrap_or_default(),
            self.step + 1,
        );
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let path = dir.join(format!("{lesson}-step{step:02}-{stamp}.png"));
        img.write_png(&path)?;
        Ok(path)
    }

    /// Ctrl+E: the current step's tensors as `.npy` files plus `manifest.json` (in the browser, one zip
    /// of them, downloaded).
    pub fn export_npy(&mut self) {
        #[cfg(all(feature = "web", target_arch = "wasm32"))]
        {
            self.status = Some(super::web::download_export(self));
            return;
        }
        #[allow(unreachable_code)]
        let dir = self.export_dir.join(format!(
            "{}-step{:02}",
            self.lesson().map(|l| l.id().to_string()).unwrap_or_default(),
            self.step + 1
        ));
        self.status = Some(match self.export_npy_to(&dir) {
            Ok(p) => format!("exported {}", p.display()),
            Err(e) => format!("export failed: {e}"),
        });
    }

    /// Write the export into `dir`.
    pub fn export_npy_to(&self, dir: &Path) -> Result<PathBuf, String> {
        let (Some(l), Some(p), Some(out)) = (self.lesson(), self.params(), self.output()) else {
            return Err("nothing computed yet".into());
        };
        let backend = self.running_backend();
        crate::lessons::export_step(l, p, out.as_ref(), self.cursor(), self.reports(), backend.as_ref(), dir)
    }

    /// Ask for a PNG of the next frame (Ctrl+S).
    pub fn request_png(&mut self) {
        self.pending_png = true;
    }
}
