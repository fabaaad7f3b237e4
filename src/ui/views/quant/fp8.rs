//! Lesson 10's FP8 step: a value's bits through the E4M3 and E5M2 encoders, and the two formats' ranges.

use super::common::*;
use crate::cache::dtype::quant::{E4M3, E5M2, Fp8};
use crate::lessons::quant::{QuantOut, show_value};
use crate::style;
use crate::ui::text::Lang;
use crate::ui::widgets::ViewCtx;
use eframe::egui::{self, RichText, Ui};

/// The fields of an FP8 code, as coloured bit boxes, with the code, its value and the error.
pub(super) fn bit_row(ui: &mut Ui, size: f32, code: u8, fields: &[(usize, style::Rgba, &str)]) {
    let cell = size * 1.6;
    let (rect, _) = ui.allocate_exact_size(egui::vec2(cell * 8.0 + 4.0, cell + size * 0.9), egui::Sense::hover());
    let p = ui.painter();
    let mut bit = 0usize;
    for (n, color, name) in fields {
        let x0 = rect.min.x + bit as f32 * cell;
        for k in 0..*n {
            let b = 7 - (bit + k);
            let r = egui::Rect::from_min_size(
                egui::pos2(x0 + k as f32 * cell, rect.min.y),
                egui::vec2(cell - 2.0, cell - 2.0),
            );
            p.rect_filled(r, 2.0, style::c32(*color));
            let on = (code >> b) & 1;
            p.text(
                r.center(),
                egui::Align2::CENTER_CENTER,
                on.to_string(),
                egui::FontId::monospace(crate::style::fit(size)),
                style::ink_on(*color),
            );
        }
        p.text(
            egui::pos2(x0 + *n as f32 * cell / 2.0, rect.min.y + cell + size * 0.4),
            egui::Align2::CENTER_CENTER,
            *name,
            egui::FontId::proportional(crate::style::fit(size * 0.7)),
            ui.visuals().text_color(),
        );
        bit += n;
    }
}

pub(super) fn encoder(cx: &mut ViewCtx, ui: &mut Ui, o: &QuantOut) {
    let size = cx.size;
    let lang = cx.lang;
    let x = o.value;
    title(
        ui,
        size,
        match lang {
            Lang::En => format!("x = {}", show_value(x)),
            Lang::Zh => format!("x = {}", show_value(x)),
        },
    );
    let sign = style::request(3);
    let expo = style::request(0);
    let mant = style::request(1);
    type Fields<'a> = Vec<(usize, style::Rgba, &'a str)>;
    let rows: [(&str, u8, f32, Fields); 3] = [
        (
            "INT8",
            o.int8.code,
            o.int8.value,
            vec![(8, style::request(2), lang.t("two's complement", "二进制补码"))],
        ),
        (
            "FP8 E4M3",
            o.e4m3.code,
            o.e4m3.value,
            vec![
                (1, sign, lang.t("S", "符号")),
                (4, expo, lang.t("exponent", "指数")),
                (3, mant, lang.t("mantissa", "尾数")),
            ],
        ),
        (
            "FP8 E5M2",
            o.e5m2.code,
            o.e5m2.value,
            vec![
                (1, sign, lang.t("S", "符号")),
                (5, expo, lang.t("exponent", "指数")),
                (2, mant, lang.t("mantissa", "尾数")),
            ],
        ),
    ];
    for (name, code, value, fields) in rows {
        ui.add_space(size * 0.2);
        let err = (value - x).abs();
        let rel = if x != 0.0 {
            format!(" ({:.2}%)", 100.0 * err / x.abs())
        } else {
            String::new()
        };
        let scale = if name == "INT8" {
            match lang {
                Lang::En => format!(", scale {:.3e} (row max {})", o.row.1, show_value(o.row.0)),
                Lang::Zh => format!("，缩放 {:.3e}（行最大 {}）", o.row.1, show_value(o.row.0)),
            }
        } else {
            match lang {
                Lang::En => ", scale 1".to_string(),
                Lang::Zh => "，缩放 1".to_string(),
            }
        };
        ui.label(
            RichText::new(format!(
                "{name}: {} 0x{code:02X} → {}{scale}; {} {}{rel}",
                lang.t("code", "编码"),
                show_value(value),
                lang.t("error", "误差"),
                show_value(err)
            ))
            .size(crate::style::fit(size)),
        );
        bit_row(ui, size, code, &fields);
    }
    ui.add_space(size * 0.3);
    range_table(cx, ui);
}

pub(super) fn range_table(cx: &mut ViewCtx, ui: &mut Ui) {
    let size = cx.size;
    let lang = cx.lang;
    let fp = |f: Fp8| {
        let mb = f.mbits as i32;
        let min_normal = 2f64.powi(f.emin());
        let min_sub = 2f64.powi(f.emin() - mb);
        let nans = (0..=255u8).filter(|&c| f.decode(c).is_nan()).count();
        [
            show_value(f.max()),
            format!("{min_normal:.3e}"),
            format!("{min_sub:.3e}"),
            format!("{}", f.mbits),
            format!("{:.1}%", 100.0 * 2f64.powi(-mb)),
            if f.ieee {
                lang.t("yes", "有")
            } else {
                lang.t("no", "无")
            }
            .to_string(),
            nans.to_string(),
        ]
    };
    let (a, b) = (fp(E4M3), fp(E5M2));
    let names = [
        lang.t("largest", "最大值"),
        lang.t("smallest normal", "最小正规数"),
        lang.t("smallest subnormal", "最小次正规数"),
        lang.t("mantissa bits", "尾数位数"),
        lang.t("relative step", "相对步长"),
        lang.t("infinities", "无穷大"),
        lang.t("NaN codes", "NaN 编码数"),
    ];
    let mut t = crate::ui::widgets::Table::new(["", "E4M3", "E5M2"]);
    for (i, n) in names.iter().enumerate() {
        use crate::ui::widgets::Cell;
        t.row([Cell::new(*n), Cell::new(&a[i]).mono(), Cell::new(&b[i]).mono()]);
    }
    crate::ui::widgets::table(ui, lang, size, &t);
}
