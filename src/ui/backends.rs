//! The backends as the app sees them: probed (or still probing), the active one, and switching with a
//! reason when a backend is unavailable.

use std::sync::Arc;

use super::text::Lang;
use super::{BackendSlot, KvscopeApp};
use crate::compute::{Backend, BackendKind};

impl KvscopeApp {
    /// The backend in use.
    pub fn active_backend(&self) -> BackendKind {
        self.active
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
                    self.fallback_note = Some(format!(
                        "{} is unavailable ({why}); running on {}",
                        kind.name(),
                        self.active.name()
                    ))
                }
            },
            _ => {
                self.fallback_note = Some(format!("{} is still being probed", kind.name()));
            }
        }
    }

    /// The active backend, ready to run (the CPU if the chosen one is not ready).
    pub fn running_backend(&self) -> Arc<dyn Backend> {
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

/// The `{ran_on}` placeholder: which code computed the shown result and where, in `lang`.
pub(super) fn ran_on(kind: BackendKind, device: &str, lang: Lang) -> String {
    match (kind, lang) {
        (BackendKind::Cpu, Lang::En) => "their Rust twins on the CPU".to_string(),
        (BackendKind::Cpu, Lang::Zh) => "CPU 上的 Rust 版本".to_string(),
        (BackendKind::CudaSim, Lang::En) => "the `.cu` source itself, on CPU threads (cuda-sim)".to_string(),
        (BackendKind::CudaSim, Lang::Zh) => "CPU 线程上的 `.cu` 源码本身（cuda-sim）".to_string(),
        (BackendKind::Cuda, Lang::En) => format!("CUDA on {device}"),
        (BackendKind::Cuda, Lang::Zh) => format!("{device} 上的 CUDA 源码"),
        (BackendKind::Wgpu, _) => {
            // The device string is "<adapter> (<API>), <f16 path>".
            let (adapter, f16) = device.rsplit_once(", ").unwrap_or((device, ""));
            match lang {
                Lang::En if f16.is_empty() => format!("their WGSL twins on {adapter}"),
                Lang::En => format!("their WGSL twins on {adapter}, with {f16}"),
                Lang::Zh => {
                    let f16 = match f16 {
                        "native f16" => "（原生 f16）",
                        "f16 as u32 pairs" => "（f16 成对存进 u32）",
                        _ => "",
                    };
                    format!("{adapter} 上的 WGSL 版本{f16}")
                }
            }
        }
    }
}
