//! The colour grammar's own tests: every mark colour in its legend, contrast and distinctness.

use super::*;

#[test]
fn every_mark_colour_is_in_the_legend() {
    let legend = [REQUESTS[0], REQUESTS[1]];
    // The entries themselves, a faded twin and a grey pass.
    let faded = [REQUESTS[1][0], REQUESTS[1][1], REQUESTS[1][2], 90];
    assert_eq!(
        unlisted_mark(&[REQUESTS[0], faded, [128, 128, 128, 255]], &legend),
        None
    );
    // A colour the legend does not list fails.
    assert!(unlisted_mark(&[REQUESTS[0], REQUESTS[3]], &legend).is_some());
    // Without a legend one coloured series may be drawn, not two.
    assert_eq!(unlisted_mark(&[REQUESTS[2], [60, 60, 60, 255]], &[]), None);
    assert!(unlisted_mark(&[REQUESTS[2], REQUESTS[4]], &[]).is_some());
}

#[test]
fn a_legend_keeps_its_colours_apart_and_few() {
    let e = |t: &str, c: Rgba, cued: bool| (t.to_string(), c, cued);
    let reqs: Vec<_> = REQUESTS
        .iter()
        .enumerate()
        .map(|(i, c)| e(&format!("r{i}"), *c, false))
        .collect();
    assert_eq!(legend_breach(&reqs), None);
    let mut more = reqs.clone();
    more.push(e("free", FREE, false));
    assert!(legend_breach(&more).is_some_and(|b| b.contains("9 colours")));
    // Requests named on their blocks do not count against the eight.
    let cued: Vec<_> = more.iter().map(|(t, c, _)| e(t, *c, t.starts_with('r'))).collect();
    assert_eq!(legend_breach(&cued), None);
    // One colour for two meanings.
    let same = [e("kept: recent R", SINK, false), e("recent R starts", SINK, false)];
    assert!(legend_breach(&same).is_some_and(|b| b.contains("ΔE2000 0.0")));
}

#[test]
fn ciede2000_matches_sharmas_test_pairs() {
    // Pairs 1, 7, 17 and 25 of Sharma, Wu and Dalal's table of test data.
    for (a, b, want) in [
        ([50.0, 2.6772, -79.7751], [50.0, 0.0, -82.7485], 2.0425),
        ([50.0, 0.0, 0.0], [50.0, -1.0, 2.0], 2.3669),
        ([50.0, 2.5, 0.0], [73.0, 25.0, -18.0], 27.1492),
        ([60.2574, -34.0099, 36.2677], [60.4626, -34.1751, 39.4387], 1.2644),
    ] {
        let d = de2000(a, b);
        assert!((d - want).abs() < 1e-4, "{a:?} {b:?}: {d} against {want}");
        assert!((de2000(b, a) - want).abs() < 1e-4);
    }
    assert_eq!(de2000([40.0, 10.0, 10.0], [40.0, 10.0, 10.0]), 0.0);
}

fn delta_e(a: Rgba, b: Rgba) -> f64 {
    let (a, b) = (lab(a), lab(b));
    ((a[0] - b[0]).powi(2) + (a[1] - b[1]).powi(2) + (a[2] - b[2]).powi(2)).sqrt()
}

