//! What lesson 8's views share: the policies' names and colours, the legend of the runs, notes, the
//! cap on the simulated backends and the trained-context line.

use eframe::egui::{self, Color32, RichText, Ui};
use egui_plot::VLine;

use crate::drivers::stream::{Positions, StreamPolicy};
use crate::lessons::streaming::StreamOut;
use crate::style;
use crate::ui::text::Lang;
use crate::ui::widgets::ViewCtx;

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

pub(super) fn policy_color(i: usize) -> Color32 {
    style::series(i)
}

/// The legend of a plot of the first `n` runs (each name followed by `suffix`) and the trained-context
/// line, drawn as a row under the plot: inside it, it covered the curves (the dense run's rise).
pub(super) fn runs_legend(lang: Lang, o: &StreamOut, n: usize, suffix: &str) -> Vec<(style::Rgba, String)> {
    let mut entries: Vec<(style::Rgba, String)> = o
        .runs
        .iter()
        .take(n)
        .enumerate()
        .map(|(i, r)| {
            (
                style::request(i),
                format!("{}{suffix}", policy_name(lang, r.config.policy, r.config.positions)),
            )
        })
        .collect();
    entries.push((
        style::CURRENT,
        lang.t("the model's trained context", "模型训练时的上下文").to_string(),
    ));
    entries
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

pub(super) fn context_line(lang: Lang, ctx: usize) -> VLine {
    VLine::new(lang.t("the model's trained context", "模型训练时的上下文"), ctx as f64)
        .color(style::c32(style::CURRENT))
}
