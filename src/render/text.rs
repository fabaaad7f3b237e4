//! A 3×5 pixel font for digits and a few signs, so PNGs rendered without egui (block ids, colorbar
//! ticks) still carry their labels.

use super::offscreen::Image;

fn glyph(c: char) -> Option<[u8; 5]> {
    // Each row is 3 bits, most significant bit on the left.
    Some(match c {
        '0' => [7, 5, 5, 5, 7],
        '1' => [2, 6, 2, 2, 7],
        '2' => [7, 1, 7, 4, 7],
        '3' => [7, 1, 7, 1, 7],
        '4' => [5, 5, 7, 1, 1],
        '5' => [7, 4, 7, 1, 7],
        '6' => [7, 4, 7, 5, 7],
        '7' => [7, 1, 1, 1, 1],
        '8' => [7, 5, 7, 5, 7],
        '9' => [7, 5, 7, 1, 7],
        '-' => [0, 0, 7, 0, 0],
        '.' => [0, 0, 0, 0, 2],
        'e' => [0, 7, 7, 4, 7],
        ' ' => [0; 5],
        _ => return None,
    })
}

/// Width in pixels of `s` at integer `scale`.
pub fn width(s: &str, scale: u32) -> u32 {
    (s.chars().count() as u32 * 4).saturating_sub(1) * scale
}

/// Draw `s` with its top-left at (x, y), each font pixel `scale`² image pixels. Unknown characters
/// are skipped.
pub fn draw(img: &mut Image, x: i64, y: i64, s: &str, scale: u32, color: [u8; 4]) {
    let sc = scale as i64;
    for (i, ch) in s.chars().enumerate() {
        let Some(rows) = glyph(ch) else { continue };
        for (ry, bits) in rows.iter().enumerate() {
            for rx in 0..3 {
                if bits & (4 >> rx) != 0 {
                    for dy in 0..sc {
                        for dx in 0..sc {
                            img.set(x + (i as i64 * 4 + rx) * sc + dx, y + ry as i64 * sc + dy, color);
                        }
                    }
                }
            }
        }
    }
}