#[test]
fn states_requests_and_policies_keep_apart() {
    let mut close = Vec::new();
    let policies: Vec<Rgba> = POLICIES.iter().map(|p| p.1).collect();
    // Every state stays 20 from every request and policy colour, except lesson 12's accepted and
    // rejected drafts: no colour 20 from every state, request and policy reads as "accepted" (a
    // search over the sRGB grid finds only near-black blues), so they keep 10 (distinct), and the
    // walk's legend check holds each view that shows them to 20.
    let min_to = |state: &str| {
        if ["accepted", "rejected"].contains(&state) {
            10.0
        } else {
            LEGEND_MIN_DE
        }
    };
    for (i, (a, ca)) in STATES.iter().enumerate() {
        for (b, cb) in &STATES[i + 1..] {
            let d = delta_e(*ca, *cb);
            if d < 15.0 {
                close.push(format!("states {a} and {b}: ΔE {d:.0}"));
            }
        }
        for (j, r) in REQUESTS.iter().enumerate() {
            let d = delta_e2000(*ca, *r);
            if d < min_to(a) {
                close.push(format!("state {a} and request {j}: ΔE2000 {d:.1}"));
            }
        }
        for (n, p) in POLICIES {
            let d = delta_e2000(*ca, p);
            if d < min_to(a) {
                close.push(format!("state {a} and policy {n}: ΔE2000 {d:.1}"));
            }
        }
    }
    for (name, pal, min) in [
        ("requests", REQUESTS.to_vec(), LEGEND_MIN_DE),
        ("policies", policies.clone(), LEGEND_MIN_DE),
    ] {
        for (i, a) in pal.iter().enumerate() {
            for (j, b) in pal.iter().enumerate().skip(i + 1) {
                let d = delta_e2000(*a, *b);
                if d < min {
                    close.push(format!("{name} {i} and {j}: ΔE2000 {d:.1}"));
                }
            }
        }
    }
    // No policy takes a request's colour.
    for (n, p) in POLICIES {
        for (j, r) in REQUESTS.iter().enumerate() {
            let d = delta_e2000(p, *r);
            if d < 8.0 {
                close.push(format!("policy {n} and request {j}: ΔE2000 {d:.1}"));
            }
        }
    }
    assert!(close.is_empty(), "{close:#?}");
    // The test can fail: the old palette's orange request sits on "written", and the palette before
    // this one had two requests 13.7 apart.
    assert!(delta_e([242, 142, 43, 255], WRITTEN) < 25.0);
    assert!(delta_e2000([120, 160, 100, 255], [160, 160, 60, 255]) < LEGEND_MIN_DE);
    assert_eq!(policy("full"), policy("dense"));
    assert!(FORMATS.iter().all(|(n, c)| kv_format(n) == *c && *c != MASKED));
}

/// The visuals of the dark or the light theme after [`install`].
fn installed_visuals(dark: bool) -> Visuals {
    let ctx = egui::Context::default();
    install(&ctx);
    let theme = if dark { egui::Theme::Dark } else { egui::Theme::Light };
    ctx.style_of(theme).visuals.clone()
}

#[test]
fn text_colours_reach_seven_to_one_on_their_panels() {
    for dark in [true, false] {
        let v = installed_visuals(dark);
        for (name, c) in [
            ("text", v.text_color()),
            ("muted", muted(&v)),
            ("pass", pass(&v)),
            ("fail", fail(&v)),
            ("warn", warn(&v)),
            ("quote", quote(&v)),
        ] {
            for (panel, bg) in [("panel", v.panel_fill), ("window", v.window_fill)] {
                let r = contrast(c, bg);
                assert!(
                    r >= 7.0,
                    "{name} on the {panel} ({}): {r:.2}:1",
                    if dark { "dark" } else { "light" }
                );
            }
        }
    }
    for dark in [true, false] {
        let v = installed_visuals(dark);
        for (name, c) in STATES {
            if ["free", "reserved", "evicted", "rejected", "swapped"].contains(&name) {
                continue; // marks only, never text
            }
            let r = contrast(state_text(&v, c), v.panel_fill);
            assert!(r >= 7.0, "state {name} as text (dark {dark}): {r:.2}:1");
        }
        for i in 0..REQUESTS.len() {
            let r = contrast(request_text(&v, i), v.panel_fill);
            assert!(r >= 7.0, "request {i} as text (dark {dark}): {r:.2}:1");
        }
        let c = code(dark);
        // Source is drawn on the panel; narration's inline `code` is text on the code background.
        let r = contrast(v.text_color(), v.code_bg_color);
        assert!(r >= 7.0, "inline code (dark {dark}): {r:.2}:1");
        for bg in [v.panel_fill, c.highlight] {
            for (name, fg) in [
                ("plain", c.plain),
                ("keyword", c.keyword),
                ("comment", c.comment),
                ("number", c.number),
            ] {
                let r = contrast(fg, bg);
                assert!(r >= 7.0, "code {name} on {bg:?} (dark {dark}): {r:.2}:1");
            }
        }
    }
}
