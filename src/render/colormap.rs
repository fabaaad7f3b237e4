//! Colour tables shared by the shaders and the CPU (so tests can predict every pixel): a
//! viridis-like sequential map for probabilities, a blue–white–red diverging map for signed scores,
//! and a palette of request colours for the block grid.

/// Which colormap a heatmap uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Colormap {
    /// Perceptual sequential map (viridis fit), for values such as probabilities.
    #[default]
    Sequential,
    /// Diverging map centred between vmin and vmax, for signed values such as raw scores.
    Diverging,
}

impl Colormap {
    /// Row of the LUT texture.
    pub fn row(self) -> u32 {
        match self {
            Colormap::Sequential => 0,
            Colormap::Diverging => 1,
        }
    }
}

/// LUT entries per colormap.
pub const LUT_SIZE: usize = 256;

fn viridis(t: f64) -> [f64; 3] {
    // Polynomial fit of matplotlib's viridis (public-domain fit by Matt Zucker).
    const C: [[f64; 3]; 7] = [
        [
            0.277_727_327_223_417_7,
            0.005_407_344_544_966_578,
            0.334_099_805_335_306_1,
        ],
        [0.105_093_043_108_577_4, 1.404_613_529_898_575, 1.384_590_162_594_685],
        [
            -0.330_861_828_725_556_3,
            0.214_847_559_468_213,
            0.095_095_163_028_236_59,
        ],
        [-4.634_230_498_983_486, -5.799_100_973_351_585, -19.332_440_956_279_87],
        [6.228_269_936_347_081, 14.179_933_366_805_09, 56.690_552_600_681_05],
        [4.776_384_997_670_288, -13.745_145_377_746_01, -65.353_032_633_372_34],
        [-5.435_455_855_934_631, 4.645_852_612_178_535, 26.312_435_249_583_2],
    ];
    let mut c = [0.0; 3];
    for (k, ch) in c.iter_mut().enumerate() {
        *ch = C.iter().rev().fold(0.0, |acc, row| acc * t + row[k]);
    }
    c
}

fn diverging(t: f64) -> [f64; 3] {
    // Moreland's cool-warm end points through a light grey centre, linear in each half.
    let (a, mid, b) = ([59.0, 76.0, 192.0], [221.0, 221.0, 221.0], [180.0, 4.0, 38.0]);
    let (lo, hi, s) = if t < 0.5 {
        (a, mid, t * 2.0)
    } else {
        (mid, b, (t - 0.5) * 2.0)
    };
    [0, 1, 2].map(|i| (lo[i] + (hi[i] - lo[i]) * s) / 255.0)
}

/// The colour of LUT entry `i` of `map`.
pub fn lut_color(map: Colormap, i: usize) -> [u8; 4] {
    let t = (i as f64 + 0.5) / LUT_SIZE as f64;
    let c = match map {
        Colormap::Sequential => viridis(t),
        Colormap::Diverging => diverging(t),
    };
    [
        (c[0].clamp(0.0, 1.0) * 255.0).round() as u8,
        (c[1].clamp(0.0, 1.0) * 255.0).round() as u8,
        (c[2].clamp(0.0, 1.0) * 255.0).round() as u8,
        255,
    ]
}

/// The LUT texture's bytes: `LUT_SIZE × 2` RGBA8, row 0 sequential, row 1 diverging.
pub fn lut_rgba() -> Vec<u8> {
    [Colormap::Sequential, Colormap::Diverging]
        .iter()
        .flat_map(|&m| (0..LUT_SIZE).flat_map(move |i| lut_color(m, i)))
        .collect()
}

/// The LUT index the shader picks for `v` in `[vmin, vmax]` (same f32 arithmetic).
pub fn lut_index(v: f32, vmin: f32, vmax: f32) -> usize {
    let inv = 1.0 / (vmax - vmin);
    let t = ((v - vmin) * inv).clamp(0.0, 0.99999);
    (t * 256.0).floor() as usize
}

/// Request colours for the block grid (cycled by request id): the grammar's request palette.
pub const PALETTE: [[u8; 4]; crate::style::REQUESTS.len()] = crate::style::REQUESTS;

/// The colour of request `owner`.
pub fn owner_color(owner: u32) -> [u8; 4] {
    PALETTE[owner as usize % PALETTE.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_have_their_shape() {
        // viridis runs dark purple → yellow; diverging is blue → grey → red.
        let (lo, hi) = (lut_color(Colormap::Sequential, 0), lut_color(Colormap::Sequential, 255));
        assert!(
            lo[2] > lo[1] && hi[0] > 200 && hi[1] > 200 && hi[2] < 80,
            "{lo:?} {hi:?}"
        );
        let (b, m, r) = (
            lut_color(Colormap::Diverging, 0),
            lut_color(Colormap::Diverging, 128),
            lut_color(Colormap::Diverging, 255),
        );
        assert!(b[2] > b[0] && r[0] > r[2] && m[0] > 200 && m[1] > 200);
        assert_eq!(lut_rgba().len(), 2 * 256 * 4);
        assert_eq!(lut_index(0.0, 0.0, 1.0), 0);
        assert_eq!(lut_index(1.0, 0.0, 1.0), 255);
        assert_eq!(lut_index(0.5, 0.0, 1.0), 128);
    }
}
