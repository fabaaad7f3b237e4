//! The backends as the app sees them: probed (or still probing), the active one, and switching with a
//! reason when a backend is unavailable.

use std::sync::Arc;

use super::{BackendSlot, Fallback, KvscopeApp};
use crate::compute::{Backend, BackendKind};

impl KvscopeApp {
    /// The backend in use.
    pub fn active_backend(&self) -> BackendKind {
        self.active
    }

    /// The name of what computes the shown result: the active backend's, or, while the exercise tab runs
    /// the views on a student's kernel, wgpu with that exercise named.
    pub fn running_name(&self, lang: super::text::Lang) -> String {
        if let Some(id) = self.widgets.kernel.exercise.edited_exercise() {
            return format!("wgpu ({} {id})", lang.t("your kernel:", "你的 kernel："));
        }
        self.active.name().to_string()
    }

    /// Every backend with its status (ready, or the reason it is not).
    pub fn backend_statuses(&self) -> Vec<(BackendKind, Result<String, String>)> {
        self.backends
            .iter()
            .map(|(k, s)| {
                let st = match s {
                    BackendSlot::Probing => Err("probing…".to_string()),
                    BackendSlot::Ready(st) => st.backend.as_ref().map(|b| b.device()).map_err(|e| e.clone()),
                };
                (*k, st)
            })
            .collect()
    }

    /// Switch backends; an unavailable one is refused with its reason in the status bar.
    pub fn choose_backend(&mut self, kind: BackendKind) {
        let found = self.backends.iter().find(|(k, _)| *k == kind).map(|(_, s)| s.clone());
        match found {
            Some(BackendSlot::Ready(st)) => match &st.backend {
                Ok(_) => {
                    self.active = kind;
                    self.fallback_note = None;
                }
                Err(why) => {
                    self.fallback_note = Some(Fallback::Unavailable {
                        chosen: kind,
                        why: why.clone(),
                        running: self.active,
                    })
                }
            },
            _ => {
                self.fallback_note = Some(Fallback::Probing(kind));
            }
        }
    }

    /// The active backend, ready to run (the CPU if the chosen one is not ready; a student's kernel from
    /// the exercise tab while the views run on it).
    pub fn running_backend(&self) -> Arc<dyn Backend> {
        // A student's kernel from the exercise tab, while its views run on it.
        if let Some(b) = self.widgets.kernel.exercise.edited_backend() {
            return b;
        }
        for (k, s) in &self.backends {
            if *k == self.active
                && let BackendSlot::Ready(st) = s
                && let Ok(b) = &st.backend
            {
                return b.clone();
            }
        }
        Arc::new(crate::compute::CpuBackend::new())
    }
}
