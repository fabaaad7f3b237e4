//! What lesson 8's views share: the policies' names and colours, the legend of the runs, notes, the
//! cap on the simulated backends and the trained-context line.

use eframe::egui::{self, Color32, RichText, Ui};

use crate::drivers::stream::{Positions, StreamPolicy};
use crate::lessons::streaming::StreamOut;
use crate::style;
use crate::ui::text::Lang;
use crate::ui::widgets::{ChartUi, ViewCtx};

/// Each policy's name and colour (the same in every view).
pub(super) fn policy_name(lang: Lang, p: StreamPolicy, pos: Positions) -> String {
    let base = match p {
        StreamPolicy::Dense => lang.t("dense", "全量"),
        StreamPolicy::Window => lang.t("window", "滑动窗口"),
        StreamPolicy::Sinks => lang.t("sinks + window", "sink + 窗口"),
        StreamPolicy::Recompute => lang.t("window, recomputed", "窗口重算"),
    };
    match pos {
        Positions::Cache => base.to_string(),
        Positions::Text => format!("{base} ({})", lang.t("text positions", "文本位置")),
    }
}

/// A policy's colour (the same in lesson 9: [`style::POLICIES`]).
pub(super) fn policy_color(p: StreamPolicy) -> Color32 {
    style::c32(style::policy(p.name()))
}

pub(super) fn note(ui: &mut Ui, size: f32, text: impl Into<String>) {
    ui.add(egui::Label::new(RichText::new(text.into()).size(crate::style::fit(size * 0.9))).wrap());
}

pub(super) fn capped(cx: &ViewCtx, ui: &mut Ui, o: &StreamOut) {
    if let Some(asked) = o.capped_from {
        note(
            ui,
            cx.size,
            format!(
                "{} {} {} {asked}.",
                cx.t(
                    "A simulated GPU runs its threads one after another on the CPU: it streamed",
                    "模拟 GPU 在 CPU 上逐个运行它的线程：只流式读取了"
                ),
                o.stream(),
                cx.t("bytes of", "字节，而不是")
            ),
        );
    }
}

/// The model's trained context, a threshold on a chart of the stream (a dashed line labelled at the line).
pub(super) fn context_line(p: &mut ChartUi<'_>, lang: Lang, ctx: usize) {
    p.threshold_x(ctx as f64, lang.t("trained context", "训练上下文"));
}
