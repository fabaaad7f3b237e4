//! What lesson 9's views share: the policies' names and colours, notes, titles, the timeline's step and
//! budget labels.

use eframe::egui::{self, Color32, RichText, Ui};

use crate::drivers::evict::EvictPolicy;
use crate::lessons::eviction::EvictOut;
use crate::style;
use crate::ui::text::Lang;
use crate::ui::widgets::ViewCtx;

/// Each policy's name (the same in every view); its colour is `style::series` of its index.
pub fn policy_name(lang: Lang, p: EvictPolicy) -> &'static str {
    match p {
        EvictPolicy::Full => lang.t("full", "全量"),
        EvictPolicy::Window => lang.t("window", "滑动窗口"),
        EvictPolicy::Sinks => lang.t("sinks + window", "sink + 窗口"),
        EvictPolicy::H2o => lang.t("H2O", "H2O"),
        EvictPolicy::SnapKv => lang.t("SnapKV", "SnapKV"),
        EvictPolicy::Random => lang.t("random", "随机"),
    }
}

pub(super) fn policy_color(p: EvictPolicy) -> Color32 {
    style::c32(policy_rgba(p))
}

pub(super) fn policy_rgba(p: EvictPolicy) -> style::Rgba {
    style::policy(p.name())
}

pub(super) fn note(ui: &mut Ui, size: f32, text: impl Into<String>) {
    ui.add(egui::Label::new(RichText::new(text.into()).size(crate::style::fit(size * 0.9))).wrap());
}

pub(super) fn title(ui: &mut Ui, size: f32, text: impl Into<String>) {
    ui.add(egui::Label::new(RichText::new(text.into()).strong().size(crate::style::fit(size))).wrap());
}

pub(super) fn step(cx: &ViewCtx, o: &EvictOut) -> usize {
    (*cx.cursor).min(o.len() - 1)
}

pub(super) fn budget_label(lang: Lang, k: usize) -> String {
    match lang {
        Lang::En => format!("budget K = {k} tokens per KV head per layer"),
        Lang::Zh => format!("预算 K = 每层每个 KV 头保留 {k} 个 token"),
    }
}
